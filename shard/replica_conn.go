package shard

import (
	"crypto/rand"
	"fmt"
	"net/netip"

	"golang.org/x/sys/unix"

	"github.com/iggy-shard/iggy-shard/replica"
	"github.com/iggy-shard/iggy-shard/ring"
	"github.com/iggy-shard/iggy-shard/wire"
)

// Completion kinds and timer kinds of the replica plane, numbered clear of the
// client plane's (shard.go, timer.go).
const (
	kindReplicaAccept completionKind = iota + 32
	kindReplicaConnect
	kindReplicaRecv
	kindReplicaSend
	kindReplicaCancel
)

const (
	timerReplicaConn   timerKind = iota + 32 // a connection's handshake and send deadlines
	timerReplicaDial                         // shard 0's reconnect period
	timerReplicaAccept                       // re-arm the replica accept after an error
)

// replicaConnsPerShardMax bounds a shard's replica connections, registered or
// handshaking: a roster has at most 254 peers, and a handshake that does not end is
// closed after HandshakeTimeout, so more than this in flight is a flood.
const replicaConnsPerShardMax = 1024

// replicaConn is one replica connection on its owner shard.
// It is handshaking until its handshake ends, and drains only to send a refusal.
type replicaConn struct {
	link
	framer *replicaFramer

	dialed     bool // this node dialed (it is the lower id)
	peer       uint8
	registered bool
	acceptor   *replica.Acceptor
	dialer     *replica.Dialer

	dirty               bool // in its shard's replica dirty list
	handshakeDeadlineNs int64

	// queues hold the frames to send by class (replica_queue.go); queued counts
	// them all. batch names the class of each frame of the sendmsg in flight.
	queues     [replicaClassCount]replicaOutQueue
	queued     int
	queueBytes int
	batch      [sendVectorMax]ReplicaClass
	batchLen   int
}

// adoptReplica installs a replica connection and starts its handshake: as the dialer
// of dialedPeer, or as the acceptor when dialedPeer is -1; exporter binds the MACs to
// its TLS session (nil in plaintext).
func (s *Shard) adoptReplica(fd int, direct bool, remote netip.AddrPort, dialedPeer int, exporter *[32]byte) {
	rr := s.rt.replica
	r := s.replica
	if s.stopping || r == nil || r.conns.live >= replicaConnsPerShardMax {
		if r != nil && !s.stopping {
			s.logRefusal(remote, "too many replica connections on the shard")
		}
		s.closeSocket(fd, direct)
		s.endDial(dialedPeer)
		return
	}
	framer, err := newReplicaFramer(s.arena, rr.cfg.Handshake.Cluster, rr.cfg.MessageSizeMax)
	if err != nil {
		s.logRefusal(remote, "no read buffer")
		s.closeSocket(fd, direct)
		s.endDial(dialedPeer)
		return
	}
	slot, c := r.conns.take(func() *replicaConn { return &replicaConn{link: link{shard: s}} })
	queues := c.queues
	// The handshake frames are queued too, beyond the control class's capacity.
	queues[ReplicaControl].resize(rr.capacity[ReplicaControl] + replicaHandshakeSlots)
	queues[ReplicaPartition].resize(rr.capacity[ReplicaPartition])
	*c = replicaConn{link: newLink(s, slot, c.id, replicaLinkKinds, fd, direct, remote, linkHandshaking),
		framer: framer, queues: queues, handshakeDeadlineNs: s.clock.nowNs + int64(rr.cfg.HandshakeTimeout)}
	var nonce [wire.HandshakeNonceSize]byte
	rand.Read(nonce[:])
	hs := rr.cfg.Handshake
	hs.TLSExporter = exporter
	if dialedPeer >= 0 {
		d, hello, err := replica.NewDialer(hs, uint8(dialedPeer), nonce)
		if err != nil {
			panic("shard: shard 0 dialed a peer the directional rule forbids: " + err.Error())
		}
		c.dialer, c.dialed, c.peer = d, true, uint8(dialedPeer)
		if c.sendHandshake(hello); c.state != linkHandshaking {
			return // no buffer for it: closed
		}
	} else {
		c.acceptor = replica.NewAcceptor(hs, nonce)
	}
	c.armRecv()
	s.clock.timers.Push(timer{deadlineNs: c.handshakeDeadlineNs, kind: timerReplicaConn, conn: c.id})
}

