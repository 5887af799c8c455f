package shard

import (
	"context"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"sync/atomic"

	"github.com/iggy-shard/iggy-shard/wire"
)

// lenderReleaser is one lent send's Releaser: it counts its releases, and those
// that ran off the thread of the shard that lent the frame.
type lenderReleaser struct {
	node     *replicaTestNode
	lender   int
	released atomic.Int64
	offShard atomic.Int64
}

func (r *lenderReleaser) Release() {
	r.released.Add(1)
	if int32(unix.Gettid()) != r.node.tids[r.lender].Load() {
		r.offShard.Add(1)
	}
}

// lendEach asks shard from of n to lend each of frames to peer once, each with a
// Releaser of its own (returned in the same order).
func lendEach(n *replicaTestNode, from int, peer uint8, frames [][]byte, o replicaSendRequest) []*lenderReleaser {
	done := make([]*lenderReleaser, len(frames))
	n.sendMu.Lock()
	for i, f := range frames {
		done[i] = &lenderReleaser{node: n, lender: from}
		r := o
		r.fromShard, r.peer, r.frame, r.repeat, r.lent = from, peer, f, 1, done[i]
		n.pending = append(n.pending, r)
	}
	n.sendMu.Unlock()
	n.rt.WakeAll()
	return done
}

// lentFrames are count aligned, unsealed prepares of sizeBytes, each its own: a
// frame is sealed in place each time it is lent.
func lentFrames(cluster string, count, sizeBytes int) [][]byte {
	frames := make([][]byte, count)
	for i := range frames {
		frames[i] = alignedCopy(prepareFrame(cluster, sizeBytes, false))
	}
	return frames
}

// checkReleasedOnce fails unless every Releaser ran exactly once, and (onLender)
// on the shard that lent its frame.
func checkReleasedOnce(t *testing.T, done []*lenderReleaser, onLender bool) {
	t.Helper()
	for i, d := range done {
		if got := d.released.Load(); got != 1 {
			t.Fatalf("lent send %d released %d times, want once", i, got)
		}
		if onLender && d.offShard.Load() != 0 {
			t.Fatalf("lent send %d released off its lender's shard", i)
		}
	}
}

func allReleased(done []*lenderReleaser) bool {
	for _, d := range done {
		if d.released.Load() == 0 {
			return false
		}
	}
	return true
}

// TestReplicaSendLentAcrossShards: a shard that does not own the peer's connection
// lends frames too, whole and in two parts, beside the owner's own; they arrive
// intact and each Releaser runs once, on the shard that lent it.
func TestReplicaSendLentAcrossShards(t *testing.T) {
	const cluster = "across"
	nodes := startMesh(t, 2, replicaNodeOptions{cluster: cluster})
	n := nodes[0]
	if owner, _ := n.rt.shards[0].ReplicaOwner(1); owner != 1 {
		t.Fatalf("shard %d owns the connection, want 1", owner)
	}
	var done []*lenderReleaser
	done = append(done, lendEach(n, 0, 1, lentFrames(cluster, 5, 200<<10), replicaSendRequest{})...)
	done = append(done, lendEach(n, 0, 1, lentFrames(cluster, 5, 64<<10), replicaSendRequest{parts: true})...)
	done = append(done, lendEach(n, 1, 1, lentFrames(cluster, 3, 200<<10), replicaSendRequest{parts: true})...)
	nodes[1].waitFor("the lent frames", 10*time.Second, func() bool { return len(nodes[1].received) == len(done) })
	n.waitFor("the releases", 10*time.Second, func() bool { return allReleased(done) })
	checkReleasedOnce(t, done, true)
	n.mu.Lock()
	if len(n.sendErrs) != 0 {
		t.Fatalf("send errors: %v", n.sendErrs)
	}
	n.mu.Unlock()
	if st := n.rt.ReplicaStats(); st.FramesLentAcross != 10 || st.Partition.FramesSent != uint64(len(done)) {
		t.Fatalf("stats %+v: want 10 frames lent across, %d sent", st, len(done))
	}
	nodes[1].mu.Lock()
	defer nodes[1].mu.Unlock()
	for _, r := range nodes[1].received {
		if !r.bodyValid || r.command != wire.CommandPrepare {
			t.Fatalf("a lent frame arrived as %+v", r)
		}
	}
}

// TestReplicaLentAcrossShardsReleasedWhenTheLinkCloses: frames lent through another
// shard's connection and still queued when it goes are dropped, and each Releaser
// runs once, on its lender.
func TestReplicaLentAcrossShardsReleasedWhenTheLinkCloses(t *testing.T) {
	const cluster = "across-gone"
	peer := newFakeAcceptor(t, cluster, 1)
	n := startReplicaNode(t, 0, replicaNodeOptions{cluster: cluster, addresses: []string{"", peer.addr()},
		queueFrames: 4, partFrames: 4})
	peer.handshake()
	n.waitFor("the fake peer registered", 10*time.Second, func() bool { return n.up[1] })
	// 1 MiB frames to a peer that reads nothing: more than the socket buffers take.
	done := lendEach(n, 0, 1, lentFrames(cluster, 4, 1<<20), replicaSendRequest{})
	n.waitFor("every frame accepted", 10*time.Second, func() bool { return n.rt.ReplicaStats().FramesLentAcross == 4 })
	n.waitFor("the frames queued on shard 1", 10*time.Second, func() bool {
		return budgetQueued(n.rt, 1, ReplicaPartition)+int64(n.rt.ReplicaStats().Partition.FramesSent) == 4
	})
	peer.close()
	n.waitFor("the releases", 10*time.Second, func() bool { return allReleased(done) })
	checkReleasedOnce(t, done, true)
	st := n.rt.ReplicaStats()
	t.Logf("partition frames: %+v", st.Partition)
	if st.Partition.FramesDropped == 0 || st.Partition.FramesSent+st.Partition.FramesDropped != 4 {
		t.Fatalf("stats %+v: want some of the 4 frames dropped with the connection, each sent or dropped once", st.Partition)
	}
	if q := budgetQueued(n.rt, 1, ReplicaPartition); q != 0 {
		t.Fatalf("%d frames' room not given back", q)
	}
}

