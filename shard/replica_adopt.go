package shard

import (
	"fmt"
	"net/netip"
)

// Replica connections from outside the runtime's own sockets: the way [cluster.tls]
// layers on the plane. TLS runs off the shards (package tlsterm): a terminator
// accepts the tcp_replica sessions (TLS 1.3, ALPN "iggy-replica", its
// Config.RequiredALPN), and a dialer goroutine, called through ReplicaConfig.Dial,
// opens the outbound ones; each session, bridged to a socketpair (tlsterm.NewBridge),
// comes in through Runtime.AdoptReplica with its exporter value, which the handshake
// folds into its MACs (the channel binding). Shard 0 places it like a socket it
// accepted or dialed itself; everything after the bytes is the same.

type replicaAdoption struct {
	fd         int
	remote     netip.AddrPort
	dialedPeer int
	exporter   *[32]byte
}

// AdoptReplica hands the runtime a connected stream socket carrying a replica
// connection that did not come from its own listener or dials: the runtime's end of
// a socketpair bridging a TLS session, say. dialedPeer is the replica id this node
// dialed (then it runs the handshake as the dialer), or -1 for an inbound session;
// exporter is the TLS session's keying-material export (label
// wire.HandshakeLabelTLSExporter, empty context, 32 bytes), nil in plaintext. The
// socket must be blocking. Safe from any goroutine. On success the runtime owns fd;
// on an error the caller does and closes it.
func (rt *Runtime) AdoptReplica(fd int, remote netip.AddrPort, dialedPeer int, exporter *[32]byte) error {
	rr := rt.replica
	if rr == nil {
		return fmt.Errorf("shard: AdoptReplica without a replica plane")
	}
	h := rr.cfg.Handshake
	if dialedPeer != -1 && (dialedPeer <= int(h.Self) || dialedPeer >= int(h.ReplicaCount)) {
		return fmt.Errorf("shard: replica %d may not dial replica %d of %d", h.Self, dialedPeer, h.ReplicaCount)
	}
	return rr.adoptions.push(rt, replicaAdoption{fd: fd, remote: remote, dialedPeer: dialedPeer, exporter: exporter})
}

// EndReplicaDial tells the runtime that a dial ReplicaConfig.Dial started has failed,
// so that the peer is dialed again after the same growing delays as a refused connect
// (replica_redial.go) rather than after twice HandshakeTimeout. Safe from any
// goroutine.
func (rt *Runtime) EndReplicaDial(peer uint8) {
	rr := rt.replica
	if rr == nil {
		return
	}
	rr.dialSinceNs[peer].Store(0)
	rr.dialEnded[peer].Store(true)
	rr.dialEnds.Add(1)
	rt.shards[0].Wake()
}

// redialEndedDials arms the redial of each peer whose ReplicaConfig.Dial ended in
// failure since the last look; shard 0, every turn.
func (s *Shard) redialEndedDials() {
	rr := s.rt.replica
	ends := rr.dialEnds.Load()
	if ends == s.replica.dialEndsSeen {
		return
	}
	s.replica.dialEndsSeen = ends
	for peer := range s.replica.dials {
		if rr.dialEnded[peer].Swap(false) {
			s.redialLater(peer)
		}
	}
}

// adoptReplicaPending places the connections AdoptReplica queued; shard 0, every turn.
func (s *Shard) adoptReplicaPending() {
	for _, p := range s.rt.replica.adoptions.take() {
		plane := uint32(cookieReplicaPlane)
		if p.dialedPeer >= 0 {
			plane |= uint32(p.dialedPeer+1) << cookieDialShift
			s.replica.dials[p.dialedPeer].backoff.connected()
		}
		if p.exporter != nil {
			plane |= cookieReplicaTLS
		}
		s.handOffTo(p.fd, s.pickReplicaShard(), plane, peerNote{addr: p.remote, exporter: p.exporter})
	}
}
