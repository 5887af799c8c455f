package shard

import (
	"math/bits"
	"strconv"
	"sync/atomic"
	"unsafe"

	"github.com/iggy-shard/iggy-shard/wire"
)

// Replica send classes. One replica connection carries the frames of every consensus
// group between two nodes: the metadata group's, whose primary the cluster loses to
// a view change when its heartbeats (Commit) or its PrepareOks stall, and those of
// every partition group, of which a node may have thousands, all busy at once when a
// topic of 1,000 partitions forms. So that the second can never starve the first,
// each frame belongs to a class with room of its own:
//
//	class      frames                               room per peer (frames)       sent
//	control    metadata group (wire.MetadataGroup,  PeerQueueCapacity, +2 for    first
//	           the session-forwarding frames), the  the handshake
//	           runtime's own (handshake)
//	partition  partition groups (and any frame of   PartitionQueueCapacity       after
//	           no known group)
//
// A class's room is a budget per peer (replicaBudget), taken when SendReplica or
// SendReplicaLent accepts a frame and given back when the frame has left on the wire
// or was dropped. It counts the frame wherever it is: on its way from another shard to
// the connection's owner (a transit queue of its own per class and pair of shards, so
// partition frames cannot fill the way control frames take either) or in the
// connection's queue of its class. A full class refuses at once with
// ErrReplicaQueueFull, which the sender sees: consensus retransmits, a pacing sender
// asks ReplicaRoom first. A flood of partition frames thus costs partition frames,
// never a control frame's place.
//
// The owner's sendmsg takes control frames before partition frames; only a frame
// already partly written goes before both (its bytes continue the stream).
// A control frame therefore waits at most for the one sendmsg in flight (up to 64
// frames) and the rest of a partly written frame.
//
// Memory: a connection holds PeerQueueCapacity+2+PartitionQueueCapacity queue slots
// (replicaOut, 96 bytes: 48 KiB at the defaults); a transit queue, made the first
// time a shard sends to a peer another shard owns, holds
// nextPow2(capacity*(ReplicaCount-1)) slots, at most transitCapacityMax, of 48 bytes
// (24 KiB per class and pair of shards for a 3-node cluster at the defaults). The
// frames' bytes are arena buffers of the sending shard (bounded by its arena) or,
// lent, the caller's; at most the classes' capacities of them per peer.

// ReplicaClass is a replica frame's send class.
type ReplicaClass uint8

const (
	// ReplicaControl: the metadata group's frames and the runtime's own.
	ReplicaControl ReplicaClass = iota
	// ReplicaPartition: the partition groups' frames.
	ReplicaPartition
	replicaClassCount
)

func (c ReplicaClass) String() string {
	switch c {
	case ReplicaControl:
		return "control"
	case ReplicaPartition:
		return "partition"
	}
	return "ReplicaClass(" + strconv.Itoa(int(c)) + ")"
}

// ReplicaFrameClass returns the send class of a frame: control for the metadata
// group's, partition for every other.
func ReplicaFrameClass(h *wire.GenericHeader) ReplicaClass {
	if group, ok := wire.FrameGroup(h); ok && group == wire.MetadataGroup {
		return ReplicaControl
	}
	return ReplicaPartition
}

// replicaHandshakeSlots are the control queue's slots beyond its capacity, for the
// handshake's frames, which take no budget.
const replicaHandshakeSlots = 2

// transitCapacityMax bounds a transit queue (48 bytes a slot: 768 KiB).
const transitCapacityMax = 1 << 14

// replicaBudget counts one peer's frames of one class that were accepted and have not
// left or been dropped yet. Senders on every shard and the connection's owner touch
// it: each on a cache line of its own.
type replicaBudget struct {
	queued atomic.Int64
	_      [56]byte
}

// reserve takes room for one frame of class to peer, or reports false when the class
// is full.
func (rr *replicaRuntime) reserve(peer uint8, class ReplicaClass) bool {
	b := &rr.budgets[peer][class]
	if b.queued.Add(1) > int64(rr.capacity[class]) {
		b.queued.Add(-1)
		return false
	}
	return true
}

func (rr *replicaRuntime) unreserve(peer uint8, class ReplicaClass) {
	rr.budgets[peer][class].queued.Add(-1)
}

// room returns how many more frames of class peer takes now.
func (rr *replicaRuntime) room(peer uint8, class ReplicaClass) int {
	return max(0, rr.capacity[class]-int(rr.budgets[peer][class].queued.Load()))
}

// replicaTransit is a frame on its way to the shard that owns its peer's connection:
// its bytes are the sending shard's arena buffer (bufClass, bufIndex), which goes back
// once sent, or, lent (done set), a header (head) and a body (data, size) the sending
// shard keeps until done comes back to it.
type replicaTransit struct {
	head     unsafe.Pointer
	data     unsafe.Pointer
	done     Releaser
	size     uint32
	bufIndex uint32
	peer     uint8
	class    ReplicaClass
	bufClass uint8
}

// transitQueue returns the queue for frames of class from shard from to shard to,
// making it on the sender's first use: only the sender writes the pointer, the owner
// reads it.
func (rr *replicaRuntime) transitQueue(to, from int, class ReplicaClass) *Queue[replicaTransit] {
	slot := &rr.transit[to][from][class]
	if q := slot.Load(); q != nil {
		return q
	}
	q := NewQueue[replicaTransit](rr.transitCapacity[class])
	slot.Store(q)
	return q
}

// transitCapacityFor sizes a transit queue so that the class's whole budget for
// every peer fits, within transitCapacityMax.
func transitCapacityFor(capacity, peers int) int {
	want := min(capacity*max(peers, 1), transitCapacityMax)
	return 1 << bits.Len(uint(want-1))
}

