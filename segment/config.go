package segment

import (
	"fmt"
	"math"
)

// Config is what the log needs of a topic's options
// (iggy.apache.org/docs/server/topic-options); metadata maps the option catalog onto
// it. Zero fields take the protocol's defaults.
type Config struct {
	// PartitionID is checked against every appended batch's stamped partition_id.
	PartitionID uint64
	// SegmentSizeBytes seals a segment once it holds at least this many bytes (the
	// crossing batch goes in whole). Default 1 GiB.
	SegmentSizeBytes int64
	// EnforceFsync makes every append durable (write linked to fdatasync) before it is
	// reported Durable; off, appends are written at once and made durable by the save
	// thresholds, by seals and on Close.
	EnforceFsync bool
	// MessageExpiryMicros deletes a sealed segment once its newest batch is older than
	// this. 0 and math.MaxUint64 mean never (the protocol's "server default" and
	// "unlimited").
	MessageExpiryMicros uint64
	// MaxSizeBytes is this partition's share of max_topic_size: while the log is
	// larger, its oldest sealed segments are deleted. 0 and math.MaxInt64 mean
	// unlimited.
	MaxSizeBytes int64
	// MessagesRequiredToSave and SizeOfMessagesRequiredToSaveBytes are the save
	// thresholds: without EnforceFsync, an fdatasync is issued once this many messages
	// or bytes have been written since the last one. Defaults 1024 and 1 MiB.
	MessagesRequiredToSave            uint32
	SizeOfMessagesRequiredToSaveBytes int64
	// PreallocateSegments reserves SegmentSizeBytes on disk for each new segment.
	PreallocateSegments bool
	// ReserveChunkBytes is how far ahead of its writes the open segment's space is
	// reserved, a chunk at a time (reserve.go). Default DefaultReserveChunkBytes;
	// negative reserves nothing ahead.
	ReserveChunkBytes int64

	// InflightBatchesMax bounds the appends whose durability is not known yet; an
	// append beyond it is refused with ErrTransientNotAccepted until completions
	// arrive. Default 4096.
	InflightBatchesMax int
	// IndexCacheSegments is how many sealed segments keep their index in memory (24
	// bytes per batch); the others load theirs when a read needs it. Default 16.
	IndexCacheSegments int
	// TrustWrites counts a batch verified (verified.go) once its write has
	// completed, rather than when it is first read: its partition validated
	// every checksum when it arrived (wire.ValidateBatch), and the log wrote
	// those bytes. Then the first read of a batch can be planned (plan.go),
	// where otherwise it must be copied to be verified. What it gives up: a
	// batch that changed between the write and its first read (a write path
	// that reused the buffer too early, the disk) is found by the scrubber,
	// once its segment is sealed, instead of by that read. Recovered batches
	// are verified on their first read all the same.
	TrustWrites bool
	// BatchSizeMax is the largest batch recovery accepts from disk: a header claiming
	// more is corruption, not an allocation to make. Default 64 MiB + 256 bytes (the
	// message bus frame limit plus a header).
	BatchSizeMax int64
}

const (
	defaultSegmentSizeBytes              = 1 << 30
	defaultMessagesRequiredToSave        = 1024
	defaultSizeOfMessagesRequiredToSave  = 1 << 20
	defaultInflightBatchesMax            = 4096
	defaultBatchSizeMax                  = 64<<20 + 256
	defaultIndexCacheSegments            = 16
	messagesRequiredToSaveMax            = 16 << 20
	sizeOfMessagesRequiredToSaveBytesMax = 1 << 30
)

// withDefaults fills zero fields and checks the rest. Segment sizes below the
// protocol's 1 MiB are allowed here (tests roll segments every few KiB); the option
// parser enforces the wire bounds.
func (c Config) withDefaults() (Config, error) {
	if c.SegmentSizeBytes == 0 {
		c.SegmentSizeBytes = defaultSegmentSizeBytes
	}
	if c.MessagesRequiredToSave == 0 {
		c.MessagesRequiredToSave = defaultMessagesRequiredToSave
	}
	if c.SizeOfMessagesRequiredToSaveBytes == 0 {
		c.SizeOfMessagesRequiredToSaveBytes = defaultSizeOfMessagesRequiredToSave
	}
	if c.InflightBatchesMax == 0 {
		c.InflightBatchesMax = defaultInflightBatchesMax
	}
	if c.IndexCacheSegments == 0 {
		c.IndexCacheSegments = defaultIndexCacheSegments
	}
	if c.BatchSizeMax == 0 {
		c.BatchSizeMax = defaultBatchSizeMax
	}
	if c.ReserveChunkBytes == 0 {
		c.ReserveChunkBytes = DefaultReserveChunkBytes
	}
	if c.MaxSizeBytes == 0 {
		c.MaxSizeBytes = math.MaxInt64
	}
	if c.MessageExpiryMicros == math.MaxUint64 {
		c.MessageExpiryMicros = 0
	}
	switch {
	case c.SegmentSizeBytes < 0 || c.SegmentSizeBytes > 1<<30:
		return c, fmt.Errorf("segment: segment size %d bytes outside 1..%d", c.SegmentSizeBytes, 1<<30)
	case c.MessagesRequiredToSave > messagesRequiredToSaveMax:
		return c, fmt.Errorf("segment: messages required to save %d > %d", c.MessagesRequiredToSave, messagesRequiredToSaveMax)
	case c.SizeOfMessagesRequiredToSaveBytes < 0 || c.SizeOfMessagesRequiredToSaveBytes > sizeOfMessagesRequiredToSaveBytesMax:
		return c, fmt.Errorf("segment: size of messages required to save %d bytes outside 1..%d", c.SizeOfMessagesRequiredToSaveBytes, sizeOfMessagesRequiredToSaveBytesMax)
	case c.MaxSizeBytes < 0:
		return c, fmt.Errorf("segment: max size %d bytes is negative", c.MaxSizeBytes)
	case c.IndexCacheSegments < 1:
		return c, fmt.Errorf("segment: index cache of %d segments < 1", c.IndexCacheSegments)
	case c.InflightBatchesMax < 1:
		return c, fmt.Errorf("segment: in-flight batches max %d < 1", c.InflightBatchesMax)
	case c.BatchSizeMax < 256+48:
		return c, fmt.Errorf("segment: batch size max %d bytes below one header and frame", c.BatchSizeMax)
	}
	return c, nil
}
