package partition

import (
	"bytes"
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

// lagReplica2 builds a 3-replica group of cfg (segments of 4 KiB) where replica 2 holds
// the first batches only: the frames to it are held (a slow link, a frozen node)
// while the others commit `more` batches. It returns the frames held.
func lagReplica2(t *testing.T, cfg Config, before, more int) (*testCluster, *[]netFrame) {
	t.Helper()
	c := newTestCluster(t, 7, 3, cfg)
	rec := newSendRecorder()
	next := c.sendAll(0, before, rec, 1)
	held := new([]netFrame)
	c.intercept = func(f *netFrame) bool {
		if f.to == 2 {
			*held = append(*held, *f)
			return false
		}
		return true
	}
	c.sendAll(next, more, rec, uint64(before)+1)
	return c, held
}

// heal delivers the frames held for replica 2, lets it hear the group again and
// ticks until it holds what the primary holds (its log's next offset).
func heal(t *testing.T, c *testCluster, held *[]netFrame) {
	t.Helper()
	c.intercept = nil
	c.queue = append(*held, c.queue...)
	want := c.stores[0].partitions[testKey].log.NextOffset()
	for round := 0; c.stores[2].partitions[testKey].log.NextOffset() < want; round++ {
		if round == 2_000 {
			t.Fatalf("replica 2 never catches up: next offset %d, want %d",
				c.stores[2].partitions[testKey].log.NextOffset(), want)
		}
		c.tick(1)
	}
	c.tick(int(partitionTiming.CommitBroadcastIntervalTicks) + 1)
	for _, s := range c.stores {
		s.WaitIdle()
	}
}

// syncAll makes every replica's log durable.
func syncAll(c *testCluster) {
	for _, s := range c.stores {
		s.WaitIdle()
		s.partitions[testKey].log.Sync()
		s.WaitIdle()
	}
}

// sameLogs fails unless every replica serves the same first offset, segments and
// bytes.
func sameLogs(t *testing.T, c *testCluster) {
	t.Helper()
	info0, _ := c.stores[0].Info(testKey)
	first0 := c.stores[0].partitions[testKey].log.FirstOffset()
	for i := 1; i < len(c.stores); i++ {
		info, _ := c.stores[i].Info(testKey)
		first := c.stores[i].partitions[testKey].log.FirstOffset()
		if first != first0 || info.SegmentsCount != info0.SegmentsCount || info.MessagesCount != info0.MessagesCount {
			t.Fatalf("replica %d serves segments=%d messages=%d first=%d, replica 0 segments=%d messages=%d first=%d",
				i, info.SegmentsCount, info.MessagesCount, first, info0.SegmentsCount, info0.MessagesCount, first0)
		}
		if !bytes.Equal(c.logBytes(i), c.logBytes(0)) {
			t.Fatalf("replica %d's log differs from replica 0's", i)
		}
	}
}

// deleteRecorder is an OffsetCompletion that keeps what each token was told.
type deleteRecorder struct {
	done map[uint64]error
}

func (r *deleteRecorder) OffsetDone(token uint64, err error) {
	if r.done == nil {
		r.done = make(map[uint64]error)
	}
	r.done[token] = err
}

// deleteSegmentsEverywhere carries out a DeleteSegments effect of revision on
// every replica, as each node's partitionhost does: the primary (replica 0)
// proposes, the others refuse (58) and wait for its op. It settles the reachable
// replicas until the primary's op is applied there.
func deleteSegmentsEverywhere(t *testing.T, c *testCluster, count uint32, revision uint64) {
	t.Helper()
	rec := &deleteRecorder{}
	for i, s := range c.stores {
		deferred, err := s.ReplicateDeleteSegments(testKey, count, revision, rec, revision)
		switch {
		case i == c.leader && (!deferred || err != nil):
			t.Fatalf("the primary: deferred %v, err %v", deferred, err)
		case i != c.leader && err != wire.ErrTransientNotAccepted:
			t.Fatalf("backup %d: deferred %v, err %v, want 58", i, deferred, err)
		}
	}
	for round := 0; ; round++ {
		if err, ok := rec.done[revision]; ok {
			if err != nil {
				t.Fatalf("the primary's DeleteSegments op: %v", err)
			}
			return
		}
		if round == 1_000 {
			t.Fatal("the primary's DeleteSegments op is never applied")
		}
		c.tick(1)
	}
}

// A DeleteSegments op deletes the same segments on every replica, whatever each
// one's log held when the metadata op reached it: here replica 2 holds 60 of the
// primary's 108 messages (3 segments of its 5) when it applies, then receives the
// rest. Each used to delete its own 3 oldest sealed segments: replica 2 deleted 2,
// received the others and kept them (first offset 48 against 72, 60 messages
// against 36).
func TestClusterDeleteSegmentsAgreeOnALaggingBackup(t *testing.T) {
	for _, fsync := range []bool{false, true} {
		cfg := smallConfig()
		cfg.EnforceFsync = fsync
		c, held := lagReplica2(t, cfg, 20, 16)
		deleteSegmentsEverywhere(t, c, 3, 100)
		heal(t, c, held)
		sameLogs(t, c)
		if first := c.stores[2].partitions[testKey].log.FirstOffset(); first != 72 {
			t.Fatalf("enforce_fsync %v: first offset %d after deleting 3 of 5 segments, want 72", fsync, first)
		}
		for i, s := range c.stores {
			if rev, _ := s.DeletedSegmentsRevision(testKey); rev != 100 {
				t.Fatalf("enforce_fsync %v: replica %d applied DeleteSegments revision %d, want 100", fsync, i, rev)
			}
		}
	}
}

// A DeleteSegments op counts once: the primary asked again for the same metadata
// op (a restart applying it again, a new primary taking it up after a view change)
// finds it applied and deletes nothing more; a whole group restart keeps what was
// deleted and deletes nothing again, with and without the journal file.
func TestClusterDeleteSegmentsCountOnce(t *testing.T) {
	for _, fsync := range []bool{false, true} {
		cfg := smallConfig()
		cfg.EnforceFsync = fsync
		c, held := lagReplica2(t, cfg, 20, 16)
		heal(t, c, held)
		deleteSegmentsEverywhere(t, c, 2, 100)
		want, _ := c.stores[0].Info(testKey)
		if deferred, err := c.stores[0].ReplicateDeleteSegments(testKey, 2, 100, &deleteRecorder{}, 1); deferred || err != nil {
			t.Fatalf("enforce_fsync %v: asked again: deferred %v, err %v, want nothing to do", fsync, deferred, err)
		}
		syncAll(c) // a power loss here takes no batch: what is compared is the deletions
		for i := range c.stores {
			c.restart(i, 50+uint64(i))
		}
		c.elect()
		c.tick(int(partitionTiming.HeartbeatTimeoutTicks) + 1)
		if deferred, err := c.stores[c.leader].ReplicateDeleteSegments(testKey, 2, 100, &deleteRecorder{}, 1); deferred || err != nil {
			t.Fatalf("enforce_fsync %v: the primary after a restart: deferred %v, err %v, want nothing to do", fsync, deferred, err)
		}
		c.tick(1)
		sameLogs(t, c)
		if got, _ := c.stores[0].Info(testKey); got.SegmentsCount != want.SegmentsCount || got.MessagesCount != want.MessagesCount {
			t.Fatalf("enforce_fsync %v: after the restart %d segments, %d messages; before it %d, %d",
				fsync, got.SegmentsCount, got.MessagesCount, want.SegmentsCount, want.MessagesCount)
		}
	}
}

// A crash between a DeleteSegments op's record and its deletions leaves segments
// the op deleted: the partition finishes the deletion when it opens again.
func TestClusterDeleteSegmentsCutShortIsFinishedAtOpen(t *testing.T) {
	c, held := lagReplica2(t, smallConfig(), 20, 16)
	heal(t, c, held)
	below, n, err := c.stores[0].partitions[testKey].log.OldestSealedEnd(2)
	if err != nil || n != 2 {
		t.Fatalf("two oldest sealed segments: end %d, %d of them, %v", below, n, err)
	}
	syncAll(c)
	for i, s := range c.stores {
		if err := s.partitions[testKey].recordDeletedSegments(deletedSegments{revision: 100, below: below}); err != nil {
			t.Fatal(err)
		}
		c.restart(i, 60+uint64(i))
	}
	c.elect()
	for i, s := range c.stores {
		if first := s.partitions[testKey].log.FirstOffset(); first != below {
			t.Fatalf("replica %d opens at offset %d, want %d: the recorded deletion was not finished", i, first, below)
		}
	}
	sameLogs(t, c)
}

// A second DeleteSegments op of a revision applied already (a second primary's,
// resolved against a log the first op trimmed) deletes nothing on any replica.
func TestClusterDeleteSegmentsOfAnAppliedRevisionDeleteNothing(t *testing.T) {
	c, held := lagReplica2(t, smallConfig(), 20, 16)
	heal(t, c, held)
	deleteSegmentsEverywhere(t, c, 1, 100)
	want, _ := c.stores[0].Info(testKey)
	p := c.stores[0].partitions[testKey]
	below, n, err := p.log.OldestSealedEnd(2)
	if err != nil || n != 2 {
		t.Fatalf("two oldest sealed segments: end %d, %d of them, %v", below, n, err)
	}
	rec := &deleteRecorder{}
	if _, err := p.propose(proposal{operation: wire.OperationDeleteSegments, body: encodeDeleteSegmentsOp(100, below), offsetDone: rec, token: 1}); err != nil {
		t.Fatal(err)
	}
	p.afterRun()
	for round := 0; ; round++ {
		if err, ok := rec.done[1]; ok {
			if err != nil {
				t.Fatal(err)
			}
			break
		}
		if round == 1_000 {
			t.Fatal("the second op is never applied")
		}
		c.tick(1)
	}
	c.tick(int(partitionTiming.CommitBroadcastIntervalTicks) + 1)
	sameLogs(t, c)
	if got, _ := c.stores[0].Info(testKey); got.SegmentsCount != want.SegmentsCount {
		t.Fatalf("%d segments after a second op of the same revision, %d before it", got.SegmentsCount, want.SegmentsCount)
	}
}

// A replica that installs a state cannot tell which DeleteSegments ops the state
// held: its record says so, durably, and as a primary it proposes no op of a
// revision above its record (one it cannot tell applied) until an op has applied
// there from the group again.
func TestClusterDeleteSegmentsAfterAStateInstall(t *testing.T) {
	c := newTestCluster(t, 9, 3, smallConfig())
	rec := newSendRecorder()
	next := c.sendAll(0, 20, rec, 1)
	c.intercept = func(f *netFrame) bool { return f.to != 2 && f.from != 2 }
	deleteSegmentsEverywhere(t, c, 2, 100)
	c.sendAll(next, headerWindow+20, rec, 100) // more than the primary retains: a state transfer
	heal(t, c, &[]netFrame{})
	sameLogs(t, c)
	if p := c.stores[2].partitions[testKey]; p.transfer.installs == 0 || !p.deleted.installed {
		t.Fatalf("replica 2: %d states installed, record %+v; want an install, marked", p.transfer.installs, p.deleted)
	}
	syncAll(c)
	c.restart(2, 70)
	c.tick(int(partitionTiming.HeartbeatTimeoutTicks) + 1)
	if d := c.stores[2].partitions[testKey].deleted; !d.installed {
		t.Fatalf("replica 2's record after a restart: %+v, want it marked installed over", d)
	}

	primary := c.stores[c.leader].partitions[testKey]
	primary.deleted.installed = true // as if it were the one that installed a state
	if deferred, err := c.stores[c.leader].ReplicateDeleteSegments(testKey, 1, 200, &deleteRecorder{}, 1); deferred || err != ErrDeleteSegmentsUncertain {
		t.Fatalf("a primary installed over: deferred %v, err %v; want %v", deferred, err, ErrDeleteSegmentsUncertain)
	}
	primary.deleted.installed = false

	deleteSegmentsEverywhere(t, c, 1, 300)
	c.tick(int(partitionTiming.CommitBroadcastIntervalTicks) + 1)
	sameLogs(t, c)
	if d := c.stores[2].partitions[testKey].deleted; d.installed || d.revision != 300 {
		t.Fatalf("replica 2's record after an op applied: %+v, want revision 300, unmarked", d)
	}
}
