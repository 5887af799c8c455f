package bzip2

// Symbols of the block alphabet after move-to-front: two zero-run digits, then
// move-to-front positions 1..inUse-1 as 2..inUse, then EOB = inUse+1.
const (
	symbolRunA = 0 // zero-run digit worth 1 << k at digit k
	symbolRunB = 1 // zero-run digit worth 2 << k at digit k

	// maxAlphabetSize is RUNA, RUNB, positions 1..255 and EOB.
	maxAlphabetSize = 258
)

// moveToFront codes last (the transform's output) into symbols, appended to
// symbols[:0], and counts them in freq. inUse lists the byte values that occur,
// ascending; the move-to-front list starts in that order, as the reader's does.
func moveToFront(symbols []uint16, freq *[maxAlphabetSize]int32, last []byte, inUse []byte) []uint16 {
	var indexOf [256]byte // byte value -> position in inUse
	var list [256]byte    // move-to-front list of indexes into inUse
	for i, b := range inUse {
		indexOf[b] = byte(i)
		list[i] = byte(i)
	}
	*freq = [maxAlphabetSize]int32{}
	symbols = symbols[:0]
	zeroRun := 0
	for _, b := range last {
		index := indexOf[b]
		if list[0] == index {
			zeroRun++
			continue
		}
		if zeroRun > 0 {
			symbols = appendZeroRun(symbols, freq, zeroRun)
			zeroRun = 0
		}
		position := 1
		for list[position] != index {
			position++
		}
		copy(list[1:position+1], list[:position])
		list[0] = index
		symbols = append(symbols, uint16(position+1))
		freq[position+1]++
	}
	if zeroRun > 0 {
		symbols = appendZeroRun(symbols, freq, zeroRun)
	}
	endOfBlock := uint16(len(inUse) + 1)
	symbols = append(symbols, endOfBlock)
	freq[endOfBlock]++
	return symbols
}

// appendZeroRun writes run (> 0) in bijective base 2, least significant digit
// first: digit 1 is RUNA, digit 2 is RUNB.
func appendZeroRun(symbols []uint16, freq *[maxAlphabetSize]int32, run int) []uint16 {
	for run > 0 {
		if run&1 == 1 {
			symbols = append(symbols, symbolRunA)
			freq[symbolRunA]++
			run = (run - 1) / 2
		} else {
			symbols = append(symbols, symbolRunB)
			freq[symbolRunB]++
			run = (run - 2) / 2
		}
	}
	return symbols
}
