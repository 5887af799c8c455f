package partition

import (
	"bytes"
	"errors"
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

// checkBodiesGiven settles the cluster and checks that every store gave back every
// copy of a body it made: nothing is prepared and not applied, every log is idle.
func (c *testCluster) checkBodiesGiven() {
	c.t.Helper()
	c.settle()
	for i, s := range c.stores {
		s.WaitIdle()
		if s.bodies.inUseBytes != 0 {
			c.t.Fatalf("replica %d holds %d bytes of body copies with nothing in flight", i, s.bodies.inUseBytes)
		}
	}
}

// A backup that lost a few prepares repairs them from its peers, who read the
// applied ones back from their segment files (no replica keeps a copy of what it
// applied): no state transfer, the same log on every replica, and every copy made
// on the way given back.
func TestClusterRepairReadsAppliedOpsFromTheLog(t *testing.T) {
	for _, cfg := range []Config{{PartitionsCount: 1}, fsyncConfig()} {
		c := newTestCluster(t, 31, 3, cfg)
		rec := newSendRecorder()
		next := c.sendAll(0, 3, rec, 1)
		const down = 2
		c.intercept = func(f *netFrame) bool { return int(f.to) != down }
		next = c.sendAll(next, headerWindow/2, rec, 100)
		c.intercept = nil
		// The peers apply what they prepared, then one more send: the backup
		// sees the gap and repairs it.
		c.tick(int(partitionTiming.CommitBroadcastIntervalTicks) + 1)
		next = c.sendAll(next, 1, rec, 200)
		c.tick(int(partitionTiming.HeartbeatTimeoutTicks) + 1)
		backup := c.stores[down].partitions[testKey]
		if backup.transfers != 0 {
			t.Fatalf("enforce_fsync %v: %d ops missed were taken by state transfer, not repaired", cfg.EnforceFsync, headerWindow/2)
		}
		for i := range c.stores {
			if !bytes.Equal(c.logBytes(i), c.logBytes(0)) {
				t.Fatalf("enforce_fsync %v: replica %d's log differs from the primary's", cfg.EnforceFsync, i)
			}
			if p := c.stores[i].partitions[testKey]; p.recent.n == 0 {
				t.Fatalf("enforce_fsync %v: replica %d remembers no applied op", cfg.EnforceFsync, i)
			}
		}
		_, msgs := poll(t, c.stores[down], testKey, PollRequest{Strategy: wire.PollingStrategy{Kind: wire.PollingFirst}, Count: 10_000})
		if len(msgs) != int(next) {
			t.Fatalf("enforce_fsync %v: the backup serves %d messages, want %d", cfg.EnforceFsync, len(msgs), next)
		}
		c.checkBodiesGiven()
	}
}

// An op whose batch retention deleted is not served for repair: the replica
// answers from its oldest batch still stored (RangeEvicted below it).
func TestRepairServesNoOpRetentionDeleted(t *testing.T) {
	c := newTestCluster(t, 32, 3, smallConfig())
	rec := newSendRecorder()
	c.sendAll(0, 30, rec, 1)
	c.tick(int(partitionTiming.CommitBroadcastIntervalTicks) + 1)
	s := c.stores[0]
	p := s.partitions[testKey]
	oldest := p.oldestServed()
	if oldest >= p.journal.firstOp || oldest > p.journal.firstOp-uint64(min(30, headerWindow)) {
		t.Fatalf("serves from op %d, the journal starts at %d: the recent ops are not served", oldest, p.journal.firstOp)
	}
	h, _ := p.core.Header(oldest)
	if body, ok := p.appliedBody(oldest, h.Checksum); !ok || wire.CheckStoredBatch(body) != nil {
		t.Fatalf("op %d: not served from the log (%v)", oldest, ok)
	}
	p.releaseRepairReads()
	if _, err := s.DeleteSegments(testKey, 2); err != nil {
		t.Fatal(err)
	}
	after := p.oldestServed()
	if after <= oldest {
		t.Fatalf("after retention deleted two segments it still serves from op %d (was %d)", after, oldest)
	}
	if _, ok := p.appliedBody(oldest, h.Checksum); ok {
		t.Fatalf("op %d, deleted by retention, served", oldest)
	}
	if s.bodies.inUseBytes != 0 {
		t.Fatalf("%d bytes of reads held after the Ready", s.bodies.inUseBytes)
	}
}

// With a body budget of one byte a backup takes a prepare only while its partition
// holds no copy: the rest are dropped at ingress and retransmitted, and the group
// still commits every send, each backup holding at most one batch per partition.
func TestBodyBudgetDropsPreparesAndTheGroupGoesOn(t *testing.T) {
	c := newTestCluster(t, 33, 3, Config{PartitionsCount: 1})
	for i := range c.stores {
		c.stores[i].bodies.budgetBytes = 1
	}
	rec := newSendRecorder()
	// Sends in flight together: the pipeline brings several prepares to a backup
	// before any is applied.
	const sends = 12
	var biggest int
	for i := uint64(0); i < sends; i++ {
		b := makeBatch(t, i*3, 3, 200)
		biggest = max(biggest, len(b))
		c.send(b, 5_000+i, rec, i)
	}
	round := 0
	for ; rec.done() < sends; round++ {
		if round == 5_000 {
			t.Fatalf("%d of %d sends done", rec.done(), sends)
		}
		c.tick(1)
	}
	for token, err := range rec.failed {
		t.Fatalf("send %d failed: %v", token, err)
	}
	dropped := 0
	for _, err := range c.stepErrs {
		if errors.Is(err, errBodyBudget) {
			dropped++
		}
	}
	if dropped == 0 {
		t.Fatal("no prepare was dropped for the budget")
	}
	for i, s := range c.stores {
		if s.bodies.peakBytes > int64(biggest) {
			t.Fatalf("replica %d held %d bytes of copies, more than one batch (%d)", i, s.bodies.peakBytes, biggest)
		}
	}
	c.tick(int(partitionTiming.CommitBroadcastIntervalTicks) + 1)
	for i := range c.stores {
		if !bytes.Equal(c.logBytes(i), c.logBytes(0)) {
			t.Fatalf("replica %d's log differs from the primary's", i)
		}
	}
	c.checkBodiesGiven()
}