// drainReplicaTransit queues the frames other shards sent through this one, the
// control class first, and takes back the frames this one lent through others. Each
// queue holds at most its capacity, all of it budgeted.
func (s *Shard) drainReplicaTransit() {
	rr := s.rt.replica
	s.drainLentReturns()
	for class := range replicaClassCount {
		for from := range rr.transit[s.index] {
			q := rr.transit[s.index][from][class].Load()
			if q == nil {
				continue
			}
			for range q.Cap() {
				t, ok := q.Pop()
				if !ok {
					break
				}
				out := replicaOut{data: unsafe.Slice((*byte)(t.data), int(t.size)), from: from, peer: t.peer, class: t.class,
					bufClass: t.bufClass, bufIndex: t.bufIndex, done: t.done}
				if t.head != nil {
					out.head = unsafe.Slice((*byte)(t.head), headerSizeBytes)
				}
				_ = s.enqueueReplica(out) // counted; the sender learnt nothing, as with a lost packet
			}
		}
	}
}

// replicaOutQueue is a connection's FIFO of one class's frames.
type replicaOutQueue struct {
	items []replicaOut
	head  int
	n     int
}

func (q *replicaOutQueue) at(i int) *replicaOut { return &q.items[(q.head+i)%len(q.items)] }

func (q *replicaOutQueue) push(out replicaOut) {
	q.items[(q.head+q.n)%len(q.items)] = out
	q.n++
}

func (q *replicaOutQueue) pop() replicaOut {
	out := q.items[q.head]
	q.items[q.head] = replicaOut{}
	q.head = (q.head + 1) % len(q.items)
	q.n--
	return out
}

// resize makes the queue hold capacity frames (empty), reusing its slots when they
// fit.
func (q *replicaOutQueue) resize(capacity int) {
	if len(q.items) != capacity {
		q.items = make([]replicaOut, capacity)
	}
	q.head, q.n = 0, 0
}

// enqueue queues a frame in its class and reports true, or false when the class's
// queue is full (its handshake slots are the handshake's) or the connection takes no
// more frames.
func (c *replicaConn) enqueue(out replicaOut) bool {
	if c.state == linkAborting || c.state == linkFree || c.state == linkDraining && !out.handshake {
		return false
	}
	q := &c.queues[out.class]
	limit := len(q.items)
	if out.class == ReplicaControl && !out.handshake {
		limit -= replicaHandshakeSlots
	}
	if q.n >= limit {
		return false
	}
	if c.queued == 0 {
		c.sendWaitFromNs = c.shard.clock.nowNs
	}
	q.push(out)
	c.queued++
	c.queueBytes += out.size()
	if !c.dirty {
		c.dirty = true
		c.shard.replica.dirty = append(c.shard.replica.dirty, c)
	}
	return true
}

// flush submits one sendmsg over the queued frames (up to sendVectorMax) when no
// send is in flight; frames queued meanwhile ride the next one. A frame partly sent
// goes first, then control frames, then partition frames.
func (c *replicaConn) flush() {
	if c.sendInFlight || c.queued == 0 || c.state == linkAborting || c.state == linkFree {
		return
	}
	frames, iovecs := 0, 0
	partial := replicaClassCount
	for class := range replicaClassCount {
		if q := &c.queues[class]; q.n > 0 && q.at(0).sent > 0 {
			partial = class
			iovecs = c.addFrame(frames, iovecs, q.at(0), class)
			frames++
		}
	}
	for class := range replicaClassCount {
		q := &c.queues[class]
		first := 0
		if class == partial {
			first = 1
		}
		// A frame lent in two parts takes two iovecs.
		for i := first; i < q.n && iovecs+2 <= sendVectorMax; i++ {
			iovecs = c.addFrame(frames, iovecs, q.at(i), class)
			frames++
		}
	}
	c.batchLen = frames
	c.submitSend(iovecs, false)
}

// addFrame sets the iovecs of what is left of frame number i of the sendmsg from
// iovec k on, and returns the next free iovec.
func (c *replicaConn) addFrame(i, k int, out *replicaOut, class ReplicaClass) int {
	c.batch[i] = class
	sent := out.sent
	if sent < len(out.head) {
		c.vec.set(k, out.head[sent:])
		k++
		sent = 0
	} else {
		sent -= len(out.head)
	}
	if len(out.data) > sent {
		c.vec.set(k, out.data[sent:])
		k++
	}
	return k
}

// size is the frame's bytes.
func (out *replicaOut) size() int { return len(out.head) + len(out.data) }

// sent accounts for n bytes of the sendmsg in flight, in the order its iovecs had:
// each is the front frame of its class's queue until it is whole and popped.
func (c *replicaConn) sent(n int) {
	s := c.shard
	c.queueBytes -= n
	for i := 0; i < c.batchLen && n > 0; i++ {
		class := c.batch[i]
		out := c.queues[class].at(0)
		k := min(n, out.size()-out.sent)
		out.sent += k
		n -= k
		if out.sent < out.size() {
			break
		}
		if !out.handshake {
			s.counters.replica.classes[class].sent.Add(1)
		}
		c.pop(class)
	}
	c.batchLen = 0
}

// pop takes the front frame of class off the queue and gives its buffer back.
func (c *replicaConn) pop(class ReplicaClass) {
	out := c.queues[class].pop()
	c.queued--
	c.shard.releaseReplicaOut(out)
}

// dropQueued drops every frame still queued (the connection is gone), counted.
func (c *replicaConn) dropQueued() {
	s := c.shard
	for class := range replicaClassCount {
		for c.queues[class].n > 0 {
			if !c.queues[class].at(0).handshake {
				s.counters.replica.classes[class].dropped.Add(1)
			}
			c.pop(class)
		}
	}
	c.queueBytes = 0
}
