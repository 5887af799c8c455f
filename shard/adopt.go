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

// adoptions are the connections handed to the runtime from outside its listener
// (Runtime.Adopt), waiting for shard 0 to place them. Goroutines outside the shards
// push, shard 0 pops: the lock is between those goroutines and shard 0 only, never
// between two shards, and is taken once per connection, not per request.
type adoptions struct {
	mu      sync.Mutex
	pending []adoption
	closed  bool
	// count is len(pending), read by shard 0 every loop turn without the lock.
	count atomic.Int32
}

type adoption struct {
	fd   int
	peer netip.AddrPort
}

// Adopt hands the runtime a connected stream socket that did not come through its
// listener, e.g. the runtime's end of a socketpair whose other end a TLS terminator
// feeds with the plaintext of a session. Shard 0 places it like an accepted
// connection (least loaded shard) and peer is the address the connection reports
// (GET_ME, GET_CLIENTS) instead of getpeername's. The socket must be blocking (the
// runtime's sockets are: io_uring polls a blocking socket that is not ready). Safe from
// any goroutine. On success the runtime owns fd; on ErrRuntimeStopped the caller does.
func (rt *Runtime) Adopt(fd int, peer netip.AddrPort) error {
	a := &rt.adoptions
	a.mu.Lock()
	if a.closed || rt.stopping.Load() {
		a.mu.Unlock()
		return ErrRuntimeStopped
	}
	a.pending = append(a.pending, adoption{fd: fd, peer: peer})
	a.count.Store(int32(len(a.pending)))
	a.mu.Unlock()
	rt.shards[0].Wake()
	return nil
}

// adoptPending places the connections Adopt queued; shard 0, once per loop turn.
func (s *Shard) adoptPending() {
	a := &s.rt.adoptions
	if s.index != 0 || a.count.Load() == 0 {
		return
	}
	a.mu.Lock()
	pending := a.pending
	a.pending = nil
	a.count.Store(0)
	a.mu.Unlock()
	for _, p := range pending {
		s.handOff(p.fd, p.peer)
	}
}

// close refuses later adoptions and closes the descriptors no shard took; once the
// shards have exited.
func (a *adoptions) close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.closed = true
	for _, p := range a.pending {
		unix.Close(p.fd)
	}
	a.pending = nil
	a.count.Store(0)
}
