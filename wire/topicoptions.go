package wire

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/bits"
	"slices"
	"strings"
	"unicode/utf8"
)

// The topic option catalog (iggy.apache.org/docs/server/topic-options; apache/iggy
// core/common/src/types/options/mod.rs): eight keys a CreateTopic options block may
// carry, three of which an UpdateTopic may change. Streams and users have empty
// catalogs, so every key in their blocks is ErrUnsupportedOptionKey.
//
//	key                                canonical kind  default          after create
//	compression_algorithm              String          "none"           updatable
//	message_expiry                     Uint64 µs       MaxUint64 never  updatable
//	max_topic_size                     Uint64 bytes    MaxUint64        updatable
//	segment_size                       Uint64 bytes    1 GiB            create-only
//	enforce_fsync                      Bool            false            create-only
//	messages_required_to_save          Uint32          1024             create-only
//	size_of_messages_required_to_save  Uint64 bytes    1 MiB            create-only
//	preallocate_segments               Bool            false            create-only
//
// A created topic stores two blocks: the explicit one (the keys the client set,
// re-encoded in canonical kinds) and the derived one (every other key at its
// default). Both are sorted by key, as the reference server's ordered map keeps them.
// An update stores the client's entries verbatim in the explicit block.

// TopicOptionKey names one key of the topic catalog. The order is DescribeOptions'.
type TopicOptionKey uint8

// The topic option keys.
const (
	TopicOptionCompressionAlgorithm TopicOptionKey = iota
	TopicOptionMessageExpiry
	TopicOptionMaxTopicSize
	TopicOptionSegmentSize
	TopicOptionEnforceFsync
	TopicOptionMessagesRequiredToSave
	TopicOptionSizeOfMessagesRequiredToSave
	TopicOptionPreallocateSegments
	topicOptionCount
)

// Bounds and defaults of the topic catalog.
const (
	DefaultMessageExpiryMicros                uint64 = math.MaxUint64 // never expire
	DefaultMaxTopicSizeBytes                  uint64 = math.MaxUint64 // unlimited
	DefaultSegmentSizeBytes                   uint64 = 1 << 30
	DefaultMessagesRequiredToSave             uint32 = 1024
	DefaultSizeOfMessagesRequiredToSaveBytes  uint64 = 1 << 20
	TopicSegmentSizeBytesMin                  uint64 = 1 << 20
	TopicSegmentSizeBytesMax                  uint64 = 1 << 30
	topicSegmentSizeAlignmentBytes            uint64 = 512
	TopicMessagesRequiredToSaveMax            uint32 = 16 << 20
	TopicSizeOfMessagesRequiredToSaveBytesMax uint64 = 1 << 30
	TopicPreallocatedBytesMax                 uint64 = 64 << 30
	TopicPartitionsCountMax                   uint32 = 1000
	messageExpiryHumantimeSecondsMax          uint64 = math.MaxUint32
	microsPerSecond                           uint64 = 1_000_000
)

// TopicOptionSpec is one catalog entry, as DescribeOptions describes it.
type TopicOptionSpec struct {
	Key string
	// Kind is the canonical kind: what a created topic stores and what Default is
	// encoded in.
	Kind    HeaderKind
	Default []byte
	// Updatable keys may appear in an UpdateTopic block; the rest are create-only.
	Updatable   bool
	Description string
}

