package shard

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/iggy-shard/iggy-shard/arena"
	"github.com/iggy-shard/iggy-shard/ring"
)

// inputBacklog is what a client connection received and could not serve yet: the
// bytes that landed after it was throttled or began to wait for a frame buffer
// (Conn.stash).
type inputBacklog struct {
	data   []byte       // data[:bytes] is stashed
	buffer arena.Buffer // data's arena buffer; zero when data is on the heap
	bytes  int          // received while throttled, not yet served
	// eofPending: the peer half-closed while the backlog still held requests.
	eofPending bool
}

// armRecv arms the connection's multishot recv: it stays armed, posting one completion
// per arrival, until EOF, an error, a cancel, or the receive ring running dry. Once a
// frame's header is in and some of a large body is still to come, the recv is
// cancelled and the body read straight into the frame buffer (armRecvDirect).
func (c *Conn) armRecv() {
	sqe := c.shard.getSQE()
	sqe.PrepareRecvMultishot(c.fd, recvBufferGroup, 0)
	c.markFixed(sqe)
	sqe.UserData = userData(kindRecv, c.id)
	c.recvInFlight = true
	c.recvCancelSent = false
}

// recvDirectBytesMinDefault is the body from which a frame is large: its body is
// read straight into the frame buffer (armRecvDirect) rather than through the
// receive ring, whose 8 KiB buffers the framer copies out of, and the connection
// stays out of the multishot recv until a smaller frame comes (receivesLargeFrames).
// Leaving the multishot recv costs a cancel, its completion and the re-arm, and pays
// only for what arrives after the cancel: by then the kernel may have put up to a
// whole multishot round (32 buffers, 256 KiB) into the ring, which on loopback it
// does whenever the frame was sent at once. Below this the cancel was measured to
// buy nothing (BenchmarkConnFrameRecv, with the recv into the frame at 4 KiB: 64 KiB
// and 256 KiB frames 2 completions more and no faster). Above it, a 1000 x 1000 B
// batch's frame after another one takes 5 completions of all kinds (its header's,
// its body's, its reply's), not 37 through a cancel of the multishot recv or 130
// through the ring, with all its body copied once. Pipelined small requests keep
// arriving many to a receive.
const recvDirectBytesMinDefault = 256 << 10

// armRecvDirect arms a one-shot recv of the connection's socket into the frame
// buffer's room for the body still to come (Framer.Space): the kernel copies those
// bytes once, where the receive ring's path copies them twice. It never reads past
// the frame, so what follows it stays in the socket for the recv its header calls
// for. When the
// frame needs a larger buffer and the arena has none, the connection waits for one
// as a frame fed through Feed does; when its replies or retained requests call for
// back-pressure, it is throttled as consumeInput throttles. A TLS connection's
// large recv reads ciphertext into arena buffers instead (armRecvDirectTLS).
func (c *Conn) armRecvDirect() {
	if c.overloaded() {
		c.throttled = true
		c.shard.log.Debug("connection throttled", "conn", c.id, "queued_bytes", c.out.bytes)
		return
	}
	if c.tls != nil {
		c.armRecvDirectTLS()
		return
	}
	room := c.framer.Space()
	if room == nil {
		c.waitForBuffer()
		return
	}
	sqe := c.shard.getSQE()
	sqe.PrepareRecv(c.fd, room, 0)
	c.markFixed(sqe)
	sqe.UserData = userData(kindRecv, c.id)
	c.recvInFlight, c.recvDirect = true, true
	c.recvCancelSent = false
}

// A connection whose frames are large stays out of the multishot recv. Under load,
// the multishot recv can take most of a large frame into the receive ring before
// its cancel lands (~780 KiB of a 1 MiB frame was seen with six test binaries
// running), all of it copied twice. So the rest of a large body (recvDirectBytesMin
// or more), however little, is read straight into the frame buffer, the multishot
// recv cancelled for it if armed; and after a large frame the next header is read
// alone (armRecvHeader), so that the next large body finds no multishot recv to
// cancel and is read whole into its buffer. The connection goes back to the
// multishot recv as soon as a header announces a smaller frame. The rule looks only
// at the frame being received or the last one, so the recv changes kind at most
// twice a frame, and every recv waits only on the socket (the frame timeout covers
// a header or body that stops coming): a client sending small requests pays one
// header recv after its last large frame; one alternating large and small frames
// pays, per large frame, the cancel every large frame paid before.
//
// The kernel (6.18) bounds a multishot recv's total bytes too (sqe->optlen), but only
// coarsely: the recv that reaches the bound is not shortened (a bound of 300 bytes
// over 128-byte buffers ended after 384), so a header read that way would take the
// start of its body into the ring; bounded to the header, it is the one-shot recv.