// replicaConnOf returns the live replica connection id names, or nil.
func (s *Shard) replicaConnOf(id ConnID) *replicaConn {
	r := s.replica
	if r == nil || id.Shard() != s.index {
		return nil
	}
	c := r.conns.at(id.slot())
	if c == nil || c.id != id || c.state == linkFree {
		return nil
	}
	return c
}

func (c *replicaConn) armRecv() {
	target := c.framer.RecvTarget()
	if len(target) == 0 {
		panic("shard: replica framer offers no room to receive into")
	}
	flags := 0
	if c.framer.InBigFrame() {
		// The rest of one large frame: one completion when it is all in, not one
		// per segment the loopback or the NIC delivers (BenchmarkReplicaThroughput,
		// 1 MiB frames).
		flags = unix.MSG_WAITALL
	}
	sqe := c.shard.getSQE()
	sqe.PrepareRecv(c.fd, target, flags)
	c.markFixed(sqe)
	sqe.UserData = userData(kindReplicaRecv, c.id)
	c.recvInFlight = true
}

func (c *replicaConn) onRecv(res int32) {
	c.recvInFlight = false
	s := c.shard
	if c.state == linkAborting || c.state == linkDraining {
		c.maybeFinish()
		return
	}
	switch {
	case res == 0:
		if c.state == linkHandshaking {
			// A refusal the protocol does not send (AuthRequired, MacMismatch)
			// reaches the other side as a close.
			c.refuseHandshake("the peer closed the connection during the handshake")
			c.close("peer closed")
			return
		}
		c.close("peer closed")
		return
	case res < 0:
		if errno := unix.Errno(-res); errno == unix.EINTR || errno == unix.EAGAIN {
			c.armRecv()
			return
		}
		c.close(unix.Errno(-res).Error())
		return
	}
	s.counters.replica.bytesReceived.Add(uint64(res))
	c.framer.Received(int(res))
	frameCompleted := false
	for c.state == linkHandshaking || c.state == linkOpen {
		frame, err := c.framer.Next()
		if err != nil {
			c.refuseFrame(err)
			return
		}
		if frame == nil {
			break
		}
		frameCompleted = true
		if c.state == linkHandshaking {
			c.handshakeFrame(frame)
		} else {
			c.serve(frame)
		}
	}
	if c.state != linkHandshaking && c.state != linkOpen {
		c.maybeFinish() // a refusal may have freed it already; then this does nothing
		return
	}
	c.trackFrame(c.framer.Partial(), frameCompleted)
	c.armRecv()
}

// refuseFrame closes a connection whose peer sent a frame that failed validation.
func (c *replicaConn) refuseFrame(err error) {
	s := c.shard
	if c.state == linkHandshaking {
		c.refuseHandshake(err.Error())
		return
	}
	s.counters.replica.framesRefused.Add(1)
	s.logLimitedReplica(replicaLogBadFrame, "replica connection closed: bad frame", "peer", c.peer,
		"peer_address", c.remote.String(), "err", err)
	c.close("bad frame")
}

func (c *replicaConn) handshakeFrame(frame []byte) {
	var step replica.Step
	if c.dialed {
		step = c.dialer.Receive(frame)
	} else {
		step = c.acceptor.Receive(frame)
	}
	if step.Send != nil {
		c.sendHandshake(step.Send)
	}
	if step.Err != nil {
		c.refuseHandshake(step.Err.Error())
		return
	}
	if !step.Done {
		return
	}
	if !c.dialed {
		c.peer = c.acceptor.Peer
	}
	c.register()
}

// refuseHandshake ends a connection whose handshake failed: it sends what the
// handshake owes (a Challenge carrying the refusal) and closes.
func (c *replicaConn) refuseHandshake(reason string) {
	s := c.shard
	s.counters.replica.handshakesRefused.Add(1)
	args := []any{"dialed", c.dialed}
	if c.dialed {
		args = append(args, "peer", c.peer)
	}
	s.logRefusal(c.remote, reason, args...)
	c.drain("handshake refused")
}

// register makes the connection its peer's: the owner table names this shard, and
// frames flow. A peer already registered keeps its connection; this one is refused.
func (c *replicaConn) register() {
	s := c.shard
	rr := s.rt.replica
	if !rr.owners[c.peer].CompareAndSwap(0, int32(s.index+1)) {
		c.refuseHandshake(fmt.Sprintf("a connection to replica %d is already up", c.peer))
		return
	}
	c.registered = true
	c.state = linkOpen
	c.framer.EndHandshake()
	c.acceptor, c.dialer = nil, nil
	c.sendWaitFromNs = s.clock.nowNs // the handshake's timer, when it fires, turns to the send and frame deadlines
	s.replica.links[c.peer] = c
	if c.dialed {
		s.endDial(int(c.peer))
	}
	s.log.Info("replica connected", "peer", c.peer, "peer_address", c.remote.String(), "dialed", c.dialed)
	if o := s.replica.observer; o != nil {
		o.ReplicaConnected(s, c.peer)
	}
}

