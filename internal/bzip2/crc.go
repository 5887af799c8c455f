package bzip2

// bzip2's CRC is CRC-32 with polynomial 0x04C11DB7 computed most significant
// bit first (not reflected, unlike hash/crc32's IEEE), initial value and final
// xor all ones.
const crcPolynomial = 0x04c11db7

var crcTable = makeCRCTable()

func makeCRCTable() (table [256]uint32) {
	for i := range table {
		c := uint32(i) << 24
		for range 8 {
			if c&(1<<31) != 0 {
				c = c<<1 ^ crcPolynomial
			} else {
				c <<= 1
			}
		}
		table[i] = c
	}
	return table
}

// crcUpdateRun folds count copies of b into crc (the inner, not yet
// inverted, register).
func crcUpdateRun(crc uint32, b byte, count int) uint32 {
	for range count {
		crc = crc<<8 ^ crcTable[byte(crc>>24)^b]
	}
	return crc
}

// crcBytes is the bzip2 CRC of p, for tests and callers holding whole buffers.
func crcBytes(p []byte) uint32 {
	crc := ^uint32(0)
	for _, b := range p {
		crc = crc<<8 ^ crcTable[byte(crc>>24)^b]
	}
	return ^crc
}
