package server

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/wire"
)

// scrubSetup writes 3 MB in 500 KB batches to a topic of 1 MB segments (the
// first ones sealed), polls the first batch once (which verifies it), and
// returns that poll (by any client) and the partition's directory.
func scrubSetup(t *testing.T, c *client.Client, dir string) (poll func(*client.Client) uint32, partDir string) {
	t.Helper()
	ctx := testContext(t)
	st, err := c.CreateStream(ctx, "s")
	mustOK(t, "CreateStream", err)
	opts, err := client.TopicOptions{SegmentSizeBytes: wire.TopicSegmentSizeBytesMin}.Block()
	mustOK(t, "TopicOptions", err)
	topic, err := c.CreateTopic(ctx, client.ID(st.ID), "t", 1, opts)
	mustOK(t, "CreateTopic", err)
	payload := bytes.Repeat([]byte("rot"), 333)
	msgs := make([]client.Message, 500)
	for i := range msgs {
		msgs[i] = client.Message{Payload: payload}
	}
	for range 6 {
		_, err := c.SendMessages(ctx, client.ID(st.ID), client.ID(topic.ID), wire.Partitioning{Kind: wire.PartitioningPartitionID}, msgs)
		mustOK(t, "SendMessages", err)
	}
	poll = func(c *client.Client) uint32 {
		polled, err := c.PollMessages(ctx, &wire.PollMessages{Consumer: client.SingleConsumer(client.ID(1)), StreamID: client.ID(st.ID),
			TopicID: client.ID(topic.ID), Strategy: wire.PollingStrategy{Kind: wire.PollingOffset, Value: 0}, Count: 500})
		mustOK(t, "PollMessages", err)
		return polled.MessagesCount
	}
	if n := poll(c); n != 500 {
		t.Fatalf("the first poll got %d messages, want 500", n)
	}
	return poll, partitionDir(dir, st.ID, topic.ID, 0)
}

// rotFirstBatch flips a payload byte of the first batch, in the first (sealed)
// segment of the partition in partDir.
func rotFirstBatch(t *testing.T, partDir string) {
	t.Helper()
	entries, err := os.ReadDir(partDir)
	if err != nil {
		t.Fatal(err)
	}
	var segments []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".log") {
			segments = append(segments, e.Name())
		}
	}
	slices.Sort(segments)
	if len(segments) < 2 {
		t.Fatalf("segments %v: want the first one sealed", segments)
	}
	f, err := os.OpenFile(filepath.Join(partDir, segments[0]), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	at := int64(64 << 10) // inside the first batch's payloads
	var b [1]byte
	if _, err := f.ReadAt(b[:], at); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b[:], at); err != nil {
		t.Fatal(err)
	}
}

// A byte that rots under a range a poll verified already is found by the
// scrubber, without a poll asking: the next poll of that batch serves nothing of
// it, as a poll of a corrupt batch does. Without the scrubber's turns the poll
// served the rotten bytes, since a verified range is not verified again.
func TestScrubberFindsRotUnderAVerifiedRange(t *testing.T) {
	dir := t.TempDir()
	s := testServer(t, dir, 1)
	c := dialRoot(t, s)
	poll, partDir := scrubSetup(t, c, dir)
	rotFirstBatch(t, partDir)
	waitUntil(t, "the scrubber finds the rotten batch", func() bool { return poll(c) == 0 })
}

// The scrubber's reads go through the disk ring, so a turn that starts one has
// verified nothing yet: it keeps its next turn all the same, and an idle node
// (no connection; the test watches its log, which wakes no shard) finds the rot
// within a few of its once-a-second turns. When a turn that only started a read
// armed no wake-up, the scrubber stopped there until something else woke the
// shard: here the closed connection's last deadline check (shard.Config's
// FrameTimeout, 10 s), so the rot was found ~10 s after it was made.
func TestScrubberFindsRotOnAnIdleNode(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir, 1)
	cfg.HeartbeatInterval = time.Hour // shard 0's heartbeat checks wake it only every 12 minutes
	logs := &lockedBuffer{}
	s, err := start(cfg, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { stopServer(t, s) })
	c := dialRoot(t, s)
	poll, partDir := scrubSetup(t, c, dir)
	rotFirstBatch(t, partDir)
	rotAt := time.Now()
	c.Close()
	waitUntil(t, "the idle node's scrubber finds the rotten batch", func() bool {
		return strings.Contains(logs.String(), "the scrubber found corrupt batches")
	})
	// A pass over the 3 MB takes under a second at 8 MiB/s; the rot is found at
	// the latest by the turn after the next pass starts, ~3 s.
	if took := time.Since(rotAt); took > 6*time.Second {
		t.Fatalf("the idle node's scrubber found the rot %v after it was made: its turns stopped", took)
	}
	if n := poll(dialRoot(t, s)); n != 0 {
		t.Fatalf("the rotten batch's poll got %d messages", n)
	}
}
