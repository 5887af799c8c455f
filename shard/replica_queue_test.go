package shard

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/wire"
)

// sendTogether asks shard fromShard to send every request in its next turn: all of
// them are queued before the turn's flush.
func (n *replicaTestNode) sendTogether(reqs ...replicaSendRequest) {
	n.sendMu.Lock()
	n.pending = append(n.pending, reqs...)
	n.sendMu.Unlock()
	n.rt.WakeAll()
}

// frameGroupOf reads the group of a frame the fake peer received.
func frameGroupOf(t *testing.T, frame []byte) uint64 {
	t.Helper()
	h, err := wire.ViewHeader[wire.GenericHeader](alignedCopy(frame))
	if err != nil {
		t.Fatal(err)
	}
	group, ok := wire.FrameGroup(h)
	if !ok {
		t.Fatalf("a frame of command %v without a group", h.Command)
	}
	return group
}

// budgetQueued returns the frames of class to peer the runtime holds budget for.
func budgetQueued(rt *Runtime, peer uint8, class ReplicaClass) int64 {
	return rt.replica.budgets[peer][class].queued.Load()
}

// A flood of partition frames to a peer that reads nothing fills the partition
// class only: the metadata frames sent after it are all accepted and leave first,
// and the flood beyond its class's room is refused, counted, with
// ErrReplicaQueueFull. (One queue shared by both refused the metadata frames.)
func TestReplicaControlFramesNeverWaitBehindPartitionFrames(t *testing.T) {
	const (
		cluster           = "classes"
		controlCapacity   = 16
		partitionCapacity = 8
		floodFrames       = 100
		metadataFrames    = 10
	)
	for _, from := range []int{1, 0} { // shard 1 owns the connection; shard 0's frames cross to it
		peer := newFakeAcceptor(t, cluster, 1)
		n := startReplicaNode(t, 0, replicaNodeOptions{cluster: cluster, addresses: []string{"", peer.addr()},
			queueFrames: controlCapacity, partFrames: partitionCapacity})
		peer.handshake()
		n.waitFor("the fake peer registered", 10*time.Second, func() bool { return n.up[1] })
		var reqs []replicaSendRequest
		for i := range floodFrames {
			reqs = append(reqs, replicaSendRequest{fromShard: from, peer: 1, frame: partitionCommitFrame(cluster, uint64(i)), repeat: 1})
		}
		for i := range metadataFrames {
			reqs = append(reqs, replicaSendRequest{fromShard: from, peer: 1, frame: commitFrame(cluster, uint64(i+1)), repeat: 1})
		}
		n.sendTogether(reqs...)
		n.waitFor("the flood's outcome", 10*time.Second, func() bool { return len(n.sendErrs) > 0 })
		n.mu.Lock()
		errs := n.sendErrs
		n.mu.Unlock()
		for _, err := range errs {
			if !errors.Is(err, ErrReplicaQueueFull) {
				t.Fatalf("from shard %d: %v, want ErrReplicaQueueFull", from, err)
			}
		}
		// The owner queues all of its own turn's frames before it sends any: its
		// partition class takes exactly its room. Frames from another shard reach
		// the owner while the sender still sends, and the first to leave (into the
		// socket's buffers) give room back: at least the room is taken.
		refused := len(errs)
		if from == 1 && refused != floodFrames-partitionCapacity || refused > floodFrames-partitionCapacity || refused == 0 {
			t.Fatalf("from shard %d: %d frames refused, want the %d partition frames beyond the class's room",
				from, refused, floodFrames-partitionCapacity)
		}
		accepted := floodFrames - refused
		var metadata, partition int
		for range metadataFrames + accepted {
			if frameGroupOf(t, peer.read(wire.HeaderSize)) == wire.MetadataGroup {
				metadata++
				if from == 1 && partition > 0 {
					t.Fatalf("metadata frame after %d partition frames: control frames go first", partition)
				}
			} else {
				partition++
			}
		}
		if metadata != metadataFrames || partition != accepted {
			t.Fatalf("from shard %d: the peer got %d metadata and %d partition frames, want %d and %d",
				from, metadata, partition, metadataFrames, accepted)
		}
		n.waitFor("the frames counted as sent", 5*time.Second, func() bool {
			return n.rt.ReplicaStats().FramesSent == uint64(metadataFrames+accepted)
		})
		st := n.rt.ReplicaStats()
		want := ReplicaStats{Control: ReplicaClassStats{FramesSent: metadataFrames},
			Partition: ReplicaClassStats{FramesSent: uint64(accepted), FramesDropped: uint64(refused), QueueFull: uint64(refused)}}
		if st.Control != want.Control || st.Partition != want.Partition || st.FramesDropped != uint64(refused) {
			t.Fatalf("from shard %d: stats %+v, want per class %+v", from, st, want)
		}
		// Every frame left: each class has its whole room again.
		var rooms [replicaClassCount]int
		if err := n.rt.Inspect(context.Background(), func(s *Shard) {
			if s.Index() == 0 {
				rooms[ReplicaControl], rooms[ReplicaPartition] = s.ReplicaRoom(1, ReplicaControl), s.ReplicaQueueRoom(1)
			}
		}); err != nil {
			t.Fatal(err)
		}
		if rooms != [replicaClassCount]int{controlCapacity, partitionCapacity} {
			t.Fatalf("from shard %d: room %v after every frame left, want %d and %d", from, rooms, controlCapacity, partitionCapacity)
		}
		peer.close()
	}
}

