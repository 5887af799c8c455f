package bzip2

import (
	"errors"
	"fmt"
	"io"
)

const (
	// blockSizeUnitBytes is what one level step adds to the block size.
	blockSizeUnitBytes = 100000
	// blockSlackBytes is left unused at the end of each block, as bzip2 does
	// (its nblockMAX), so our blocks never exceed what a bzip2 reader sizes.
	blockSlackBytes = 19
	// maxRunBytes is the most one rle1 run adds to a block: 4 bytes and a count.
	maxRunBytes = 5
	// maxRunLength is the longest run one rle1 run codes: 4 bytes and a
	// count of up to 251 more.
	maxRunLength = 255
)

// ErrClosed is returned by Write after Close.
var ErrClosed = errors.New("bzip2: write to closed writer")

// Writer compresses what is written to it into a bzip2 stream. Nothing reaches
// the underlying writer before the first block is full or Close is called.
type Writer struct {
	w           io.Writer
	level       int
	err         error // sticky: a bad level or the underlying writer's error
	closed      bool
	wroteHeader bool

	blockLimitBytes int
	block           []byte // rle1 output of the current block
	blockCRC        uint32 // running CRC register of the block's input bytes
	streamCRC       uint32
	runByte         byte // the pending run, not yet in block
	runLength       int  // 0 only when the block has seen no input yet

	bits    bitWriter
	encoder *blockEncoder // allocated with the first block
}

// NewWriter returns a Writer compressing to w at level 1..9, meaning blocks of
// 100k..900k bytes as bzip2 -1..-9. Memory grows with the largest block
// written, to about 25 bytes per block byte (the rotation sort's five int32
// arrays dominate) and 27 KB of tables: 22 MB at level 9 once a block fills,
// 140 KB for a 4 KiB stream. Any other level makes Write and Close fail.
func NewWriter(w io.Writer, level int) *Writer {
	z := &Writer{}
	z.init(w, level)
	return z
}

// Reset discards z's state and makes it write a new stream to w at the same
// level, keeping its buffers.
func (z *Writer) Reset(w io.Writer) {
	z.init(w, z.level)
}

func (z *Writer) init(w io.Writer, level int) {
	*z = Writer{
		w:               w,
		level:           level,
		blockLimitBytes: level*blockSizeUnitBytes - blockSlackBytes,
		block:           z.block[:0],
		blockCRC:        ^uint32(0),
		bits:            bitWriter{out: z.bits.out[:0]},
		encoder:         z.encoder,
	}
	if level < 1 || level > 9 {
		z.err = fmt.Errorf("bzip2: invalid compression level %d, want 1..9", level)
	}
}

// Write compresses p. A block is compressed and written out each time one
// fills, so a Write may take as long as compressing 900k bytes.
func (z *Writer) Write(p []byte) (int, error) {
	if z.err != nil {
		return 0, z.err
	}
	if z.closed {
		return 0, ErrClosed
	}
	for i, b := range p {
		if z.runLength > 0 {
			if b == z.runByte && z.runLength < maxRunLength {
				z.runLength++
				continue
			}
			z.flushRun()
			if len(z.block)+maxRunBytes > z.blockLimitBytes {
				if err := z.writeBlock(); err != nil {
					return i, err
				}
			}
		}
		z.runByte, z.runLength = b, 1
	}
	return len(p), nil
}

// flushRun moves the pending run into the block: up to 4 bytes, and when
// there are 4 a count of the rest, even if zero, as readers expect a count
// after any 4 equal bytes.
func (z *Writer) flushRun() {
	for range min(z.runLength, 4) {
		z.block = append(z.block, z.runByte)
	}
	if z.runLength >= 4 {
		z.block = append(z.block, byte(z.runLength-4))
	}
	z.blockCRC = crcUpdateRun(z.blockCRC, z.runByte, z.runLength)
	z.runLength = 0
}

// writeBlock compresses the block (with the pending run already flushed) and
// writes out the whole bytes of the stream so far.
func (z *Writer) writeBlock() error {
	z.writeHeader()
	if z.encoder == nil {
		z.encoder = new(blockEncoder)
	}
	crc := ^z.blockCRC
	z.encoder.encode(&z.bits, z.block, crc)
	z.streamCRC = (z.streamCRC<<1 | z.streamCRC>>31) ^ crc
	z.block = z.block[:0]
	z.blockCRC = ^uint32(0)
	return z.writeOut()
}

func (z *Writer) writeHeader() {
	if !z.wroteHeader {
		z.bits.out = append(z.bits.out, 'B', 'Z', 'h', byte('0'+z.level))
		z.wroteHeader = true
	}
}

// writeOut hands the whole bytes written so far to the underlying writer.
func (z *Writer) writeOut() error {
	if _, err := z.w.Write(z.bits.out); err != nil {
		z.err = err
		return err
	}
	z.bits.out = z.bits.out[:0]
	return nil
}

// Close compresses what is left, ends the stream and writes it out. It does
// not close the underlying writer. Closing again returns nil, or the error
// that stopped the stream.
func (z *Writer) Close() error {
	if z.err != nil {
		return z.err
	}
	if z.closed {
		return nil
	}
	z.closed = true
	if z.runLength > 0 {
		z.flushRun()
		if err := z.writeBlock(); err != nil {
			return err
		}
	}
	z.writeHeader()
	z.bits.writeBits(24, endMagicHigh)
	z.bits.writeBits(24, endMagicLow)
	z.bits.writeBits(32, z.streamCRC)
	z.bits.alignByte()
	return z.writeOut()
}
