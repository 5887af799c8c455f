package metadata

import (
	"encoding/binary"
	"unicode/utf8"

	"github.com/iggy-shard/iggy-shard/wire"
)

// reader is a bounds-checked little-endian cursor over untrusted bytes (a proposal
// body or a snapshot). The first failure sticks; later reads return zero values, so
// decoders read straight down a layout and check ok once.
type reader struct {
	buf []byte
	off int
	ok  bool
}

func newReader(b []byte) reader { return reader{buf: b, ok: true} }

func (r *reader) take(n int) []byte {
	if !r.ok || n < 0 || len(r.buf)-r.off < n {
		r.ok = false
		return nil
	}
	b := r.buf[r.off : r.off+n : r.off+n]
	r.off += n
	return b
}

func (r *reader) u8() uint8 {
	if b := r.take(1); b != nil {
		return b[0]
	}
	return 0
}

func (r *reader) u32() uint32 {
	if b := r.take(4); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

func (r *reader) u64() uint64 {
	if b := r.take(8); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}

func (r *reader) u128() wire.Uint128 {
	if b := r.take(16); b != nil {
		return wire.GetUint128(b)
	}
	return wire.Uint128{}
}

// name reads [len u8][UTF-8], 1..255 bytes.
func (r *reader) name() []byte {
	n := int(r.u8())
	if r.ok && n == 0 {
		r.ok = false
		return nil
	}
	b := r.take(n)
	if b != nil && !utf8.Valid(b) {
		r.ok = false
		return nil
	}
	return b
}

// block32 reads [len u32][bytes].
func (r *reader) block32() []byte {
	n := r.u32()
	if !r.ok || uint64(n) > uint64(len(r.buf)-r.off) {
		r.ok = false
		return nil
	}
	return r.take(int(n))
}

// count reads a u32 element count and checks that count elements of at least
// minSize bytes fit in what remains, so a hostile count never sizes an allocation.
func (r *reader) count(minSize int) int {
	n := r.u32()
	if !r.ok || uint64(n)*uint64(minSize) > uint64(len(r.buf)-r.off) {
		r.ok = false
		return 0
	}
	return int(n)
}

func (r *reader) done() bool { return r.ok && r.off == len(r.buf) }

func appendU8(b []byte, v uint8) []byte   { return append(b, v) }
func appendU32(b []byte, v uint32) []byte { return binary.LittleEndian.AppendUint32(b, v) }
func appendU64(b []byte, v uint64) []byte { return binary.LittleEndian.AppendUint64(b, v) }

func appendName(b []byte, v string) []byte {
	b = append(b, uint8(len(v)))
	return append(b, v...)
}

func appendBlock32(b []byte, v []byte) []byte {
	b = appendU32(b, uint32(len(v)))
	return append(b, v...)
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}
