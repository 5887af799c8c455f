package bzip2

import "math"

const (
	// blockMagic and endMagic are 48-bit, written as two 24-bit halves.
	blockMagicHigh, blockMagicLow = 0x314159, 0x265359
	endMagicHigh, endMagicLow     = 0x177245, 0x385090

	// groupSymbols is how many symbols share one selector.
	groupSymbols = 50
	maxTables    = 6

	// tableRefinementRounds is how many times the tables are rebuilt from
	// the groups that chose them; bzip2 does 4, after which gains are tiny.
	tableRefinementRounds = 4
)

// blockEncoder turns one block of rle1 bytes into its bits. Its buffers live
// as long as the Writer, so blocks after the first allocate nothing.
type blockEncoder struct {
	sorter    rotationSorter
	last      []byte   // the transform's last column
	symbols   []uint16 // move-to-front and zero-run output, EOB last
	selectors []uint8  // table of each group of groupSymbols symbols
	freq      [maxAlphabetSize]int32
	tableFreq [maxTables][maxAlphabetSize]int32
	lengths   [maxTables][maxAlphabetSize]uint8
	codes     [maxTables][maxAlphabetSize]uint32
	huffman   huffmanBuilder
}

// encode writes block (non-empty, at most 900000-19 bytes) whose original
// bytes have CRC blockCRC.
func (e *blockEncoder) encode(bw *bitWriter, block []byte, blockCRC uint32) {
	var used [256]bool
	for _, b := range block {
		used[b] = true
	}
	var inUseBuf [256]byte
	inUse := inUseBuf[:0]
	for b, ok := range used {
		if ok {
			inUse = append(inUse, byte(b))
		}
	}

	e.last = resize(e.last, len(block))
	origPtr := burrowsWheeler(&e.sorter, block, e.last)
	e.symbols = moveToFront(e.symbols, &e.freq, e.last, inUse)
	alphabetSize := len(inUse) + 2
	tables := tableCount(len(e.symbols))
	e.selectors = resize(e.selectors, (len(e.symbols)+groupSymbols-1)/groupSymbols)
	e.chooseTables(alphabetSize, tables)

	bw.writeBits(24, blockMagicHigh)
	bw.writeBits(24, blockMagicLow)
	bw.writeBits(32, blockCRC)
	bw.writeBits(1, 0) // not randomised
	bw.writeBits(24, uint32(origPtr))
	writeUsedBitmap(bw, &used)

	bw.writeBits(3, uint32(tables))
	bw.writeBits(15, uint32(len(e.selectors)))
	recent := [maxTables]uint8{0, 1, 2, 3, 4, 5}
	for _, table := range e.selectors {
		position := 0
		for recent[position] != table {
			position++
		}
		copy(recent[1:position+1], recent[:position])
		recent[0] = table
		bw.writeBits(uint(position+1), 1<<(position+1)-2) // position ones, a zero
	}

	for t := range tables {
		lengths := e.lengths[t][:alphabetSize]
		current := lengths[0]
		bw.writeBits(5, uint32(current))
		for _, length := range lengths {
			for ; current < length; current++ {
				bw.writeBits(2, 0b10)
			}
			for ; current > length; current-- {
				bw.writeBits(2, 0b11)
			}
			bw.writeBits(1, 0)
		}
		canonicalCodes(e.codes[t][:alphabetSize], lengths)
	}

	for g, table := range e.selectors {
		lengths, codes := &e.lengths[table], &e.codes[table]
		for _, s := range e.symbols[g*groupSymbols : min((g+1)*groupSymbols, len(e.symbols))] {
			bw.writeBits(uint(lengths[s]), codes[s])
		}
	}
}

// tableCount is how many tables bzip2 uses for a block of that many symbols:
// more tables pay for their cost (about 40 bytes each) only in larger blocks.
func tableCount(symbols int) int {
	switch {
	case symbols < 200:
		return 2
	case symbols < 600:
		return 3
	case symbols < 1200:
		return 4
	case symbols < 2400:
		return 5
	default:
		return 6
	}
}

// writeUsedBitmap writes which byte values occur: a 16-bit map of used ranges
// of 16 values, then a 16-bit map for each used range.
func writeUsedBitmap(bw *bitWriter, used *[256]bool) {
	var rangeMaps [16]uint32
	usedRanges := uint32(0)
	for b, ok := range used {
		if ok {
			rangeMaps[b/16] |= 1 << (15 - b%16)
			usedRanges |= 1 << (15 - b/16)
		}
	}
	bw.writeBits(16, usedRanges)
	for _, m := range rangeMaps {
		if m != 0 {
			bw.writeBits(16, m)
		}
	}
}

// chooseTables sets e.selectors and e.lengths[:tables]. Table t starts by
// favouring the t-th of tables contiguous symbol ranges of about equal total
// frequency (cost 0 inside, 15 outside); then each round lets every group pick
// its cheapest table and rebuilds each table as the Huffman code of the groups
// that picked it. The last round's tables are exactly right for its selectors.
func (e *blockEncoder) chooseTables(alphabetSize, tables int) {
	remaining := int64(len(e.symbols))
	symbol := 0
	for t := range tables {
		share := remaining / int64(tables-t)
		first := symbol
		sum := int64(0)
		for symbol < alphabetSize && (sum < share || symbol == first || t == tables-1) {
			sum += int64(e.freq[symbol])
			symbol++
		}
		remaining -= sum
		for s := range alphabetSize {
			if s >= first && s < symbol {
				e.lengths[t][s] = 0
			} else {
				e.lengths[t][s] = 15
			}
		}
	}

	for range tableRefinementRounds {
		for t := range tables {
			clear(e.tableFreq[t][:alphabetSize])
		}
		for g := range e.selectors {
			group := e.symbols[g*groupSymbols : min((g+1)*groupSymbols, len(e.symbols))]
			var cost [maxTables]int
			for _, s := range group {
				for t := range tables {
					cost[t] += int(e.lengths[t][s])
				}
			}
			best, bestCost := 0, math.MaxInt
			for t := range tables {
				if cost[t] < bestCost {
					best, bestCost = t, cost[t]
				}
			}
			e.selectors[g] = uint8(best)
			freq := &e.tableFreq[best]
			for _, s := range group {
				freq[s]++
			}
		}
		for t := range tables {
			e.huffman.codeLengths(e.lengths[t][:alphabetSize], e.tableFreq[t][:alphabetSize])
		}
	}
}
