package partition

import (
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

// A primary cut off from its backups with a request prepared only in its own
// journal loses that prepare when it learns the view its backups elected: the new
// view's log truncates it (dropAbove, when the new view has nothing at its op) or
// replaces it (discard, when the new primary prepared another batch there). The
// request is answered 57 TransientNotCommitted, as the reference answers one a view
// change cancels, and the SDK's replay of it is stored once. It was answered 4006
// ("the partition's storage failed"), which the SDKs do not replay.

// isolatePrimaryWithPrepare sends one acknowledged batch (token 1, 3 messages),
// then cuts replica 0 off and sends a batch of 3 there (token 2), which only its
// journal holds; the survivors elect a new primary, the leader sends go to then.
func isolatePrimaryWithPrepare(t *testing.T, seed uint64) (*testCluster, *sendRecorder) {
	t.Helper()
	c := newTestCluster(t, seed, 3, Config{PartitionsCount: 1})
	rec := newSendRecorder()
	c.sendAll(0, 1, rec, 1)
	c.intercept = func(f *netFrame) bool { return f.from != 0 && f.to != 0 }
	c.send(makeBatch(t, 3, 3, 40), 20_000, rec, 2)
	c.settle()
	if c.stores[0].partitions[testKey].journal.at(2) == nil {
		t.Fatal("the isolated primary did not prepare op 2")
	}
	if rec.done() != 1 {
		t.Fatalf("the isolated primary's send was answered before the view change: %v", rec.failed[2])
	}
	primary := c.electSurvivors()
	for i, s := range c.stores {
		if s.partitions[testKey] == primary {
			c.leader = i
		}
	}
	return c, rec
}

// rejoin lets replica 0 hear the survivors again and ticks until its cut send is
// answered.
func rejoin(t *testing.T, c *testCluster, rec *sendRecorder) error {
	t.Helper()
	c.intercept = nil
	for round := 0; round < 1_000; round++ {
		if _, acked := rec.acked[2]; acked {
			t.Fatal("the cut-off primary's send was acknowledged")
		}
		if err := rec.failed[2]; err != nil {
			return err
		}
		c.tick(1)
	}
	t.Fatal("the cut-off primary's send is never answered")
	return nil
}

// replayOnce sends the cut batch's bytes again, as the SDK replays a 57 (the cut
// copy was stamped in place), and checks every replica holds it once: want
// messages in all.
func replayOnce(t *testing.T, c *testCluster, rec *sendRecorder, token uint64, want int) {
	t.Helper()
	c.send(makeBatch(t, 3, 3, 40), 30_000, rec, token)
	for round := 0; ; round++ {
		if _, ok := rec.acked[token]; ok {
			break
		}
		if err := rec.failed[token]; err != nil || round == 1_000 {
			t.Fatalf("the replay: failed %v after %d rounds", err, round)
		}
		c.tick(1)
	}
	c.survivorsHold(want)
	c.tick(int(partitionTiming.CommitBroadcastIntervalTicks) + 1)
	c.stores[0].WaitIdle()
	if string(c.logBytes(0)) != string(c.logBytes(1)) {
		t.Fatal("the rejoined replica's log differs from the survivors'")
	}
}

func TestClusterSendTruncatedByAViewChangeIsAnswered57(t *testing.T) {
	c, rec := isolatePrimaryWithPrepare(t, 90)
	if op := c.stores[c.leader].partitions[testKey].group.core.Op(); op != 1 {
		t.Fatalf("the new primary's log reaches op %d, want 1 (nothing at the cut op)", op)
	}
	if err := rejoin(t, c, rec); err != wire.ErrTransientNotCommitted {
		t.Fatalf("the truncated send was answered %v, want 57 %v", err, wire.ErrTransientNotCommitted)
	}
	replayOnce(t, c, rec, 3, 6)
}

func TestClusterSendReplacedByAViewChangeIsAnswered57(t *testing.T) {
	c, rec := isolatePrimaryWithPrepare(t, 91)
	// The survivors prepare and commit another batch at the cut op.
	c.intercept = func(f *netFrame) bool { return f.from != 0 && f.to != 0 }
	c.sendAll(100, 1, rec, 10)
	if op := c.stores[c.leader].partitions[testKey].group.core.Op(); op != 2 {
		t.Fatalf("the new primary's log reaches op %d, want 2 (another batch at the cut op)", op)
	}
	if err := rejoin(t, c, rec); err != wire.ErrTransientNotCommitted {
		t.Fatalf("the replaced send was answered %v, want 57 %v", err, wire.ErrTransientNotCommitted)
	}
	replayOnce(t, c, rec, 3, 9)
}

// An offset store prepared only in the cut-off primary's journal is answered 57 as
// well when the new view truncates it: the same path as a send (finishEntry).
func TestClusterOffsetStoreTruncatedByAViewChangeIsAnswered57(t *testing.T) {
	c := newTestCluster(t, 92, 3, Config{PartitionsCount: 1})
	rec := newSendRecorder()
	c.sendAll(0, 1, rec, 1)
	c.intercept = func(f *netFrame) bool { return f.from != 0 && f.to != 0 }
	offsets := &offsetRecorder{done: map[uint64]error{}}
	consumer := Consumer{Kind: wire.ConsumerSingle, ID: 7}
	deferred, err := c.stores[0].ReplicateConsumerOffset(testKey, consumer, 1, false, offsets, 1)
	if err != nil || !deferred {
		t.Fatalf("offset store on the cut-off primary: deferred %v, %v", deferred, err)
	}
	c.settle()
	c.electSurvivors()
	c.intercept = nil
	for round := 0; ; round++ {
		if err, ok := offsets.done[1]; ok {
			if err != wire.ErrTransientNotCommitted {
				t.Fatalf("the truncated offset store was answered %v, want 57 %v", err, wire.ErrTransientNotCommitted)
			}
			break
		}
		if round == 1_000 {
			t.Fatal("the truncated offset store is never answered")
		}
		c.tick(1)
	}
}
