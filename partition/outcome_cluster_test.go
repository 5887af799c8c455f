package partition

import (
	"bytes"
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

// 58 TransientNotAccepted says a request was not admitted, so that the client may
// send it again anywhere: it is never said of a send this replica prepared. A send
// prepared here that leaves the journal without being applied here, its fate not
// known (a stopped group, a closed store), is answered 57 TransientNotCommitted
// (outcome unknown): its prepare may be in a peer's journal, and a new view
// commits it. So is a synchronous offset store that returns before its commit
// (TestClusterConsumerOffsetIsReplicated).

// electSurvivors has replicas 1 and 2 elect a primary among them while replica 0
// is cut off, and returns it.
func (c *testCluster) electSurvivors() *Partition {
	c.t.Helper()
	c.intercept = func(f *netFrame) bool { return f.from != 0 && f.to != 0 }
	for round := 0; ; round++ {
		for _, s := range c.stores[1:] {
			if p := s.partitions[testKey]; p.group.core.IsPrimary() {
				return p
			}
		}
		if round == 5_000 {
			c.t.Fatal("replicas 1 and 2 elect no primary")
		}
		for _, s := range c.stores[1:] {
			s.Tick()
		}
		c.settle()
	}
}

// survivorsHold checks that replicas 1 and 2 hold the same log, of want messages.
func (c *testCluster) survivorsHold(want int) {
	c.t.Helper()
	c.tick(int(partitionTiming.CommitBroadcastIntervalTicks) + 1)
	for _, s := range c.stores[1:] {
		s.WaitIdle()
	}
	if !bytes.Equal(c.logBytes(1), c.logBytes(2)) {
		c.t.Fatal("the survivors' logs differ")
	}
	_, msgs := poll(c.t, c.stores[1], testKey, PollRequest{Strategy: wire.PollingStrategy{Kind: wire.PollingFirst}, Count: 100})
	if len(msgs) != want {
		c.t.Fatalf("the survivors hold %d messages, want %d", len(msgs), want)
	}
}

// A primary whose journal write fails stops its group; the prepare went down the
// chain before that write (vsr.Ready.SendableEarly), the backups journaled it, and
// the view they elect commits it: the send was in the log, and was answered 4006
// ("cut from the log, never polled").
func TestClusterSendOfAStoppedPrimaryIsNotCommittedNotRefused(t *testing.T) {
	c := newTestCluster(t, 70, 3, fsyncConfig())
	rec := newSendRecorder()
	c.sendAll(0, 1, rec, 1)
	c.storages[0].disks[c.stores[0].Dir(testKey)].FailNextSyncs(1)
	c.send(makeBatch(t, 3, 3, 40), 20_000, rec, 2)
	c.settle()
	if c.stores[0].Err(testKey) == nil {
		t.Fatal("the primary whose journal sync failed still serves its partition")
	}
	if err := rec.failed[2]; err != wire.ErrTransientNotCommitted {
		t.Fatalf("the send of the stopped primary: acked %v, failed %v; want 57", rec.acked[2], err)
	}
	c.electSurvivors()
	c.survivorsHold(6)
}

// A primary closed (a shutdown) with a send prepared, its acknowledgements not
// back yet: it is answered 57, and the survivors' new view commits it. It was
// answered 4006 ("cut from the log, never polled").
func TestClusterSendOfAClosedPrimaryIsNotCommittedNotRefused(t *testing.T) {
	c := newTestCluster(t, 71, 3, Config{PartitionsCount: 1})
	rec := newSendRecorder()
	c.sendAll(0, 1, rec, 1)
	c.intercept = func(f *netFrame) bool { return f.to != 0 } // the acks are lost
	c.send(makeBatch(t, 3, 3, 40), 20_000, rec, 2)
	c.settle()
	if backup := c.stores[1].partitions[testKey]; backup.group.core.Op() != 2 {
		t.Fatalf("the backup prepared up to op %d, want 2", backup.group.core.Op())
	}
	if err := c.stores[0].Close(); err != nil {
		t.Fatal(err)
	}
	if err := rec.failed[2]; err != wire.ErrTransientNotCommitted {
		t.Fatalf("the send of the closed primary: acked %v, failed %v; want 57", rec.acked[2], err)
	}
	c.electSurvivors()
	c.survivorsHold(6)
}
