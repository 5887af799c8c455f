package wire

import (
	"encoding/binary"
	"math"
	"slices"
	"strings"
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
//
// This file holds the catalog and a topic's effective values (TopicOptions);
// topicoptions_values.go parses one entry's value, and topicoptions_blocks.go admits
// CreateTopic and UpdateTopic blocks and writes and reads the stored blocks.

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
