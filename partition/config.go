package partition

import (
	"math"

	"github.com/iggy-shard/iggy-shard/segment"
	"github.com/iggy-shard/iggy-shard/wire"
)

// Config is a partition's share of its topic's options
// (iggy.apache.org/docs/server/topic-options): how its log rolls, syncs and ages. The
// metadata plane owns the options; the glue maps them with ConfigFromTopicOptions.
type Config struct {
	// SegmentSizeBytes rolls a segment once it holds this many bytes. 0 = 1 GiB.
	SegmentSizeBytes int64
	// EnforceFsync acknowledges a batch only once fdatasync has made it durable, and
	// syncs consumer offset files too; off, a batch is acknowledged once written.
	EnforceFsync bool
	// MessageExpiryMicros deletes sealed segments whose newest batch is older.
	// 0 and math.MaxUint64 mean never.
	MessageExpiryMicros uint64
	// MaxTopicSizeBytes caps the whole topic; each partition keeps its share
	// (MaxTopicSizeBytes / PartitionsCount, at least one segment + 64 MiB, as the
	// reference server does: iggy.apache.org/docs/server/storage-engine, "Retention and
	// cleanup"). 0 and math.MaxUint64 mean unlimited.
	MaxTopicSizeBytes uint64
	// PartitionsCount is the topic's partition count, for the share above.
	PartitionsCount uint32
	// Save thresholds without EnforceFsync: an fdatasync after this many messages or
	// bytes. 0 = 1024 messages, 1 MiB.
	MessagesRequiredToSave            uint32
	SizeOfMessagesRequiredToSaveBytes int64
	// PreallocateSegments reserves SegmentSizeBytes on disk for each new segment.
	PreallocateSegments bool
	// InflightBatchesMax bounds a partition's batches written but not yet
	// acknowledged; a send beyond it is refused with 58 TransientNotAccepted, which
	// the SDKs retry. 0 = segment's default (4096).
	InflightBatchesMax int
}

// maxSizeShareSlackBytes is what a partition's share of max_topic_size keeps beyond
// one segment: a share smaller than the open segment would make retention delete
// every sealed segment at once, and the reference server adds the same 64 MiB.
const maxSizeShareSlackBytes = 64 << 20

const defaultSegmentSizeBytes = 1 << 30

// ConfigFromTopicOptions maps a topic's effective options (wire.TopicOptions, as
// CreateTopic resolves them or TopicOptionsFromBlocks reads them back) and its
// partition count onto a partition's Config.
func ConfigFromTopicOptions(o wire.TopicOptions, partitionsCount uint32) Config {
	return Config{
		SegmentSizeBytes:                  clampInt64(o.SegmentSizeBytes),
		EnforceFsync:                      o.EnforceFsync,
		MessageExpiryMicros:               o.MessageExpiryMicros,
		MaxTopicSizeBytes:                 o.MaxTopicSizeBytes,
		PartitionsCount:                   partitionsCount,
		MessagesRequiredToSave:            o.MessagesRequiredToSave,
		SizeOfMessagesRequiredToSaveBytes: clampInt64(o.SizeOfMessagesRequiredToSaveBytes),
		PreallocateSegments:               o.PreallocateSegments,
	}
}

func clampInt64(v uint64) int64 {
	if v > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(v)
}

// maxSizeShareBytes is this partition's share of max_topic_size; 0 is unlimited.
func (c Config) maxSizeShareBytes() int64 {
	if c.MaxTopicSizeBytes == 0 || c.MaxTopicSizeBytes == math.MaxUint64 {
		return 0
	}
	segmentSize := c.SegmentSizeBytes
	if segmentSize <= 0 {
		segmentSize = defaultSegmentSizeBytes
	}
	share := c.MaxTopicSizeBytes / uint64(max(c.PartitionsCount, 1))
	share = max(share, uint64(segmentSize)+maxSizeShareSlackBytes)
	return clampInt64(share)
}

func (c Config) segmentConfig(partitionID uint32) segment.Config {
	return segment.Config{
		PartitionID:                       uint64(partitionID),
		SegmentSizeBytes:                  c.SegmentSizeBytes,
		EnforceFsync:                      c.EnforceFsync,
		MessageExpiryMicros:               c.MessageExpiryMicros,
		MaxSizeBytes:                      c.maxSizeShareBytes(),
		MessagesRequiredToSave:            c.MessagesRequiredToSave,
		SizeOfMessagesRequiredToSaveBytes: c.SizeOfMessagesRequiredToSaveBytes,
		PreallocateSegments:               c.PreallocateSegments,
		InflightBatchesMax:                c.InflightBatchesMax,
	}
}

// logConfig is the segment.Config of p's log under cfg: the topic's options
// and the store's.
func (p *Partition) logConfig(cfg Config) segment.Config {
	c := cfg.segmentConfig(p.key.PartitionID)
	c.TrustWrites = p.store.repl.Plans.TrustWrites
	return c
}
