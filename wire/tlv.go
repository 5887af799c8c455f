package wire

import (
	"bytes"
	"encoding/binary"
	"slices"
	"unicode/utf8"
)

// User headers (inside a message frame) and the options block (at the end of the
// Create/Update Stream, Topic and User bodies) share one TLV encoding: a flat run of
// fields that pair up as key, value, key, value, ...
//
//	+-----------+-------------+--------------+-------------+---------------+---------------+
//	| key kind  | key length  | key          | value kind  | value length  | value         |
//	| u8, != 0  | u32, 1..255 | length bytes | u8, != 0    | u32, 1..255   | length bytes  |
//	+-----------+-------------+--------------+-------------+---------------+---------------+
//
// The structural walk (both blocks): every kind byte is non-zero, every length is
// 1..=255, the fields pair up, and the walk consumes its byte range exactly. Kind
// codes outside 1..15 pass: they are preserved and forwarded so that headers survive
// mixed-version clusters. Like the reference validator, the walk does not require a
// user-header key to be of String kind: the Go SDK builds typed keys (Raw, Int32, ...),
// so a String-only rule would refuse its messages. The options block does require it.
// Nor does the walk check the width of fixed-size kinds (HeaderKind.FixedSizeBytes);
// the reference server forwards a 3-byte Uint32 unchanged, though the Go SDK refuses
// to read one.
//
// The options block adds: keys are String (kind 2) and valid UTF-8, no key appears
// twice, at most 1024 entries and at most 100000 bytes. An empty block is valid.

const (
	tlvFieldLengthMax = 255
	tlvFieldHeadBytes = 1 + 4 // kind + length
	// tlvEntryBytesMin is the smallest key/value pair: two heads and one byte each.
	tlvEntryBytesMin = 2 * (tlvFieldHeadBytes + 1)

	// OptionsEntriesMax is the most key/value pairs an options block may hold.
	OptionsEntriesMax = 1024
	// OptionsSizeBytesMax bounds an options block. It equals the user-headers budget
	// and leaves room for OptionsEntriesMax entries even at their largest useful size.
	OptionsSizeBytesMax = 100_000
)

// TLVEntry is one key/value pair of a user headers or options block. Key and Value
// alias the block.
type TLVEntry struct {
	KeyKind   HeaderKind
	Key       []byte
	ValueKind HeaderKind
	Value     []byte
}

// TLVIterator walks the pairs of a block without allocating. It is safe on any
// bytes: it stops at the first malformed field and reports it through Err, so a
// caller that iterates a block it validated earlier never sees an error, and one that
// iterates untrusted bytes learns where they stop making sense.
//
//	it := wire.NewTLVIterator(block)
//	for e, ok := it.Next(); ok; e, ok = it.Next() { ... }
//	if err := it.Err(); err != nil { ... }
type TLVIterator struct {
	buf []byte
	off int
	err error
}

// NewTLVIterator starts an iteration over block.
func NewTLVIterator(block []byte) TLVIterator { return TLVIterator{buf: block} }

// Next returns the next pair, or false at the end of the block or at the first
// malformed field.
func (it *TLVIterator) Next() (TLVEntry, bool) {
	if it.err != nil || it.off == len(it.buf) {
		return TLVEntry{}, false
	}
	var e TLVEntry
	var ok bool
	if e.KeyKind, e.Key, ok = it.field(); !ok {
		return TLVEntry{}, false
	}
	if e.ValueKind, e.Value, ok = it.field(); !ok {
		return TLVEntry{}, false
	}
	return e, true
}

// Err is the structural error that stopped the iteration, or nil.
func (it *TLVIterator) Err() error { return it.err }

// Offset is the byte offset of the next pair in the block.
func (it *TLVIterator) Offset() int { return it.off }

func (it *TLVIterator) field() (HeaderKind, []byte, bool) {
	rest := it.buf[it.off:]
	if len(rest) < tlvFieldHeadBytes {
		it.err = ErrInvalidCommand
		return 0, nil, false
	}
	kind := HeaderKind(rest[0])
	n := binary.LittleEndian.Uint32(rest[1:tlvFieldHeadBytes])
	if kind == 0 || n == 0 || n > tlvFieldLengthMax || uint32(len(rest)-tlvFieldHeadBytes) < n {
		it.err = ErrInvalidCommand
		return 0, nil, false
	}
	end := tlvFieldHeadBytes + int(n)
	it.off += end
	return kind, rest[tlvFieldHeadBytes:end:end], true
}