var topicOptionSpecs = [topicOptionCount]TopicOptionSpec{
	TopicOptionCompressionAlgorithm: {
		Key: "compression_algorithm", Kind: HeaderString, Default: []byte("none"), Updatable: true,
		Description: "Compression label for the topic: none or gzip (case-insensitive; Uint8 1 or 2 also accepted). Stored and reported only; payloads are not compressed.",
	},
	TopicOptionMessageExpiry: {
		Key: "message_expiry", Kind: HeaderUint64, Default: u64Bytes(DefaultMessageExpiryMicros), Updatable: true,
		Description: "Age after which sealed segments are deleted: microseconds as Uint64 (u64::MAX = never, 0 = server default) or a humantime string such as \"7 days\" or \"none\".",
	},
	TopicOptionMaxTopicSize: {
		Key: "max_topic_size", Kind: HeaderUint64, Default: u64Bytes(DefaultMaxTopicSizeBytes), Updatable: true,
		Description: "Size past which the oldest sealed segments are deleted: bytes as Uint64 (u64::MAX = unlimited, 0 = server default) or a byte-size string such as \"1 GiB\"; at least the segment size.",
	},
	TopicOptionSegmentSize: {
		Key: "segment_size", Kind: HeaderUint64, Default: u64Bytes(DefaultSegmentSizeBytes),
		Description: "Soft cap of one segment file: bytes as Uint64 or a byte-size string such as \"128MiB\"; a multiple of 512 in 1048576..=1073741824.",
	},
	TopicOptionEnforceFsync: {
		Key: "enforce_fsync", Kind: HeaderBool, Default: []byte{0},
		Description: "Whether every write to the topic's partitions is fsynced before it is acknowledged: Bool or the string true/false.",
	},
	TopicOptionMessagesRequiredToSave: {
		Key: "messages_required_to_save", Kind: HeaderUint32, Default: u32Bytes(DefaultMessagesRequiredToSave),
		Description: "Flush threshold in messages for the in-memory journal: Uint32 or a decimal string, 1..=16777216.",
	},
	TopicOptionSizeOfMessagesRequiredToSave: {
		Key: "size_of_messages_required_to_save", Kind: HeaderUint64, Default: u64Bytes(DefaultSizeOfMessagesRequiredToSaveBytes),
		Description: "Flush threshold in bytes for the in-memory journal: Uint64 or a byte-size string, at most 1073741824.",
	},
	TopicOptionPreallocateSegments: {
		Key: "preallocate_segments", Kind: HeaderBool, Default: []byte{0},
		Description: "Whether a segment's full size is reserved on disk when it is opened: Bool or the string true/false; segment_size x partitions is capped at 68719476736 bytes.",
	},
}

// topicOptionsByKey lists the keys in byte order of their names: the order of the
// entries inside a stored block.
var topicOptionsByKey = func() [topicOptionCount]TopicOptionKey {
	var order [topicOptionCount]TopicOptionKey
	for i := range order {
		order[i] = TopicOptionKey(i)
	}
	slices.SortFunc(order[:], func(a, b TopicOptionKey) int {
		return strings.Compare(topicOptionSpecs[a].Key, topicOptionSpecs[b].Key)
	})
	return order
}()

// topicOptionDescriptors is the DescribeOptions catalog, built once.
var topicOptionDescriptors = func() []OptionDescriptor {
	out := make([]OptionDescriptor, topicOptionCount)
	for i := range topicOptionSpecs {
		s := &topicOptionSpecs[i]
		out[i] = OptionDescriptor{Key: []byte(s.Key), Kind: s.Kind, Default: s.Default, Description: []byte(s.Description)}
	}
	return out
}()

func u64Bytes(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }
func u32Bytes(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }

// Spec returns k's catalog entry. It must not be modified.
func (k TopicOptionKey) Spec() *TopicOptionSpec { return &topicOptionSpecs[k] }

// String returns the option's key.
func (k TopicOptionKey) String() string {
	if k < topicOptionCount {
		return topicOptionSpecs[k].Key
	}
	return "TopicOptionKey(?)"
}

// LookupTopicOption finds a key of the topic catalog by name.
func LookupTopicOption(key []byte) (TopicOptionKey, bool) {
	for i := range topicOptionSpecs {
		if string(key) == topicOptionSpecs[i].Key {
			return TopicOptionKey(i), true
		}
	}
	return 0, false
}

// AppendTopicOptionDescriptors appends the topic catalog in DescribeOptions order.
// The descriptors' byte fields are shared, read-only package data.
func AppendTopicOptionDescriptors(dst []OptionDescriptor) []OptionDescriptor {
	return append(dst, topicOptionDescriptors...)
}

// AppendTopicOptionsCatalogReply encodes the DescribeOptions body for the topic
// scope. The stream and user scopes answer AppendDescribeOptionsReply(b, nil), the
// four bytes 00 00 00 00.
func AppendTopicOptionsCatalogReply(b []byte) []byte {
	return AppendDescribeOptionsReply(b, topicOptionDescriptors)
}

