package shard

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/iggy-shard/iggy-shard/arena"
)

// sendSegmentsMax bounds the pieces queued on one connection, and so the iovecs of one
// sendmsg: a connection with 64 pieces outstanding is not reading.
const sendSegmentsMax = sendVectorMax

// sendBufferBytesMax is the largest buffer Reserve takes for copied replies.
const sendBufferBytesMax = 64 << 10

// sendProgressBytesMin is how much a connection's queue must drain within SendTimeout
// (unless it drains completely) to count as read: 64 KiB per 30 s by default, a rate
// any live reader exceeds.
const sendProgressBytesMin = 64 << 10

// sendSegment is one piece of the send queue: bytes the runtime copied into its own
// arena buffer (owned set), bytes a handler lent (done, if set, told when sent), or
// file runs spliced to the socket (spliced set, data nil: splice.go).
type sendSegment struct {
	data    []byte
	sent    int
	owned   arena.Buffer
	done    Releaser
	spliced *splicedReply
}

// size is the piece's bytes.
func (seg *sendSegment) size() int {
	if seg.spliced != nil {
		return seg.spliced.sizeBytes
	}
	return len(seg.data)
}

// sendQueue is a client connection's replies on their way out: a ring of pieces in
// reply order, sent as one send or sendmsg at a time (link.submitSend).
type sendQueue struct {
	segments [sendSegmentsMax]sendSegment
	head     int
	count    int
	bytes    int          // queued and not sent yet
	spare    arena.Buffer // a drained send buffer kept for the next reply
	// sentSinceMarkBytes counts bytes sent since sendWaitFromNs was last moved.
	sentSinceMarkBytes int
}

// Reserve appends n bytes to the reply being answered and returns them for the caller
// to fill before its callback returns (a reply header and a small body, written in
// place: no copy, no allocation when the reply goes straight into the send queue).
// On an error the connection is closed (or was already).
func (c *Conn) Reserve(n int) ([]byte, error) {
	if !c.accepts() {
		return nil, ErrConnClosed
	}
	if !c.straightToQueue(1, n) {
		return c.parkReserve(n)
	}
	if c.out.count > 0 {
		last := c.out.at(c.out.count - 1)
		if !last.owned.IsZero() && cap(last.data)-len(last.data) >= n {
			start := len(last.data)
			last.data = last.data[:start+n]
			c.order.headBytesQueued += n
			c.queued(n)
			return last.data[start : start+n], nil
		}
	}
	// Send buffers grow with the queue (4 KiB while it is short, up to 64 KiB), so that
	// the segment bound does not cut off a client that is merely slow with many small
	// replies before the byte bound and the throttle do their work.
	size := max(n, min(max(c.out.bytes, standingFrameBytes), sendBufferBytesMax))
	buf := c.out.spare
	c.out.spare = arena.Buffer{}
	if buf.IsZero() || len(buf.Full()) < size {
		if !buf.IsZero() {
			c.shard.arena.Release(buf)
		}
		var err error
		buf, err = c.shard.arena.Acquire(size)
		if err != nil {
			c.shard.log.Warn("connection closed: no send buffer", "conn", c.id, "bytes", n, "err", err)
			c.abort("send buffers exhausted")
			return nil, ErrSendBuffersExhausted
		}
	}
	c.out.push(sendSegment{data: buf.Full()[:n], owned: buf})
	c.order.headBytesQueued += n
	c.queued(n)
	return buf.Full()[:n], nil
}

// SendVectored appends parts to the reply being answered without copying them: the
// stored batch bytes of a poll reply go from where they lie. done, if not nil, is
// released once the kernel no longer reads the parts (sent, or the connection
// closed). The parts must stay valid and unchanged until then. On an error the
// connection is closed and done is not called: the caller still owns the parts.
func (c *Conn) SendVectored(parts [][]byte, done Releaser) error {
	if !c.accepts() {
		return ErrConnClosed
	}
	if len(parts) > sendSegmentsMax {
		// A reply must fit the queue's iovecs whole, or it could never be sent.
		panic(fmt.Sprintf("shard: a reply of %d parts, more than the %d the send queue holds", len(parts), sendSegmentsMax))
	}
	total := 0
	for _, p := range parts {
		total += len(p)
	}
	if !c.straightToQueue(len(parts), total) {
		c.park(parts, done)
		if len(parts) == 0 && done != nil {
			done.Release()
		}
		return nil
	}
	for i, p := range parts {
		seg := sendSegment{data: p}
		if i == len(parts)-1 {
			seg.done = done
		}
		c.out.push(seg)
	}
	if len(parts) == 0 && done != nil {
		done.Release()
	}
	c.order.headBytesQueued += total
	c.queued(total)
	return nil
}

// sendPending reports whether the connection has bytes to send: replies queued, or
// records its TLS session sealed.
func (c *Conn) sendPending() bool {
	return c.out.count > 0 || (c.tls != nil && c.tls.unsent() > 0)
}

func (q *sendQueue) push(seg sendSegment) {
	q.segments[(q.head+q.count)%sendSegmentsMax] = seg
	q.count++
}

