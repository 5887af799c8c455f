package bzip2

// bitWriter packs bits most significant first into out. Bits that do not yet
// fill a byte wait in acc, so blocks follow each other without alignment.
type bitWriter struct {
	out     []byte
	acc     uint64 // the low pending bits are the unwritten ones
	pending uint   // number of bits in acc not yet in out, < 8 between calls
}

// writeBits appends the low n bits of v, n <= 32.
func (bw *bitWriter) writeBits(n uint, v uint32) {
	bw.acc = bw.acc<<n | uint64(v)
	bw.pending += n
	for bw.pending >= 8 {
		bw.pending -= 8
		bw.out = append(bw.out, byte(bw.acc>>bw.pending))
	}
}

// writeBit appends one bit.
func (bw *bitWriter) writeBit(bit bool) {
	v := uint32(0)
	if bit {
		v = 1
	}
	bw.writeBits(1, v)
}

// alignByte pads the pending bits with zeros to a whole byte.
func (bw *bitWriter) alignByte() {
	if bw.pending > 0 {
		bw.writeBits(8-bw.pending, 0)
	}
}