// AppendOptionsCatalogReply encodes the DescribeOptions body for scope: the topic
// catalog, or the empty catalog 00 00 00 00 of streams and users. An unknown scope
// is ErrInvalidCommand (status 3), with b unchanged.
func AppendOptionsCatalogReply(b []byte, scope OptionsScope) ([]byte, error) {
	switch scope {
	case OptionsScopeTopic:
		return AppendTopicOptionsCatalogReply(b), nil
	case OptionsScopeStream, OptionsScopeUser:
		return AppendDescribeOptionsReply(b, nil), nil
	}
	return b, ErrInvalidCommand
}

// TopicOptionSet is a set of topic option keys.
type TopicOptionSet uint8

// Has reports whether k is in the set.
func (s TopicOptionSet) Has(k TopicOptionKey) bool { return s&(1<<k) != 0 }

func (s *TopicOptionSet) add(k TopicOptionKey) { *s |= 1 << k }

// TopicOptions are a topic's effective option values.
type TopicOptions struct {
	// CompressionAlgorithm is the TopicHeader code: TopicCompressionNone or
	// TopicCompressionGzip.
	CompressionAlgorithm              uint8
	MessageExpiryMicros               uint64
	MaxTopicSizeBytes                 uint64
	SegmentSizeBytes                  uint64
	EnforceFsync                      bool
	MessagesRequiredToSave            uint32
	SizeOfMessagesRequiredToSaveBytes uint64
	PreallocateSegments               bool
}

// DefaultTopicOptions is every key at its catalog default.
func DefaultTopicOptions() TopicOptions {
	return TopicOptions{
		CompressionAlgorithm:              TopicCompressionNone,
		MessageExpiryMicros:               DefaultMessageExpiryMicros,
		MaxTopicSizeBytes:                 DefaultMaxTopicSizeBytes,
		SegmentSizeBytes:                  DefaultSegmentSizeBytes,
		MessagesRequiredToSave:            DefaultMessagesRequiredToSave,
		SizeOfMessagesRequiredToSaveBytes: DefaultSizeOfMessagesRequiredToSaveBytes,
	}
}

// SetHeaderFields copies the three options a TopicHeader carries as fixed fields
// (message_expiry, compression_algorithm, max_topic_size) into h.
func (o *TopicOptions) SetHeaderFields(h *TopicHeader) {
	h.MessageExpiryMicros = o.MessageExpiryMicros
	h.CompressionAlgorithm = o.CompressionAlgorithm
	h.MaxTopicSizeBytes = o.MaxTopicSizeBytes
}

// TopicOptionValue is one parsed option entry.
type TopicOptionValue struct {
	Key TopicOptionKey
	// ServerDefault marks a value that means "as if absent": 0 for the expiry and
	// the three sizes, or the strings default / server_default.
	ServerDefault bool
	// Uint holds the value of the integer keys and the compression code; Bool the
	// value of the two flags.
	Uint uint64
	Bool bool
}

// ParseTopicOption parses one entry of an options block against the topic catalog:
// ErrUnsupportedOptionKey (4041) for a key outside it, ErrInvalidOptionValue (4042)
// for a value of the wrong kind, width or range. Bounds that depend on other keys
// (segment size against max topic size, the preallocation cap) are checked by
// ResolveCreateTopicOptions and CheckTopicUpdate.
func ParseTopicOption(key []byte, kind HeaderKind, value []byte) (TopicOptionValue, error) {
	k, ok := LookupTopicOption(key)
	if !ok {
		return TopicOptionValue{}, ErrUnsupportedOptionKey
	}
	v := TopicOptionValue{Key: k}
	var ok2 bool
	switch k {
	case TopicOptionCompressionAlgorithm:
		v.Uint, ok2 = parseCompression(kind, value)
	case TopicOptionMessageExpiry:
		v.Uint, ok2 = parseU64Or(kind, value, parseExpiryString)
		v.ServerDefault = v.Uint == 0
	case TopicOptionMaxTopicSize:
		v.Uint, ok2 = parseU64Or(kind, value, parseMaxTopicSizeString)
		v.ServerDefault = v.Uint == 0
	case TopicOptionSegmentSize:
		v.Uint, ok2 = parseU64Or(kind, value, parseByteSizeString)
		v.ServerDefault = v.Uint == 0
	case TopicOptionSizeOfMessagesRequiredToSave:
		v.Uint, ok2 = parseU64Or(kind, value, parseByteSizeString)
		ok2 = ok2 && v.Uint <= TopicSizeOfMessagesRequiredToSaveBytesMax
		v.ServerDefault = v.Uint == 0
	case TopicOptionMessagesRequiredToSave:
		v.Uint, ok2 = parseU32(kind, value)
		ok2 = ok2 && v.Uint >= 1 && v.Uint <= uint64(TopicMessagesRequiredToSaveMax)
	case TopicOptionEnforceFsync, TopicOptionPreallocateSegments:
		v.Bool, ok2 = parseBool(kind, value)
	}
	if !ok2 {
		return TopicOptionValue{}, ErrInvalidOptionValue
	}
	return v, nil
}

