package partitionhost

import (
	"sync"
	"sync/atomic"

	"github.com/iggy-shard/iggy-shard/metadata"
	"github.com/iggy-shard/iggy-shard/partition"
	"github.com/iggy-shard/iggy-shard/wire"
)

// Stats publishes each partition's figures from its owner shard to shard 0,
// which reports them in GetStream, GetTopic and GetStats. Entries are created and
// updated by the owner and only read elsewhere: atomics, no lock.
type Stats struct {
	m sync.Map // partition.Key -> *partitionStats
}

type partitionStats struct {
	segments      atomic.Uint32
	currentOffset atomic.Uint64
	sizeBytes     atomic.Uint64
	messages      atomic.Uint64
}

func (t *Stats) Publish(k partition.Key, info wire.PartitionInfo) {
	v, ok := t.m.Load(k)
	if !ok {
		v, _ = t.m.LoadOrStore(k, &partitionStats{})
	}
	ps := v.(*partitionStats)
	ps.segments.Store(info.SegmentsCount)
	ps.currentOffset.Store(info.CurrentOffset)
	ps.sizeBytes.Store(info.SizeBytes)
	ps.messages.Store(info.MessagesCount)
}

func (t *Stats) Remove(k partition.Key) { t.m.Delete(k) }

func (t *Stats) Of(stream, topic, p uint32) metadata.PartitionStats {
	v, ok := t.m.Load(partition.Key{StreamID: stream, TopicID: topic, PartitionID: p})
	if !ok {
		return metadata.PartitionStats{}
	}
	ps := v.(*partitionStats)
	return metadata.PartitionStats{
		SegmentsCount: ps.segments.Load(),
		CurrentOffset: ps.currentOffset.Load(),
		SizeBytes:     ps.sizeBytes.Load(),
		MessagesCount: ps.messages.Load(),
	}
}

func (t *Stats) Totals() (segments uint32, sizeBytes, messages uint64) {
	t.m.Range(func(_, v any) bool {
		ps := v.(*partitionStats)
		segments += ps.segments.Load()
		sizeBytes += ps.sizeBytes.Load()
		messages += ps.messages.Load()
		return true
	})
	return
}

// Range calls f with every partition's figures, in no order.
func (t *Stats) Range(f func(k partition.Key, s metadata.PartitionStats)) {
	t.m.Range(func(k, v any) bool {
		ps := v.(*partitionStats)
		f(k.(partition.Key), metadata.PartitionStats{SegmentsCount: ps.segments.Load(), CurrentOffset: ps.currentOffset.Load(),
			SizeBytes: ps.sizeBytes.Load(), MessagesCount: ps.messages.Load()})
		return true
	})
}
