package client

import (
	"encoding/binary"

	"github.com/iggy-shard/iggy-shard/wire"
)

// TopicOptions builds the options block of CreateTopic and UpdateTopic from the
// settings the Go SDK types (iggy.apache.org/docs/server/topic-options); zero fields
// are left out, so the server applies its defaults. Other catalog keys (enforce_fsync,
// messages_required_to_save, ...) can be appended to the block with wire.AppendOption.
type TopicOptions struct {
	// CompressionAlgorithm is "none" or "gzip"; "" leaves it out.
	CompressionAlgorithm string
	// MessageExpiryMicros is the age after which sealed segments are deleted;
	// wire.DefaultMessageExpiryMicros (MaxUint64) never expires them.
	MessageExpiryMicros uint64
	// MaxTopicSizeBytes caps the topic's size; MaxUint64 is unlimited.
	MaxTopicSizeBytes uint64
	// SegmentSizeBytes is the size of one segment file (create only).
	SegmentSizeBytes uint64
}

// Block returns the options block, nil when every field is zero.
func (o TopicOptions) Block() ([]byte, error) {
	var b []byte
	var err error
	if o.CompressionAlgorithm != "" {
		if b, err = wire.AppendOption(b, "compression_algorithm", wire.HeaderString, []byte(o.CompressionAlgorithm)); err != nil {
			return nil, err
		}
	}
	for _, opt := range [...]struct {
		key   string
		value uint64
	}{
		{"message_expiry", o.MessageExpiryMicros},
		{"max_topic_size", o.MaxTopicSizeBytes},
		{"segment_size", o.SegmentSizeBytes},
	} {
		if opt.value == 0 {
			continue
		}
		if b, err = wire.AppendOption(b, opt.key, wire.HeaderUint64, binary.LittleEndian.AppendUint64(nil, opt.value)); err != nil {
			return nil, err
		}
	}
	return b, nil
}
