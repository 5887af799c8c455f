package wire

import (
	"strconv"
	"unicode/utf8"
)

// The shared encodings that request bodies are built from. Every one decodes through
// the sticky-error decoder (so a request decoder reads straight down its layout) and
// encodes through the sticky-error encoder (so a request encoder refuses a value the
// decoder would refuse, instead of writing bytes that no server accepts).
//
//	Name                  [len u8][UTF-8, 1..255 bytes]
//	Identifier            [kind u8][len u8][value]         kind 1: len 4, u32
//	                                                       kind 2: len 1..255, UTF-8
//	Consumer              [kind u8][Identifier]            kind 1 consumer, 2 group
//	optional partition id [flag u8][partition_id u32]      flag 1: set; else unset
//	Partitioning          [kind u8][len u8][value]         1 balanced (len 0),
//	                                                       2 partition id (len 4, u32),
//	                                                       3 messages key (len 1..255)
//	PollingStrategy       [kind u8][value u64]             kinds 1..5, always 9 bytes
//
// A decode failure is ErrInvalidCommand: the reference answers an undecodable body, a
// bad Identifier included, with status 3 (apache/iggy core/server/src/responses.rs).

const (
	nameLengthMax          = 255
	numericIdentifierBytes = 4
	// PollingStrategySizeBytes is the fixed size of an encoded PollingStrategy.
	PollingStrategySizeBytes = 9
	// OptionalPartitionSizeBytes is the fixed size of an optional partition id.
	OptionalPartitionSizeBytes = 5
)

// encoder appends to a caller-owned slice and remembers the first value it could not
// represent (an empty name, a 4-byte string identifier, ...). It is the mirror of
// decoder: request encoders write straight down their layout and check err once.
type encoder struct {
	b   []byte
	err error
}

func (e *encoder) fail(err error) {
	if e.err == nil {
		e.err = err
	}
}

func (e *encoder) u8(v uint8)   { e.b = appendU8(e.b, v) }
func (e *encoder) u32(v uint32) { e.b = appendU32(e.b, v) }
func (e *encoder) u64(v uint64) { e.b = appendU64(e.b, v) }
func (e *encoder) bytes(v []byte) {
	e.b = append(e.b, v...)
}

func (e *encoder) flag(v bool) {
	if v {
		e.u8(1)
	} else {
		e.u8(0)
	}
}

// finish returns the encoded bytes, or the caller's slice untouched (its original
// length) together with the first error.
func (e *encoder) finish(orig []byte) ([]byte, error) {
	if e.err != nil {
		return orig, e.err
	}
	return e.b, nil
}

// name reads a Name: 1..255 bytes of UTF-8. The result aliases the input.
func (d *decoder) name() []byte {
	n := int(d.u8())
	if d.err == nil && n == 0 {
		d.fail(ErrInvalidCommand)
		return nil
	}
	return d.utf8String(n)
}

// name writes a Name, refusing an empty, over-long or non-UTF-8 one.
func (e *encoder) name(v []byte) {
	if !validName(v) {
		e.fail(ErrInvalidCommand)
		return
	}
	e.u8(uint8(len(v)))
	e.bytes(v)
}

func validName(v []byte) bool {
	return len(v) >= 1 && len(v) <= nameLengthMax && utf8.Valid(v)
}

// AppendName appends v as a Name ([len u8][bytes]). It fails with ErrInvalidCommand
// when v is empty, longer than 255 bytes or not UTF-8.
func AppendName(b []byte, v []byte) ([]byte, error) {
	e := encoder{b: b}
	e.name(v)
	return e.finish(b)
}

// IdentifierKind says how an Identifier names its object.
type IdentifierKind uint8

// Identifier kinds on the wire.
const (
	IdentifierNumeric IdentifierKind = 1
	IdentifierString  IdentifierKind = 2
)

func (k IdentifierKind) String() string {
	switch k {
	case IdentifierNumeric:
		return "numeric"
	case IdentifierString:
		return "string"
	}
	return "IdentifierKind(" + strconv.Itoa(int(k)) + ")"
}

// Identifier names a stream, topic, user or consumer group by its u32 id or by its
// name. A decoded String aliases the request body.
type Identifier struct {
	Kind    IdentifierKind
	Numeric uint32 // when Kind is IdentifierNumeric
	String  []byte // when Kind is IdentifierString: 1..255 bytes of UTF-8
}

