package shard

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"

	"golang.org/x/sys/unix"

	"github.com/iggy-shard/iggy-shard/arena"
	"github.com/iggy-shard/iggy-shard/ring"
	"github.com/iggy-shard/iggy-shard/wire"
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

var (
	// ErrConnClosed: the connection is closing or closed; nothing more can be sent.
	ErrConnClosed = errors.New("shard: connection closed")
	// ErrSendQueueFull: the reply did not fit the connection's bounded send queue. The
	// connection has been closed: its consumer stopped reading.
	ErrSendQueueFull = errors.New("shard: send queue full, connection closed")
	// ErrSendBuffersExhausted: the shard's arena had no buffer for the reply. The
	// connection has been closed.
	ErrSendBuffersExhausted = errors.New("shard: no send buffer available, connection closed")
)

// sendSegment is one piece of the send queue: bytes the runtime copied into its own
// arena buffer (owned set) or bytes a handler lent (done, if set, told when sent).
type sendSegment struct {
	data  []byte
	sent  int
	owned arena.Buffer
	done  Releaser
}

// Conn is a client connection on its shard. Its methods must be called from that
// shard's goroutine; another shard refers to it by ConnID and posts a Message.
type Conn struct {
	link   // its socket and lifecycle; the multishot recv is its recv in flight
	framer *Framer

	throttled bool // not reading: too many reply bytes queued, or request bytes retained
	// waitingForBuffer: not reading because the arena had no buffer for its frame;
	// it is in its shard's bufferWaiters until one comes back.
	waitingForBuffer bool
	// retainedBytes is the size of the request buffers the handler retained and
	// has not released yet (Request.Retain, Frame.Release).
	retainedBytes int
	resumePending bool         // in its shard's resumable list
	backlog       []byte       // holds backlogBytes stashed bytes
	backlogBuffer arena.Buffer // backlog's arena buffer; zero when backlog is on the heap
	backlogBytes  int          // received while throttled, not yet served
	eofPending    bool         // the peer half-closed while the backlog still held requests
	inDirty       bool
	lastRecvNs    int64
	// sentSinceMarkBytes counts bytes sent since sendWaitFromNs was last moved.
	sentSinceMarkBytes int

	client wire.Uint128 // the client id of the last valid request, for evictions

	// The reply order (replyorder.go): tickets below replySeq have their replies
	// queued; the reply methods answer the ticket answering; with the connection
	// draining, tickets from closeBeforeSeq on are dropped.
	nextRequestSeq  uint64
	replySeq        uint64
	answering       uint64
	answeringSet    bool
	closeBeforeSeq  uint64
	headBytesQueued int // bytes of the head ticket's reply in the send queue
	parked          []parkedSlot
	parkedBytes     int

	segments    [sendSegmentsMax]sendSegment
	segHead     int
	segCount    int
	queuedBytes int
	spare       arena.Buffer // a drained send buffer kept for the next reply

	// Value is the handler's per-connection state (a session); the runtime clears it
	// when the connection closes, after Handler.ConnClosed.
	Value any
}

// RemoteAddr returns the peer's address as accepted (getpeername on shard 0), or the
// zero AddrPort if it could not be learned.
func (c *Conn) RemoteAddr() netip.AddrPort { return c.remote }

// ID returns the connection's runtime-wide name.
func (c *Conn) ID() ConnID { return c.id }

// Shard returns the shard that owns the connection.
func (c *Conn) Shard() *Shard { return c.shard }

// Open reports whether the connection still accepts replies.
func (c *Conn) Open() bool { return c.state == linkOpen }

func (c *Conn) open(fd int, direct bool, slot uint32, peer netip.AddrPort) error {
	s := c.shard
	*c = Conn{link: newLink(s, slot, c.id, clientLinkKinds, fd, direct, peer, linkOpen), framer: c.framer,
		closeBeforeSeq: ^uint64(0), parked: c.parked}
	c.lastRecvNs = s.nowNs
	c.armRecv()
	s.timers.Push(timer{deadlineNs: s.nowNs + int64(c.checkInterval()), kind: timerConn, conn: c.id})
	return nil
}

// armRecv arms the connection's multishot recv: it stays armed, posting one completion
// per arrival, until EOF, an error, a cancel, or the receive ring running dry.
func (c *Conn) armRecv() {
	sqe := c.shard.getSQE()
	sqe.PrepareRecvMultishot(c.fd, recvBufferGroup, 0)
	c.markFixed(sqe)
	sqe.UserData = userData(kindRecv, c.id)
	c.recvInFlight = true
	c.recvCancelSent = false
}

