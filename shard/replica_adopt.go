package shard

import (
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
)

// Replica connections from outside the runtime's own sockets: the way [cluster.tls]
// layers on the plane. TLS runs off the shards (package tlsterm): a terminator
// accepts the tcp_replica sessions (TLS 1.3, ALPN "iggy-replica", its
// Config.RequiredALPN), and a dialer goroutine, called through ReplicaConfig.Dial,
// opens the outbound ones; each session, bridged to a socketpair (tlsterm.NewBridge),
// comes in through Runtime.AdoptReplica with its exporter value, which the handshake
// folds into its MACs (the channel binding). Shard 0 places it like a socket it
// accepted or dialed itself; everything after the bytes is the same.

// replicaAdoptions are replica connections given to AdoptReplica, on their way to
// shard 0: the lock is between the goroutines that adopt and shard 0 only, taken
// once per connection.
type replicaAdoptions struct {
	mu      sync.Mutex
	pending []replicaAdoption
	closed  bool
	count   atomic.Int32 // len(pending), read by shard 0 every turn without the lock
}

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
	a := &rr.adoptions
	a.mu.Lock()
	if a.closed || rt.stopping.Load() {
		a.mu.Unlock()
		return ErrRuntimeStopped
	}
	a.pending = append(a.pending, replicaAdoption{fd: fd, remote: remote, dialedPeer: dialedPeer, exporter: exporter})
	a.count.Store(int32(len(a.pending)))
	a.mu.Unlock()
	rt.shards[0].Wake()
	return nil
}

// EndReplicaDial tells the runtime that a dial ReplicaConfig.Dial started has failed,
// so that the peer is dialed again at the next ReconnectPeriod rather than after twice
// HandshakeTimeout. Safe from any goroutine.
func (rt *Runtime) EndReplicaDial(peer uint8) {
	if rt.replica != nil {
		rt.replica.dialSinceNs[peer].Store(0)
	}
}

// adoptReplicaPending places the connections AdoptReplica queued; shard 0, every turn.
func (s *Shard) adoptReplicaPending() {
	a := &s.rt.replica.adoptions
	if a.count.Load() == 0 {
		return
	}
	a.mu.Lock()
	pending := a.pending
	a.pending = nil
	a.count.Store(0)
	a.mu.Unlock()
	for _, p := range pending {
		plane := uint32(cookieReplicaPlane)
		if p.dialedPeer >= 0 {
			plane |= uint32(p.dialedPeer+1) << cookieDialShift
		}
		if p.exporter != nil {
			plane |= cookieReplicaTLS
		}
		s.handOffTo(p.fd, p.remote, s.pickReplicaShard(), plane, p.exporter)
	}
}

// close refuses later adoptions and closes the descriptors no shard took; once the
// shards have exited.
func (a *replicaAdoptions) close(closeFd func(int)) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.closed = true
	for _, p := range a.pending {
		closeFd(p.fd)
	}
	a.pending = nil
	a.count.Store(0)
}
