package server

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/pollmemory"
	"github.com/iggy-shard/iggy-shard/shard"
	"github.com/iggy-shard/iggy-shard/wire"
)

// Expired segments go though no request comes: the retention pass runs at a turn
// of the owner shard, and an idle shard takes its maintenance turn. It used to run
// only when another shard posted work to the owner, so a topic written once and
// left alone kept its expired messages on disk for as long as nothing polled it.
// The server's clock is moved past the expiry and the pass's interval, not waited
// for; the move wakes the shard once, as its maintenance turn does in production
// (shard.TestIdleShardTakesItsMaintenanceTurns).
func TestExpiredSegmentsGoWithoutTraffic(t *testing.T) {
	clock := newTestClock()
	dir := t.TempDir()
	cfg := testConfig(dir, 1)
	cfg.clock = clock.now
	s := startTestServer(t, cfg)
	c := dialRoot(t, s)
	ctx := testContext(t)
	st, err := c.CreateStream(ctx, "s")
	mustOK(t, "CreateStream", err)
	opts, err := client.TopicOptions{SegmentSizeBytes: wire.TopicSegmentSizeBytesMin,
		MessageExpiryMicros: uint64(time.Minute / time.Microsecond)}.Block()
	mustOK(t, "TopicOptions", err)
	topic, err := c.CreateTopic(ctx, client.ID(st.ID), "t", 1, opts)
	mustOK(t, "CreateTopic", err)
	payload := bytes.Repeat([]byte("old"), 333)
	msgs := make([]client.Message, 500)
	for i := range msgs {
		msgs[i] = client.Message{Payload: payload}
	}
	for range 10 {
		_, err := c.SendMessages(ctx, client.ID(st.ID), client.ID(topic.ID), wire.Partitioning{Kind: wire.PartitioningPartitionID}, msgs)
		mustOK(t, "SendMessages", err)
	}
	partDir := partitionDir(dir, st.ID, topic.ID, 0)
	segmentFiles := func() int {
		entries, err := os.ReadDir(partDir)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range entries {
			if strings.HasSuffix(e.Name(), ".log") {
				n++
			}
		}
		return n
	}
	before := segmentFiles()
	if before < 3 {
		t.Fatalf("%d segments written, want at least 3 (2 sealed)", before)
	}
	// Nothing is asked of the server from here on, and no connection is open (an
	// eviction at its idle deadline gives the shard work too): the partition's
	// directory is looked at.
	c.Close()
	waitUntil(t, "the connection's end", func() bool { return s.rt.ConnectionCount() == 0 })
	for range 2 { // the turns that serve what the close posted (its session's end)
		mustOK(t, "Inspect", s.rt.Inspect(ctx, func(*shard.Shard) {}))
	}
	clock.advance(s, 2*time.Minute)
	for start := time.Now(); segmentFiles() >= before; time.Sleep(10 * time.Millisecond) {
		if time.Since(start) > 10*time.Second {
			t.Fatalf("the expired segments are still there 10 s after the clock moved: %d files", segmentFiles())
		}
	}
	c = dialRoot(t, s)
	details, err := c.GetTopic(ctx, client.ID(st.ID), client.ID(topic.ID))
	mustOK(t, "GetTopic", err)
	if p := details.Partitions[0]; int(p.SegmentsCount) >= before || p.MessagesCount >= 5000 {
		t.Fatalf("after the retention pass: %+v", p)
	}
}

// A burst of copied polls leaves its read buffers free for the next polls; an idle
// shard lets them go within two pollmemory.DropIdleIntervals, at its maintenance
// turns, where they used to stay for the shard's life.
func TestIdlePollBuffersAreDropped(t *testing.T) {
	clock := newTestClock()
	cfg := testConfig(t.TempDir(), 1)
	cfg.clock = clock.now
	s := startTestServer(t, cfg)
	c := dialRoot(t, s)
	ctx := testContext(t)
	st, err := c.CreateStream(ctx, "s")
	mustOK(t, "CreateStream", err)
	topic, err := c.CreateTopic(ctx, client.ID(st.ID), "t", 1, nil)
	mustOK(t, "CreateTopic", err)
	msgs := make([]client.Message, 100)
	for i := range msgs {
		msgs[i] = client.Message{Payload: bytes.Repeat([]byte("burst"), 200)}
	}
	_, err = c.SendMessages(ctx, client.ID(st.ID), client.ID(topic.ID), wire.Partitioning{Kind: wire.PartitioningPartitionID}, msgs)
	mustOK(t, "SendMessages", err)
	for offset := range uint64(10) { // each cuts the batch: copied through a read buffer
		polled, err := c.PollMessages(ctx, &wire.PollMessages{Consumer: client.SingleConsumer(client.ID(1)), StreamID: client.ID(st.ID),
			TopicID: client.ID(topic.ID), Strategy: wire.PollingStrategy{Kind: wire.PollingOffset, Value: offset * 7}, Count: 5})
		mustOK(t, "PollMessages", err)
		if polled.MessagesCount != 5 {
			t.Fatalf("polled %d messages, want 5", polled.MessagesCount)
		}
	}
	c.Close()
	waitUntil(t, "the connection's end", func() bool { return s.rt.ConnectionCount() == 0 })
	freeBytes := func() int64 {
		var n int64
		mustOK(t, "Inspect", s.rt.Inspect(ctx, func(*shard.Shard) { n = s.pollMemories[0].FreeBytes() }))
		return n
	}
	if freeBytes() == 0 {
		t.Fatal("the polls left no free read buffer: nothing to drop")
	}
	for range 2 {
		clock.advance(s, pollmemory.DropIdleInterval+time.Second)
		mustOK(t, "Inspect", s.rt.Inspect(ctx, func(*shard.Shard) {})) // the turn the move woke
	}
	if n := freeBytes(); n != 0 {
		t.Fatalf("%d bytes of idle read buffers kept two intervals after the polls", n)
	}
}
