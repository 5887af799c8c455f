package partition

import (
	"bytes"
	"testing"

	"github.com/iggy-shard/iggy-shard/segment"
	"github.com/iggy-shard/iggy-shard/vsr"
	"github.com/iggy-shard/iggy-shard/wire"
)

// restart replaces replica i with a new store over what its disks kept through a
// power loss, opening the partition as a restarted server does (Open, not Create).
func (c *testCluster) restart(i int, seed uint64) {
	c.t.Helper()
	crashed := c.storages[i].crash(seed)
	s := NewReplicatedStore("local_data", crashed, Replication{
		Cluster: testCluster3, ReplicaID: uint8(i), ReplicaCount: uint8(len(c.stores)), Outbox: clusterOutbox{c: c, from: uint8(i)},
		OpenFilesMax: c.openFilesMax,
	})
	if _, err := s.Open(testKey, c.cfg, Incarnation{CreatedAtMicros: 1}); err != nil {
		c.t.Fatalf("replica %d: open after restart: %v", i, err)
	}
	c.stores[i], c.storages[i] = s, crashed
}

// sendAll sends count batches of 3 messages through the primary, each acknowledged
// before the next, and returns the next sequence number.
func (c *testCluster) sendAll(first uint64, count int, rec *sendRecorder, token uint64) uint64 {
	c.t.Helper()
	for b := 0; b < count; b++ {
		c.send(makeBatch(c.t, first, 3, 40), 10_000+first, rec, token)
		for round := 0; ; round++ {
			if round == 10_000 {
				c.t.Fatalf("send %d is never acknowledged", token)
			}
			if _, ok := rec.acked[token]; ok {
				break
			}
			if err := rec.failed[token]; err != nil {
				c.t.Fatalf("send %d failed: %v", token, err)
			}
			if !c.deliverOne() {
				moved := 0
				for _, s := range c.stores {
					moved += s.PollIO()
				}
				if moved == 0 {
					for _, s := range c.stores {
						s.Tick()
					}
				}
			}
		}
		first += 3
		token++
	}
	return first
}

// A replica that restarts while its group goes on rejoins it (its durable group
// state, a probe for the view) and catches up: by repair from the primary's
// retained ops when it missed few, by state transfer when it missed more than the
// primary retains. Every replica then holds the primary's log byte for byte, and
// the restarted one follows the group.
func TestClusterRestartedBackupCatchesUp(t *testing.T) {
	small := fsyncConfig()
	small.SegmentSizeBytes = 2048 // a segment every dozen batches or so
	for _, run := range []struct {
		cfg          Config
		openFilesMax int
	}{
		{Config{PartitionsCount: 1}, 0}, {fsyncConfig(), 0}, {small, 0},
		// Two open files a store: the segments, the journal and the group state
		// are closed and opened again as they are used.
		{small, 2},
	} {
		cfg := run.cfg
		c := newTestClusterOfFiles(t, 11, 3, cfg, run.openFilesMax)
		rec := newSendRecorder()
		next := c.sendAll(0, 5, rec, 1)
		c.tick(int(partitionTiming.CommitBroadcastIntervalTicks) + 1)
		down := 2
		token := uint64(100)
		for round, missed := range []int{10, headerWindow + 20, 0} {
			c.intercept = func(f *netFrame) bool { return int(f.to) != down && int(f.from) != down }
			next = c.sendAll(next, missed, rec, token)
			token += 100
			c.restart(down, 77+uint64(round))
			if st := c.stores[down].partitions[testKey].group.core.Status(); st != vsr.StatusRecovering {
				t.Fatalf("enforce_fsync %v round %d: a restarted replica is %v, want recovering (it must not trust its memory)", cfg.EnforceFsync, round, st)
			}
			c.intercept = nil
			next = c.sendAll(next, 3, rec, token)
			token += 100
			c.tick(int(partitionTiming.HeartbeatTimeoutTicks) + 1)

			restarted := c.stores[down].partitions[testKey]
			if err := c.stores[down].Err(testKey); err != nil {
				t.Fatalf("enforce_fsync %v round %d: restarted replica: %v", cfg.EnforceFsync, round, err)
			}
			// With enforce_fsync every batch survives the power loss, so the log
			// ends at the checkpoint and only what was missed is fetched.
			switch {
			case cfg.EnforceFsync && missed < headerWindow && restarted.transfer.installs != 0:
				t.Fatalf("round %d: %d ops missed were taken by state transfer, not repaired", round, missed)
			case missed > headerWindow && restarted.transfer.installs == 0:
				t.Fatalf("enforce_fsync %v round %d: %d ops missed, no state transfer", cfg.EnforceFsync, round, missed)
			}
			if cfg.SegmentSizeBytes > 0 && restarted.transfer.installs > 0 && restarted.transfer.segmentsHeld == 0 {
				t.Fatalf("round %d: the transfer fetched every segment, the sealed ones it held too", round)
			}
			for i := range c.stores {
				if !bytes.Equal(c.logBytes(i), c.logBytes(0)) {
					t.Fatalf("enforce_fsync %v round %d: replica %d's log (%d bytes) differs from the primary's (%d bytes)", cfg.EnforceFsync, round, i, len(c.logBytes(i)), len(c.logBytes(0)))
				}
			}
			_, msgs := poll(t, c.stores[down], testKey, PollRequest{Strategy: wire.PollingStrategy{Kind: wire.PollingFirst}, Count: 10_000})
			if len(msgs) != int(next) {
				t.Fatalf("enforce_fsync %v round %d: the restarted replica serves %d messages, want %d", cfg.EnforceFsync, round, len(msgs), next)
			}
		}
		if run.openFilesMax > 0 {
			for i, s := range c.stores {
				if f := s.OpenFiles(); f.Reopens == 0 || f.Open > run.openFilesMax {
					t.Fatalf("replica %d: files %+v under a budget of %d", i, f, run.openFilesMax)
				}
			}
		}
	}
}