// TestReplicaLentReturnsWaitForRoom: when the way back to the lender is full (the
// lender is busy in its turn while its frames are sent), the owner keeps the
// releases and passes them on as room comes; each runs once, on its lender.
func TestReplicaLentReturnsWaitForRoom(t *testing.T) {
	for _, tc := range []struct {
		name                    string
		queueFrames, partFrames int // 0: the defaults
		capacity, frames        int
	}{
		{name: "small queues", queueFrames: 4, partFrames: 4, capacity: 8, frames: 40},
		{name: "defaults", capacity: 2 * ReplicaPeerQueueCapacityDefault, frames: 10 * ReplicaPeerQueueCapacityDefault},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const cluster = "across-full"
			nodes := startMesh(t, 2, replicaNodeOptions{cluster: cluster, queueFrames: tc.queueFrames, partFrames: tc.partFrames})
			n := nodes[0]
			if c := n.rt.replica.lentReturnCapacity; c != tc.capacity {
				t.Fatalf("return queue capacity %d, want %d (the frames to one peer)", c, tc.capacity)
			}
			// Shard 0 lends the frames in one turn, each once the peer has room:
			// shard 1 sends and releases them meanwhile, more than the way back
			// holds.
			done := lendEach(n, 0, 1, lentFrames(cluster, tc.frames, 8<<10), replicaSendRequest{paced: true})
			nodes[1].waitFor("the lent frames", 20*time.Second, func() bool { return len(nodes[1].received) == len(done) })
			n.waitFor("the releases", 10*time.Second, func() bool { return allReleased(done) })
			checkReleasedOnce(t, done, true)
			st := n.rt.ReplicaStats()
			t.Logf("returns kept for room: %d", st.LentReturnsKept)
			if st.LentReturnsKept == 0 {
				t.Fatal("no return found its way back full: the test did not cross the bound")
			}
			n.mu.Lock()
			defer n.mu.Unlock()
			if len(n.sendErrs) != 0 {
				t.Fatalf("send errors: %v", n.sendErrs)
			}
		})
	}
}

// stopOrderHandler holds shard 1 in its Tick, once the test asks, until shard 0's
// loop has ended: shard 1 begins its stop only then, so the frames shard 0 lent
// through shard 1's connection are dropped after their lender has exited.
type stopOrderHandler struct {
	*replicaTestHandler
	hold          *atomic.Bool
	holding       chan struct{}
	lenderStopped chan struct{}
}

func (h *stopOrderHandler) Tick(s *Shard) bool {
	if s.Index() == 1 && h.hold.CompareAndSwap(true, false) {
		close(h.holding)
		select {
		case <-h.lenderStopped:
		case <-time.After(10 * time.Second):
		}
	}
	return h.replicaTestHandler.Tick(s)
}

func (h *stopOrderHandler) Stop(s *Shard) {
	if s.Index() == 0 {
		close(h.lenderStopped)
	}
}

// TestReplicaLentAcrossShardsReleasedAtShutdown: frames lent through another
// shard's connection, queued to a peer that reads nothing when the runtime stops,
// and dropped by their connection's owner after their lender exited, are each
// released once (by the closing runtime) and the stop is clean.
func TestReplicaLentAcrossShardsReleasedAtShutdown(t *testing.T) {
	const cluster = "across-stop"
	peer := newFakeAcceptor(t, cluster, 1)
	var hold atomic.Bool
	holding, lenderStopped := make(chan struct{}), make(chan struct{})
	n := startReplicaNode(t, 0, replicaNodeOptions{cluster: cluster, addresses: []string{"", peer.addr()},
		queueFrames: 4, partFrames: 4, handler: func(h *replicaTestHandler) Handler {
			return &stopOrderHandler{replicaTestHandler: h, hold: &hold, holding: holding, lenderStopped: lenderStopped}
		}})
	peer.handshake()
	n.waitFor("the fake peer registered", 10*time.Second, func() bool { return n.up[1] })
	done := lendEach(n, 0, 1, lentFrames(cluster, 4, 1<<20), replicaSendRequest{})
	n.waitFor("the frames queued on shard 1", 10*time.Second, func() bool {
		st := n.rt.ReplicaStats()
		return st.FramesLentAcross == 4 && budgetQueued(n.rt, 1, ReplicaPartition)+int64(st.Partition.FramesSent) == 4
	})
	if budgetQueued(n.rt, 1, ReplicaPartition) == 0 {
		t.Fatal("every frame left before the stop: the test did not hold any")
	}
	hold.Store(true)
	n.rt.WakeAll()
	<-holding
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.rt.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	peer.close()
	checkReleasedOnce(t, done, false)
}