// NumericIdentifier names an object by its id.
func NumericIdentifier(id uint32) Identifier {
	return Identifier{Kind: IdentifierNumeric, Numeric: id}
}

// StringIdentifier names an object by its name.
func StringIdentifier(name []byte) Identifier {
	return Identifier{Kind: IdentifierString, String: name}
}

// EncodedLen is the number of bytes Append writes for a valid identifier.
func (id Identifier) EncodedLen() int {
	if id.Kind == IdentifierNumeric {
		return 2 + numericIdentifierBytes
	}
	return 2 + len(id.String)
}

// Equal reports whether two identifiers name the same thing the same way.
func (id Identifier) Equal(other Identifier) bool {
	if id.Kind != other.Kind {
		return false
	}
	if id.Kind == IdentifierNumeric {
		return id.Numeric == other.Numeric
	}
	return string(id.String) == string(other.String)
}

func (id Identifier) GoString() string {
	if id.Kind == IdentifierNumeric {
		return "NumericIdentifier(" + strconv.FormatUint(uint64(id.Numeric), 10) + ")"
	}
	return "StringIdentifier(" + strconv.Quote(string(id.String)) + ")"
}

// Append encodes id. It fails with ErrInvalidIdentifier for an unknown kind or a
// string that is empty, longer than 255 bytes or not UTF-8.
func (id Identifier) Append(b []byte) ([]byte, error) {
	e := encoder{b: b}
	e.identifier(id)
	return e.finish(b)
}

func (e *encoder) identifier(id Identifier) {
	switch id.Kind {
	case IdentifierNumeric:
		e.u8(uint8(IdentifierNumeric))
		e.u8(numericIdentifierBytes)
		e.u32(id.Numeric)
	case IdentifierString:
		if !validName(id.String) {
			e.fail(ErrInvalidIdentifier)
			return
		}
		e.u8(uint8(IdentifierString))
		e.u8(uint8(len(id.String)))
		e.bytes(id.String)
	default:
		e.fail(ErrInvalidIdentifier)
	}
}

// DecodeIdentifier reads one Identifier from the front of b and returns it with the
// number of bytes it took. The string form aliases b.
func DecodeIdentifier(b []byte) (Identifier, int, error) {
	d := newDecoder(b)
	id := d.identifier()
	return id, d.off, d.err
}

func (d *decoder) identifier() Identifier {
	kind := IdentifierKind(d.u8())
	n := int(d.u8())
	if d.err != nil {
		return Identifier{}
	}
	switch kind {
	case IdentifierNumeric:
		if n != numericIdentifierBytes {
			d.fail(ErrInvalidCommand)
			return Identifier{}
		}
		return Identifier{Kind: kind, Numeric: d.u32()}
	case IdentifierString:
		if n == 0 {
			d.fail(ErrInvalidCommand)
			return Identifier{}
		}
		return Identifier{Kind: kind, String: d.utf8String(n)}
	}
	d.fail(ErrInvalidCommand)
	return Identifier{}
}

// ConsumerKind says whether offsets and polls belong to one consumer or to a group.
type ConsumerKind uint8

// Consumer kinds on the wire. (A later protocol build adds 3, an external group;
// 0.11.0 accepts only 1 and 2.)
const (
	ConsumerSingle ConsumerKind = 1
	ConsumerGroup  ConsumerKind = 2
)

func (k ConsumerKind) String() string {
	switch k {
	case ConsumerSingle:
		return "consumer"
	case ConsumerGroup:
		return "consumer_group"
	}
	return "ConsumerKind(" + strconv.Itoa(int(k)) + ")"
}

// Consumer identifies a consumer or a consumer group in poll and offset commands.
type Consumer struct {
	Kind ConsumerKind
	ID   Identifier
}

// EncodedLen is the number of bytes Append writes for a valid consumer.
func (c Consumer) EncodedLen() int { return 1 + c.ID.EncodedLen() }

// Append encodes c; ErrInvalidCommand for an unknown kind, ErrInvalidIdentifier for a
// bad identifier.
func (c Consumer) Append(b []byte) ([]byte, error) {
	e := encoder{b: b}
	e.consumer(c)
	return e.finish(b)
}

func (e *encoder) consumer(c Consumer) {
	if c.Kind != ConsumerSingle && c.Kind != ConsumerGroup {
		e.fail(ErrInvalidCommand)
		return
	}
	e.u8(uint8(c.Kind))
	e.identifier(c.ID)
}