// receivesLargeFrames reports whether a plain TCP connection is receiving a frame
// whose body is recvDirectBytesMin or more, or, before the next frame's header is
// in, has just received one. TLS connections read past frames (conn_tls_recv.go).
func (c *Conn) receivesLargeFrames() bool {
	bytesMin := c.shard.cfg.recvDirectBytesMin
	if c.tls != nil || bytesMin <= 0 {
		return false
	}
	size := c.framer.Size()
	if size == 0 {
		size = c.framer.LastSize()
	}
	return size-headerSizeBytes >= bytesMin
}

// armRecvHeader arms a one-shot recv of the next frame's header into a receive-ring
// buffer, reading no more than the header's missing bytes: what follows stays in the
// socket for the recv the header calls for. It throttles as armRecvDirect does.
func (c *Conn) armRecvHeader() {
	if c.overloaded() {
		c.throttled = true
		c.shard.log.Debug("connection throttled", "conn", c.id, "queued_bytes", c.out.bytes)
		return
	}
	sqe := c.shard.getSQE()
	sqe.PrepareRecvBufferSelectMax(c.fd, recvBufferGroup, uint32(c.framer.HeaderAwaited()), 0)
	c.markFixed(sqe)
	sqe.UserData = userData(kindRecv, c.id)
	c.recvInFlight = true
	c.recvCancelSent = false
}

// wantsRecvDirect reports whether the rest of the frame being assembled is to be read
// straight into its buffer: any of a large body (receivesLargeFrames), for a plain
// connection; for a TLS connection, in large recvs, while tlsRecvDirectBytesMin or
// more is to come.
func (c *Conn) wantsRecvDirect() bool {
	bytesMin := c.shard.cfg.recvDirectBytesMin
	if c.tls != nil {
		return bytesMin > 0 && c.framer.Awaited() >= min(bytesMin, tlsRecvDirectBytesMin)
	}
	return c.receivesLargeFrames() && c.framer.Awaited() > 0
}

// onRecvDirect handles the completion of a recv into the frame buffer: res bytes of
// the body landed where the framer left room for them (or of a TLS connection's
// large recv: onRecvDirectTLS).
func (c *Conn) onRecvDirect(res int32) {
	if c.tls != nil {
		c.onRecvDirectTLS(res)
		return
	}
	s := c.shard
	c.recvInFlight, c.recvDirect = false, false
	if c.state != linkOpen {
		c.maybeFinish() // the bytes die with the frame buffer, as unread ones would
		return
	}
	switch {
	case res == 0:
		c.closeAfterFlush("peer closed") // mid-body: the partial frame is dropped
		return
	case res < 0:
		if errno := unix.Errno(-res); errno != unix.ECANCELED {
			c.abort(errno.Error())
			return
		}
		c.maybeRearm()
		return
	}
	c.lastRecvNs = s.clock.nowNs
	s.counters.bytesReceived += uint64(res)
	s.counters.bytesReceivedIntoFrames += uint64(res)
	frame := c.framer.Filled(int(res))
	if frame != nil {
		c.serve(frame)
	}
	c.trackFrame(c.framer.Partial(), frame != nil)
	if c.state != linkOpen {
		c.maybeFinish()
		return
	}
	c.maybeRearm()
}

func (c *Conn) onRecv(cqe *ring.CQE) {
	if c.recvDirect {
		c.onRecvDirect(cqe.Res)
		return
	}
	s := c.shard
	res := cqe.Res
	if !cqe.More() {
		c.recvInFlight = false
	}
	bid, hasBuffer := cqe.BufferID()
	if hasBuffer {
		// The framer copies what it keeps, so the buffer goes back at once.
		defer s.recv.ring.Recycle(bid)
	}
	if c.state != linkOpen {
		c.maybeFinish()
		return
	}
	switch {
	case res == 0 && c.tls != nil:
		c.tls.eof = true
		c.in.eofPending = true // read no more; the session's EOF closes it once read
		c.readTLS()
		return
	case res == 0:
		if c.in.bytes > 0 {
			// Half-closed after pipelining: serve what is stashed, then close.
			c.in.eofPending = true
			return
		}
		c.closeAfterFlush("peer closed")
		return
	case res < 0:
		switch errno := unix.Errno(-res); errno {
		case unix.ENOBUFS, unix.ECANCELED:
			// ENOBUFS: the receive ring ran dry under a burst; buffers are recycled as
			// each completion is handled. ECANCELED: cancelled to throttle. Either way
			// arm again, unless still throttled (then the drain of the replies does).
			c.maybeRearm()
		default:
			c.abort(errno.Error())
		}
		return
	}
	if !hasBuffer {
		panic(fmt.Sprintf("shard %d: recv completion of %d bytes without a buffer", s.index, res))
	}
	c.lastRecvNs = s.clock.nowNs
	s.counters.bytesReceived += uint64(res)
	data := s.recv.ring.Buffer(bid, int(res))
	if c.tls != nil {
		c.receiveTLS(data)
	} else if c.in.bytes > 0 {
		c.stash(data) // behind what is already waiting
	} else if rest := c.consumeInput(data); len(rest) > 0 {
		c.stash(rest)
	}
	if c.state != linkOpen {
		c.maybeFinish()
		return
	}
	if c.recvInFlight && c.wantsRecvDirect() {
		c.cancelRecv() // the cancel's completion arms the recv into the frame buffer
	}
	c.maybeRearm()
}

