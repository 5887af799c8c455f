package shard

import (
	"encoding/binary"
	"errors"
	"log/slog"
	"net/netip"

	"github.com/iggy-shard/iggy-shard/arena"
	"github.com/iggy-shard/iggy-shard/wire"
)

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

// Conn is a client connection on its shard. Its methods must be called from that
// shard's goroutine; another shard refers to it by ConnID and posts a Message.
type Conn struct {
	link   // its socket and lifecycle; its recv in flight is the multishot one, or:
	framer *Framer
	// recvDirect: the recv in flight reads into the frame buffer (framer.Space), not
	// the receive ring (conn_recv.go, armRecvDirect).
	recvDirect bool

	throttled bool // not reading: too many reply bytes queued, or request bytes retained
	// waitingForBuffer: not reading because the arena had no buffer for its frame;
	// it is in its shard's bufferWaiters until one comes back.
	waitingForBuffer bool
	// retainedBytes is the size of the request buffers the handler retained and
	// has not released yet (Request.Retain, Frame.Release).
	retainedBytes int
	resumePending bool         // in its shard's resumable list
	in            inputBacklog // what was received and could not be served yet (conn_recv.go)
	lastRecvNs    int64
	client        wire.Uint128 // the client id of the last valid request, for evictions
	order         replyOrder   // which request's reply goes next (replyorder.go)
	out           sendQueue    // the replies on their way out (sendqueue.go)
	inDirty       bool         // in its shard's list of connections to flush
	tls           *tlsRecords  // its TLS session, run on the shard (conn_tls.go); nil for plain TCP
	// waitingForPipe: the spliced reply at the head of its queue waits for a pipe;
	// it is in its shard's line for a pipe (splicer.waiters).
	waitingForPipe bool
	splicing       *splicedReply // the spliced reply whose step is in flight (splice.go)

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
		order: replyOrder{closeBeforeSeq: ^uint64(0), parked: c.order.parked}}
	c.lastRecvNs = s.clock.nowNs
	c.armRecv()
	s.clock.timers.Push(timer{deadlineNs: s.clock.nowNs + int64(c.checkInterval()), kind: timerConn, conn: c.id})
	return nil
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
	ticket := c.order.nextRequestSeq
	c.order.nextRequestSeq++
	c.order.answering, c.order.answeringSet = ticket, true
	if !c.serveFrame(frame, ticket) {
		c.endAnswer()
	}
	c.order.answeringSet = false
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
	if !c.order.answeringSet {
		c.answerUnsolicited()
		defer c.endAnswer()
	}
	if b, err := c.Reserve(headerSizeBytes); err == nil {
		wire.PutEviction(b, client, reason, versionMax, versionMin)
	}
	// The eviction is the last thing sent: the replies owed before it still go out,
	// those of later requests are dropped.
	c.closeBefore(c.order.answering+1, "evicted: "+reason.String())
}

// checkDeadlines runs when the connection's timer fires: it closes a connection that
// is stuck (a frame not finished in time, silence past the idle timeout, replies not
// read in time) and otherwise sets the next timer.
func (c *Conn) checkDeadlines() {
	s := c.shard
	now := s.clock.nowNs
	if c.state == linkOpen {
		if !c.waitingForBuffer && c.frameOverdue(now, int64(s.cfg.FrameTimeout)) {
			s.logLimited(logFrameTimeout, slog.LevelInfo, "connection closed: frame timeout", "conn", c.id, "timeout", s.cfg.FrameTimeout)
			c.abort("frame timeout")
			return
		}
		if s.cfg.IdleTimeout > 0 && now-c.lastRecvNs >= int64(s.cfg.IdleTimeout) && c.out.count == 0 {
			s.logLimited(logIdleTimeout, slog.LevelInfo, "connection closed: idle timeout", "conn", c.id, "timeout", s.cfg.IdleTimeout)
			c.abort("idle timeout")
			return
		}
	}
	if deadline, ok := c.spliceDeadline(); ok && now >= deadline && c.state != linkAborting {
		s.log.Info("connection closed: a spliced reply outlived its plan", "conn", c.id)
		c.abort("spliced reply overdue")
		return
	}
	if c.waitingForPipe && s.splice.pipes.available() {
		s.markDirty(c) // woken by no pipe given back (the one woken closed): try again
	}
	if c.state != linkAborting && c.sendOverdue(c.sendPending(), now, int64(s.cfg.SendTimeout)) {
		s.logLimited(logRepliesNotRead, slog.LevelWarn, "connection closed: its client read none of its replies", "conn", c.id,
			"timeout", s.cfg.SendTimeout, "queued_bytes", c.out.bytes, "parked_bytes", c.order.parkedBytes, "replies_owed", c.owed())
		c.abort("send timeout")
		return
	}
	next := now + int64(c.checkInterval())
	if s.cfg.IdleTimeout > 0 {
		next = min(next, c.lastRecvNs+int64(s.cfg.IdleTimeout))
	}
	if deadline, ok := c.spliceDeadline(); ok {
		next = min(next, deadline)
	}
	next = c.nextDeadline(next, now, int64(s.cfg.FrameTimeout), c.sendPending(), int64(s.cfg.SendTimeout))
	s.clock.timers.Push(timer{deadlineNs: next, kind: timerConn, conn: c.id})
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
	c.closeBefore(c.order.nextRequestSeq, reason)
}

// closeBefore stops reading and closes the connection once the replies of the
// tickets before seq are sent; later ones are dropped.
func (c *Conn) closeBefore(seq uint64, reason string) {
	if !c.beginDrain(reason) {
		return
	}
	c.order.closeBeforeSeq = seq
	c.maybeFinish()
}

// abort closes the connection without sending what is queued.
func (c *Conn) abort(reason string) {
	if c.beginAbort(reason) {
		c.cancelSplice()
		c.maybeFinish()
	}
}

// maybeFinish closes the socket and frees the slot once a closing connection has
// nothing in flight: only then has the kernel let go of its buffers.
func (c *Conn) maybeFinish() {
	owing := c.out.count > 0 || c.order.replySeq < c.order.closeBeforeSeq
	if c.tls != nil && !owing && c.state == linkDraining {
		owing = c.tlsOwing()
	}
	if !c.finishable(owing) {
		return
	}
	s := c.shard
	c.closeSocket()
	for c.out.count > 0 {
		c.out.popHead(s)
	}
	c.releaseParked()
	if !c.out.spare.IsZero() {
		s.arena.Release(c.out.spare)
	}
	c.releaseBacklog()
	c.framer.Close()
	if c.tls != nil {
		c.endTLS()
	}
	s.handler.ConnClosed(c)
	s.log.Debug("connection closed", "conn", c.id, "reason", c.closeReason)
	c.state = linkFree
	c.Value = nil
	c.out.spare, c.in.bytes = arena.Buffer{}, 0
	s.release(c)
}
