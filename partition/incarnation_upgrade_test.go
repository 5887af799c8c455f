package partition

import (
	"bytes"
	"errors"
	"testing"

	"github.com/iggy-shard/iggy-shard/vsr"
	"github.com/iggy-shard/iggy-shard/wire"
)

// An upgrade from a binary before incarnation tags is two rolling restarts
// (incarnation.go): nodes that send untagged group ids (Replication.UntaggedGroups,
// as the old binary did) and nodes that send tagged ones run the same groups.

// untagReplica replaces replica i of a fresh cluster by a store that sends untagged
// group ids, over storage of its own.
func (c *testCluster) untagReplica(i int, seed uint64) {
	c.t.Helper()
	st := newSimStorages(seed)
	s := NewReplicatedStore("local_data", st, Replication{
		Cluster: testCluster3, ReplicaID: uint8(i), ReplicaCount: uint8(len(c.stores)), Outbox: clusterOutbox{c: c, from: uint8(i)},
		UntaggedGroups: true,
	})
	if err := s.Create(testKey, c.cfg, 1); err != nil {
		c.t.Fatal(err)
	}
	c.stores[i], c.storages[i] = s, st
}

// electWithout ticks every replica but down, whose frames are lost, as are those
// pass (if set) refuses, until another one leads the group in a newer view than
// any replica was in, and makes it the leader sends go to. The frames stay so
// filtered.
func (c *testCluster) electWithout(down int, pass func(f *netFrame) bool) int {
	c.t.Helper()
	var viewBefore uint32
	for _, s := range c.stores {
		viewBefore = max(viewBefore, s.partitions[testKey].group.core.View())
	}
	c.intercept = func(f *netFrame) bool {
		return int(f.from) != down && int(f.to) != down && (pass == nil || pass(f))
	}
	for round := 0; round < 20_000; round++ {
		for i, s := range c.stores {
			if i != down {
				s.Tick()
			}
		}
		c.settle()
		for i, s := range c.stores {
			if core := s.partitions[testKey].group.core; i != down && core.IsPrimary() && core.View() > viewBefore {
				c.leader = i
				return i
			}
		}
	}
	c.t.Fatalf("no replica but %d leads the group", down)
	return -1
}

// One replica of three sends untagged ids, the others tagged ones: the group
// commits under a tagged primary, through a view change to the untagged replica,
// under it, through a view change back to a tagged one, and after, and every
// replica ends with every acknowledged batch, the same log, and no frame dropped
// as another incarnation's or refused as another group's.
func TestClusterMixedTaggedAndUntaggedReplicasCommit(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		for _, cfg := range []Config{{PartitionsCount: 1}, fsyncConfig()} {
			c := newTestCluster(t, 700+seed, 3, cfg)
			c.untagReplica(1, 700+seed+5000)
			c.leader = 0
			rec := newSendRecorder()
			next := c.sendAll(0, 3, rec, 1)

			if leader := c.electWithout(0, nil); leader != 1 {
				t.Fatalf("seed %d: replica %d leads once replica 0 is gone, want the untagged 1", seed, leader)
			}
			next = c.sendAll(next, 3, rec, 100)

			if leader := c.electWithout(1, nil); leader == 1 {
				t.Fatalf("seed %d: the untagged replica still leads without its frames", seed)
			}
			next = c.sendAll(next, 3, rec, 200)

			c.intercept = nil
			c.tick(3 * int(partitionTiming.HeartbeatTimeoutTicks))
			next = c.sendAll(next, 1, rec, 300)
			c.tick(int(partitionTiming.CommitBroadcastIntervalTicks) + 1)
			for i, s := range c.stores {
				if err := s.Err(testKey); err != nil {
					t.Fatalf("seed %d: replica %d: %v", seed, i, err)
				}
				if n := s.IngressDrops()[IngressOtherIncarnation]; n != 0 {
					t.Fatalf("seed %d: replica %d dropped %d frames as another incarnation's", seed, i, n)
				}
				s.WaitIdle()
				_, msgs := poll(t, s, testKey, PollRequest{Strategy: wire.PollingStrategy{Kind: wire.PollingFirst}, Count: 1000})
				if len(msgs) != int(next) || !bytes.Equal(c.logBytes(i), c.logBytes(0)) {
					t.Fatalf("seed %d: replica %d serves offsets %v, want 0..%d as replica 0", seed, i, offsetsOf(msgs), next-1)
				}
			}
			for _, err := range c.stepErrs {
				if errors.Is(err, vsr.ErrBadMessage) {
					t.Fatalf("seed %d: a replica refused a frame: %v", seed, err)
				}
			}
			if !cfg.EnforceFsync {
				continue
			}
			// The second roll: every replica restarts sending tagged ids, over
			// journals and logs that hold both kinds, and the group goes on.
			for i := range c.stores {
				c.restart(i, seed*10+uint64(i))
			}
			c.elect()
			next = c.sendAll(next, 2, rec, 400)
			c.tick(int(partitionTiming.CommitBroadcastIntervalTicks) + 1)
			for i, s := range c.stores {
				if s.repl.UntaggedGroups {
					t.Fatalf("replica %d still sends untagged ids", i)
				}
				s.WaitIdle()
				_, msgs := poll(t, s, testKey, PollRequest{Strategy: wire.PollingStrategy{Kind: wire.PollingFirst}, Count: 1000})
				if len(msgs) != int(next) {
					t.Fatalf("seed %d: after the second roll replica %d serves offsets %v, want 0..%d", seed, i, offsetsOf(msgs), next-1)
				}
			}
		}
	}
}