// ValidateUserHeaders checks the structure of a user headers block and returns its
// number of pairs. A malformed block is ErrInvalidCommand.
func ValidateUserHeaders(block []byte) (pairs int, err error) {
	it := NewTLVIterator(block)
	for _, ok := it.Next(); ok; _, ok = it.Next() {
		pairs++
	}
	if it.err != nil {
		return 0, it.err
	}
	return pairs, nil
}

// ValidateOptions checks an options block (structure, String UTF-8 keys, no duplicate
// keys, at most 1024 pairs and 100000 bytes) and returns its number of pairs. A
// violation is ErrInvalidCommand: the reference answers a malformed block with status 3
// (iggy.apache.org/docs/binary-protocol/encodings, "Options block"), before any key is
// looked up in a catalog.
//
// It does not allocate. Duplicate keys are found by sorting a fixed on-stack array of
// packed (offset, length) key references, O(n log n) comparisons of at most 255
// bytes each; a map of keys would allocate per block, and the pairwise scan it
// replaces would cost 1024²/2 comparisons on a hostile block.
func ValidateOptions(block []byte) (pairs int, err error) {
	if len(block) > OptionsSizeBytesMax {
		return 0, ErrInvalidCommand
	}
	// keyRefs[i] = key offset << 8 | key length; offsets fit in 24 bits because the
	// block is at most 100000 bytes.
	var keyRefs [OptionsEntriesMax]uint32
	it := NewTLVIterator(block)
	for {
		start := it.off
		e, ok := it.Next()
		if !ok {
			break
		}
		if pairs == OptionsEntriesMax {
			return 0, ErrInvalidCommand
		}
		if e.KeyKind != HeaderString || !utf8.Valid(e.Key) {
			return 0, ErrInvalidCommand
		}
		keyRefs[pairs] = uint32(start+tlvFieldHeadBytes)<<8 | uint32(len(e.Key))
		pairs++
	}
	if it.err != nil {
		return 0, it.err
	}
	if pairs > 1 && hasDuplicateKey(block, keyRefs[:pairs]) {
		return 0, ErrInvalidCommand
	}
	return pairs, nil
}

func hasDuplicateKey(block []byte, keyRefs []uint32) bool {
	key := func(ref uint32) []byte {
		off := int(ref >> 8)
		return block[off : off+int(ref&0xff)]
	}
	slices.SortFunc(keyRefs, func(a, b uint32) int { return bytes.Compare(key(a), key(b)) })
	for i := 1; i < len(keyRefs); i++ {
		if bytes.Equal(key(keyRefs[i-1]), key(keyRefs[i])) {
			return true
		}
	}
	return false
}

// AppendTLV appends one key/value pair. It refuses (ErrInvalidCommand, b returned
// unchanged) a zero kind or a key or value outside 1..255 bytes, so a block built
// only from AppendTLV always passes ValidateUserHeaders. ValidateOptions adds rules
// that span pairs (no duplicates, the limits), which a builder of one pair cannot see.
func AppendTLV(b []byte, keyKind HeaderKind, key []byte, valueKind HeaderKind, value []byte) ([]byte, error) {
	if !validTLVField(keyKind, len(key)) || !validTLVField(valueKind, len(value)) {
		return b, ErrInvalidCommand
	}
	b = appendTLVField(b, keyKind, len(key))
	b = append(b, key...)
	b = appendTLVField(b, valueKind, len(value))
	return append(b, value...), nil
}

// AppendOption appends one option: a String key, which must be valid UTF-8, and a
// typed value.
func AppendOption(b []byte, key string, valueKind HeaderKind, value []byte) ([]byte, error) {
	if !validTLVField(HeaderString, len(key)) || !validTLVField(valueKind, len(value)) || !utf8.ValidString(key) {
		return b, ErrInvalidCommand
	}
	b = appendTLVField(b, HeaderString, len(key))
	b = append(b, key...)
	b = appendTLVField(b, valueKind, len(value))
	return append(b, value...), nil
}

func validTLVField(kind HeaderKind, n int) bool {
	return kind != 0 && n >= 1 && n <= tlvFieldLengthMax
}

func appendTLVField(b []byte, kind HeaderKind, n int) []byte {
	return appendU32(appendU8(b, uint8(kind)), uint32(n))
}

// optionsBlock reads the options block that ends a request body: everything left.
func (d *decoder) optionsBlock() []byte {
	block := d.rest()
	if d.err != nil {
		return nil
	}
	if _, err := ValidateOptions(block); err != nil {
		d.fail(err)
		return nil
	}
	return block
}

// optionsBlock writes a request's trailing options block after validating it, so our
// client never sends a block the server must refuse.
func (e *encoder) optionsBlock(block []byte) {
	if _, err := ValidateOptions(block); err != nil {
		e.fail(err)
		return
	}
	e.bytes(block)
}
