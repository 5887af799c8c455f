// Package bzip2 writes bzip2 streams (the format of bzip2 1.0), which the
// standard library's compress/bzip2 only reads.
//
// A stream is a bit string, most significant bit first, with no byte alignment
// between blocks:
//
//	"BZh" level('1'..'9')
//	block*:
//	  magic        48 bits  0x314159265359 (BCD pi)
//	  blockCRC     32 bits  CRC of the block's original bytes
//	  randomised    1 bit   0
//	  origPtr      24 bits  row of the unrotated block in the sorted rotations
//	  usedRanges   16 bits  bit i (from the top): bytes 16i..16i+15 occur
//	  usedBytes    16 bits  per used range, one bit per byte of the range
//	  nGroups       3 bits  2..6 Huffman tables
//	  nSelectors   15 bits  one selector per 50 symbols
//	  selectors    unary    table numbers, move-to-front coded: j ones, a zero
//	  tables       per table: 5-bit first length, then per symbol
//	                        "10" (+1) or "11" (-1) repeated, then "0"
//	  symbols      Huffman codes, table switched every 50 symbols
//	endMagic       48 bits  0x177245385090 (BCD sqrt pi)
//	streamCRC      32 bits  each block CRC folded in as crc = crc<<<1 ^ blockCRC
//	padding        to a byte boundary
//
// A block is made in four steps, each undone by the reader in reverse:
//
//  1. Run-length coding of the input (rle1): a run of 4..255 equal bytes
//     becomes the byte four times and a count of 0..251 more.
//  2. The Burrows-Wheeler transform: the last column of the block's cyclic
//     rotations in sorted order, and origPtr (bwt.go sorts by prefix doubling,
//     O(n log n) however repetitive the block).
//  3. Move-to-front over the bytes in use, with runs of zeros written in
//     bijective base 2 as RUNA (1) and RUNB (2) digits, least significant
//     first; a value v > 0 becomes symbol v+1; EOB ends the block.
//  4. Huffman coding of those symbols with 2..6 tables, each 50-symbol group
//     choosing the table that codes it cheapest (huffman.go, block.go).
//
// The block size limit applies to the output of step 1: level*100000 bytes
// less 19, as bzip2 itself leaves.
package bzip2
