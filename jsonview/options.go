package jsonview

import (
	"encoding/binary"
	"math"
	"math/big"
	"slices"
	"strconv"

	"github.com/iggy-shard/iggy-shard/wire"
)

// Option is one key of an options map.
type Option struct {
	Value    string `json:"value"`
	Explicit bool   `json:"explicit"`
}

// TopicOptions is a topic's options map: every catalog key at its effective value
// (wire.TopicOptionsFromBlocks, the explicit block over the derived one, in the
// catalog's canonical forms), explicit for the keys its client set.
func TopicOptions(explicit, derived []byte) map[string]Option {
	o := wire.TopicOptionsFromBlocks(explicit, derived)
	set := map[string]bool{}
	it := wire.NewTLVIterator(explicit)
	for e, ok := it.Next(); ok; e, ok = it.Next() {
		set[string(e.Key)] = true
	}
	u := func(v uint64) string { return strconv.FormatUint(v, 10) }
	values := map[wire.TopicOptionKey]string{
		wire.TopicOptionCompressionAlgorithm:         CompressionName(o.CompressionAlgorithm),
		wire.TopicOptionMessageExpiry:                u(o.MessageExpiryMicros),
		wire.TopicOptionMaxTopicSize:                 u(o.MaxTopicSizeBytes),
		wire.TopicOptionSegmentSize:                  u(o.SegmentSizeBytes),
		wire.TopicOptionEnforceFsync:                 strconv.FormatBool(o.EnforceFsync),
		wire.TopicOptionMessagesRequiredToSave:       u(uint64(o.MessagesRequiredToSave)),
		wire.TopicOptionSizeOfMessagesRequiredToSave: u(o.SizeOfMessagesRequiredToSaveBytes),
		wire.TopicOptionPreallocateSegments:          strconv.FormatBool(o.PreallocateSegments),
	}
	out := make(map[string]Option, len(values))
	for k, v := range values {
		out[k.String()] = Option{Value: v, Explicit: set[k.String()]}
	}
	return out
}

// PlainOptions is a stream's or user's options map (empty today: they have no
// keys): every entry of the block, explicit; a block that does not parse gives
// what parsed of it.
func PlainOptions(block []byte) map[string]Option {
	out := map[string]Option{}
	it := wire.NewTLVIterator(block)
	for e, ok := it.Next(); ok; e, ok = it.Next() {
		out[string(e.Key)] = Option{Value: ValueText(e.ValueKind, e.Value), Explicit: true}
	}
	return out
}

// ValueText is the string form of a typed header or option value: text as is,
// numbers in decimal, bools as true/false, raw bytes (and values whose size does
// not fit their kind) in hex.
func ValueText(kind wire.HeaderKind, v []byte) string {
	if n := kind.FixedSizeBytes(); n != 0 && len(v) != n {
		return hexText(v)
	}
	le := binary.LittleEndian
	switch kind {
	case wire.HeaderString:
		return string(v)
	case wire.HeaderBool:
		return strconv.FormatBool(v[0] != 0)
	case wire.HeaderInt8:
		return strconv.FormatInt(int64(int8(v[0])), 10)
	case wire.HeaderInt16:
		return strconv.FormatInt(int64(int16(le.Uint16(v))), 10)
	case wire.HeaderInt32:
		return strconv.FormatInt(int64(int32(le.Uint32(v))), 10)
	case wire.HeaderInt64:
		return strconv.FormatInt(int64(le.Uint64(v)), 10)
	case wire.HeaderUint8:
		return strconv.FormatUint(uint64(v[0]), 10)
	case wire.HeaderUint16:
		return strconv.FormatUint(uint64(le.Uint16(v)), 10)
	case wire.HeaderUint32:
		return strconv.FormatUint(uint64(le.Uint32(v)), 10)
	case wire.HeaderUint64:
		return strconv.FormatUint(le.Uint64(v), 10)
	case wire.HeaderInt128:
		return int128Text(v, true)
	case wire.HeaderUint128:
		return int128Text(v, false)
	case wire.HeaderFloat32:
		return strconv.FormatFloat(float64(math.Float32frombits(le.Uint32(v))), 'g', -1, 32)
	case wire.HeaderFloat64:
		return strconv.FormatFloat(math.Float64frombits(le.Uint64(v)), 'g', -1, 64)
	}
	return hexText(v)
}

func hexText(v []byte) string {
	const digits = "0123456789abcdef"
	b := make([]byte, 0, 2+2*len(v))
	b = append(b, "0x"...)
	for _, c := range v {
		b = append(b, digits[c>>4], digits[c&15])
	}
	return string(b)
}

// int128Text prints 16 little-endian bytes in decimal.
func int128Text(v []byte, signed bool) string {
	be := slices.Clone(v)
	slices.Reverse(be)
	n := new(big.Int).SetBytes(be)
	if signed && v[15]&0x80 != 0 {
		n.Sub(n, new(big.Int).Lsh(big.NewInt(1), 128))
	}
	return n.String()
}

// CompressionName is a topic's compression as JSON names it; a code the protocol
// does not define is shown with its number.
func CompressionName(code uint8) string {
	switch code {
	case wire.TopicCompressionNone:
		return "none"
	case wire.TopicCompressionGzip:
		return "gzip"
	}
	return "unknown(" + strconv.Itoa(int(code)) + ")"
}
