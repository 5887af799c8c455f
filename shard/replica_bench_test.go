package shard

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/replica"
	"github.com/iggy-shard/iggy-shard/wire"
)

// replicaBenchState is what the two runtimes of a benchmark share with it: the frames
// still to send (the sender's Tick reads it), the frames received and when the last
// one came.
type replicaBenchState struct {
	frame     []byte
	remaining atomic.Int64
	received  atomic.Int64
	target    atomic.Int64
	done      chan struct{}
	connected chan struct{} // closed when the sender's connection registers
	sendErrs  atomic.Int64
	lent      benchLent
}

type replicaBenchHandler struct {
	testHandler
	st   *replicaBenchState
	lent bool // send with SendReplicaLent, not SendReplica
	// sender is the shard that sends: with two, shard 0, whose frames go
	// through shard 1, which owns the connection.
	sender int
}

// benchLent counts the lent sends the kernel is done with.
type benchLent struct{ released atomic.Int64 }

func (l *benchLent) Release() { l.released.Add(1) }

func (h *replicaBenchHandler) ServeReplica(s *Shard, f *ReplicaFrame) {
	if h.st.received.Add(1) == h.st.target.Load() {
		close(h.st.done)
	}
}

func (h *replicaBenchHandler) ReplicaConnected(s *Shard, peer uint8) {
	if s.rt.replica.cfg.Handshake.Self == 0 {
		close(h.st.connected)
	}
}

func (h *replicaBenchHandler) ReplicaDisconnected(s *Shard, peer uint8) {}

// Tick sends while the peer's queue has room: it runs on every turn, so a send's
// completion, which frees room, brings the next frames.
func (h *replicaBenchHandler) Tick(s *Shard) bool {
	st := h.st
	if s.Index() != h.sender || st.remaining.Load() == 0 {
		return false
	}
	for st.remaining.Load() > 0 && s.ReplicaQueueRoom(1) > 0 {
		var err error
		if h.lent {
			err = s.SendReplicaLent(1, st.frame, &st.lent)
		} else {
			err = s.SendReplica(1, st.frame[:wire.HeaderSize], st.frame[wire.HeaderSize:])
		}
		if errors.Is(err, ErrReplicaBuffersExhausted) {
			return true // copies across shards: their buffers come back by message
		}
		if err != nil {
			st.sendErrs.Add(1)
			return true
		}
		st.remaining.Add(-1)
	}
	return false
}

// BenchmarkReplicaThroughput moves replica frames from replica 0 to replica 1, two
// runtimes of one shard each on loopback, and, in the same run, the same bytes over a
// plain net.Conn pair (a writer goroutine, a reader doing io.ReadFull into one
// buffer): the baseline of what loopback TCP does for a Go program that neither
// frames, validates, seals nor copies.
func BenchmarkReplicaThroughput(b *testing.B) {
	for _, size := range []int{64 << 10, 1 << 20} {
		// Without busy polling too: the two runtimes' pollers share the CPUs with
		// each other's work on a small machine.
		b.Run(fmt.Sprintf("plane=replica/size=%d", size), func(b *testing.B) { benchReplicaPlane(b, size, 0, false, 1) })
		b.Run(fmt.Sprintf("plane=replica-nopoll/size=%d", size), func(b *testing.B) { benchReplicaPlane(b, size, -1, false, 1) })
		b.Run(fmt.Sprintf("plane=replica-lent-nopoll/size=%d", size), func(b *testing.B) { benchReplicaPlane(b, size, -1, true, 1) })
		// Sent by the shard that does not own the connection: copied through
		// the other, or lent through it (its releases coming back).
		b.Run(fmt.Sprintf("plane=replica-across-nopoll/size=%d", size), func(b *testing.B) { benchReplicaPlane(b, size, -1, false, 2) })
		b.Run(fmt.Sprintf("plane=replica-lent-across-nopoll/size=%d", size), func(b *testing.B) { benchReplicaPlane(b, size, -1, true, 2) })
		b.Run(fmt.Sprintf("plane=netconn/size=%d", size), func(b *testing.B) { benchNetConn(b, size) })
	}
}

// benchReplicaPlane sends from a runtime of senderShards shards (the last owns the
// connection, the first sends).
func benchReplicaPlane(b *testing.B, size int, busyPoll time.Duration, lent bool, senderShards int) {
	const cluster = "bench"
	st := &replicaBenchState{frame: sealed(prepareFrame(cluster, size, false)), done: make(chan struct{}), connected: make(chan struct{})}
	start := func(id uint8, addresses []string, shards int) *Runtime {
		return startTestRuntime(b, Config{
			ShardCount: shards,
			Arena:      ArenaConfigDefault(),
			BusyPoll:   busyPoll,
			NewHandler: func(s *Shard) Handler {
				return &replicaBenchHandler{testHandler: testHandler{shard: s}, st: st, lent: lent}
			},
			Replica: &ReplicaConfig{
				ListenAddress: "127.0.0.1:0",
				Handshake:     replica.HandshakeConfig{Cluster: wire.ClusterID(cluster), Self: id, ReplicaCount: 2},
				PeerAddresses: addresses,
				// The sender's arena holds 64 frames of 1 MiB: a deeper queue
				// would only meet ErrReplicaBuffersExhausted.
				PeerQueueCapacity: 32,
				ReconnectPeriod:   20 * time.Millisecond,
			},
		})
	}
	receiver := start(1, []string{"", ""}, 1)
	sender := start(0, []string{"", receiver.ReplicaAddr().String()}, senderShards)
	select {
	case <-st.connected:
	case <-time.After(10 * time.Second):
		b.Fatal("the replicas did not connect")
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	st.target.Store(int64(b.N))
	st.remaining.Store(int64(b.N))
	sender.WakeAll()
	select {
	case <-st.done:
	case <-time.After(5 * time.Minute):
		b.Fatalf("received %d of %d frames", st.received.Load(), b.N)
	}
	b.StopTimer()
	if n := st.sendErrs.Load(); n > 0 {
		b.Fatalf("%d sends failed", n)
	}
}

func benchNetConn(b *testing.B, size int) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	w, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	r, ok := <-accepted
	if !ok {
		b.Fatal("accept failed")
	}
	defer r.Close()
	frame := make([]byte, size)
	readBuf := make([]byte, size)
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	writeErr := make(chan error, 1)
	go func() {
		for range b.N {
			if _, err := w.Write(frame); err != nil {
				writeErr <- err
				return
			}
		}
		writeErr <- nil
	}()
	for range b.N {
		if _, err := io.ReadFull(r, readBuf); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if err := <-writeErr; err != nil {
		b.Fatal(err)
	}
}
