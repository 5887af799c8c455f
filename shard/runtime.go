package shard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/iggy-shard/iggy-shard/fdpass"
	"github.com/iggy-shard/iggy-shard/linux"
)

// Runtime is a running set of shards serving one TCP listener.
type Runtime struct {
	cfg         Config
	shards      []*Shard
	addr        *net.TCPAddr
	allowedCPUs []int
	// epoch is time zero of every shard's clock (Shard.NowNs), so that the shards'
	// readings compare.
	epoch time.Time

	// connCounts[i] is shard i's live connection count: shard 0 places new
	// connections by it (pickShard), observers outside the shards (tests, metrics)
	// read it.
	connCounts []atomic.Int64
	// handoffsArrived[i] counts the connections shard 0 handed to shard i that
	// reached it (adopted or refused there): shard 0's placement subtracts them from
	// those it sent to see what is still on the way.
	handoffsArrived []atomic.Int64

	// adoptions are connections given to Adopt, on their way to shard 0.
	adoptions adoptionQueue[adoption]
	// replica is the replica plane's runtime-wide state; nil without Config.Replica.
	replica *replicaRuntime

	stopping atomic.Bool
	// wakeMu orders Shard.Wake, from any goroutine, before closeAll closes the
	// eventfds, so that a late Wake never writes to a descriptor number reused since.
	// Only wake-ups from outside the shards take it, never a request path.
	wakeMu         sync.RWMutex
	eventFdsClosed bool
	done           chan struct{}
	// inspectMu runs one Inspect at a time.
	inspectMu sync.Mutex
	errOnce   sync.Once
	err       error
}

// Start binds the listener, starts the shards and returns once every shard is ready:
// from then on connections to Addr are served. It fails, having undone everything, when
// the address cannot be bound or a shard cannot set up its ring (io_uring unavailable).
func Start(cfg Config) (*Runtime, error) {
	// Read before any shard narrows its thread's affinity: a thread the Go runtime
	// creates later inherits the mask of the thread that created it.
	allowed, err := linux.AllowedCPUs()
	if err != nil {
		return nil, err
	}
	cfg, err = cfg.withDefaults(allowed)
	if err != nil {
		return nil, err
	}
	if cfg.FdPass == 0 {
		if cfg.ShardCount == 1 {
			cfg.FdPass = fdpass.ModeQueue // nothing to hand over
		} else {
			probed, err := fdpass.Probe()
			if err != nil {
				return nil, fmt.Errorf("shard: %w", err)
			}
			cfg.FdPass = probed.Mode
			cfg.Logger.Info("connection handoff", "mode", probed.Mode.String(), "why", probed.Why)
		}
	}
	listenFd, addr := -1, (*net.TCPAddr)(nil)
	if !cfg.ListenerOff {
		if listenFd, addr, err = listen(cfg.TCPAddress); err != nil {
			return nil, err
		}
	}
	var rr *replicaRuntime
	if cfg.Replica != nil {
		replicaCfg, peers, err := cfg.Replica.withDefaults()
		if err == nil {
			rr = newReplicaRuntime(replicaCfg, peers, cfg.ShardCount)
			if !replicaCfg.ListenerOff {
				rr.listenFd, rr.addr, err = listen(replicaCfg.ListenAddress)
			}
		}
		if err != nil {
			if listenFd >= 0 {
				unix.Close(listenFd)
			}
			return nil, err
		}
		cfg.Replica = replicaCfg
	}
	rt := &Runtime{cfg: cfg, addr: addr, allowedCPUs: allowed, done: make(chan struct{}), connCounts: make([]atomic.Int64, cfg.ShardCount),
		handoffsArrived: make([]atomic.Int64, cfg.ShardCount), epoch: time.Now(), replica: rr}
	rt.shards = make([]*Shard, cfg.ShardCount)
	for i := range rt.shards {
		s := &Shard{
			index:    i,
			rt:       rt,
			cfg:      &rt.cfg,
			log:      cfg.Logger.With("shard", i),
			listener: newListener(-1),
			splice:   splicer{pipes: newPipePool(cfg.PipesPerShardMax, cfg.PipeSizeBytes)},
		}
		s.mail.init(cfg.ShardCount, cfg.InboxCapacity)
		s.handoff.notes = NewQueue[peerNote](peerTableSize)
		rt.shards[i] = s
	}
	rt.shards[0].listener = newListener(listenFd)
	rt.shards[0].listener.handedOff = make([]int64, cfg.ShardCount)
	reserveProcs(cfg.ShardCount)

	ready := make(chan error, len(rt.shards))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for _, s := range rt.shards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.run(ready, start)
		}()
	}
	var setupErr error
	for range rt.shards {
		if err := <-ready; err != nil && setupErr == nil {
			setupErr = err
		}
	}
	if setupErr != nil {
		rt.stopping.Store(true)
	}
	close(start)
	go func() {
		wg.Wait()
		rt.closeAll()
		reserveProcs(-cfg.ShardCount)
		close(rt.done)
	}()
	if setupErr != nil {
		<-rt.done
		return nil, setupErr
	}
	if addr != nil {
		cfg.Logger.Info("listening", "address", addr.String(), "shards", cfg.ShardCount)
	}
	if rr != nil && rr.addr != nil {
		cfg.Logger.Info("replica plane listening", "address", rr.addr.String(), "replica", rr.cfg.Handshake.Self,
			"replicas", rr.cfg.Handshake.ReplicaCount)
	}
	return rt, nil
}

