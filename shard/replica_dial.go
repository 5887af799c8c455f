package shard

import (
	"net/netip"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/iggy-shard/iggy-shard/linux"
	"github.com/iggy-shard/iggy-shard/ring"
)

// A handoff cookie names the connection's plane, so that a replica connection can
// never be taken for a client's (the peer-address note, which may be lost, is not
// relied on for it):
//
//	31  30           22 21  20               0
//	+---+--------------+---+-----------------+
//	| R | dialed+1 (9) | T |  sequence (21)  |
//	+---+--------------+---+-----------------+
//
// R: a replica connection; dialed+1: the replica id dialed, plus one (0: an inbound
// connection, whose peer the handshake names); T: a TLS session, whose exporter
// travels in the peer note.
const (
	cookieSequenceMask = 1<<21 - 1
	cookieReplicaTLS   = 1 << 21
	cookieDialShift    = 22
	cookieDialMask     = 1<<9 - 1
	cookieReplicaPlane = 1 << 31
)

// replicaListener is shard 0's replica listener (paused a moment after any failure)
// and dialing state.
type replicaListener struct {
	acceptor
	// dialTimerDueNs is the deadline of the dial timer armed last (0: none).
	dialTimerDueNs int64
}

func newReplicaListener(fd int) replicaListener {
	return replicaListener{acceptor: acceptor{fd: fd, completion: kindReplicaAccept, cancel: kindReplicaCancel,
		retry: timerReplicaAccept, policy: replicaAccept{}}}
}

// replicaAccept is the replica plane's acceptPolicy.
type replicaAccept struct{}

func (replicaAccept) accepted(s *Shard, fd int) {
	if s.stopping {
		unix.Close(fd)
		return
	}
	if err := linux.SetNoDelay(fd, true); err != nil {
		s.log.Debug("TCP_NODELAY failed", "err", err)
	}
	s.handOffTo(fd, s.pickReplicaShard(), cookieReplicaPlane, peerNote{addr: peerAddress(fd)})
}

func (replicaAccept) failed(s *Shard, _ *acceptor, errno unix.Errno) time.Duration {
	s.logLimitedReplica(replicaLogDialFailed, "replica accept failed", "err", errno)
	// Out of descriptors or memory, most likely: retry after a pause.
	return acceptBackoffMin
}

// replicaDial is shard 0's outbound connection to one higher-id peer while its connect
// is in flight.
type replicaDial struct {
	fd         int
	connecting bool
	cancelSent bool
	startedNs  int64
	backoff    redialBackoff
	// sockaddr is the connect's address; heap memory the kernel reads after submit.
	sockaddr *unix.RawSockaddrInet6
	length   uint32
}

// startReplica begins shard 0's replica work when the loop starts: accept, and dial
// every higher-id peer now (then every ReconnectPeriod, sooner after a failed
// connect: replica_redial.go).
func (s *Shard) startReplica() {
	if s.replica == nil || s.index != 0 {
		return
	}
	s.replica.listener.arm(s)
	s.dialPeers()
}

// pickReplicaShard places a replica connection: round-robin, skipping shard 0 unless
// configured (ShardZero) or alone. Replica connections are few and long-lived, and
// each carries the traffic of many groups, so spreading them is what matters.
func (s *Shard) pickReplicaShard() int {
	r := s.replica
	n := len(s.rt.shards)
	first := 1
	if n == 1 || s.rt.replica.cfg.ShardZero {
		first = 0
	}
	span := n - first
	target := first + r.nextShard%span
	r.nextShard = (r.nextShard + 1) % span
	return target
}

