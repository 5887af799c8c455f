package server

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/metafiles"
	"github.com/iggy-shard/iggy-shard/metaplane"
	"github.com/iggy-shard/iggy-shard/vsr"
	"github.com/iggy-shard/iggy-shard/wire"
)

// TestRestartRecoversEverything: metadata over snapshots and the journal, messages,
// offsets and users survive a restart, with another shard count too.
func TestRestartRecoversEverything(t *testing.T) {
	dir := t.TempDir()
	s := testServer(t, dir, 2)
	c := dialRoot(t, s)
	ctx := testContext(t)
	// More ops than the snapshot interval (16), so recovery reads a snapshot and a journal.
	for i := 0; i < 20; i++ {
		_, err := c.CreateStream(ctx, "stream-"+string(rune('a'+i)))
		mustOK(t, "CreateStream", err)
	}
	_, err := c.CreateTopic(ctx, client.NameID("stream-a"), "t", 3, nil)
	mustOK(t, "CreateTopic", err)
	_, err = c.CreateUser(ctx, "bob", "bobpass", wire.UserActive, nil)
	mustOK(t, "CreateUser", err)
	for p := uint32(0); p < 3; p++ {
		_, err := c.SendMessages(ctx, client.NameID("stream-a"), client.NameID("t"), wire.Partitioning{Kind: wire.PartitioningPartitionID, PartitionID: p}, messages(5, "m"))
		mustOK(t, "SendMessages", err)
	}
	mustOK(t, "StoreConsumerOffset", c.StoreConsumerOffset(ctx, &wire.StoreConsumerOffset{Consumer: client.SingleConsumer(client.ID(9)),
		StreamID: client.NameID("stream-a"), TopicID: client.NameID("t"), Partition: wire.SomePartition(2), Offset: 3, Ack: wire.AckQuorum}))
	c.Close()
	stopServer(t, s)
	raw, err := os.ReadFile(filepath.Join(dir, "metadata", metafiles.SnapshotFileName))
	if err != nil {
		t.Fatalf("no snapshot: %v", err)
	}
	// The checkpoint ran (on the journal writer's goroutine) once 16 ops had committed.
	if head, err := metaplane.SplitSnapshot(raw); err != nil || head.At.Op < 16 {
		t.Fatalf("snapshot at op %d (%v), want a checkpoint at op 16 or later", head.At.Op, err)
	}

	s2 := testServer(t, dir, 3)
	c2 := dialRoot(t, s2)
	streams, err := c2.GetStreams(ctx)
	mustOK(t, "GetStreams", err)
	if len(streams) != 20 {
		t.Fatalf("%d streams after restart, want 20", len(streams))
	}
	for p := uint32(0); p < 3; p++ {
		polled, err := c2.PollMessages(ctx, &wire.PollMessages{Consumer: client.SingleConsumer(client.ID(1)), StreamID: client.NameID("stream-a"),
			TopicID: client.NameID("t"), Partition: wire.SomePartition(p), Strategy: wire.PollingStrategy{Kind: wire.PollingFirst}, Count: 100})
		mustOK(t, "PollMessages", err)
		if polled.MessagesCount != 5 {
			t.Fatalf("partition %d: %d messages after restart", p, polled.MessagesCount)
		}
	}
	off, ok, err := c2.GetConsumerOffset(ctx, &wire.GetConsumerOffset{Consumer: client.SingleConsumer(client.ID(9)),
		StreamID: client.NameID("stream-a"), TopicID: client.NameID("t"), Partition: wire.SomePartition(2)})
	if err != nil || !ok || off.StoredOffset != 3 {
		t.Fatalf("offset after restart: %+v %v %v", off, ok, err)
	}
	dialAs(t, s2, "bob", "bobpass")
	// The new server keeps numbering after the recovered ops.
	_, err = c2.CreateStream(ctx, "after-restart")
	mustOK(t, "CreateStream after restart", err)
}

// TestTornJournalTail: a torn last entry (a crash mid-append) is cut; interior
// damage refuses the start with an error naming the journal.
func TestTornJournalTail(t *testing.T) {
	dir := t.TempDir()
	s := testServer(t, dir, 1)
	c := dialRoot(t, s)
	ctx := testContext(t)
	for _, name := range []string{"one", "two", "three"} {
		_, err := c.CreateStream(ctx, name)
		mustOK(t, "CreateStream", err)
	}
	c.Close()
	stopServer(t, s)

	journal := filepath.Join(dir, "metadata", metafiles.JournalFileName)
	raw, err := os.ReadFile(journal)
	if err != nil {
		t.Fatal(err)
	}
	// Tear the entry of the last CreateStream (the session's end, an op of its
	// own, follows it): half of it reached the disk, nothing after it.
	var lastCreateEnd int
	offset := 0
	if _, err := vsr.ScanJournal(raw, metafiles.FrameMax, func(h *wire.PrepareHeader, _ []byte) error {
		offset += int(h.Size)
		if h.Operation == wire.OperationCreateStream {
			lastCreateEnd = offset
		}
		return nil
	}); err != nil || lastCreateEnd == 0 {
		t.Fatalf("the journal holds no CreateStream (%v)", err)
	}
	if err := os.WriteFile(journal, raw[:lastCreateEnd-20], 0o644); err != nil {
		t.Fatal(err)
	}
	s2 := testServer(t, dir, 1)
	c2 := dialRoot(t, s2)
	streams, err := c2.GetStreams(ctx)
	mustOK(t, "GetStreams", err)
	if len(streams) != 2 {
		t.Fatalf("%d streams after a torn tail, want 2 (the torn op was never acknowledged)", len(streams))
	}
	c2.Close()
	stopServer(t, s2)

	// Damage inside the journal, followed by intact entries, refuses the start.
	raw, err = os.ReadFile(journal)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) < 2*wire.HeaderSize {
		t.Fatalf("journal too short to damage: %d bytes", len(raw))
	}
	raw[100] ^= 0xff // inside the first entry's header
	if err := os.WriteFile(journal, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := defaultSetup()
	cfg.TCPAddress, cfg.SystemPath, cfg.ShardCount, cfg.PinCPUs = "127.0.0.1:0", dir, 1, false
	if s3, err := start(cfg, nil); err == nil {
		stopServer(t, s3)
		t.Fatal("a journal with interior damage was accepted")
	}
}
