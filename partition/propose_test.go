package partition

import (
	"bytes"
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

// A new primary that holds a committed op's header without its body (the op
// reached the other backup only) cannot know where its next batch starts: a send
// it takes meanwhile waits in its Driver (the ProposalGate, groupHost.ProposalWaits)
// until the repair brings the body, and is then stamped after that op's batch.
// Stamped at once, it would start where the missing batch does.
func TestClusterNewPrimaryWaitsForTheBodiesItLacks(t *testing.T) {
	c := newTestCluster(t, 60, 3, Config{PartitionsCount: 1})
	rec := newSendRecorder()
	next := c.sendAll(0, 2, rec, 1)
	// Op 3 reaches replica 2 only, and commits there and on replica 0.
	c.intercept = func(f *netFrame) bool { return f.to != 1 && f.from != 1 }
	c.send(makeBatch(t, next, 3, 40), 20_000, rec, 10)
	for round := 0; rec.acked[10] == (wire.SendConfirmation{}) || c.stores[2].partitions[testKey].group.core.CommitMax() < 3; round++ {
		if round == 10_000 || rec.failed[10] != nil {
			t.Fatalf("op 3 is not committed on replicas 0 and 2 (%v)", rec.failed[10])
		}
		c.tick(1)
	}
	// Replica 0 falls silent; replica 1 is elected, its Ready with the new view
	// out, and takes a send then. Repairs of op 3 are held back.
	var held []netFrame
	c.intercept = func(f *netFrame) bool {
		if f.from == 0 || f.to == 0 {
			return false
		}
		if f.to == 1 && f.header().Command == wire.CommandRepairPrepare && held != nil {
			held = append(held, *f)
			return false
		}
		return true
	}
	primary := c.stores[1].partitions[testKey]
	for round := 0; !primary.group.core.IsPrimary(); round++ {
		if round == 100_000 {
			t.Fatal("replica 1 is never elected")
		}
		if c.deliverOne() {
			continue // checked at once, before a poll finishes its Ready
		}
		moved := 0
		for _, s := range c.stores[1:] {
			moved += s.PollIO()
		}
		if moved == 0 {
			for _, s := range c.stores[1:] {
				s.Tick()
			}
		}
	}
	if !primary.holding() {
		t.Fatal("the new primary's view is durable before any poll: the test cannot send while it is out")
	}
	held = []netFrame{}
	if err := c.stores[1].Send(testKey, sendRequest(makeBatch(t, 100, 2, 40)), 30_000, rec, 20); err != nil {
		t.Fatalf("send to the new primary: %v", err)
	}
	for range 50 {
		c.settle()
		for _, s := range c.stores[1:] {
			s.Tick()
		}
	}
	if primary.proposing.queue.n != 1 || primary.group.core.Op() != 3 {
		t.Fatalf("the new primary without op 3's body: %d sends waiting, head op %d; want the send waiting, op 3", primary.proposing.queue.n, primary.group.core.Op())
	}
	if len(held) == 0 {
		t.Fatal("no repair of op 3 was held back")
	}
	c.queue = append(c.queue, held...)
	held = nil
	for round := 0; rec.acked[20] == (wire.SendConfirmation{}); round++ {
		if round == 10_000 || rec.failed[20] != nil {
			t.Fatalf("the send to the new primary: %v", rec.failed[20])
		}
		c.tick(1)
	}
	if got := rec.acked[20].BaseOffset; got != 9 {
		t.Fatalf("the send is stamped at base_offset %d, want 9: after op 3's batch", got)
	}
	c.tick(int(partitionTiming.CommitBroadcastIntervalTicks) + 1)
	for _, s := range c.stores[1:] {
		s.WaitIdle()
	}
	if !bytes.Equal(c.logBytes(1), c.logBytes(2)) {
		t.Fatal("the survivors' logs differ")
	}
}