// set stores v into o; a ServerDefault value leaves o unchanged.
func (v TopicOptionValue) set(o *TopicOptions) {
	if v.ServerDefault {
		return
	}
	switch v.Key {
	case TopicOptionCompressionAlgorithm:
		o.CompressionAlgorithm = uint8(v.Uint)
	case TopicOptionMessageExpiry:
		o.MessageExpiryMicros = v.Uint
	case TopicOptionMaxTopicSize:
		o.MaxTopicSizeBytes = v.Uint
	case TopicOptionSegmentSize:
		o.SegmentSizeBytes = v.Uint
	case TopicOptionEnforceFsync:
		o.EnforceFsync = v.Bool
	case TopicOptionMessagesRequiredToSave:
		o.MessagesRequiredToSave = uint32(v.Uint)
	case TopicOptionSizeOfMessagesRequiredToSave:
		o.SizeOfMessagesRequiredToSaveBytes = v.Uint
	case TopicOptionPreallocateSegments:
		o.PreallocateSegments = v.Bool
	}
}

// CreateTopicOptions is what CreateTopic admission resolves from the client's block.
type CreateTopicOptions struct {
	Effective TopicOptions
	// Explicit holds the keys the client effectively set (server-default sentinels
	// dropped); every other key is derived.
	Explicit TopicOptionSet
}

// ResolveCreateTopicOptions runs CreateTopic admission over its options block and
// partition count as the reference admits it (apache/iggy core/server/src/dispatch.rs,
// core/metadata/src/impls/metadata.rs), first failure wins:
//
//  1. the block's structure (ValidateOptions): ErrInvalidCommand;
//  2. every entry in block order: ErrUnsupportedOptionKey or ErrInvalidOptionValue;
//  3. an explicit segment_size off its bounds or 512-byte grid: ErrInvalidOptionValue;
//  4. preallocation above 64 GiB (segment_size × partitions): ErrInvalidOptionValue;
//  5. more than 1000 partitions: ErrTooManyPartitions;
//  6. an explicit max_topic_size below the segment size: ErrInvalidTopicSize.
func ResolveCreateTopicOptions(block []byte, partitionsCount uint32) (CreateTopicOptions, error) {
	if _, err := ValidateOptions(block); err != nil {
		return CreateTopicOptions{}, err
	}
	r := CreateTopicOptions{Effective: DefaultTopicOptions()}
	it := NewTLVIterator(block)
	for e, ok := it.Next(); ok; e, ok = it.Next() {
		v, err := ParseTopicOption(e.Key, e.ValueKind, e.Value)
		if err != nil {
			return CreateTopicOptions{}, err
		}
		if !v.ServerDefault {
			v.set(&r.Effective)
			r.Explicit.add(v.Key)
		}
	}
	o := &r.Effective
	if r.Explicit.Has(TopicOptionSegmentSize) && !validSegmentSize(o.SegmentSizeBytes) {
		return CreateTopicOptions{}, ErrInvalidOptionValue
	}
	if o.PreallocateSegments && saturatingMul(o.SegmentSizeBytes, uint64(partitionsCount)) > TopicPreallocatedBytesMax {
		return CreateTopicOptions{}, ErrInvalidOptionValue
	}
	if partitionsCount > TopicPartitionsCountMax {
		return CreateTopicOptions{}, ErrTooManyPartitions
	}
	if r.Explicit.Has(TopicOptionMaxTopicSize) && o.MaxTopicSizeBytes < o.SegmentSizeBytes {
		return CreateTopicOptions{}, ErrInvalidTopicSize
	}
	return r, nil
}

