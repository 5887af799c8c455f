package partition

import (
	"bytes"
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

// A deletion frees a partition's ids for the next create, and the replicas apply the
// metadata at their own pace: a replica that has not applied the deletion yet still
// runs the old incarnation's group while the others run the new one's, under the
// same ids. Its frames must not reach the new group (nor theirs its group): the two
// histories do not chain, and a view change that installed the old log on a replica
// of the new one panicked "a committed op changed" (vsr.Core.verifyDown).

// recreateBehindReplica2 commits 4 ops on the group of testKey (created at 1), then
// recreates the partition (created at 2) on replicas 0 and 1 only, while replica 2
// hears nothing, and commits 3 ops there: replica 2 still runs the old incarnation,
// at op 4, a backup whose primary went silent.
func recreateBehindReplica2(t *testing.T, seed uint64) *testCluster {
	t.Helper()
	c := newTestCluster(t, seed, 3, Config{PartitionsCount: 1})
	rec := newSendRecorder()
	c.sendAll(0, 4, rec, 1)
	c.tick(int(partitionTiming.CommitBroadcastIntervalTicks) + 1)
	if op := c.stores[2].partitions[testKey].group.core.CommitMin(); op != 4 {
		t.Fatalf("replica 2 applied op %d of the old incarnation, want 4", op)
	}
	c.intercept = func(f *netFrame) bool { return f.from != 2 && f.to != 2 }
	for _, s := range c.stores[:2] {
		if err := s.Delete(testKey); err != nil {
			t.Fatal(err)
		}
		if err := s.Create(testKey, c.cfg, 2); err != nil {
			t.Fatal(err)
		}
	}
	c.leader = 0
	c.sendAll(100, 3, rec, 100)
	for _, s := range c.stores[:2] {
		s.Tick()
	}
	c.settle()
	if op := c.stores[1].partitions[testKey].group.core.CommitMin(); op != 3 {
		t.Fatalf("replica 1 applied op %d of the new incarnation, want 3", op)
	}
	return c
}

// Then the primary of both, replica 0, stops (a process frozen for a while): replica
// 1 of the new incarnation and replica 2 of the old one time out on it together and
// start a view change, whose primary is replica 1. The old replica's vote (op 4) must
// not be counted: the new group keeps its log (3 ops) and goes on once replica 0 is
// back; replica 2, once it applies the deletion and the create, catches up with it.
func TestClusterRecreatedPartitionIgnoresTheOldIncarnation(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		c := recreateBehindReplica2(t, 500+seed)
		c.intercept = func(f *netFrame) bool { return f.from != 0 && f.to != 0 }
		for r := 0; r < 3*int(partitionTiming.HeartbeatTimeoutTicks); r++ {
			for _, s := range c.stores[1:] {
				s.Tick()
			}
			c.settle()
		}
		if n := c.stores[1].IngressDrops()[IngressOtherIncarnation]; n == 0 {
			t.Fatalf("seed %d: replica 1 dropped no frame of the old incarnation", seed)
		}
		c.intercept = nil
		c.elect()
		rec := newSendRecorder()
		c.sendAll(200, 1, rec, 200)
		for i, s := range c.stores[:2] {
			if err := s.Err(testKey); err != nil {
				t.Fatalf("seed %d: replica %d: %v", seed, i, err)
			}
			if op := s.partitions[testKey].group.core.CommitMin(); op != 4 {
				t.Fatalf("seed %d: replica %d applied op %d of the new incarnation, want 4", seed, i, op)
			}
		}
		if op := c.stores[2].partitions[testKey].group.core.CommitMin(); op != 4 {
			t.Fatalf("seed %d: the old replica applied op %d, want its own 4", seed, op)
		}

		if err := c.stores[2].Delete(testKey); err != nil {
			t.Fatal(err)
		}
		if err := c.stores[2].Create(testKey, c.cfg, 2); err != nil {
			t.Fatal(err)
		}
		c.tick(3 * int(partitionTiming.HeartbeatTimeoutTicks))
		for i, s := range c.stores {
			s.WaitIdle()
			_, msgs := poll(t, s, testKey, PollRequest{Strategy: wire.PollingStrategy{Kind: wire.PollingFirst}, Count: 100})
			if len(msgs) != 12 || !bytes.Equal(c.logBytes(i), c.logBytes(0)) {
				t.Fatalf("seed %d: replica %d holds %d messages (%v), want the new incarnation's 12 as replica 0", seed, i, len(msgs), offsetsOf(msgs))
			}
		}
	}
}

// A node that restarts with the old incarnation on disk (its metadata snapshot
// older than the deletion) opens the old partition again, a fresh core that asks the
// group for its view: the new incarnation's primary answers, and its log must not
// become the old partition's. The old partition keeps what it held (what its disk
// kept through the power loss) until the node's metadata deletes it; the new one, created then, catches up with its group.
func TestClusterRestartWithTheOldIncarnationIgnoresTheNewOne(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		c := recreateBehindReplica2(t, 600+seed)
		c.restart(2, seed)
		c.intercept = nil
		c.tick(3 * int(partitionTiming.HeartbeatTimeoutTicks))
		old := c.stores[2]
		if err := old.Err(testKey); err != nil {
			t.Fatalf("seed %d: the restarted old partition: %v", seed, err)
		}
		if n := old.IngressDrops()[IngressOtherIncarnation]; n == 0 {
			t.Fatalf("seed %d: the restarted old partition dropped no frame of the new incarnation", seed)
		}
		old.WaitIdle()
		_, msgs := poll(t, old, testKey, PollRequest{Strategy: wire.PollingStrategy{Kind: wire.PollingFirst}, Count: 100})
		for _, m := range msgs {
			if m.seq != m.offset {
				t.Fatalf("seed %d: the restarted old partition serves %+v, a message of the new incarnation", seed, m)
			}
		}

		if err := old.Delete(testKey); err != nil {
			t.Fatal(err)
		}
		if err := old.Create(testKey, c.cfg, 2); err != nil {
			t.Fatal(err)
		}
		c.tick(3 * int(partitionTiming.HeartbeatTimeoutTicks))
		old.WaitIdle()
		_, msgs = poll(t, old, testKey, PollRequest{Strategy: wire.PollingStrategy{Kind: wire.PollingFirst}, Count: 100})
		if len(msgs) != 9 || !bytes.Equal(c.logBytes(2), c.logBytes(0)) {
			t.Fatalf("seed %d: the recreated partition serves %v, want the new incarnation's 9 messages", seed, offsetsOf(msgs))
		}
	}
}
