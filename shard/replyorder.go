package shard

import (
	"fmt"
)

// Replies leave a connection in the order its requests arrived, whichever shard
// served each one and whenever its reply came back (Kafka promises the same, and an
// Iggy client has no other way to match replies: partition operations and reads all
// carry one request number).
//
// Every request the connection serves gets the next Ticket. The reply methods
// (Reserve, SendVectored, ReplyStatus, Evict) answer one ticket at a time: the
// request being served inside ServeRequest, or the deferred one a handler named with
// Answer. The send queue holds the replies of tickets up to the head (replySeq) only;
// pieces of a later ticket wait, parked in a slot of their own, until every earlier
// reply has been queued, and then move into the queue in order. The common case (a
// reply to the oldest request, with room in the queue) goes straight into the queue.
//
//	tickets:  ... 7 8 | 9 (head)   10     11      12 ... nextRequestSeq
//	queue:    replies ≤ 8, the head's first pieces
//	parked:            9's rest   (none)  11 done  12 half
//
// A connection owing owedRepliesMax replies is not read (back-pressure, as for a full
// send queue), so the parked slots are bounded; parked pieces also wait for room in
// the queue, which therefore never refuses a reply the server produced.

// replyOrder is a connection's place in its reply order: tickets below replySeq have
// their replies queued; the reply methods answer the ticket answering; with the
// connection draining, tickets from closeBeforeSeq on are dropped.
type replyOrder struct {
	nextRequestSeq  uint64
	replySeq        uint64
	answering       uint64
	answeringSet    bool
	closeBeforeSeq  uint64
	headBytesQueued int // bytes of the head ticket's reply in the send queue
	parked          []parkedSlot
	parkedBytes     int
}

// Ticket is a request's place in its connection's reply order (Request.Defer).
type Ticket uint64

// owedRepliesMax bounds the requests of one connection whose replies are not all in
// its send queue yet: beyond it the connection is not read until replies drain.
const owedRepliesMax = 256

// parkedBufferBytes is the smallest buffer a parked copied reply takes; later small
// replies of the same ticket share it.
const parkedBufferBytes = 4 << 10

// parkedSlot holds the pieces of one ticket that wait for an earlier reply or for
// room in the send queue.
type parkedSlot struct {
	pieces []sendSegment
	moved  int  // pieces[:moved] went into the send queue already
	ended  bool // the reply is complete (Answered, or ServeRequest returned)
}

// Defer keeps the request's reply open beyond ServeRequest: the handler answers it
// later, on this shard, between Conn.Answer(ticket) and Conn.Answered. Replies of
// later requests wait for it. Call it at most once, from ServeRequest.
func (r *Request) Defer() Ticket {
	if r.deferred {
		panic("shard: Request.Defer called twice")
	}
	r.deferred = true
	return r.ticket
}

// Answer starts the reply to a deferred request: until Answered, the reply methods
// answer t. A connection that was evicted by an earlier request drops what t sends.
func (c *Conn) Answer(t Ticket) {
	if c.order.answeringSet {
		panic(fmt.Sprintf("shard: Answer(%d) while ticket %d is being answered", t, c.order.answering))
	}
	if uint64(t) >= c.order.nextRequestSeq || uint64(t) < c.order.replySeq {
		panic(fmt.Sprintf("shard: Answer(%d) outside the owed tickets [%d, %d)", t, c.order.replySeq, c.order.nextRequestSeq))
	}
	c.order.answering, c.order.answeringSet = uint64(t), true
}

// Answered completes the reply Answer started; the replies waiting behind it follow.
func (c *Conn) Answered() {
	if !c.order.answeringSet {
		panic("shard: Answered without Answer")
	}
	c.endAnswer()
}

// answerUnsolicited gives what no request asked for (an eviction of a silent client,
// of a stream that cannot be framed) a ticket behind every owed reply.
func (c *Conn) answerUnsolicited() {
	t := c.order.nextRequestSeq
	c.order.nextRequestSeq++
	c.order.answering, c.order.answeringSet = t, true
}

func (c *Conn) endAnswer() {
	t := c.order.answering
	c.order.answeringSet = false
	if c.state == linkAborting || c.state == linkFree || t >= c.order.closeBeforeSeq {
		return
	}
	if t == c.order.replySeq && (c.order.parked == nil || len(c.slot(t).pieces) == 0) {
		c.order.replySeq++
		c.order.headBytesQueued = 0
	} else {
		c.slotFor(t).ended = true
	}
	c.advance()
	if c.state == linkDraining {
		c.shard.markDirty(c) // the flush pass closes it once all it owes is sent
	}
}

// owed is the number of served requests whose replies are not all queued.
func (c *Conn) owed() int { return int(c.order.nextRequestSeq - c.order.replySeq) }

// slot returns t's parked slot; c.order.parked must be allocated and t owed.
func (c *Conn) slot(t uint64) *parkedSlot { return &c.order.parked[t&uint64(len(c.order.parked)-1)] }

