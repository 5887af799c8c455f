package shard

import (
	"fmt"
	"net/netip"

	"golang.org/x/sys/unix"

	"github.com/iggy-shard/iggy-shard/fdpass"
	"github.com/iggy-shard/iggy-shard/linux"
	"github.com/iggy-shard/iggy-shard/ring"
)

// handoffs are the connections on their way from shard 0, which accepts, dials or
// adopts them, to the shard that serves them (fd passing), with the notes that travel
// beside them.
type handoffs struct {
	sender *fdpass.Sender // shard 0 only: hands accepted connections to the others
	// connSlotCount is the size of the registered-file table's connection range, into
	// which other shards' handoffs land (msg_ring send-fd); 0 in queue mode.
	connSlotCount uint32
	// notes carries the peer addresses of connections shard 0 hands over, by
	// handoff cookie; peers holds the ones received, until their connection arrives.
	notes      *Queue[peerNote]
	peers      [peerTableSize]peerNote
	nextCookie uint32 // shard 0: the cookie of the next handoff
}

// registerFileTable gives the ring a sparse registered-file table: slots
// [0, connSlotCount) receive connections handed over by shard 0 (the kernel picks a free
// one), and on shard 0 the next handoffsInFlightMax slots park files being handed over.
// The kernel caps a table at RLIMIT_NOFILE entries.
func (s *Shard) registerFileTable() error {
	limit, err := linux.OpenFilesLimit()
	if err != nil {
		return err
	}
	want := uint64(s.cfg.ConnectionsPerShardMax) + handoffsInFlightMax
	size := min(want, limit.Soft, 1<<20)
	if size <= 2*handoffsInFlightMax {
		return fmt.Errorf("RLIMIT_NOFILE %d too low for a registered-file table (run with FdPass: fdpass.ModeQueue)", limit.Soft)
	}
	if err := s.ring.RegisterFilesSparse(uint32(size)); err != nil {
		return err
	}
	s.handoff.connSlotCount = uint32(size) - handoffsInFlightMax
	return s.ring.SetFileAllocRange(0, s.handoff.connSlotCount)
}

// newSender makes shard 0's connection sender, once every shard's ring exists.
func (s *Shard) newSender() error {
	cfg := fdpass.Config{Mode: s.cfg.FdPass}
	switch s.cfg.FdPass {
	case fdpass.ModeMsgRing:
		cfg.Ring = s.ring
		cfg.InFlightMax = handoffsInFlightMax
		cfg.StagingSlotFirst = s.handoff.connSlotCount
		for _, other := range s.rt.shards {
			cfg.TargetRingFds = append(cfg.TargetRingFds, other.ring.Fd())
		}
	case fdpass.ModeQueue:
		cfg.ShardCount = len(s.rt.shards)
		cfg.Enqueue = func(target int, h fdpass.Handoff) bool {
			return s.Post(target, Message{internal: internalAdoptConn, fd: h.Fd, Value: uint64(h.Cookie)})
		}
	}
	sender, err := fdpass.NewSender(cfg)
	if err != nil {
		return err
	}
	s.handoff.sender = sender
	return nil
}

// handOffTo places a connection on target; plane is the cookie's plane bits (0 for
// a client connection, see cookieReplicaPlane), note what travels beside it.
func (s *Shard) handOffTo(fd int, target int, plane uint32, note peerNote) {
	if target == s.index || !s.canHandOff(target) {
		s.adoptPlane(fd, false, note, plane)
		return
	}
	s.handoff.nextCookie = (s.handoff.nextCookie + 1) & cookieSequenceMask
	if s.handoff.nextCookie == 0 {
		s.handoff.nextCookie = 1 // 0 means "no note"
	}
	cookie := s.handoff.nextCookie | plane
	note.cookie = cookie
	s.rt.shards[target].handoff.notes.Push(note)
	if err := s.handoff.sender.SendFd(fd, target, ring.FileIndexAlloc, cookie); err != nil {
		s.log.Warn("connection lost in handoff", "to_shard", target, "err", err)
		return
	}
	s.listener.handedOff[target]++
}

// canHandOff reports whether a handoff to target would be taken now: msg_ring mode
// has a bounded number in flight, queue mode a bounded inbox. When it would not, shard
// 0 keeps the connection rather than lose it to a burst of accepts.
func (s *Shard) canHandOff(target int) bool {
	if s.handoff.sender.Mode() == fdpass.ModeMsgRing {
		return s.handoff.sender.InFlightCount() < handoffsInFlightMax
	}
	q := s.rt.shards[target].mail.inbox[s.index] // we are its only producer: Len cannot grow under us
	return q.Len() < q.Cap()
}

