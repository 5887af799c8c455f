package server

import (
	"fmt"
	"hash/crc32"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/shard"
	"github.com/iggy-shard/iggy-shard/wire"
)

// lentForwardsOf sums what a node's shards' frame lenders did.
func lentForwardsOf(t *testing.T, s *Server) lentForwards {
	t.Helper()
	var mu sync.Mutex
	var sum lentForwards
	err := s.rt.Inspect(testContext(t), func(sh *shard.Shard) {
		l := s.handlers[sh.Index()].lender.LentForwards()
		mu.Lock()
		sum.lent, sum.copied, sum.outlived = sum.lent+l.lent, sum.copied+l.copied, sum.outlived+l.outlived
		sum.out, sum.held = sum.out+l.out, sum.held+l.held
		mu.Unlock()
	})
	mustOK(t, "inspect", err)
	return sum
}

// TestClusterBackupForwardsLent: the first backup of a 3-node chain forwards the
// prepares of 1000-message batches to the second from the frames they came in
// (none copied on one shard), through the second stopped and started again
// mid-stream (the forwards queued to it released as its connection closes);
// every frame goes back (and, at each node's stop, the arena's leak check finds
// none missing), the second backup refused no prepare's body (a frame gone back
// early is poisoned), and both backups hold the same messages, checksums
// intact. On two shards a prepare received by the shard that does not own its
// partition is copied: some are lent, some copied.
func TestClusterBackupForwardsLent(t *testing.T) {
	for _, shards := range []int{1, 2} {
		t.Run(fmt.Sprintf("shards=%d", shards), func(t *testing.T) { testBackupForwardsLent(t, shards) })
	}
}

func testBackupForwardsLent(t *testing.T, shards int) {
	servers := replicateThroughARestart(t, shards, "fwd")
	first := servers[1]
	waitUntil(t, "the first backup's frames go back", func() bool {
		l := lentForwardsOf(t, first)
		return l.out == 0 && l.held == 0
	})
	l := lentForwardsOf(t, first)
	t.Logf("first backup: %d forwards lent, %d copied, %d loans outlived by their forwards", l.lent, l.copied, l.outlived)
	if l.lent == 0 {
		t.Fatal("the first backup lent no forward")
	}
	if shards == 1 && l.copied != 0 {
		t.Fatalf("the first backup copied %d forwards, want none", l.copied)
	}
	if n := ingressBindingDrops(t, servers[2]); n != 0 {
		t.Fatalf("the second backup refused %d prepares whose body did not bind", n)
	}
}

// TestClusterBackupFrameOutlivesItsWrite: a received prepare whose forward is
// still out when the store is done with the frame (written to the log, its loan
// returned) stays unchanged, and in the arena, until the forward is released,
// however late: the test holds each forward's release back on the first backup
// until the store has given every loan back, checks the body against its
// checksum when lent (a frame gone back is poisoned), and releases it.
func TestClusterBackupFrameOutlivesItsWrite(t *testing.T) {
	cfgs := clusterConfigs(t, 3, testClusterSecret)
	for i := range cfgs {
		cfgs[i].ShardCount = 1 // a frame is lent to a forward on the shard that received it
	}
	servers := startCluster(t, cfgs)
	first := servers[1]
	hs := &heldSends{}
	mustOK(t, "inspect", first.rt.Inspect(testContext(t), func(sh *shard.Shard) {
		hs.tid = unix.Gettid()
		l := &first.handlers[sh.Index()].lender
		send := l.sendLent
		l.sendLent = func(peer uint8, header, body []byte, done shard.Releaser) error {
			return send(peer, header, body, &heldSend{held: hs, body: body, sum: crc32.ChecksumIEEE(body), done: done})
		}
	}))
	pc := dialCluster(t, servers[0])
	ctx := testContext(t)
	_, err := pc.CreateStream(ctx, "late")
	mustOK(t, "create stream", err)
	_, err = pc.CreateTopic(ctx, client.NameID("late"), "t", 1, nil)
	mustOK(t, "create topic", err)
	for i, s := range servers[1:] {
		c := dialCluster(t, s)
		waitUntil(t, fmt.Sprintf("the topic reaches node %d", i+1), func() bool {
			_, err := c.PollMessagesCopy(ctx, &wire.PollMessages{Consumer: client.SingleConsumer(client.ID(1)), StreamID: client.NameID("late"),
				TopicID: client.NameID("t"), Partition: wire.SomePartition(0), Strategy: wire.PollingStrategy{Kind: wire.PollingFirst}, Count: 1}, nil)
			return err == nil
		})
	}
	const batches = 6
	for b := range batches {
		_, err := pc.SendMessages(ctx, client.NameID("late"), client.NameID("t"),
			wire.Partitioning{Kind: wire.PartitioningPartitionID, PartitionID: 0}, messagesOf(1000, 1000, fmt.Sprintf("b%d-", b)))
		mustOK(t, "send", err)
		waitUntil(t, fmt.Sprintf("batch %d: the store gives its frame back, its forward still out", b), func() bool {
			out, _ := lentBodies(t, first)
			l := lentForwardsOf(t, first)
			return out == 0 && l.outlived == uint64(b+1) && l.held == 1
		})
		mustOK(t, "inspect", first.rt.Inspect(testContext(t), func(*shard.Shard) {
			for _, s := range hs.sends {
				if crc32.ChecksumIEEE(s.body) != s.sum {
					t.Errorf("a lent forward's body changed before its send was released: its frame went back early")
				}
				s.done.Release()
				hs.released++
			}
			clear(hs.sends)
			hs.sends = hs.sends[:0]
		}))
		waitUntil(t, fmt.Sprintf("batch %d: its frame goes back", b), func() bool {
			l := lentForwardsOf(t, first)
			return l.out == 0 && l.held == 0
		})
	}
	l := lentForwardsOf(t, first)
	t.Logf("first backup: %d forwards lent, %d copied, %d loans outlived by their forwards, %d releases held",
		l.lent, l.copied, l.outlived, hs.released)
	if n := hs.offShard.Load(); n != 0 {
		t.Fatalf("%d lent forwards released off the shard that lent them", n)
	}
	if uint64(hs.released) != l.lent || l.lent < batches || l.copied != 0 {
		t.Fatalf("%d releases held, %d forwards lent, %d copied of %d batches: want each lent and held", hs.released, l.lent, l.copied, batches)
	}
	if n := ingressBindingDrops(t, servers[2]); n != 0 {
		t.Fatalf("the second backup refused %d prepares whose body did not bind", n)
	}
}