// slotFor returns t's parked slot, allocating or growing the slots as needed: a
// connection that never gets a reply out of order never allocates them.
func (c *Conn) slotFor(t uint64) *parkedSlot {
	need := int(t-c.order.replySeq) + 1
	if len(c.order.parked) < need {
		size := max(16, len(c.order.parked))
		for size < need {
			size *= 2
		}
		grown := make([]parkedSlot, size)
		for s := c.order.replySeq; s < c.order.replySeq+uint64(len(c.order.parked)); s++ {
			grown[s&uint64(size-1)] = *c.slot(s)
		}
		c.order.parked = grown
	}
	return c.slot(t)
}

// accepts reports whether a reply to the ticket being answered may still be queued:
// the connection is open, or draining and the ticket comes before its close.
func (c *Conn) accepts() bool {
	if !c.order.answeringSet {
		panic("shard: a reply method called outside ServeRequest or Answer")
	}
	return c.state == linkOpen || (c.state == linkDraining && c.order.answering < c.order.closeBeforeSeq)
}

// straightToQueue reports whether a piece of n bytes for the ticket being answered goes
// straight into the send queue: it answers the head, nothing of the head waits
// parked, and the queue has room.
func (c *Conn) straightToQueue(pieces, n int) bool {
	if c.order.answering != c.order.replySeq {
		return false
	}
	if c.order.parked != nil && len(c.slot(c.order.replySeq).pieces) > c.slot(c.order.replySeq).moved {
		return false
	}
	return c.room(pieces, n)
}

// room reports whether the send queue takes pieces more pieces of n bytes of the head
// reply. Its bytes are bounded by SendQueueBytesMax, except that the head reply is
// always taken once the queue holds nothing else: a reply larger than the bound (a
// large poll) is sent, alone.
func (c *Conn) room(pieces, n int) bool {
	if c.out.count+pieces > sendSegmentsMax {
		return false
	}
	return c.out.bytes-c.order.headBytesQueued == 0 || c.out.bytes+n <= c.shard.cfg.SendQueueBytesMax
}

// parkReserve returns n bytes of a parked copied reply for the ticket being
// answered, in the slot's last buffer when it has room.
func (c *Conn) parkReserve(n int) ([]byte, error) {
	sl := c.slotFor(c.order.answering)
	if k := len(sl.pieces); k > sl.moved {
		last := &sl.pieces[k-1]
		if !last.owned.IsZero() && cap(last.data)-len(last.data) >= n {
			start := len(last.data)
			last.data = last.data[:start+n]
			c.order.parkedBytes += n
			return last.data[start : start+n], nil
		}
	}
	buf, err := c.shard.arena.Acquire(max(n, parkedBufferBytes))
	if err != nil {
		c.shard.log.Warn("connection closed: no buffer for a reply", "conn", c.id, "bytes", n, "err", err)
		c.abort("send buffers exhausted")
		return nil, ErrSendBuffersExhausted
	}
	sl.pieces = append(sl.pieces, sendSegment{data: buf.Full()[:n], owned: buf})
	c.order.parkedBytes += n
	return buf.Full()[:n], nil
}

// park keeps lent parts for the ticket being answered.
func (c *Conn) park(parts [][]byte, done Releaser) {
	sl := c.slotFor(c.order.answering)
	for i, p := range parts {
		seg := sendSegment{data: p}
		if i == len(parts)-1 {
			seg.done = done
		}
		sl.pieces = append(sl.pieces, seg)
		c.order.parkedBytes += len(p)
	}
}

// advance moves parked pieces of the head into the send queue while it has room, and
// moves the head past every reply that is complete and queued.
func (c *Conn) advance() {
	for c.order.parked != nil && c.order.replySeq < c.order.nextRequestSeq {
		sl := c.slot(c.order.replySeq)
		for sl.moved < len(sl.pieces) {
			seg := sl.pieces[sl.moved]
			if !c.room(1, seg.size()) {
				return
			}
			sl.pieces[sl.moved] = sendSegment{}
			sl.moved++
			c.order.parkedBytes -= seg.size()
			c.out.push(seg)
			c.order.headBytesQueued += seg.size()
			c.queued(seg.size())
		}
		if !sl.ended {
			return
		}
		sl.pieces, sl.moved, sl.ended = sl.pieces[:0], 0, false
		c.order.replySeq++
		c.order.headBytesQueued = 0
	}
	if c.throttled && !c.resumePending && c.state == linkOpen && !c.overloaded() {
		c.resumePending = true
		c.shard.clients.resumable = append(c.shard.clients.resumable, c.id)
	}
}

// releaseParked gives back what parked replies hold: the connection is closing
// without sending them.
func (c *Conn) releaseParked() {
	for i := range c.order.parked {
		sl := &c.order.parked[i]
		for k := sl.moved; k < len(sl.pieces); k++ {
			seg := &sl.pieces[k]
			if !seg.owned.IsZero() {
				c.shard.arena.Release(seg.owned)
			}
			if seg.done != nil {
				seg.done.Release()
			}
			if seg.spliced != nil {
				seg.spliced.release(c.shard)
			}
			*seg = sendSegment{}
		}
		sl.pieces, sl.moved, sl.ended = sl.pieces[:0], 0, false
	}
	c.order.parkedBytes = 0
}