func validSegmentSize(v uint64) bool {
	return v >= TopicSegmentSizeBytesMin && v <= TopicSegmentSizeBytesMax && v%topicSegmentSizeAlignmentBytes == 0
}

func saturatingMul(a, b uint64) uint64 {
	if a != 0 && b > math.MaxUint64/a {
		return math.MaxUint64
	}
	return a * b
}

// AppendExplicitBlock encodes the keys the client set, in canonical kinds, sorted by
// key: the explicit block of the created topic (without a length prefix).
func (c *CreateTopicOptions) AppendExplicitBlock(b []byte) []byte {
	for _, k := range topicOptionsByKey {
		if c.Explicit.Has(k) {
			b = appendCanonicalOption(b, k, &c.Effective)
		}
	}
	return b
}

// AppendDerivedBlock encodes every other key at its default, sorted by key: the
// derived block of the created topic (without a length prefix).
func (c *CreateTopicOptions) AppendDerivedBlock(b []byte) []byte {
	for _, k := range topicOptionsByKey {
		if !c.Explicit.Has(k) {
			b = appendCanonicalOption(b, k, &c.Effective)
		}
	}
	return b
}

// appendCanonicalOption writes key k with its value from o in the canonical kind.
func appendCanonicalOption(b []byte, k TopicOptionKey, o *TopicOptions) []byte {
	spec := &topicOptionSpecs[k]
	b = appendTLVField(b, HeaderString, len(spec.Key))
	b = append(b, spec.Key...)
	switch k {
	case TopicOptionCompressionAlgorithm:
		name := "none"
		if o.CompressionAlgorithm == TopicCompressionGzip {
			name = "gzip"
		}
		b = appendTLVField(b, HeaderString, len(name))
		return append(b, name...)
	case TopicOptionMessageExpiry:
		return appendU64Option(b, o.MessageExpiryMicros)
	case TopicOptionMaxTopicSize:
		return appendU64Option(b, o.MaxTopicSizeBytes)
	case TopicOptionSegmentSize:
		return appendU64Option(b, o.SegmentSizeBytes)
	case TopicOptionSizeOfMessagesRequiredToSave:
		return appendU64Option(b, o.SizeOfMessagesRequiredToSaveBytes)
	case TopicOptionMessagesRequiredToSave:
		b = appendTLVField(b, HeaderUint32, 4)
		return appendU32(b, o.MessagesRequiredToSave)
	case TopicOptionEnforceFsync:
		return appendBoolOption(b, o.EnforceFsync)
	case TopicOptionPreallocateSegments:
		return appendBoolOption(b, o.PreallocateSegments)
	}
	panic("wire: unknown topic option key")
}

func appendU64Option(b []byte, v uint64) []byte {
	return appendU64(appendTLVField(b, HeaderUint64, 8), v)
}

func appendBoolOption(b []byte, v bool) []byte {
	return appendFlagByte(appendTLVField(b, HeaderBool, 1), v)
}

// TopicUpdate is a checked UpdateTopic options block.
type TopicUpdate struct {
	block  []byte
	values [3]TopicOptionValue
	count  int
}