// endDial tells shard 0 that the dial of peer has ended (registered or failed), so it
// may dial again when the peer is down.
func (s *Shard) endDial(peer int) {
	if peer >= 0 && s.rt.replica != nil {
		s.rt.replica.dialSinceNs[peer].Store(0)
	}
}

// serve hands a validated frame to the handler.
func (c *replicaConn) serve(frame []byte) {
	s := c.shard
	s.counters.replica.framesReceived.Add(1)
	h, _ := wire.ViewHeader[wire.GenericHeader](frame)
	f := &s.replica.frame
	*f = ReplicaFrame{Peer: c.peer, Header: h, Body: frame[headerSizeBytes:], conn: c}
	s.replica.handler.ServeReplica(s, f)
	*f = ReplicaFrame{}
}

// sendHandshake queues a copy of a handshake frame (the state machines reuse theirs).
func (c *replicaConn) sendHandshake(frame []byte) {
	s := c.shard
	b, err := s.arena.Acquire(len(frame))
	if err != nil {
		c.close("no buffer for a handshake frame")
		return
	}
	data := b.Full()[:len(frame)]
	copy(data, frame)
	c.enqueue(replicaOut{data: data, buffer: b, from: s.index, class: ReplicaControl, handshake: true})
}

// flushReplicaSends flushes the connections that queued frames this turn, once the
// handler's Tick is done: the frames of a turn leave in one sendmsg.
func (s *Shard) flushReplicaSends() {
	r := s.replica
	for i, c := range r.dirty {
		c.dirty = false
		c.flush()
		r.dirty[i] = nil
	}
	r.dirty = r.dirty[:0]
}

func (c *replicaConn) onSend(res int32) {
	c.sendInFlight = false
	s := c.shard
	if res < 0 {
		if c.state != linkAborting {
			c.close(unix.Errno(-res).Error())
		}
		c.maybeFinish()
		return
	}
	s.counters.replica.bytesSent.Add(uint64(res))
	if res > 0 {
		c.sendWaitFromNs = s.clock.nowNs
	}
	c.sent(int(res))
	switch c.state {
	case linkHandshaking, linkOpen, linkDraining:
		c.flush()
	}
	c.maybeFinish()
}

// drain stops reading and closes the connection once what is queued is sent: the
// refusal a handshake owes its peer.
func (c *replicaConn) drain(reason string) {
	if c.beginDrain(reason) {
		c.unregister()
		c.maybeFinish()
	}
}

// close closes the connection, dropping what is queued.
func (c *replicaConn) close(reason string) {
	if c.beginAbort(reason) {
		c.unregister()
		c.maybeFinish()
	}
}

// unregister takes the connection out of the owner table, so that no frame is sent
// to it any more and shard 0 dials the peer again.
func (c *replicaConn) unregister() {
	s := c.shard
	if c.dialed && !c.registered {
		s.endDial(int(c.peer))
	}
	if !c.registered {
		return
	}
	c.registered = false
	s.replica.links[c.peer] = nil
	s.rt.replica.owners[c.peer].Store(0)
	s.log.Info("replica disconnected", "peer", c.peer, "peer_address", c.remote.String())
	if o := s.replica.observer; o != nil {
		o.ReplicaDisconnected(s, c.peer)
	}
}

// maybeFinish frees a closing connection once the kernel holds none of its buffers.
func (c *replicaConn) maybeFinish() {
	if c.state == linkDraining && !c.recvInFlight && !c.sendInFlight && c.queued > 0 {
		c.flush() // the refusal
	}
	if !c.finishable(c.queued > 0) {
		return
	}
	s := c.shard
	c.closeSocket()
	c.dropQueued()
	c.framer.Close()
	s.log.Debug("replica connection closed", "peer", c.peer, "peer_address", c.remote.String(), "reason", c.closeReason)
	queues, dirty := c.queues, c.dirty
	*c = replicaConn{link: link{shard: s, id: c.id}, queues: queues, dirty: dirty} // a dirty entry finds it free and flushes nothing
	s.replica.conns.put(c.id.slot())
}