// elect ticks the cluster until one replica leads the group, makes it the leader
// sends go to, and returns it.
func (c *testCluster) elect() int {
	c.t.Helper()
	for round := 0; round < 20_000; round++ {
		for _, s := range c.stores {
			s.Tick()
		}
		c.settle()
		for i, s := range c.stores {
			if s.partitions[testKey].group.core.IsPrimary() {
				c.leader = i
				return i
			}
		}
	}
	c.t.Fatal("no replica leads the group")
	return -1
}

// Every replica of an enforce_fsync group loses power at once, right after sends
// were acknowledged: they restart, elect a primary among themselves, and the group
// serves again with every acknowledged batch on every replica.
func TestClusterWholeGroupRestartKeepsAcknowledged(t *testing.T) {
	for seed := uint64(1); seed <= 8; seed++ {
		c := newTestCluster(t, 40+seed, 3, fsyncConfig())
		rec := newSendRecorder()
		next := c.sendAll(0, 2, rec, 1)
		for i := range c.stores {
			c.restart(i, seed*10+uint64(i))
		}
		c.elect()
		next = c.sendAll(next, 2, rec, 100)
		c.tick(int(partitionTiming.HeartbeatTimeoutTicks) + 1)
		for i, s := range c.stores {
			if err := s.Err(testKey); err != nil {
				t.Fatalf("seed %d: replica %d: %v", seed, i, err)
			}
			_, msgs := poll(t, s, testKey, PollRequest{Strategy: wire.PollingStrategy{Kind: wire.PollingFirst}, Count: 1000})
			if len(msgs) != int(next) {
				t.Fatalf("seed %d: replica %d serves offsets %v, want 0..%d", seed, i, offsetsOf(msgs), next-1)
			}
		}
	}
}

// A backup of an enforce_fsync group forwards each prepare down the chain only once
// its journal write is durable, after the frame it came in was released: the
// forwarded prepare carries the journal's copy, and the next hop takes it.
func TestClusterHeldForwardOutlivesItsFrame(t *testing.T) {
	c := newTestCluster(t, 21, 3, fsyncConfig())
	rec := newSendRecorder()
	c.sendAll(0, 4, rec, 1)
	c.tick(int(partitionTiming.CommitBroadcastIntervalTicks) + 1)
	if len(c.stepErrs) != 0 {
		t.Fatalf("frames refused: %v", c.stepErrs)
	}
	for i := range c.stores {
		if !bytes.Equal(c.logBytes(i), c.logBytes(0)) {
			t.Fatalf("replica %d's log differs from the primary's", i)
		}
	}
}

// A state install replaces the partition's own files and nothing else: the files
// of others in its directory (the server's purge record, which makes a replayed
// purge a no-op) are there after it, byte for byte.
func TestStateInstallKeepsFilesOfOthers(t *testing.T) {
	for _, cfg := range []Config{{PartitionsCount: 1}, fsyncConfig()} {
		c := newTestCluster(t, 31, 3, cfg)
		rec := newSendRecorder()
		next := c.sendAll(0, 5, rec, 1)
		down := 2
		disk := c.storages[down].disks[c.stores[down].Dir(testKey)]
		foreign := map[string][]byte{
			"purge.gen":                 []byte("generation, created_revision, revision"),
			"offsets/consumers/README":  []byte("not a consumer id"),
			"00000000000000000000.logx": []byte("not a segment"),
		}
		for name, data := range foreign {
			if err := writeWhole(disk, name, data); err != nil {
				t.Fatal(err)
			}
		}
		c.intercept = func(f *netFrame) bool { return int(f.to) != down && int(f.from) != down }
		next = c.sendAll(next, headerWindow+20, rec, 100)
		c.intercept = nil
		c.sendAll(next, 3, rec, 1000)
		c.tick(int(partitionTiming.HeartbeatTimeoutTicks) + 1)
		if n := c.stores[down].StatesInstalled(); n == 0 {
			t.Fatalf("enforce_fsync %v: the lagging backup took no state transfer", cfg.EnforceFsync)
		}
		if !bytes.Equal(c.logBytes(down), c.logBytes(0)) {
			t.Fatalf("enforce_fsync %v: the installed log differs from the primary's", cfg.EnforceFsync)
		}
		for name, want := range foreign {
			f, size, err := disk.Open(name, false, 0)
			if err != nil {
				t.Fatalf("enforce_fsync %v: %s is gone after the install: %v", cfg.EnforceFsync, name, err)
			}
			got := make([]byte, size)
			r := &segment.Request{Op: segment.OpRead, File: f, Data: got}
			if err := waitRequest(disk, r); err != nil || !bytes.Equal(got, want) {
				t.Fatalf("enforce_fsync %v: %s after the install: %q (%v), want %q", cfg.EnforceFsync, name, got, err, want)
			}
			_ = disk.Close(f)
		}
	}
}