// CheckTopicUpdate runs UpdateTopic admission over its options block against the
// topic's current segment size ("Create-only vs updatable" in
// iggy.apache.org/docs/server/topic-options): ErrInvalidCommand for a malformed block,
// ErrUnsupportedOptionKey for a key outside the catalog or not updatable,
// ErrInvalidOptionValue for a bad value, ErrInvalidTopicSize for a max_topic_size below
// the segment size. The result aliases block.
func CheckTopicUpdate(block []byte, segmentSizeBytes uint64) (TopicUpdate, error) {
	if _, err := ValidateOptions(block); err != nil {
		return TopicUpdate{}, err
	}
	u := TopicUpdate{block: block}
	it := NewTLVIterator(block)
	for e, ok := it.Next(); ok; e, ok = it.Next() {
		k, known := LookupTopicOption(e.Key)
		if !known || !topicOptionSpecs[k].Updatable {
			return TopicUpdate{}, ErrUnsupportedOptionKey
		}
		v, err := ParseTopicOption(e.Key, e.ValueKind, e.Value)
		if err != nil {
			return TopicUpdate{}, err
		}
		// ValidateOptions refused duplicates, so at most the three updatable keys.
		u.values[u.count] = v
		u.count++
	}
	for _, v := range u.values[:u.count] {
		if v.Key == TopicOptionMaxTopicSize && !v.ServerDefault && v.Uint < segmentSizeBytes {
			return TopicUpdate{}, ErrInvalidTopicSize
		}
	}
	return u, nil
}

// ApplyTo updates a topic's effective values; a server-default sentinel leaves its
// field unchanged.
func (u *TopicUpdate) ApplyTo(o *TopicOptions) {
	for _, v := range u.values[:u.count] {
		v.set(o)
	}
}

// AppendBlocks writes the topic's new explicit and derived blocks after the update:
// the updated keys move into (or stay in) the explicit block with the client's kind
// and bytes verbatim, and leave the derived block. Every other entry of the old
// blocks is kept; the explicit block stays sorted by key.
func (u *TopicUpdate) AppendBlocks(explicitDst, derivedDst, oldExplicit, oldDerived []byte) (explicit, derived []byte) {
	var updates [3]TLVEntry
	n := 0
	it := NewTLVIterator(u.block)
	for e, ok := it.Next(); ok; e, ok = it.Next() {
		updates[n] = e
		n++
	}
	pending := updates[:n]
	slices.SortFunc(pending, func(a, b TLVEntry) int { return bytes.Compare(a.Key, b.Key) })
	updated := func(key []byte) bool {
		for i := range n {
			if bytes.Equal(updates[i].Key, key) {
				return true
			}
		}
		return false
	}

	explicit = explicitDst
	old := NewTLVIterator(oldExplicit)
	for e, ok := old.Next(); ok; e, ok = old.Next() {
		for len(pending) > 0 && bytes.Compare(pending[0].Key, e.Key) < 0 {
			explicit = appendTLVEntry(explicit, pending[0])
			pending = pending[1:]
		}
		if !updated(e.Key) {
			explicit = appendTLVEntry(explicit, e)
		}
	}
	for _, e := range pending {
		explicit = appendTLVEntry(explicit, e)
	}

	derived = derivedDst
	old = NewTLVIterator(oldDerived)
	for e, ok := old.Next(); ok; e, ok = old.Next() {
		if !updated(e.Key) {
			derived = appendTLVEntry(derived, e)
		}
	}
	return explicit, derived
}

func appendTLVEntry(b []byte, e TLVEntry) []byte {
	b = appendTLVField(b, e.KeyKind, len(e.Key))
	b = append(b, e.Key...)
	b = appendTLVField(b, e.ValueKind, len(e.Value))
	return append(b, e.Value...)
}

// TopicOptionsFromBlocks reads a stored topic's effective values from its derived
// and explicit blocks (explicit wins), starting from the defaults. Entries this
// build cannot interpret are skipped, as a replica applying a committed block must.
// A server-default sentinel stored by an update reads as the default: the TopicHeader
// fixed fields, not the blocks, are authoritative for the three updatable keys.
func TopicOptionsFromBlocks(explicit, derived []byte) TopicOptions {
	o := DefaultTopicOptions()
	for _, block := range [2][]byte{derived, explicit} {
		it := NewTLVIterator(block)
		for e, ok := it.Next(); ok; e, ok = it.Next() {
			if v, err := ParseTopicOption(e.Key, e.ValueKind, e.Value); err == nil {
				v.set(&o)
			}
		}
	}
	return o
}

// Value parsers. Each returns false for a value of the wrong kind or width, or a
// string that does not parse.