// A node that ran with untagged ids (the binary before the tag, or the setting
// off) journaled untagged records: restarted with tags on, it replays them as its
// partition's, and loses none of the batches they hold.
func TestDurableJournalReplaysUntaggedRecords(t *testing.T) {
	replaysAfterCrash(t, 900, Replication{JournalFile: JournalFileAlways, UntaggedGroups: true}, 0, nil)
}

// A binary before purge generations tagged a purged life's records with its
// incarnation's own tag (that of generation 0): upgraded, a node replays them as
// its purged partition's, and loses none of the batches they hold.
func TestDurableJournalReplaysRecordsTaggedBeforePurgeGenerations(t *testing.T) {
	replaysAfterCrash(t, 950, Replication{JournalFile: JournalFileAlways}, 3, nil)
}

// taggedIDs reports whether frame f carries a tagged group id: in its header, or
// in a prepare header of its body (a view change's suffix).
func taggedIDs(f *netFrame) bool {
	h := f.header()
	if group, ok := wire.FrameGroup(h); ok && !wire.GroupUntagged(group) {
		return true
	}
	if h.Command == wire.CommandDoViewChange || h.Command == wire.CommandStartView {
		for at := wire.HeaderSize; at+wire.HeaderSize <= len(f.buf); at += wire.HeaderSize {
			var p wire.PrepareHeader
			copy(wire.HeaderBytes(&p)[:], f.buf[at:])
			if !wire.GroupUntagged(p.Group) {
				return true
			}
		}
	}
	return false
}

// The first roll: beside a node of the binary before the tag (replica 0 here, which
// refuses any id but its exact group's, so drops a tagged one), the upgraded nodes
// run with the setting off: no frame the old node gets carries a tagged id, through
// writes under it and under the others and view changes each way.
func TestClusterUntaggedReplicasSendNothingAnOldNodeRefuses(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		c := newTestCluster(t, 800+seed, 3, fsyncConfig())
		for i := range c.stores {
			c.untagReplica(i, 800+seed+uint64(i)*1000)
		}
		tagged := 0
		toOld := func(f *netFrame) bool {
			if f.to == 0 && taggedIDs(f) {
				tagged++
				return false
			}
			return true
		}
		c.intercept = toOld
		c.leader = 0
		rec := newSendRecorder()
		next := c.sendAll(0, 3, rec, 1)
		c.electWithout(0, toOld)
		next = c.sendAll(next, 3, rec, 100)
		c.electWithout(c.leader, toOld)
		next = c.sendAll(next, 3, rec, 200)
		c.intercept = toOld
		c.tick(3 * int(partitionTiming.HeartbeatTimeoutTicks))
		next = c.sendAll(next, 1, rec, 300)
		c.tick(int(partitionTiming.CommitBroadcastIntervalTicks) + 1)
		if tagged != 0 {
			t.Fatalf("seed %d: the old node was sent %d frames with tagged ids", seed, tagged)
		}
		for i, s := range c.stores {
			s.WaitIdle()
			_, msgs := poll(t, s, testKey, PollRequest{Strategy: wire.PollingStrategy{Kind: wire.PollingFirst}, Count: 1000})
			if len(msgs) != int(next) || !bytes.Equal(c.logBytes(i), c.logBytes(0)) {
				t.Fatalf("seed %d: replica %d serves offsets %v, want 0..%d as replica 0", seed, i, offsetsOf(msgs), next-1)
			}
		}
	}
}
