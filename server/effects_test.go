package server

import (
	"fmt"
	"github.com/iggy-shard/iggy-shard/partitionhost"
	"slices"
	"testing"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/shard"
	"github.com/iggy-shard/iggy-shard/wire"
)

// effectsPeak is the most partition effects any shard of s carried out in one loop
// turn.
func effectsPeak(t *testing.T, s *Server) int {
	t.Helper()
	peaks := make([]int, s.shardCount)
	err := s.rt.Inspect(testContext(t), func(sh *shard.Shard) { peaks[sh.Index()] = s.handlers[sh.Index()].owned.EffectsPeak() })
	mustOK(t, "Inspect", err)
	return slices.Max(peaks)
}

// effectsWaiting reports whether a shard of s has partition effects waiting.
func effectsWaiting(t *testing.T, s *Server) bool {
	t.Helper()
	waiting := make([]bool, s.shardCount)
	err := s.rt.Inspect(testContext(t), func(sh *shard.Shard) { waiting[sh.Index()] = s.handlers[sh.Index()].owned.EffectsPending() })
	mustOK(t, "Inspect", err)
	return slices.Contains(waiting, true)
}

// A topic of 1,000 partitions is created a slice of effects per loop turn, so that
// the shard serves meanwhile, and a partition is used at once all the same: a send
// right after the creation, to its last partition, finds it (created ahead of its
// turn); and so does one to a topic deleted and created again under the same id
// before the first one's creations were all carried out (the effects before it
// that concern it run first, in order).
func TestCreationEffectsRunInSlices(t *testing.T) {
	const partitions = 1000
	s := testServer(t, t.TempDir(), 2)
	c := dialRoot(t, s)
	ctx := testContext(t)
	st, err := c.CreateStream(ctx, "s")
	mustOK(t, "CreateStream", err)
	send := func(topic, p uint32, payload string) {
		t.Helper()
		_, err := c.SendMessages(ctx, client.ID(st.ID), client.ID(topic), wire.Partitioning{Kind: wire.PartitioningPartitionID, PartitionID: p},
			[]client.Message{{Payload: []byte(payload)}})
		mustOK(t, fmt.Sprintf("send to %d/%d", topic, p), err)
	}
	first, err := c.CreateTopic(ctx, client.ID(st.ID), "first", partitions, nil)
	mustOK(t, "CreateTopic", err)
	send(first.ID, partitions-1, "first")
	waitUntil(t, "every partition effect is carried out", func() bool { return !effectsWaiting(t, s) })
	// A slice, and the partition taken ahead of it (ensureCreated).
	if peak := effectsPeak(t, s); peak > partitionhost.EffectsPerTurnMax+1 {
		t.Fatalf("a loop turn carried out %d partition effects, want at most %d", peak, partitionhost.EffectsPerTurnMax+1)
	}

	mustOK(t, "DeleteTopic", c.DeleteTopic(ctx, client.ID(st.ID), client.ID(first.ID)))
	_, err = c.CreateTopic(ctx, client.ID(st.ID), "interim", partitions, nil)
	mustOK(t, "CreateTopic", err)
	mustOK(t, "DeleteTopic", c.DeleteTopic(ctx, client.ID(st.ID), client.ID(first.ID)))
	again, err := c.CreateTopic(ctx, client.ID(st.ID), "again", partitions, nil)
	mustOK(t, "CreateTopic again", err)
	if again.ID != first.ID {
		t.Fatalf("the topic created again has id %d, not the deleted one's %d: the test needs the id reused", again.ID, first.ID)
	}
	send(again.ID, partitions-1, "again")
	if n := polledFrom(t, c, st.ID, again.ID, partitions-1); n != 1 {
		t.Fatalf("the last partition of the topic created again holds %d messages, want its own 1", n)
	}
	waitUntil(t, "every partition effect is carried out", func() bool { return !effectsWaiting(t, s) })
	if n := polledFrom(t, c, st.ID, again.ID, partitions-1); n != 1 {
		t.Fatalf("the last partition of the topic created again holds %d messages once every effect ran, want its own 1", n)
	}
}