// overloaded reports whether the connection's queued or parked replies, the replies
// it is owed, or the requests it has in the handler's hands, call for back-pressure.
func (c *Conn) overloaded() bool {
	return c.out.bytes+c.order.parkedBytes > c.shard.cfg.SendQueueBytesMax/2 || c.out.count > sendSegmentsMax/2 ||
		c.retainedBytes > retainedBytesMax || c.owed() >= owedRepliesMax
}

// retainedBytesMax bounds the request buffers one connection may have retained by the
// handler (requests in flight between shards, sends waiting for the disk) before it
// is no longer read: a client pipelining large batches cannot take every large buffer
// of its shard's arena, which the other connections' frames need too. A single frame
// larger than the bound is still taken, alone.
const retainedBytesMax = 4 << 20

// consumeInput frames and serves received bytes until they run out, the connection
// stops being open, or its replies pile up; then it throttles the connection (cancels
// its recv) and returns the bytes it did not look at. Requests are thus served only
// while their replies can be queued: a client that pipelines faster than it reads
// waits in its own socket, not in our memory.
func (c *Conn) consumeInput(data []byte) (rest []byte) {
	s := c.shard
	frameCompleted := false
	for len(data) > 0 && c.state == linkOpen {
		if c.overloaded() {
			if !c.throttled {
				s.log.Debug("connection throttled", "conn", c.id, "queued_bytes", c.out.bytes)
				c.throttled = true
				c.cancelRecv()
			}
			break
		}
		n, frame, err := c.framer.Feed(data)
		data = data[n:]
		if errors.Is(err, ErrFrameBuffersExhausted) {
			c.waitForBuffer()
			break
		}
		if err != nil {
			c.onFrameError(err)
			break
		}
		if frame != nil {
			frameCompleted = true
			c.serve(frame)
		}
	}
	c.trackFrame(c.framer.Partial(), frameCompleted)
	if c.state != linkOpen {
		return nil
	}
	return data
}

// waitForBuffer stops reading a connection whose frame found no buffer in the arena:
// it waits in line (clientTable.bufferWaiters) for buffers that requests in flight give
// back as they finish, rather than being closed for the server's own shortage. What
// it has received meanwhile is stashed.
func (c *Conn) waitForBuffer() {
	if c.waitingForBuffer {
		return
	}
	s := c.shard
	s.log.Debug("connection waits for a frame buffer", "conn", c.id)
	c.waitingForBuffer = true
	s.counters.framesWaitedForBuffer++
	c.cancelRecv()
	s.clients.bufferWaiters = append(s.clients.bufferWaiters, c.id)
	// Its backlogs leave the arena (keep puts them on the heap while it waits): the
	// buffer a backlog holds may be the one a waiting frame needs.
	c.in.toHeap(s.arena)
	if c.tls != nil {
		c.tls.pending.toHeap(s.arena)
	}
}

// frameReleased accounts for a retained request buffer given back. The connection may
// read again, but not from here (Release runs inside the handler): the shard resumes
// it at the top of its next turn.
func (c *Conn) frameReleased(sizeBytes int) {
	c.retainedBytes -= sizeBytes
	if c.throttled && !c.resumePending && c.state == linkOpen && !c.overloaded() {
		c.resumePending = true
		c.shard.clients.resumable = append(c.shard.clients.resumable, c.id)
	}
}

// resumeInput serves what a connection stashed while it was throttled or waiting for
// a buffer, and reads again, unless it has to wait or throttle anew.
func (c *Conn) resumeInput() {
	if c.state != linkOpen {
		return
	}
	if c.throttled {
		if c.overloaded() {
			return
		}
		c.throttled = false
	}
	if c.framer.Partial() {
		c.frameStartNs = c.shard.clock.nowNs // the wait was the server's, not the client's
	}
	c.drainBacklog()
	if c.state == linkOpen {
		c.maybeRearm()
	}
}

