package shard

import (
	"sync/atomic"

	"golang.org/x/sys/cpu"
)

// Queue is a bounded single-producer single-consumer ring of T: the channel between an
// ordered pair of shards. Exactly one goroutine may Push and exactly one (usually
// another) may Pop; under that contract no operation takes a lock or allocates.
//
// The producer owns tail and the consumer owns head; each keeps a private copy of the
// other's index and reloads it only when the ring looks full (or empty), so in the
// steady state a Push or Pop touches one shared cache line. The padding keeps the two
// indexes on separate lines so the producer's stores do not invalidate the consumer's.
//
// A full queue is reported, not waited on: Push returns false and the caller decides
// (drop with an error reply, or close the connection). A shard never blocks on another.
type Queue[T any] struct {
	_          cpu.CacheLinePad
	head       atomic.Uint64 // next slot to pop; written by the consumer only
	cachedTail uint64        // the consumer's last view of tail
	_          cpu.CacheLinePad
	tail       atomic.Uint64 // next slot to push; written by the producer only
	cachedHead uint64        // the producer's last view of head
	_          cpu.CacheLinePad
	mask       uint64
	slots      []T
}

// NewQueue returns an empty queue holding up to capacity items; capacity must be a
// power of two so that an index maps to its slot with a mask.
func NewQueue[T any](capacity int) *Queue[T] {
	if capacity < 1 || capacity&(capacity-1) != 0 {
		panic("shard: queue capacity must be a power of two")
	}
	return &Queue[T]{mask: uint64(capacity - 1), slots: make([]T, capacity)}
}

// Cap returns the number of items the queue holds when full.
func (q *Queue[T]) Cap() int { return len(q.slots) }

// Push appends v and reports true, or reports false when the queue is full. Producer
// side only.
func (q *Queue[T]) Push(v T) bool {
	tail := q.tail.Load()
	if tail-q.cachedHead == uint64(len(q.slots)) {
		q.cachedHead = q.head.Load()
		if tail-q.cachedHead == uint64(len(q.slots)) {
			return false
		}
	}
	q.slots[tail&q.mask] = v
	// The store of tail publishes the slot: Go's atomics are sequentially consistent, so
	// the consumer that loads the new tail also sees the slot written before it.
	q.tail.Store(tail + 1)
	return true
}

// Pop removes and returns the oldest item, or reports false when the queue is empty.
// Consumer side only.
func (q *Queue[T]) Pop() (T, bool) {
	head := q.head.Load()
	if head == q.cachedTail {
		q.cachedTail = q.tail.Load()
		if head == q.cachedTail {
			var zero T
			return zero, false
		}
	}
	slot := &q.slots[head&q.mask]
	v := *slot
	// Clear the slot so the queue does not keep a popped item's pointers alive.
	var zero T
	*slot = zero
	q.head.Store(head + 1)
	return v, true
}

// Len returns the number of queued items. Exact only when called by the producer or the
// consumer while the other side is quiescent; otherwise a snapshot.
func (q *Queue[T]) Len() int {
	return int(q.tail.Load() - q.head.Load())
}