func (d *decoder) consumer() Consumer {
	kind := ConsumerKind(d.u8())
	if d.err == nil && kind != ConsumerSingle && kind != ConsumerGroup {
		d.fail(ErrInvalidCommand)
		return Consumer{}
	}
	return Consumer{Kind: kind, ID: d.identifier()}
}

// OptionalPartition is the 5-byte [flag u8][partition_id u32] field. Only flag 1 means
// "set"; any other flag reads as unset and the value bytes are then ignored, as the
// reference server does (the Go SDK sends five zero bytes for "none").
type OptionalPartition struct {
	ID  uint32
	Set bool
}

// SomePartition is an optional partition id that is set.
func SomePartition(id uint32) OptionalPartition { return OptionalPartition{ID: id, Set: true} }

func (e *encoder) optionalPartition(p OptionalPartition) {
	if p.Set {
		e.u8(1)
		e.u32(p.ID)
		return
	}
	e.u8(0)
	e.u32(0)
}

func (d *decoder) optionalPartition() OptionalPartition {
	flag := d.u8()
	id := d.u32()
	if flag != 1 {
		return OptionalPartition{}
	}
	return OptionalPartition{ID: id, Set: true}
}

// PartitioningKind says how SendMessages picks its target partition.
type PartitioningKind uint8

// Partitioning kinds on the wire.
const (
	PartitioningBalanced    PartitioningKind = 1
	PartitioningPartitionID PartitioningKind = 2
	PartitioningMessagesKey PartitioningKind = 3
)

func (k PartitioningKind) String() string {
	switch k {
	case PartitioningBalanced:
		return "balanced"
	case PartitioningPartitionID:
		return "partition_id"
	case PartitioningMessagesKey:
		return "messages_key"
	}
	return "PartitioningKind(" + strconv.Itoa(int(k)) + ")"
}

const messagesKeyLengthMax = 255

// Partitioning is the [kind u8][len u8][value] routing field of SendMessages.
// A decoded Key aliases the body.
type Partitioning struct {
	Kind        PartitioningKind
	PartitionID uint32 // when Kind is PartitioningPartitionID
	Key         []byte // when Kind is PartitioningMessagesKey: 1..255 opaque bytes
}

// EncodedLen is the number of bytes Append writes for a valid partitioning.
func (p Partitioning) EncodedLen() int {
	switch p.Kind {
	case PartitioningPartitionID:
		return 2 + 4
	case PartitioningMessagesKey:
		return 2 + len(p.Key)
	}
	return 2
}

// Append encodes p. It fails with ErrInvalidKeyValueLength for a messages key outside
// 1..255 bytes (the code the Go SDK uses for the same mistake) and ErrInvalidCommand
// for an unknown kind.
func (p Partitioning) Append(b []byte) ([]byte, error) {
	e := encoder{b: b}
	e.partitioning(p)
	return e.finish(b)
}

func (e *encoder) partitioning(p Partitioning) {
	switch p.Kind {
	case PartitioningBalanced:
		e.u8(uint8(p.Kind))
		e.u8(0)
	case PartitioningPartitionID:
		e.u8(uint8(p.Kind))
		e.u8(4)
		e.u32(p.PartitionID)
	case PartitioningMessagesKey:
		if len(p.Key) == 0 || len(p.Key) > messagesKeyLengthMax {
			e.fail(ErrInvalidKeyValueLength)
			return
		}
		e.u8(uint8(p.Kind))
		e.u8(uint8(len(p.Key)))
		e.bytes(p.Key)
	default:
		e.fail(ErrInvalidCommand)
	}
}

// DecodePartitioning reads one Partitioning from the front of b and returns it with
// the number of bytes it took. The key aliases b.
func DecodePartitioning(b []byte) (Partitioning, int, error) {
	d := newDecoder(b)
	p := d.partitioning()
	return p, d.off, d.err
}

func (d *decoder) partitioning() Partitioning {
	kind := PartitioningKind(d.u8())
	n := int(d.u8())
	if d.err != nil {
		return Partitioning{}
	}
	switch {
	case kind == PartitioningBalanced && n == 0:
		return Partitioning{Kind: kind}
	case kind == PartitioningPartitionID && n == 4:
		return Partitioning{Kind: kind, PartitionID: d.u32()}
	case kind == PartitioningMessagesKey && n >= 1:
		return Partitioning{Kind: kind, Key: d.take(n)}
	}
	d.fail(ErrInvalidCommand)
	return Partitioning{}
}