// stash keeps received bytes the connection cannot serve yet: those that arrived after
// it was throttled or began to wait for a frame buffer, before the cancel of its recv
// took effect. They are copied out of the receive ring (whose buffers must keep
// circulating) into a buffer (the arena's; the heap's when the arena is dry or the
// connection waits for a frame buffer) that grows to at most recvPool.backlogBytesMax.
//
// That bound is what the kernel can deliver, so no client is dropped for it: the
// shard's ring runs with DEFER_TASKRUN, so arrivals land only when the shard enters
// the kernel, and the enter that carries the recv's cancel lands at most as many as
// the receive ring has free buffers (its whole size). Until the backlog is drained the
// recv is not armed again, so nothing more lands. Passing the bound is a broken
// invariant of the runtime, not the client's doing; the connection is closed, loudly.
func (c *Conn) stash(data []byte) { c.keep(&c.in, data) }

// keep appends data to b, a backlog of c bounded by what the kernel can deliver
// (stash); it reports false when that bound was passed and c is closed.
func (c *Conn) keep(b *inputBacklog, data []byte) bool {
	s := c.shard
	held := b.bytes
	need := held + len(data)
	if need > s.recv.backlogBytesMax {
		s.log.Error("connection closed: receive backlog past what the receive ring can deliver", "conn", c.id,
			"backlog_bytes", need, "max_bytes", s.recv.backlogBytesMax)
		c.abort("receive backlog full")
		return false
	}
	if len(b.data) < need {
		size := max(need, 2*len(b.data), sendBufferBytesMax)
		var buffer arena.Buffer
		if !c.waitingForBuffer { // else what it would take may be what its frame waits for
			buffer, _ = s.arena.Acquire(size)
		}
		bigger := buffer.Full()
		if buffer.IsZero() {
			// The arena ran dry, most likely because frames wait for its buffers
			// too, or this connection's frame does: a bounded heap buffer, rare,
			// rather than closing the connection or taking what frames wait for.
			bigger = make([]byte, size)
		}
		copy(bigger, b.data[:held])
		b.release(s.arena)
		b.data, b.buffer = bigger, buffer
	}
	copy(b.data[held:], data)
	b.bytes = need
	return true
}

// toHeap moves b's bytes out of the arena buffer holding them, if one does, to the
// heap, and gives the buffer back to a.
func (b *inputBacklog) toHeap(a *arena.Arena) {
	if b.buffer.IsZero() {
		return
	}
	moved := make([]byte, len(b.data))
	copy(moved, b.data[:b.bytes])
	a.Release(b.buffer)
	b.data, b.buffer = moved, arena.Buffer{}
}

// releaseBacklog gives the backlog's buffer back (to the arena when it came from it).
func (c *Conn) releaseBacklog() { c.in.release(c.shard.arena) }

// release gives b's buffer back (to a when it came from it) and empties b.
func (b *inputBacklog) release(a *arena.Arena) {
	if !b.buffer.IsZero() {
		a.Release(b.buffer)
	}
	b.data, b.buffer, b.bytes = nil, arena.Buffer{}, 0
}

// drainBacklog serves stashed bytes once the connection may read again, keeping what
// it still cannot take.
func (c *Conn) drainBacklog() {
	if c.in.bytes == 0 {
		if c.tls != nil {
			c.readTLS() // what the session holds comes after the stashed plaintext
		}
		return
	}
	buf := c.in.data
	rest := c.consumeInput(buf[:c.in.bytes])
	if c.state != linkOpen {
		return
	}
	c.in.bytes = copy(buf, rest)
	if c.in.bytes == 0 {
		c.releaseBacklog()
		if c.tls != nil {
			c.readTLS() // the session's own EOF closes it
			return
		}
		if c.in.eofPending {
			c.closeAfterFlush("peer closed")
		}
	}
}

// maybeRearm arms the recv again when it is not armed, the connection is open and not
// throttled, and nothing is waiting in the backlog: into the frame buffer while a
// large frame's body is to come, the next header alone after a large frame
// (receivesLargeFrames), else the multishot recv.
func (c *Conn) maybeRearm() {
	if c.state != linkOpen || c.recvInFlight || c.throttled || c.waitingForBuffer || c.in.bytes > 0 || c.in.eofPending {
		return
	}
	switch {
	case c.wantsRecvDirect():
		c.armRecvDirect()
	case c.receivesLargeFrames():
		c.armRecvHeader()
	default:
		c.armRecv()
	}
}