func parseCompression(kind HeaderKind, v []byte) (uint64, bool) {
	switch kind {
	case HeaderUint8:
		if len(v) == 1 && (v[0] == TopicCompressionNone || v[0] == TopicCompressionGzip) {
			return uint64(v[0]), true
		}
	case HeaderString:
		switch {
		case asciiEqualFold(v, "none"):
			return uint64(TopicCompressionNone), true
		case asciiEqualFold(v, "gzip"):
			return uint64(TopicCompressionGzip), true
		}
	}
	return 0, false
}

func parseU64Or(kind HeaderKind, v []byte, fromString func(string) (uint64, bool)) (uint64, bool) {
	switch kind {
	case HeaderUint64:
		if len(v) == 8 {
			return binary.LittleEndian.Uint64(v), true
		}
	case HeaderString:
		if utf8.Valid(v) {
			return fromString(string(v))
		}
	}
	return 0, false
}

func parseU32(kind HeaderKind, v []byte) (uint64, bool) {
	switch kind {
	case HeaderUint32:
		if len(v) == 4 {
			return uint64(binary.LittleEndian.Uint32(v)), true
		}
	case HeaderString:
		n, ok := parseDecimal(strings.TrimPrefix(string(v), "+"))
		if ok && n <= math.MaxUint32 {
			return n, true
		}
	}
	return 0, false
}

func parseBool(kind HeaderKind, v []byte) (bool, bool) {
	switch kind {
	case HeaderBool:
		if len(v) == 1 && v[0] <= 1 {
			return v[0] == 1, true
		}
	case HeaderString:
		switch string(v) {
		case "true":
			return true, true
		case "false":
			return false, true
		}
	}
	return false, false
}

// parseExpiryString reads a message_expiry string: a never-expire word, a
// server-default word (0), or a humantime duration of at most u32::MAX seconds.
func parseExpiryString(s string) (uint64, bool) {
	switch s {
	case "none", "None", "unlimited", "Unlimited", "never_expire":
		return math.MaxUint64, true
	case "default", "Default", "server_default", "Server_default":
		return 0, true
	}
	micros, ok := parseHumantimeMicros(s)
	if !ok || micros/microsPerSecond > messageExpiryHumantimeSecondsMax {
		return 0, false
	}
	return micros, true
}

// parseMaxTopicSizeString reads a max_topic_size string: unlimited, a server-default
// word (0), or a byte size.
func parseMaxTopicSizeString(s string) (uint64, bool) {
	switch s {
	case "unlimited", "Unlimited":
		return math.MaxUint64, true
	case "0", "server_default", "Server_default", "default", "Default":
		return 0, true
	}
	return parseByteSizeString(s)
}

// parseByteSizeString reads a byte size as the reference server's IggyByteSize does:
// "0", "unlimited" and "none" mean 0; otherwise a decimal number (a fraction is
// allowed) and an optional case-insensitive unit: b, k/kb (10^3), ki/kib (2^10), and
// so on through e/eb and ei/eib. The result must fit in a u64; a fraction of a byte
// is dropped.
func parseByteSizeString(s string) (uint64, bool) {
	switch s {
	case "0", "unlimited", "Unlimited", "none", "None":
		return 0, true
	}
	s = strings.TrimSpace(s)
	i := 0
	for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
		i++
	}
	number, unit := s[:i], strings.TrimSpace(s[i:])
	multiplier, ok := byteUnitMultiplier(unit)
	if !ok {
		return 0, false
	}
	whole, fraction, _ := strings.Cut(number, ".")
	if whole == "" && fraction == "" || strings.Contains(fraction, ".") {
		return 0, false
	}
	w, ok := parseDecimalOrEmpty(whole)
	if !ok || (multiplier != 0 && w > math.MaxUint64/multiplier) {
		return 0, false
	}
	total := w * multiplier
	if fraction == "" {
		return total, true
	}
	// The fraction adds floor(F × multiplier / 10^k) for its k digits F, computed
	// in 128 bits so no digit is lost.
	if _, ok := parseDecimalDigits(fraction); !ok {
		return 0, false
	}
	if len(fraction) > 19 {
		fraction = fraction[:19] // 10^19 is the largest power of ten in a u64
	}
	f, _ := parseDecimal(fraction)
	pow := uint64(1)
	for range len(fraction) {
		pow *= 10
	}
	hi, lo := bits.Mul64(f, multiplier)
	if hi >= pow {
		return 0, false
	}
	add, _ := bits.Div64(hi, lo, pow)
	if total > math.MaxUint64-add {
		return 0, false
	}
	total += add
	return total, true
}