// PollingKind says where a poll starts.
type PollingKind uint8

// Polling strategy kinds on the wire.
const (
	PollingOffset    PollingKind = 1 // at Value, an offset
	PollingTimestamp PollingKind = 2 // at Value, microseconds since the epoch
	PollingFirst     PollingKind = 3 // from the beginning; Value ignored
	PollingLast      PollingKind = 4 // from the end; Value ignored
	PollingNext      PollingKind = 5 // after the stored consumer offset; Value ignored
)

func (k PollingKind) String() string {
	switch k {
	case PollingOffset:
		return "offset"
	case PollingTimestamp:
		return "timestamp"
	case PollingFirst:
		return "first"
	case PollingLast:
		return "last"
	case PollingNext:
		return "next"
	}
	return "PollingKind(" + strconv.Itoa(int(k)) + ")"
}

// PollingStrategy is the fixed 9-byte [kind u8][value u64] field of PollMessages.
// Value is carried verbatim even for the kinds that ignore it.
type PollingStrategy struct {
	Kind  PollingKind
	Value uint64
}

// Append encodes s; ErrInvalidCommand for a kind outside 1..5.
func (s PollingStrategy) Append(b []byte) ([]byte, error) {
	e := encoder{b: b}
	e.pollingStrategy(s)
	return e.finish(b)
}

func (e *encoder) pollingStrategy(s PollingStrategy) {
	if s.Kind < PollingOffset || s.Kind > PollingNext {
		e.fail(ErrInvalidCommand)
		return
	}
	e.u8(uint8(s.Kind))
	e.u64(s.Value)
}

func (d *decoder) pollingStrategy() PollingStrategy {
	kind := PollingKind(d.u8())
	if d.err == nil && (kind < PollingOffset || kind > PollingNext) {
		d.fail(ErrInvalidCommand)
		return PollingStrategy{}
	}
	return PollingStrategy{Kind: kind, Value: d.u64()}
}

// HeaderKind is the type byte of a TLV field in user headers and option blocks.
// Codes outside 1..15 are not errors at the wire level: they are preserved and
// forwarded so that headers survive mixed-version clusters.
type HeaderKind uint8

// Header kinds on the wire. Integers are little-endian; Bool is one byte.
const (
	HeaderRaw     HeaderKind = 1
	HeaderString  HeaderKind = 2
	HeaderBool    HeaderKind = 3
	HeaderInt8    HeaderKind = 4
	HeaderInt16   HeaderKind = 5
	HeaderInt32   HeaderKind = 6
	HeaderInt64   HeaderKind = 7
	HeaderInt128  HeaderKind = 8
	HeaderUint8   HeaderKind = 9
	HeaderUint16  HeaderKind = 10
	HeaderUint32  HeaderKind = 11
	HeaderUint64  HeaderKind = 12
	HeaderUint128 HeaderKind = 13
	HeaderFloat32 HeaderKind = 14
	HeaderFloat64 HeaderKind = 15
)

var headerKindNames = [...]string{
	HeaderRaw: "raw", HeaderString: "string", HeaderBool: "bool",
	HeaderInt8: "int8", HeaderInt16: "int16", HeaderInt32: "int32", HeaderInt64: "int64",
	HeaderInt128: "int128", HeaderUint8: "uint8", HeaderUint16: "uint16",
	HeaderUint32: "uint32", HeaderUint64: "uint64", HeaderUint128: "uint128",
	HeaderFloat32: "float32", HeaderFloat64: "float64",
}

// Known reports whether the protocol defines k (1..15).
func (k HeaderKind) Known() bool { return k >= HeaderRaw && k <= HeaderFloat64 }

func (k HeaderKind) String() string {
	if k.Known() {
		return headerKindNames[k]
	}
	return "HeaderKind(" + strconv.Itoa(int(k)) + ")"
}

// FixedSizeBytes is the value size a known fixed-width kind requires, or 0 for Raw,
// String and unknown kinds, whose length is free within 1..255.
func (k HeaderKind) FixedSizeBytes() int {
	switch k {
	case HeaderBool, HeaderInt8, HeaderUint8:
		return 1
	case HeaderInt16, HeaderUint16:
		return 2
	case HeaderInt32, HeaderUint32, HeaderFloat32:
		return 4
	case HeaderInt64, HeaderUint64, HeaderFloat64:
		return 8
	case HeaderInt128, HeaderUint128:
		return 16
	}
	return 0
}
