package server

import (
	"github.com/iggy-shard/iggy-shard/partitionhost"
	"testing"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/partition"
	"github.com/iggy-shard/iggy-shard/shard"
	"github.com/iggy-shard/iggy-shard/wire"
)

// heldCounts copies shard 0's counts of held frames, with how many it holds now.
func heldCounts(t *testing.T, s *Server) (partitionhost.HeldFrameCounts, int) {
	t.Helper()
	var counts partitionhost.HeldFrameCounts
	var holding int
	err := s.rt.Inspect(testContext(t), func(sh *shard.Shard) {
		if sh.Index() == 0 {
			counts, holding = s.handlers[0].owned.HeldCounts(), s.handlers[0].owned.HeldFrames()
		}
	})
	mustOK(t, "Inspect", err)
	return counts, holding
}

// A partition group's frame for a partition the shard's view does not have is
// held, not dropped: it is stepped once a commit brings the partition, and dropped
// after partitionhost.HeldFrameTimeout when none does.
func TestFramesHeldUntilTheirPartitionComes(t *testing.T) {
	clock := newTestClock()
	cfg := testConfig(t.TempDir(), 1)
	cfg.clock = clock.now
	s := startTestServer(t, cfg)
	c := dialRoot(t, s)
	ctx := testContext(t)
	st, err := c.CreateStream(ctx, "s")
	mustOK(t, "CreateStream", err)
	// Frames for the first topics the stream may get: one of them is the next.
	const candidates = 3
	err = s.rt.Inspect(ctx, func(sh *shard.Shard) {
		for topic := range uint32(candidates) {
			k := partition.Key{StreamID: st.ID, TopicID: topic}
			var hdr wire.GenericHeader
			hdr.Command = wire.CommandCommit
			s.handlers[0].stepPartition(k, 1, &hdr, nil)
		}
	})
	mustOK(t, "Inspect", err)
	if counts, holding := heldCounts(t, s); counts.Held != candidates || holding != candidates {
		t.Fatalf("held %+v, holding %d; want the %d frames held", counts, holding, candidates)
	}
	_, err = c.CreateTopic(ctx, client.ID(st.ID), "t", 1, nil)
	mustOK(t, "CreateTopic", err)
	waitUntil(t, "the new partition's frame is stepped", func() bool {
		counts, holding := heldCounts(t, s)
		return counts.Stepped == 1 && holding == candidates-1
	})
	clock.advance(s, partitionhost.HeldFrameTimeout)
	waitUntil(t, "the other frames expire", func() bool {
		counts, holding := heldCounts(t, s)
		return counts.Expired == candidates-1 && holding == 0
	})
}
