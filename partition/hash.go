package partition

import (
	"github.com/iggy-shard/iggy-shard/wire"
)

// Partition choice for SendMessages. The Go SDK resolves Balanced and MessagesKey
// itself and always sends an explicit partition id (apache/iggy foreign/go); other SDKs
// may send the other two kinds, and the server must then place the batch exactly where
// an SDK would have, so that a key lands on one partition whoever sends it.

// RoundRobin is a topic's Balanced cursor: the first call returns 0, then 1, and so
// on, wrapping to 0 when the cursor reaches the partition count (the count may shrink
// between calls: DeletePartitions removes the highest ids). The zero value is ready.
// Whoever routes sends for the topic keeps one; it is not safe for concurrent use.
type RoundRobin struct {
	next uint32
}

// Next returns the partition for the next Balanced batch. partitionsCount must be at
// least 1.
func (r *RoundRobin) Next(partitionsCount uint32) uint32 {
	p := r.next
	if p >= partitionsCount {
		p = 0
	}
	r.next = p + 1
	return p
}

// ResolvePartition picks the partition of a SendMessages batch from its partitioning
// field and the topic's partition count. An explicit id outside 0..count-1, or a topic
// without partitions, is wire.ErrResourceNotFound: the status the reference server
// gives every resolution failure of a partition write (apache/iggy
// core/server/src/dispatch.rs, dispatch_partition_request).
func ResolvePartition(p wire.Partitioning, partitionsCount uint32, balanced *RoundRobin) (uint32, error) {
	if partitionsCount == 0 {
		return 0, wire.ErrResourceNotFound
	}
	switch p.Kind {
	case wire.PartitioningBalanced:
		return balanced.Next(partitionsCount), nil
	case wire.PartitioningPartitionID:
		if p.PartitionID >= partitionsCount {
			return 0, wire.ErrResourceNotFound
		}
		return p.PartitionID, nil
	case wire.PartitioningMessagesKey:
		if len(p.Key) == 0 {
			return 0, wire.ErrResourceNotFound
		}
		return wire.PartitionForKey(p.Key, partitionsCount), nil
	}
	return 0, wire.ErrResourceNotFound
}