func byteUnitMultiplier(unit string) (uint64, bool) {
	u := strings.ToLower(unit)
	if u == "" || u == "b" {
		return 1, true
	}
	u = strings.TrimSuffix(u, "b")
	binaryUnit := strings.HasSuffix(u, "i")
	u = strings.TrimSuffix(u, "i")
	if len(u) != 1 {
		return 0, false
	}
	power := strings.IndexByte("kmgtpe", u[0]) + 1
	if power == 0 {
		return 0, false
	}
	base := uint64(1000)
	if binaryUnit {
		base = 1024
	}
	m := uint64(1)
	for range power {
		m *= base
	}
	return m, true
}

// humantimeUnits maps a humantime unit to microseconds, as the humantime crate
// spells them (a month is 30.44 days, a year 365.25 days). Nanosecond units round
// down to whole microseconds at the end.
var humantimeUnits = map[string]uint64{
	"nanos": 0, "nsec": 0, "ns": 0,
	"usec": 1, "us": 1, "µs": 1, "micros": 1,
	"millis": 1_000, "msec": 1_000, "ms": 1_000,
	"seconds": 1_000_000, "second": 1_000_000, "secs": 1_000_000, "sec": 1_000_000, "s": 1_000_000,
	"minutes": 60_000_000, "minute": 60_000_000, "mins": 60_000_000, "min": 60_000_000, "m": 60_000_000,
	"hours": 3_600_000_000, "hour": 3_600_000_000, "hrs": 3_600_000_000, "hr": 3_600_000_000, "h": 3_600_000_000,
	"days": 86_400_000_000, "day": 86_400_000_000, "d": 86_400_000_000,
	"weeks": 604_800_000_000, "week": 604_800_000_000, "w": 604_800_000_000,
	"months": 2_630_016_000_000, "month": 2_630_016_000_000, "M": 2_630_016_000_000,
	"years": 31_557_600_000_000, "year": 31_557_600_000_000, "y": 31_557_600_000_000,
}

// parseHumantimeMicros reads a humantime duration: one or more "<integer><unit>"
// terms, optionally separated by spaces ("7 days", "1h 30m", "1h30m").
func parseHumantimeMicros(s string) (uint64, bool) {
	var micros, nanos uint64
	terms := 0
	for {
		s = strings.TrimLeft(s, " ")
		if s == "" {
			break
		}
		i := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		n, ok := parseDecimal(s[:i])
		if !ok {
			return 0, false
		}
		s = strings.TrimLeft(s[i:], " ")
		j := 0
		for j < len(s) && s[j] != ' ' && (s[j] < '0' || s[j] > '9') {
			j++
		}
		perUnit, known := humantimeUnits[s[:j]]
		if !known {
			return 0, false
		}
		s = s[j:]
		terms++
		if perUnit == 0 { // nanoseconds
			if nanos > math.MaxUint64-n {
				return 0, false
			}
			nanos += n
			continue
		}
		if n > (math.MaxUint64-micros)/perUnit {
			return 0, false
		}
		micros += n * perUnit
	}
	if terms == 0 || micros > math.MaxUint64-nanos/1000 {
		return 0, false
	}
	return micros + nanos/1000, true
}

// parseDecimal reads a non-empty run of ASCII digits that fits in a u64.
func parseDecimal(s string) (uint64, bool) {
	if s == "" {
		return 0, false
	}
	return parseDecimalOrEmpty(s)
}

// parseDecimalDigits reports whether s is all ASCII digits, whatever its length.
func parseDecimalDigits(s string) (int, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return i, false
		}
	}
	return len(s), true
}

func parseDecimalOrEmpty(s string) (uint64, bool) {
	var n uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if n > (math.MaxUint64-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}

func asciiEqualFold(b []byte, s string) bool {
	return len(b) == len(s) && strings.EqualFold(string(b), s)
}