// Addr returns the address the listener is bound to; nil with Config.ListenerOff.
func (rt *Runtime) Addr() *net.TCPAddr { return rt.addr }

// ShardCount returns the number of shards.
func (rt *Runtime) ShardCount() int { return len(rt.shards) }

// WakeAll wakes every shard, from any goroutine, so that each reads its clock and
// serves what is due (after a test moved Config.Clock).
func (rt *Runtime) WakeAll() {
	for _, s := range rt.shards {
		s.Wake()
	}
}

// ConnectionCount returns the number of open connections over all shards. Safe from any
// goroutine; a snapshot.
func (rt *Runtime) ConnectionCount() int {
	n := int64(0)
	for i := range rt.connCounts {
		n += rt.connCounts[i].Load()
	}
	return int(n)
}

// Shutdown stops accepting, lets every connection send the replies it is owed and
// closes it (cutting those still sending after Config.ShutdownTimeout), and waits for
// the shards to exit or ctx to end. Safe from any goroutine, more than once.
func (rt *Runtime) Shutdown(ctx context.Context) error {
	rt.stopping.Store(true)
	for _, s := range rt.shards {
		s.Wake()
	}
	select {
	case <-rt.done:
		return rt.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Done is closed when every shard has exited.
func (rt *Runtime) Done() <-chan struct{} { return rt.done }

// Err returns the fatal error that stopped the runtime, once Done is closed; nil after
// a clean shutdown.
func (rt *Runtime) Err() error {
	select {
	case <-rt.done:
		return rt.err
	default:
		return nil
	}
}

// fatal records a shard's fatal error and stops the others: a runtime with a dead shard
// would keep serving half its connections, the half-alive state to avoid.
func (rt *Runtime) fatal(err error) {
	rt.errOnce.Do(func() { rt.err = err })
	rt.stopping.Store(true)
	for _, s := range rt.shards {
		s.Wake()
	}
}

// closeAll releases every shard's kernel resources once all shard goroutines exited.
// Rings close first: that ends any operation still referencing an arena buffer.
func (rt *Runtime) closeAll() {
	var errs []error
	for _, s := range rt.shards {
		if s.ring != nil {
			errs = append(errs, s.ring.Close())
		}
		if s.disk.ring != nil {
			errs = append(errs, s.disk.ring.Close())
			unix.Close(s.disk.event.fd)
		}
		errs = append(errs, s.closeSpliceRing())
	}
	rt.wakeMu.Lock()
	rt.eventFdsClosed = true
	for _, s := range rt.shards {
		if s.mail.event.fd >= 0 {
			unix.Close(s.mail.event.fd)
		}
	}
	rt.wakeMu.Unlock()
	// A receive ring unmaps its descriptors only once its ring is closed (no recv can
	// still be armed on it); its buffers go back to the arena.
	for _, s := range rt.shards {
		if s.recv.ring != nil {
			s.recv.ring.Close()
			s.arena.ReturnClass(s.recv.class)
		}
	}
	rt.adoptions.close(func(a adoption) int {
		if a.tls != nil {
			a.tls.transport.Close()
		}
		return a.fd
	})
	// Handoffs still in flight: the rings are closed, so the kernel has dropped the
	// parked files; the sender closes its plain copies. Connections still in an inbox
	// were never adopted.
	if sender := rt.shards[0].handoff.sender; sender != nil {
		sender.Close()
	}
	for _, s := range rt.shards {
		for _, q := range append(s.mail.control, s.mail.inbox...) {
			for {
				m, ok := q.Pop()
				if !ok {
					break
				}
				switch {
				case m.internal == internalAdoptConn:
					unix.Close(m.fd)
				case m.internal == internalReplicaRelease:
					s.arena.Release(s.arena.BufferAt(int(m.Value&0xff), int(m.Value>>8)))
				default:
					if d, ok := s.handler.Handler.(Dropper); ok {
						d.DropMessage(m)
					}
				}
			}
		}
	}
	rt.closeReplica()
	for _, s := range rt.shards {
		for _, c := range s.clients.conns.items {
			if c != nil && c.state != linkFree && !c.direct { // the ring's close released slots
				unix.Close(c.fd)
			}
		}
		s.listener.closeFd()
		if s.splice.pipes.lent != 0 && rt.err == nil {
			// Every spliced reply gives its pipe back before its connection is freed.
			errs = append(errs, fmt.Errorf("shard %d: %d pipes still lent after the stop", s.index, s.splice.pipes.lent))
		}
		s.splice.pipes.close()
		if s.arena != nil {
			if rt.err == nil {
				// After a clean stop every buffer is back: a leak is our bug (or a
				// handler's retained frame never released).
				errs = append(errs, s.arena.CheckNoLeaks())
			}
			errs = append(errs, s.arena.Close())
		}
	}
	if err := errors.Join(errs...); err != nil {
		rt.errOnce.Do(func() { rt.err = fmt.Errorf("shard: closing: %w", err) })
	}
}

// shardProcs counts the shard threads of every live runtime in the process.
var shardProcs struct {
	sync.Mutex
	count int
}

// reserveProcs adds delta to GOMAXPROCS. A shard's locked thread spends its idle time
// blocked in io_uring_enter, and a goroutine in a system call keeps its P until the Go
// scheduler's monitor takes it back (20 µs to 10 ms later): with GOMAXPROCS equal to
// the CPU count, the shards would hold the Ps the rest of the process (timers, the
// garbage collector, a client in the same process) needs, and a shard returning from
// io_uring_enter would wait for a P. So the shard threads get Ps of their own on top of
// what the process had; the kernel still schedules all threads on the same CPUs.
func reserveProcs(delta int) {
	ReserveProcs(delta)
}

// ReserveProcs adds delta to GOMAXPROCS for goroutines that hold a P for long
// stretches of CPU work outside the shards (the server's argon2id workers), so that
// they take no P the rest of the process needs either; the kernel schedules their
// threads, which can be niced, on the same CPUs. It shares the shards' lock: the
// read-modify-write of GOMAXPROCS must not interleave with theirs.
func ReserveProcs(delta int) {
	shardProcs.Lock()
	defer shardProcs.Unlock()
	shardProcs.count += delta
	runtime.GOMAXPROCS(runtime.GOMAXPROCS(0) + delta)
}