// checkDeadlines runs when the connection's timer fires: a handshake past its time,
// or a queue the peer has not read for SendTimeout, closes it.
func (c *replicaConn) checkDeadlines() {
	s := c.shard
	now := s.clock.nowNs
	switch c.state {
	case linkHandshaking:
		if now >= c.handshakeDeadlineNs {
			c.refuseHandshake("handshake timeout")
			c.close("handshake timeout")
			return
		}
		s.clock.timers.Push(timer{deadlineNs: c.handshakeDeadlineNs, kind: timerReplicaConn, conn: c.id})
	case linkDraining:
		// A refusal the peer does not take within the handshake's time is dropped.
		if now >= c.handshakeDeadlineNs {
			c.close("refusal not read")
			return
		}
		s.clock.timers.Push(timer{deadlineNs: c.handshakeDeadlineNs, kind: timerReplicaConn, conn: c.id})
	case linkOpen:
		if c.frameOverdue(now, int64(s.cfg.FrameTimeout)) {
			s.logLimitedReplica(replicaLogBadFrame, "replica connection closed: frame timeout", "peer", c.peer,
				"timeout", s.cfg.FrameTimeout)
			c.close("frame timeout")
			return
		}
		if c.sendOverdue(c.queued > 0, now, int64(s.cfg.SendTimeout)) {
			s.log.Warn("replica connection closed: the peer read nothing", "peer", c.peer, "timeout", s.cfg.SendTimeout,
				"queued_frames", c.queued, "queued_bytes", c.queueBytes)
			c.close("send timeout")
			return
		}
		next := c.nextDeadline(now+int64(min(s.cfg.SendTimeout, s.cfg.FrameTimeout)), now, int64(s.cfg.FrameTimeout),
			c.queued > 0, int64(s.cfg.SendTimeout))
		s.clock.timers.Push(timer{deadlineNs: next, kind: timerReplicaConn, conn: c.id})
	}
}

// completeReplica acts on a replica-plane completion.
func (s *Shard) completeReplica(kind completionKind, rest uint64, cqe *ring.CQE) {
	switch kind {
	case kindReplicaAccept:
		s.replica.listener.onCompletion(s, cqe)
	case kindReplicaConnect:
		s.onReplicaConnect(int(rest), cqe.Res)
	case kindReplicaRecv, kindReplicaSend:
		id := s.linkOf(rest)
		c := s.replicaConnOf(id)
		if c == nil {
			panic(s.goneLink(id))
		}
		if kind == kindReplicaRecv {
			c.onRecv(cqe.Res)
		} else {
			c.onSend(cqe.Res)
		}
	case kindReplicaCancel:
	}
}

// fireReplicaTimer acts on a replica-plane timer.
func (s *Shard) fireReplicaTimer(t timer) {
	switch t.kind {
	case timerReplicaConn:
		if c := s.replicaConnOf(t.conn); c != nil {
			c.checkDeadlines()
		}
	case timerReplicaDial:
		s.onDialTimer(t)
	case timerReplicaAccept:
		s.replica.listener.onRetry(s)
	}
}

// stopReplica begins a stop: no accepts, no dials, and every replica connection
// closes (consensus frames still queued are dropped; the peers' VSR recovers them).
func (s *Shard) stopReplica() {
	if s.replica == nil {
		return
	}
	s.replica.listener.stop(s)
	for peer := range s.replica.dials {
		d := &s.replica.dials[peer]
		if d.connecting && !d.cancelSent {
			d.cancelSent = true
			s.submitCancel(userData(kindReplicaConnect, ConnID(peer)), userData(kindReplicaCancel, 0))
		}
	}
	for _, c := range s.replica.conns.items {
		if c.state != linkFree {
			c.close("shutdown")
		}
	}
}

// replicaStopped reports whether the replica plane of the shard has nothing left.
func (s *Shard) replicaStopped() bool {
	r := s.replica
	if r == nil {
		return true
	}
	if r.conns.live > 0 || r.listener.fd >= 0 {
		return false
	}
	for i := range r.dials {
		if r.dials[i].connecting {
			return false
		}
	}
	return true
}

// replicaTurn is the replica plane's work at the top of every turn.
func (s *Shard) replicaTurn() {
	if len(s.replica.releases) > 0 {
		s.retryReleases()
	}
	if len(s.replica.lentReturnsKept) > 0 {
		s.retryLentReturns()
	}
	if s.index == 0 {
		s.adoptReplicaPending()
		s.redialEndedDials()
	}
}
