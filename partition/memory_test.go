package partition

import (
	"bytes"
	"errors"
	"runtime/debug"
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

// checkBodiesGiven settles the cluster and checks that every store gave back every
// copy of a body it made, and every frame it was lent: nothing is prepared and not
// applied, every log is idle.
func (c *testCluster) checkBodiesGiven() {
	c.t.Helper()
	c.settle()
	for i, s := range c.stores {
		s.WaitIdle()
		if s.bodies.inUseBytes != 0 {
			c.t.Fatalf("replica %d holds %d bytes of body copies with nothing in flight", i, s.bodies.inUseBytes)
		}
		if out, _ := s.LentBodies(); out != 0 || c.lenders[i] != nil && len(c.lenders[i].loans) != 0 {
			c.t.Fatalf("replica %d holds %d frames on loan with nothing in flight", i, out)
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
		if backup.transfer.installs != 0 {
			t.Fatalf("enforce_fsync %v: %d ops missed were taken by state transfer, not repaired", cfg.EnforceFsync, headerWindow/2)
		}
		for i := range c.stores {
			if !bytes.Equal(c.logBytes(i), c.logBytes(0)) {
				t.Fatalf("enforce_fsync %v: replica %d's log differs from the primary's", cfg.EnforceFsync, i)
			}
			if p := c.stores[i].partitions[testKey]; p.group.recent.n == 0 {
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
	h, _ := p.group.core.Header(oldest)
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
	dropped, counted := 0, uint64(0)
	for _, err := range c.stepErrs {
		if errors.Is(err, errBodyBudget) {
			dropped++
		}
	}
	for _, s := range c.stores {
		counted += s.IngressDrops()[IngressBodyBudget]
	}
	if dropped == 0 || counted != uint64(dropped) {
		t.Fatalf("%d prepares dropped for the budget, %d counted (IngressBodyBudget)", dropped, counted)
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

// The body budget bounds a store, not each partition: with 16 partitions taking
// prepares at once and room for three batches, a backup holds at most its budget
// plus one batch (each partition could take one past the budget before, 16 in
// all), and every send still commits, the prepares refused retransmitted.
func TestBodyBudgetBoundsTheStoreNotEachPartition(t *testing.T) {
	const partitions, sendsEach = 16, 4
	c := idleCluster(t, partitions)
	batchBytes := len(makeBatch(t, 0, 4, 500))
	for _, s := range c.stores {
		s.bodies.budgetBytes = int64(3 * batchBytes)
	}
	rec := newSendRecorder()
	sends := uint64(0)
	for i := range sendsEach {
		for p := range uint32(partitions) {
			k := Key{StreamID: 1, TopicID: 1, PartitionID: p}
			if err := c.stores[0].Send(k, sendRequest(makeBatch(t, uint64(i)*4, 4, 500)), 5_000+sends, rec, sends); err != nil {
				t.Fatalf("send %d to %v: %v", i, k, err)
			}
			sends++
		}
	}
	for round := 0; rec.done() < int(sends); round++ {
		if round == 20_000 {
			t.Fatalf("%d of %d sends done", rec.done(), sends)
		}
		c.runTicks(1)
	}
	for token, err := range rec.failed {
		t.Fatalf("send %d failed: %v", token, err)
	}
	c.runTicks(int(partitionTiming.CommitBroadcastIntervalTicks) + 1)
	refused := uint64(0)
	for i, s := range c.stores {
		refused += s.IngressDrops()[IngressBodyBudget]
		if s.bodies.peakBytes > s.bodies.budgetBytes+int64(batchBytes) {
			t.Fatalf("replica %d held %d bytes of copies, past its budget (%d) by more than one batch (%d)", i, s.bodies.peakBytes, s.bodies.budgetBytes, batchBytes)
		}
		for _, k := range s.Keys(nil) {
			if got := s.partitions[k].log.NextOffset(); got != sendsEach*4 {
				t.Fatalf("replica %d, partition %v: %d messages, want %d", i, k, got, sendsEach*4)
			}
		}
		s.WaitIdle()
		if s.bodies.inUseBytes != 0 {
			t.Fatalf("replica %d holds %d bytes of body copies with nothing in flight", i, s.bodies.inUseBytes)
		}
	}
	if refused == 0 {
		t.Fatal("no prepare was refused for the budget: the test does not reach it")
	}
}

// Batches read back for repairs share the store's budget too: past it, one
// partition's first read is served while nothing else holds the store past its
// budget, and another partition's read waits (the core skips the op, the peer
// asks again) until the Ready that carries the first is done.
func TestRepairReadsShareTheStoreBudget(t *testing.T) {
	c := idleCluster(t, 2)
	rec := newSendRecorder()
	keys := []Key{{StreamID: 1, TopicID: 1, PartitionID: 0}, {StreamID: 1, TopicID: 1, PartitionID: 1}}
	for i, k := range keys {
		for b := range 2 {
			token := uint64(10*i + b)
			if err := c.stores[0].Send(k, sendRequest(makeBatch(t, uint64(b)*3, 3, 100)), 5_000+token, rec, token); err != nil {
				t.Fatal(err)
			}
		}
	}
	c.runTicks(int(partitionTiming.CommitBroadcastIntervalTicks) + 1)
	if len(rec.acked) != 4 {
		t.Fatalf("%d of 4 sends acknowledged (%v)", len(rec.acked), rec.failed)
	}
	s := c.stores[0]
	s.bodies.budgetBytes = 1
	read := func(p *Partition, op uint64) bool {
		h, ok := p.group.core.Header(op)
		if !ok {
			t.Fatalf("partition %v: no header of op %d", p.key, op)
		}
		_, ok = p.appliedBody(op, h.Checksum)
		return ok
	}
	a, b := s.partitions[keys[0]], s.partitions[keys[1]]
	if !read(a, 1) {
		t.Fatal("the first read past the budget was refused: no repair could progress")
	}
	if read(a, 2) {
		t.Fatal("a second read of the same Ready was served past the budget")
	}
	if read(b, 1) {
		t.Fatal("another partition's read was served while the first holds the store past its budget")
	}
	a.releaseRepairReads()
	if !read(b, 1) {
		t.Fatal("the read was refused once the store held nothing")
	}
	b.releaseRepairReads()
}

// A backup's journal copies of large bodies reuse the buffers of the copies its log
// has written: a stream of 128 KB prepares, one in flight, costs each backup a
// buffer or two, not one per prepare. (The collector, which may empty the pool, is
// held off meanwhile.)
func TestBackupReusesItsBodyCopies(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	c := newTestCluster(t, 41, 3, Config{PartitionsCount: 1})
	rec := newSendRecorder()
	const sends = 40
	for i := range sends {
		token := uint64(i + 1)
		c.send(makeBatch(t, uint64(i)*16, 16, 8<<10), 10_000+uint64(i), rec, token)
		c.settle()
		for _, s := range c.stores {
			s.WaitIdle()
		}
		c.settle()
		if _, ok := rec.acked[token]; !ok {
			t.Fatalf("send %d not acknowledged (failed: %v)", token, rec.failed[token])
		}
	}
	for i, s := range c.stores {
		if i == c.leader {
			continue
		}
		if made := s.bodies.buffers.made; made > 3 {
			t.Errorf("backup %d allocated %d buffers for %d prepares of 128 KB, one in flight", i, made, sends)
		}
	}
	c.checkBodiesGiven()
}
