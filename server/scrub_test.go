package server

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/wire"
)

// A byte that rots under a range a poll verified already is found by the
// scrubber, without a poll asking: the next poll of that batch serves nothing of
// it, as a poll of a corrupt batch does. Without the scrubber's turns the poll
// served the rotten bytes, since a verified range is not verified again.
func TestScrubberFindsRotUnderAVerifiedRange(t *testing.T) {
	dir := t.TempDir()
	s := testServer(t, dir, 1)
	c := dialRoot(t, s)
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
	// 3 MB in 500 KB batches: the first segments are sealed.
	for range 6 {
		_, err := c.SendMessages(ctx, client.ID(st.ID), client.ID(topic.ID), wire.Partitioning{Kind: wire.PartitioningPartitionID}, msgs)
		mustOK(t, "SendMessages", err)
	}
	poll := func() uint32 {
		polled, err := c.PollMessages(ctx, &wire.PollMessages{Consumer: client.SingleConsumer(client.ID(1)), StreamID: client.ID(st.ID),
			TopicID: client.ID(topic.ID), Strategy: wire.PollingStrategy{Kind: wire.PollingOffset, Value: 0}, Count: 500})
		mustOK(t, "PollMessages", err)
		return polled.MessagesCount
	}
	if n := poll(); n != 500 {
		t.Fatalf("the first poll got %d messages, want 500", n)
	}

	// Rot a payload byte of the first batch, in the first (sealed) segment.
	partDir := partitionDir(dir, st.ID, topic.ID, 0)
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
	at := int64(64 << 10) // inside the first batch's payloads
	var b [1]byte
	if _, err := f.ReadAt(b[:], at); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b[:], at); err != nil {
		t.Fatal(err)
	}
	f.Close()

	waitUntil(t, "the scrubber finds the rotten batch", func() bool { return poll() == 0 })
}