// dialPeers dials every higher-id peer that has no connection, none being dialed and
// no dialed connection in its handshake; then sets the next round.
func (s *Shard) dialPeers() {
	rr := s.rt.replica
	r := s.replica
	for peer := int(rr.cfg.Handshake.Self) + 1; peer < len(rr.peers); peer++ {
		d := &r.dials[peer]
		if d.connecting {
			if s.clock.nowNs-d.startedNs >= int64(rr.cfg.ReconnectPeriod) && !d.cancelSent {
				// A connect to an address that drops SYNs takes minutes to fail.
				d.cancelSent = true
				s.submitCancel(userData(kindReplicaConnect, ConnID(peer)), userData(kindReplicaCancel, 0))
			}
			continue
		}
		if rr.owners[peer].Load() != 0 || !d.backoff.ready(s.clock.nowNs) {
			continue
		}
		if since := rr.dialSinceNs[peer].Load(); since != 0 && s.clock.nowNs-since < 2*int64(rr.cfg.HandshakeTimeout) {
			continue
		}
		if rr.cfg.Dial != nil {
			rr.dialSinceNs[peer].Store(max(s.clock.nowNs, 1))
			rr.cfg.Dial(uint8(peer), rr.peers[peer])
			continue
		}
		s.dial(peer)
	}
	s.armDialTimer(s.clock.nowNs + int64(rr.cfg.ReconnectPeriod))
}

// dial starts an io_uring connect to peer: a blocking socket, for which io_uring
// polls the connect's completion like any other operation (no goroutine, no wait).
func (s *Shard) dial(peer int) {
	rr := s.rt.replica
	d := &s.replica.dials[peer]
	addr := rr.peers[peer]
	family := unix.AF_INET
	if addr.Addr().Is6() && !addr.Addr().Is4In6() {
		family = unix.AF_INET6
	}
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		s.logLimitedReplica(replicaLogDialFailed, "replica dial failed", "peer", peer, "address", addr.String(), "err", err)
		s.dialFailed(peer)
		return
	}
	s.counters.replica.dials.Add(1)
	if d.sockaddr == nil {
		d.sockaddr = new(unix.RawSockaddrInet6)
	}
	d.length = putSockaddr(d.sockaddr, addr, family)
	d.fd, d.connecting, d.cancelSent, d.startedNs = fd, true, false, s.clock.nowNs
	sqe := s.getSQE()
	*sqe = ring.SQE{Opcode: ring.OpConnect, Fd: int32(fd), Addr: uint64(uintptr(unsafe.Pointer(d.sockaddr))), Off: uint64(d.length)}
	sqe.UserData = userData(kindReplicaConnect, ConnID(peer))
}

// putSockaddr writes addr as a struct sockaddr_in or sockaddr_in6 into sa and
// returns its length. The port is in network byte order, the family in host order.
func putSockaddr(sa *unix.RawSockaddrInet6, addr netip.AddrPort, family int) uint32 {
	*sa = unix.RawSockaddrInet6{}
	port := (*[2]byte)(unsafe.Pointer(&sa.Port))
	port[0], port[1] = byte(addr.Port()>>8), byte(addr.Port())
	if family == unix.AF_INET {
		sa4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		sa4.Family = unix.AF_INET
		sa4.Addr = addr.Addr().Unmap().As4()
		return unix.SizeofSockaddrInet4
	}
	sa.Family = unix.AF_INET6
	sa.Addr = addr.Addr().As16()
	return unix.SizeofSockaddrInet6
}

func (s *Shard) onReplicaConnect(peer int, res int32) {
	rr := s.rt.replica
	d := &s.replica.dials[peer]
	fd := d.fd
	d.fd, d.connecting = -1, false
	if res < 0 || s.stopping {
		unix.Close(fd)
		if res < 0 && !(s.stopping && unix.Errno(-res) == unix.ECANCELED) {
			s.logRefusal(rr.peers[peer], "dial failed: "+unix.Errno(-res).Error(), "peer", peer)
		}
		if res < 0 {
			s.dialFailed(peer)
		}
		return
	}
	d.backoff.connected()
	if err := linux.SetNoDelay(fd, true); err != nil {
		s.log.Debug("TCP_NODELAY failed", "err", err)
	}
	rr.dialSinceNs[peer].Store(max(s.clock.nowNs, 1))
	s.handOffTo(fd, s.pickReplicaShard(), cookieReplicaPlane|uint32(peer+1)<<cookieDialShift, peerNote{addr: rr.peers[peer]})
}