func (c *Conn) onRecv(cqe *ring.CQE) {
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
	case res == 0:
		if c.backlogBytes > 0 {
			// Half-closed after pipelining: serve what is stashed, then close.
			c.eofPending = true
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
	c.lastRecvNs = s.nowNs
	s.counters.bytesReceived += uint64(res)
	data := s.recv.ring.Buffer(bid, int(res))
	if c.backlogBytes > 0 {
		c.stash(data) // behind what is already waiting
	} else if rest := c.consumeInput(data); len(rest) > 0 {
		c.stash(rest)
	}
	if c.state != linkOpen {
		c.maybeFinish()
		return
	}
	c.maybeRearm()
}

// overloaded reports whether the connection's queued or parked replies, the replies
// it is owed, or the requests it has in the handler's hands, call for back-pressure.
func (c *Conn) overloaded() bool {
	return c.queuedBytes+c.parkedBytes > c.shard.cfg.SendQueueBytesMax/2 || c.segCount > sendSegmentsMax/2 ||
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
				s.log.Debug("connection throttled", "conn", c.id, "queued_bytes", c.queuedBytes)
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
// it waits in line (Shard.bufferWaiters) for buffers that requests in flight give
// back as they finish, rather than being closed for the server's own shortage. What
// it has received meanwhile is stashed.
func (c *Conn) waitForBuffer() {
	if c.waitingForBuffer {
		return
	}
	s := c.shard
	s.log.Debug("connection waits for a frame buffer", "conn", c.id)
	c.waitingForBuffer = true
	c.cancelRecv()
	s.clients.bufferWaiters = append(s.clients.bufferWaiters, c.id)
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
		c.frameStartNs = c.shard.nowNs // the wait was the server's, not the client's
	}
	c.drainBacklog()
	if c.state == linkOpen {
		c.maybeRearm()
	}
}

// stash keeps received bytes the connection cannot serve yet: those that arrived after
// it was throttled or began to wait for a frame buffer, before the cancel of its recv
// took effect. They are copied out of the receive ring (whose buffers must keep
// circulating) into a buffer (the arena's, or the heap's when the arena is dry) that
// grows to at most Shard.backlogBytesMax.
//
// That bound is what the kernel can deliver, so no client is dropped for it: the
// shard's ring runs with DEFER_TASKRUN, so arrivals land only when the shard enters
// the kernel, and the enter that carries the recv's cancel lands at most as many as
// the receive ring has free buffers (its whole size). Until the backlog is drained the
// recv is not armed again, so nothing more lands. Passing the bound is a broken
// invariant of the runtime, not the client's doing; the connection is closed, loudly.
func (c *Conn) stash(data []byte) {
	s := c.shard
	need := c.backlogBytes + len(data)
	if need > s.recv.backlogBytesMax {
		s.log.Error("connection closed: receive backlog past what the receive ring can deliver", "conn", c.id,
			"backlog_bytes", need, "max_bytes", s.recv.backlogBytesMax)
		c.abort("receive backlog full")
		return
	}
	if len(c.backlog) < need {
		size := max(need, 2*len(c.backlog), sendBufferBytesMax)
		var bigger []byte
		buffer, err := s.arena.Acquire(size)
		if err == nil {
			bigger = buffer.Full()
		} else {
			// The arena ran dry, most likely because frames wait for its buffers
			// too: a bounded heap buffer, rare, rather than closing the connection.
			bigger = make([]byte, size)
		}
		copy(bigger, c.backlog[:c.backlogBytes])
		c.releaseBacklog()
		c.backlog, c.backlogBuffer = bigger, buffer
	}
	copy(c.backlog[c.backlogBytes:], data)
	c.backlogBytes = need
}

// releaseBacklog gives the backlog's buffer back (to the arena when it came from it).
func (c *Conn) releaseBacklog() {
	if !c.backlogBuffer.IsZero() {
		c.shard.arena.Release(c.backlogBuffer)
	}
	c.backlog, c.backlogBuffer = nil, arena.Buffer{}
}

// drainBacklog serves stashed bytes once the connection may read again, keeping what
// it still cannot take.
func (c *Conn) drainBacklog() {
	if c.backlogBytes == 0 {
		return
	}
	buf := c.backlog
	rest := c.consumeInput(buf[:c.backlogBytes])
	if c.state != linkOpen {
		return
	}
	c.backlogBytes = copy(buf, rest)
	if c.backlogBytes == 0 {
		c.releaseBacklog()
		if c.eofPending {
			c.closeAfterFlush("peer closed")
		}
	}
}

// maybeRearm arms the recv again when it is not armed, the connection is open and not
// throttled, and nothing is waiting in the backlog.
func (c *Conn) maybeRearm() {
	if c.state == linkOpen && !c.recvInFlight && !c.throttled && !c.waitingForBuffer && c.backlogBytes == 0 && !c.eofPending {
		c.armRecv()
	}
}

// onFrameError ends a connection whose byte stream cannot be framed: an Eviction frame
// where the protocol has a reason for it (a size out of range, a command other than
// Request, as wire's header faults say), then close.
func (c *Conn) onFrameError(err error) {
	var fe *FrameError
	if !errors.As(err, &fe) {
		c.shard.log.Warn("connection closed", "conn", c.id, "err", err)
		c.abort("frame buffers exhausted")
		return
	}
	c.shard.log.Debug("connection evicted: malformed frame", "conn", c.id, "err", err)
	reason := wire.EvictionInvalidRequestBodySize
	if fe.Reason == FrameNotRequest {
		reason = wire.EvictionInvalidRequestOperation
	}
	c.Evict(c.client, reason) // behind the replies the connection is owed
}

// serve validates a complete frame's header and hands it to the handler, or answers a
// header fault the way wire says: an eviction, a status reply, or a silent close.
//
// The frame gets the connection's next ticket (replyorder.go): what is queued while
// it is served answers it, and its reply is complete when it returns, unless the
// handler deferred it.
func (c *Conn) serve(frame []byte) {
	ticket := c.nextRequestSeq
	c.nextRequestSeq++
	c.answering, c.answeringSet = ticket, true
	if !c.serveFrame(frame, ticket) {
		c.endAnswer()
	}
	c.answeringSet = false
}

// serveFrame serves one frame as ticket; it reports whether the handler deferred
// the reply.
func (c *Conn) serveFrame(frame []byte, ticket uint64) (deferred bool) {
	s := c.shard
	header, err := wire.DecodeRequestHeader(frame, s.cfg.FrameSizeMax)
	if err != nil {
		var fault wire.HeaderFault
		if !errors.As(err, &fault) {
			panic("shard: DecodeRequestHeader returned a non-fault error: " + err.Error())
		}
		switch {
		case fault.Eviction() != 0:
			s.log.Info("connection evicted: bad request header", "conn", c.id, "err", fault)
			c.Evict(clientOf(frame), fault.Eviction())
		case fault.Status() != 0:
			view, _ := wire.ViewHeader[wire.RequestHeader](frame)
			c.ReplyStatus(view, fault.Status())
		default:
			s.log.Info("connection closed: bad request header", "conn", c.id, "err", fault)
			c.abort(fault.Error())
		}
		return false
	}
	c.client = header.Client
	body := frame[headerSizeBytes:]
	if err := wire.VerifyRequestChecksum(header.RequestChecksum, body); err != nil {
		var code wire.ErrorCode
		errors.As(err, &code)
		c.ReplyStatus(header, code)
		return false
	}
	s.counters.requestsServed++
	req := &s.clients.req
	*req = Request{Header: header, Body: body, shard: s, framer: c.framer, conn: c, ticket: Ticket(ticket)}
	s.handler.ServeRequest(c, req)
	deferred = req.deferred
	*req = Request{}
	return deferred
}

// clientOf reads the client id field of a request header that failed validation.
func clientOf(header []byte) wire.Uint128 {
	return wire.Uint128{Lo: binary.LittleEndian.Uint64(header[128:]), Hi: binary.LittleEndian.Uint64(header[136:])}
}

// ReplyStatus queues a header-only reply refusing request with status (the protocol's
// pre-commit denial): request number, operation, client, timestamp and request checksum
// echoed, body empty.
func (c *Conn) ReplyStatus(request *wire.RequestHeader, status wire.ErrorCode) error {
	b, err := c.Reserve(headerSizeBytes)
	if err != nil {
		return err
	}
	var h wire.ReplyHeader
	h.Size = headerSizeBytes
	h.Command = wire.CommandReply
	h.Cluster = request.Cluster
	h.RequestChecksum = request.RequestChecksum
	h.Client = request.Client
	h.Timestamp = request.Timestamp
	h.Request = request.Request
	h.Operation = request.Operation
	h.Status = status
	h.Put(b)
	return nil
}

// Evict sends an Eviction frame for client with reason, then closes the connection once
// it is sent. Nothing else is read from the connection.
func (c *Conn) Evict(client wire.Uint128, reason wire.EvictionReason) {
	c.evict(client, reason, 0, 0)
}

// EvictIncompatibleProtocol is Evict with reason 14 (IncompatibleProtocol), carrying
// the protocol window the server accepts, as that reason requires.
func (c *Conn) EvictIncompatibleProtocol(client wire.Uint128, window wire.ProtocolWindow) {
	c.evict(client, wire.EvictionIncompatibleProtocol, uint32(window.Max), uint32(window.Min))
}

func (c *Conn) evict(client wire.Uint128, reason wire.EvictionReason, versionMax, versionMin uint32) {
	if c.state != linkOpen {
		return
	}
	if !c.answeringSet {
		c.answerUnsolicited()
		defer c.endAnswer()
	}
	if b, err := c.Reserve(headerSizeBytes); err == nil {
		wire.PutEviction(b, client, reason, versionMax, versionMin)
	}
	// The eviction is the last thing sent: the replies owed before it still go out,
	// those of later requests are dropped.
	c.closeBefore(c.answering+1, "evicted: "+reason.String())
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
	if c.segCount > 0 {
		last := &c.segments[(c.segHead+c.segCount-1)%sendSegmentsMax]
		if !last.owned.IsZero() && cap(last.data)-len(last.data) >= n {
			start := len(last.data)
			last.data = last.data[:start+n]
			c.headBytesQueued += n
			c.queued(n)
			return last.data[start : start+n], nil
		}
	}
	// Send buffers grow with the queue (4 KiB while it is short, up to 64 KiB), so that
	// the segment bound does not cut off a client that is merely slow with many small
	// replies before the byte bound and the throttle do their work.
	size := max(n, min(max(c.queuedBytes, standingFrameBytes), sendBufferBytesMax))
	buf := c.spare
	c.spare = arena.Buffer{}
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
	c.push(sendSegment{data: buf.Full()[:n], owned: buf})
	c.headBytesQueued += n
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
		c.push(seg)
	}
	if len(parts) == 0 && done != nil {
		done.Release()
	}
	c.headBytesQueued += total
	c.queued(total)
	return nil
}

