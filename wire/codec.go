package wire

import (
	"encoding/binary"
	"unicode/utf8"
)

// decoder is a bounds-checked little-endian cursor over an untrusted body. The first
// failure sticks: later reads return zero values and the caller checks err once at the
// end, so decoders read straight down the layout without an if after every field.
// A decoder never allocates; byte and string fields are sub-slices of the input.
type decoder struct {
	buf []byte
	off int
	err error
}

func newDecoder(b []byte) decoder { return decoder{buf: b} }

// fail records the first error only.
func (d *decoder) fail(err error) {
	if d.err == nil {
		d.err = err
	}
}

// take returns the next n bytes, or nil after recording ErrInvalidCommand when fewer
// than n remain (a short body is a malformed request, code 3).
func (d *decoder) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || len(d.buf)-d.off < n {
		d.fail(ErrInvalidCommand)
		return nil
	}
	b := d.buf[d.off : d.off+n : d.off+n]
	d.off += n
	return b
}

func (d *decoder) u8() uint8 {
	b := d.take(1)
	if b == nil {
		return 0
	}
	return b[0]
}

func (d *decoder) u16() uint16 {
	b := d.take(2)
	if b == nil {
		return 0
	}
	return binary.LittleEndian.Uint16(b)
}

func (d *decoder) u32() uint32 {
	b := d.take(4)
	if b == nil {
		return 0
	}
	return binary.LittleEndian.Uint32(b)
}

func (d *decoder) u64() uint64 {
	b := d.take(8)
	if b == nil {
		return 0
	}
	return binary.LittleEndian.Uint64(b)
}

// u128 reads a little-endian u128 as its low and high halves.
func (d *decoder) u128() Uint128 {
	b := d.take(16)
	if b == nil {
		return Uint128{}
	}
	return Uint128{Lo: binary.LittleEndian.Uint64(b), Hi: binary.LittleEndian.Uint64(b[8:])}
}

// rest returns every remaining byte (possibly none).
func (d *decoder) rest() []byte {
	if d.err != nil {
		return nil
	}
	b := d.buf[d.off:len(d.buf):len(d.buf)]
	d.off = len(d.buf)
	return b
}

func (d *decoder) remaining() int { return len(d.buf) - d.off }

// end records ErrInvalidCommand when bytes are left over. Replies and the blocks that
// carry their own length (permissions, options, user headers) must be consumed
// exactly; request bodies mostly end with endIgnoringTrailing instead.
func (d *decoder) end() error {
	if d.err == nil && d.off != len(d.buf) {
		d.fail(ErrInvalidCommand)
	}
	return d.err
}

// endIgnoringTrailing ends a request body whose reference decoder ignores what follows
// the last field: apache/iggy decodes request bodies with WireDecode::decode_from
// (core/binary_protocol/src/codec.rs), which reads the fields and drops the rest.
// SDKs rely on it (the Node.js SDK sends DeleteTopic with a partitions count after
// the topic). RequestBodyRules lists which bodies end this way.
func (d *decoder) endIgnoringTrailing() error { return d.err }

// utf8String reads n bytes that must be valid UTF-8. The result aliases the input.
func (d *decoder) utf8String(n int) []byte {
	b := d.take(n)
	if b != nil && !utf8.Valid(b) {
		d.fail(ErrInvalidCommand)
		return nil
	}
	return b
}

// Uint128 is a little-endian u128 on the wire: client ids, checksums, cluster ids.
type Uint128 struct {
	Lo, Hi uint64
}

// IsZero reports whether both halves are zero.
func (u Uint128) IsZero() bool { return u.Lo == 0 && u.Hi == 0 }

// Put writes u little-endian into b[0:16].
func (u Uint128) Put(b []byte) {
	_ = b[15]
	binary.LittleEndian.PutUint64(b, u.Lo)
	binary.LittleEndian.PutUint64(b[8:], u.Hi)
}

// GetUint128 reads a little-endian u128 from b[0:16].
func GetUint128(b []byte) Uint128 {
	_ = b[15]
	return Uint128{Lo: binary.LittleEndian.Uint64(b), Hi: binary.LittleEndian.Uint64(b[8:])}
}

// Encoders append to a caller-owned slice, so a caller that reuses its buffer encodes
// without allocating.

func appendU8(b []byte, v uint8) []byte   { return append(b, v) }
func appendU16(b []byte, v uint16) []byte { return binary.LittleEndian.AppendUint16(b, v) }
func appendU32(b []byte, v uint32) []byte { return binary.LittleEndian.AppendUint32(b, v) }
func appendU64(b []byte, v uint64) []byte { return binary.LittleEndian.AppendUint64(b, v) }
func appendU128(b []byte, v Uint128) []byte {
	b = binary.LittleEndian.AppendUint64(b, v.Lo)
	return binary.LittleEndian.AppendUint64(b, v.Hi)
}