// The frames a connection still holds when it goes are dropped, counted, and give
// their room back: the budget never leaks, however a frame ends.
func TestReplicaQueuedFramesGiveTheirRoomBackWhenTheConnectionGoes(t *testing.T) {
	const cluster = "gone"
	peer := newFakeAcceptor(t, cluster, 1)
	n := startReplicaNode(t, 0, replicaNodeOptions{cluster: cluster, addresses: []string{"", peer.addr()},
		queueFrames: 4, partFrames: 4})
	peer.handshake()
	n.waitFor("the fake peer registered", 10*time.Second, func() bool { return n.up[1] })
	// 1 MiB frames: more than the socket buffers take from a peer that reads
	// nothing, so some are still queued when it goes.
	big := prepareFrame(cluster, 1<<20, false)
	n.sendTogether(
		replicaSendRequest{fromShard: 0, peer: 1, frame: big, repeat: 4},
		replicaSendRequest{fromShard: 1, peer: 1, frame: commitFrame(cluster, 1), repeat: 4},
	)
	n.waitFor("every frame accepted", 10*time.Second, func() bool {
		st := n.rt.ReplicaStats()
		return budgetQueued(n.rt, 1, ReplicaPartition)+int64(st.Partition.FramesSent) == 4 &&
			budgetQueued(n.rt, 1, ReplicaControl)+int64(st.Control.FramesSent) == 4
	})
	peer.close()
	n.waitFor("the connection gone", 10*time.Second, func() bool { return !n.up[1] })
	n.waitFor("the budget back", 10*time.Second, func() bool {
		return budgetQueued(n.rt, 1, ReplicaPartition) == 0 && budgetQueued(n.rt, 1, ReplicaControl) == 0
	})
	st := n.rt.ReplicaStats()
	t.Logf("sent and dropped by class: control %+v, partition %+v", st.Control, st.Partition)
	if st.Partition.FramesSent+st.Partition.FramesDropped != 4 || st.Control.FramesSent+st.Control.FramesDropped != 4 {
		t.Fatalf("stats %+v: every frame accepted is sent or dropped, once", st)
	}
	if len(n.sendErrs) != 0 {
		t.Fatalf("send errors %v", n.sendErrs)
	}
}

// Each class's capacity defaults and is checked.
func TestReplicaClassCapacities(t *testing.T) {
	c := &ReplicaConfig{ListenAddress: "127.0.0.1:0", PeerQueueCapacity: 100,
		PeerAddresses: []string{"", "127.0.0.1:1", "127.0.0.1:2"}}
	c.Handshake.ReplicaCount = 3
	got, _, err := c.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if got.PartitionQueueCapacity != 100 {
		t.Fatalf("partition capacity %d, want PeerQueueCapacity's 100", got.PartitionQueueCapacity)
	}
	rr := newReplicaRuntime(got, nil, 2)
	// Two peers' whole budget fits a transit queue, a power of two.
	if rr.transitCapacity != [replicaClassCount]int{256, 256} {
		t.Fatalf("transit capacities %v", rr.transitCapacity)
	}
	for range 100 {
		if !rr.reserve(2, ReplicaPartition) {
			t.Fatal("the class refused a frame within its capacity")
		}
	}
	if rr.reserve(2, ReplicaPartition) || rr.room(2, ReplicaPartition) != 0 {
		t.Fatal("the class took a frame beyond its capacity")
	}
	if rr.room(2, ReplicaControl) != 100 || rr.room(1, ReplicaPartition) != 100 {
		t.Fatal("a full class of one peer took another class's or peer's room")
	}
	rr.unreserve(2, ReplicaPartition)
	if !rr.reserve(2, ReplicaPartition) {
		t.Fatal("room given back was not taken again")
	}
	if transitCapacityFor(1<<16, 254) != transitCapacityMax || transitCapacityFor(1, 1) != 1 {
		t.Fatal("transit capacity bounds")
	}
}

// Reading is bounded per turn: a connection has one recv in flight, into its 64 KiB
// read buffer, so a turn serves at most that much of a peer's flood of partition
// frames (256 header-only frames) before the shard's timers, ticker and sends run,
// and a metadata frame behind the flood waits a few turns, not the whole flood.
// (A guard: the runtime has bounded it so from the start.)
func TestReplicaFloodOfPartitionFramesIsReadInBoundedTurns(t *testing.T) {
	const cluster, floodFrames = "readflood", 20_000
	node := startReplicaNode(t, 1, replicaNodeOptions{cluster: cluster, addresses: []string{"", ""}})
	peer := dialFake(t, node, cluster, 0)
	node.waitFor("the fake peer registered", 10*time.Second, func() bool { return node.up[0] })
	var flood []byte
	for i := range floodFrames {
		flood = append(flood, sealed(partitionCommitFrame(cluster, uint64(i)))...)
	}
	flood = append(flood, sealed(commitFrame(cluster, 1))...)
	peer.write(flood)
	node.waitFor("the flood and the metadata frame", 20*time.Second, func() bool { return len(node.received) == floodFrames+1 })
	node.mu.Lock()
	defer node.mu.Unlock()
	perTurn := map[uint64]int{}
	most := 0
	for _, r := range node.received {
		perTurn[r.turn]++
		most = max(most, perTurn[r.turn])
	}
	if last := node.received[floodFrames]; last.group != wire.MetadataGroup {
		t.Fatalf("the last frame served is of group %#x, want the metadata frame", last.group)
	}
	t.Logf("%d frames in %d turns, at most %d in one", floodFrames+1, len(perTurn), most)
	if limit := replicaReadBufferBytes / wire.HeaderSize; most > limit {
		t.Fatalf("a turn served %d frames, want at most %d (one read buffer)", most, limit)
	}
}