func (c *Conn) push(seg sendSegment) {
	c.segments[(c.segHead+c.segCount)%sendSegmentsMax] = seg
	c.segCount++
}

func (c *Conn) queued(n int) {
	if c.queuedBytes == 0 {
		c.sendWaitFromNs = c.shard.nowNs
		c.sentSinceMarkBytes = 0
	}
	c.queuedBytes += n
	c.shard.markDirty(c)
}

// flush submits one send for everything queued, if no send is in flight: a single
// send for one piece, a sendmsg over up to sendSegmentsMax iovecs otherwise.
func (c *Conn) flush() {
	if c.sendInFlight || c.segCount == 0 || c.state == linkAborting || c.state == linkFree {
		return
	}
	for i := range c.segCount {
		seg := &c.segments[(c.segHead+i)%sendSegmentsMax]
		c.vec.set(i, seg.data[seg.sent:])
	}
	c.submitSend(c.segCount)
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
	s := c.shard
	s.counters.bytesSent += uint64(res)
	c.consume(int(res))
	c.advance() // parked replies into the room the send made
	// Progress is a drained queue or sendProgressBytesMin sent: a reader that lets
	// through a few bytes now and then (or a kernel collapsing its receive queue
	// under a zero window) does not keep a stuck queue alive.
	c.sentSinceMarkBytes += int(res)
	if c.segCount == 0 || c.sentSinceMarkBytes >= sendProgressBytesMin {
		c.sendWaitFromNs = s.nowNs
		c.sentSinceMarkBytes = 0
	}
	switch c.state {
	case linkOpen:
		if c.segCount > 0 {
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
		if c.segCount > 0 {
			c.flush()
		}
	}
	c.maybeFinish()
}

// consume drops n sent bytes from the head of the queue, releasing what is done.
func (c *Conn) consume(n int) {
	c.queuedBytes -= n
	for n > 0 {
		seg := &c.segments[c.segHead]
		k := min(n, len(seg.data)-seg.sent)
		seg.sent += k
		n -= k
		if seg.sent < len(seg.data) {
			break
		}
		c.popHead()
	}
	// A queued segment may be empty (a zero-length reserve); drop those too.
	for c.segCount > 0 && c.segments[c.segHead].sent == len(c.segments[c.segHead].data) {
		c.popHead()
	}
}

func (c *Conn) popHead() {
	seg := &c.segments[c.segHead]
	if !seg.owned.IsZero() {
		if c.spare.IsZero() {
			c.spare = seg.owned
		} else {
			c.shard.arena.Release(seg.owned)
		}
	}
	if seg.done != nil {
		seg.done.Release()
	}
	*seg = sendSegment{}
	c.segHead = (c.segHead + 1) % sendSegmentsMax
	c.segCount--
}

// checkDeadlines runs when the connection's timer fires: it closes a connection that
// is stuck (a frame not finished in time, silence past the idle timeout, replies not
// read in time) and otherwise sets the next timer.
func (c *Conn) checkDeadlines() {
	s := c.shard
	now := s.nowNs
	if c.state == linkOpen {
		if !c.waitingForBuffer && c.frameOverdue(now, int64(s.cfg.FrameTimeout)) {
			s.logLimited(logFrameTimeout, slog.LevelInfo, "connection closed: frame timeout", "conn", c.id, "timeout", s.cfg.FrameTimeout)
			c.abort("frame timeout")
			return
		}
		if s.cfg.IdleTimeout > 0 && now-c.lastRecvNs >= int64(s.cfg.IdleTimeout) && c.segCount == 0 {
			s.logLimited(logIdleTimeout, slog.LevelInfo, "connection closed: idle timeout", "conn", c.id, "timeout", s.cfg.IdleTimeout)
			c.abort("idle timeout")
			return
		}
	}
	if c.state != linkAborting && c.sendOverdue(c.segCount > 0, now, int64(s.cfg.SendTimeout)) {
		s.logLimited(logRepliesNotRead, slog.LevelWarn, "connection closed: its client read none of its replies", "conn", c.id,
			"timeout", s.cfg.SendTimeout, "queued_bytes", c.queuedBytes, "parked_bytes", c.parkedBytes, "replies_owed", c.owed())
		c.abort("send timeout")
		return
	}
	next := now + int64(c.checkInterval())
	if s.cfg.IdleTimeout > 0 {
		next = min(next, c.lastRecvNs+int64(s.cfg.IdleTimeout))
	}
	next = c.nextDeadline(next, now, int64(s.cfg.FrameTimeout), c.segCount > 0, int64(s.cfg.SendTimeout))
	s.timers.Push(timer{deadlineNs: next, kind: timerConn, conn: c.id})
}

// checkInterval is how often an unremarkable connection's deadlines are re-checked:
// the shortest configured timeout, so none fires later than twice its value.
func (c *Conn) checkInterval() int64 {
	cfg := c.shard.cfg
	d := min(cfg.FrameTimeout, cfg.SendTimeout)
	if cfg.IdleTimeout > 0 {
		d = min(d, cfg.IdleTimeout)
	}
	return int64(d)
}

// Close closes the connection after the replies already queued are sent.
func (c *Conn) Close() { c.closeAfterFlush("closed by handler") }

func (c *Conn) closeAfterFlush(reason string) {
	c.closeBefore(c.nextRequestSeq, reason)
}

// closeBefore stops reading and closes the connection once the replies of the
// tickets before seq are sent; later ones are dropped.
func (c *Conn) closeBefore(seq uint64, reason string) {
	if !c.beginDrain(reason) {
		return
	}
	c.closeBeforeSeq = seq
	c.maybeFinish()
}

// abort closes the connection without sending what is queued.
func (c *Conn) abort(reason string) {
	if c.beginAbort(reason) {
		c.maybeFinish()
	}
}

// maybeFinish closes the socket and frees the slot once a closing connection has
// nothing in flight: only then has the kernel let go of its buffers.
func (c *Conn) maybeFinish() {
	if !c.finishable(c.segCount > 0 || c.replySeq < c.closeBeforeSeq) {
		return
	}
	s := c.shard
	c.closeSocket()
	for c.segCount > 0 {
		c.popHead()
	}
	c.releaseParked()
	if !c.spare.IsZero() {
		s.arena.Release(c.spare)
	}
	c.releaseBacklog()
	c.framer.Close()
	s.handler.ConnClosed(c)
	s.log.Debug("connection closed", "conn", c.id, "reason", c.closeReason)
	c.state = linkFree
	c.Value = nil
	c.spare, c.backlogBytes = arena.Buffer{}, 0
	s.release(c)
}
