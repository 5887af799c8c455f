package shard

import (
	"errors"
	"net/netip"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// ErrRuntimeStopped is Runtime.Adopt's answer once the runtime is stopping: the
// caller still owns the descriptor and closes it.
var ErrRuntimeStopped = errors.New("shard: runtime is stopping")

// adoptionQueue holds the connections handed to the runtime from outside its own
// sockets (Runtime.Adopt for clients, Runtime.AdoptReplica for replicas), waiting for
// shard 0 to place them. Goroutines outside the shards push, shard 0 takes: the lock
// is between those goroutines and shard 0 only, never between two shards, and is
// taken once per connection, not per request.
type adoptionQueue[T any] struct {
	mu      sync.Mutex
	pending []T
	closed  bool
	// count is len(pending), read by shard 0 every loop turn without the lock.
	count atomic.Int32
}

// push queues a for shard 0 and wakes it; ErrRuntimeStopped once the runtime stops.
func (q *adoptionQueue[T]) push(rt *Runtime, a T) error {
	q.mu.Lock()
	if q.closed || rt.stopping.Load() {
		q.mu.Unlock()
		return ErrRuntimeStopped
	}
	q.pending = append(q.pending, a)
	q.count.Store(int32(len(q.pending)))
	q.mu.Unlock()
	rt.shards[0].Wake()
	return nil
}

// take returns what is queued (nil, without the lock, when nothing is).
func (q *adoptionQueue[T]) take() []T {
	if q.count.Load() == 0 {
		return nil
	}
	q.mu.Lock()
	pending := q.pending
	q.pending = nil
	q.count.Store(0)
	q.mu.Unlock()
	return pending
}

// close refuses later adoptions and closes the descriptors no shard took; once the
// shards have exited.
func (q *adoptionQueue[T]) close(fdOf func(T) int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	for _, p := range q.pending {
		unix.Close(fdOf(p))
	}
	q.pending = nil
	q.count.Store(0)
}

type adoption struct {
	fd   int
	peer netip.AddrPort
	tls  *tlsHandover // AdoptTLS's session; nil for Adopt
}

// Adopt hands the runtime a connected stream socket that did not come through its
// listener, e.g. the runtime's end of a socketpair whose other end a TLS terminator
// feeds with the plaintext of a session. Shard 0 places it like an accepted
// connection (least loaded shard) and peer is the address the connection reports
// (GET_ME, GET_CLIENTS) instead of getpeername's. The socket must be blocking (the
// runtime's sockets are: io_uring polls a blocking socket that is not ready). Safe from
// any goroutine. On success the runtime owns fd; on ErrRuntimeStopped the caller does.
func (rt *Runtime) Adopt(fd int, peer netip.AddrPort) error {
	return rt.adoptions.push(rt, adoption{fd: fd, peer: peer})
}

// adoptPending places the connections Adopt queued; shard 0, once per loop turn.
func (s *Shard) adoptPending() {
	if s.index != 0 {
		return
	}
	for _, p := range s.rt.adoptions.take() {
		s.handOffClient(p.fd, peerNote{addr: p.peer, tls: p.tls})
	}
}