// adoptHandoff installs a socket handed over by shard 0: a client connection, or a
// replica one (the plane is in the handoff cookie).
func (s *Shard) adoptHandoff(fd int, direct bool, cookie uint32) {
	s.adoptPlane(fd, direct, s.noteOf(cookie), cookie)
}

// adoptPlane installs a connection whose note (peer address, TLS exporter) is known,
// on the plane its cookie names.
func (s *Shard) adoptPlane(fd int, direct bool, note peerNote, cookie uint32) {
	if cookie&cookieReplicaPlane == 0 {
		if cookie&cookieClientTLS != 0 && note.tls == nil {
			// The note was lost (more handoffs in flight than notes), and the TLS
			// session with it; the client reconnects.
			s.log.Warn("TLS connection lost in handoff: its session was lost", "peer", note.addr.String())
			s.closeSocket(fd, direct)
			return
		}
		s.adopt(fd, direct, note.addr, note.tls)
		return
	}
	if cookie&cookieReplicaTLS != 0 && note.exporter == nil {
		// The note was lost (more handoffs in flight than notes): without the
		// session's exporter the handshake would fail anyway; the peer redials.
		s.logRefusal(note.addr, "the TLS session's exporter was lost in the handoff")
		s.closeSocket(fd, direct)
		s.endDial(int(cookie>>cookieDialShift&cookieDialMask) - 1)
		return
	}
	s.adoptReplica(fd, direct, note.addr, int(cookie>>cookieDialShift&cookieDialMask)-1, note.exporter)
}

// completeHandoff handles the completions of connection handoffs: on a target, a
// connection arriving in its registered-file table; on shard 0, the end of a handoff.
func (s *Shard) completeHandoff(cqe *ring.CQE) {
	if h, ok := fdpass.Incoming(cqe); ok {
		s.rt.handoffsArrived[s.index].Add(1)
		s.adoptHandoff(h.Fd, true, h.Cookie)
		return
	}
	if s.handoff.sender == nil {
		panic(fmt.Sprintf("shard %d: handoff completion without a sender", s.index))
	}
	if out, done := s.handoff.sender.Complete(cqe); done && out.Err != nil {
		s.log.Warn("connection lost in handoff", "to_shard", out.Shard, "err", out.Err)
		s.listener.handedOff[out.Shard]-- // it will not arrive
	}
}

// peerTableSize bounds the peer addresses a shard holds for connections on their way
// to it: more handoffs than this in flight at once only cost the oldest their address.
const peerTableSize = 1024

// peerNote is a handed-over connection's peer address, keyed by its handoff cookie;
// for a replica connection over TLS the session's exporter value (the handshake
// binds its MACs to it), for a client's TLS connection the session itself.
type peerNote struct {
	cookie   uint32
	addr     netip.AddrPort
	exporter *[32]byte
	tls      *tlsHandover
}

// cookieClientTLS marks a client connection whose TLS session travels in its note
// (the bit that is cookieReplicaTLS on the replica plane).
const cookieClientTLS = cookieReplicaTLS

// peerOf returns the peer address shard 0 noted for the handoff cookie, or the zero
// AddrPort when it was lost (the note queue was full). Shard 0 pushes the note before
// it submits the handoff, so the note is in the queue by the time the connection is.
func (s *Shard) peerOf(cookie uint32) netip.AddrPort {
	return s.noteOf(cookie).addr
}

// noteOf returns the whole note shard 0 left for the handoff cookie, or the zero note.
func (s *Shard) noteOf(cookie uint32) peerNote {
	for {
		n, ok := s.handoff.notes.Pop()
		if !ok {
			break
		}
		if lost := s.handoff.peers[n.cookie%peerTableSize]; lost.tls != nil {
			lost.tls.transport.Close() // its connection will be closed as it arrives
		}
		s.handoff.peers[n.cookie%peerTableSize] = n
	}
	if n := s.handoff.peers[cookie%peerTableSize]; n.cookie == cookie && cookie != 0 {
		s.handoff.peers[cookie%peerTableSize] = peerNote{} // taken: do not keep its exporter alive
		return n
	}
	return peerNote{}
}

// peerAddress asks the kernel for a socket's peer (getpeername): once per accepted
// connection, on shard 0, which still holds a plain descriptor.
func peerAddress(fd int) netip.AddrPort {
	sa, err := unix.Getpeername(fd)
	if err != nil {
		return netip.AddrPort{}
	}
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return netip.AddrPortFrom(netip.AddrFrom4(a.Addr), uint16(a.Port))
	case *unix.SockaddrInet6:
		return netip.AddrPortFrom(netip.AddrFrom16(a.Addr).Unmap(), uint16(a.Port))
	}
	return netip.AddrPort{}
}