// at returns the i-th piece from the head.
func (q *sendQueue) at(i int) *sendSegment { return &q.segments[(q.head+i)%sendSegmentsMax] }

func (c *Conn) queued(n int) {
	if c.out.bytes == 0 {
		c.sendWaitFromNs = c.shard.clock.nowNs
		c.out.sentSinceMarkBytes = 0
	}
	c.out.bytes += n
	c.shard.markDirty(c)
}

// flush submits one send for everything queued, if no send is in flight: a single
// send for one piece, a sendmsg over up to sendSegmentsMax iovecs otherwise.
func (c *Conn) flush() {
	if c.sendInFlight && c.splicing != nil {
		c.shard.splice.awaited = true // what was queued waits for the step's end
	}
	if c.sendInFlight || c.state == linkAborting || c.state == linkFree {
		return
	}
	if c.tls != nil {
		c.flushTLS()
		return
	}
	n := 0
	for n < c.out.count {
		seg := c.out.at(n)
		if seg.spliced != nil {
			break
		}
		c.vec.set(n, seg.data[seg.sent:])
		n++
	}
	switch {
	case n == 0 && c.out.count > 0:
		c.startSplice(c.out.at(0).spliced, 0)
	case n == c.out.count:
		c.submitSend(n, false)
	case c.out.at(n).spliced.fresh() && c.startSplice(c.out.at(n).spliced, n):
		// The head of a spliced reply leads its chain.
	default:
		// The head of a spliced reply that waits for a pipe: MSG_MORE holds a
		// partial segment back for the bytes that follow from the file.
		c.submitSend(n, true)
	}
}

func (c *Conn) onSend(res int32) {
	c.sendInFlight = false
	if res < 0 {
		if c.state != linkAborting {
			c.abort(unix.Errno(-res).Error())
		}
		c.maybeFinish()
		return
	}
	if c.tls != nil {
		c.shard.counters.bytesSent += uint64(res)
		c.sentTLS(int(res))
		c.sendProgress(int(res))
		c.markIfDrained()
		c.afterSend()
		return
	}
	c.sendProgress(int(res))
	c.sent(int(res))
}

// sendProgress counts n bytes the kernel took from the send queue. Progress is a
// drained queue or sendProgressBytesMin sent: a reader that lets through a few
// bytes now and then (or a kernel collapsing its receive queue under a zero
// window) does not keep a stuck queue alive.
func (c *Conn) sendProgress(n int) {
	c.out.sentSinceMarkBytes += n
	if c.out.sentSinceMarkBytes >= sendProgressBytesMin {
		c.sendWaitFromNs = c.shard.clock.nowNs
		c.out.sentSinceMarkBytes = 0
	}
}

// sent drops n bytes sent (and counted by sendProgress) from the queue, once the
// send that took them has ended, and goes on.
func (c *Conn) sent(n int) {
	c.shard.counters.bytesSent += uint64(n)
	c.out.consume(n, c.shard)
	c.markIfDrained()
	c.afterSend()
}

// markIfDrained: a drained queue is progress (sendProgress).
func (c *Conn) markIfDrained() {
	if c.out.count == 0 {
		c.sendWaitFromNs = c.shard.clock.nowNs
		c.out.sentSinceMarkBytes = 0
	}
}

// afterSend goes on after a send ended: parked replies into the room it made, the
// next send, reading again once the queue drained enough.
func (c *Conn) afterSend() {
	s := c.shard
	c.advance() // parked replies into the room the send made
	switch c.state {
	case linkOpen:
		if c.sendPending() {
			s.markDirty(c)
		}
		if c.throttled && !c.overloaded() {
			c.throttled = false
			c.drainBacklog() // may throttle again
			if c.state == linkOpen {
				c.maybeRearm() // if the recv is still armed, its cancel's completion re-arms it
			}
		}
	case linkDraining:
		if c.sendPending() {
			c.flush()
		}
	}
	c.maybeFinish()
}

// consume drops n sent bytes from the head of the queue, releasing what is done to
// the shard (the drained buffer kept as the spare).
func (q *sendQueue) consume(n int, s *Shard) {
	q.bytes -= n
	for n > 0 {
		seg := &q.segments[q.head]
		k := min(n, seg.size()-seg.sent)
		seg.sent += k
		n -= k
		if seg.sent < seg.size() {
			break
		}
		q.popHead(s)
	}
	// A queued segment may be empty (a zero-length reserve); drop those too.
	for q.count > 0 && q.segments[q.head].sent == q.segments[q.head].size() {
		q.popHead(s)
	}
}

func (q *sendQueue) popHead(s *Shard) {
	seg := &q.segments[q.head]
	if !seg.owned.IsZero() {
		if q.spare.IsZero() {
			q.spare = seg.owned
		} else {
			s.arena.Release(seg.owned)
		}
	}
	if seg.done != nil {
		seg.done.Release()
	}
	if seg.spliced != nil {
		seg.spliced.release(s)
	}
	*seg = sendSegment{}
	q.head = (q.head + 1) % sendSegmentsMax
	q.count--
}
