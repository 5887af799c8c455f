package server

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/partitiondir"
	"github.com/iggy-shard/iggy-shard/wire"
)

// A PurgeTopic committed to the metadata journal whose effect on the partitions never
// ran (a crash in between, emulated by putting the pre-purge partition directories
// back) is carried out at the next start; a later start does not purge again, so
// messages sent after the purge stay.
func TestPurgeCommittedBeforeCrashStaysPurged(t *testing.T) {
	dir := t.TempDir()
	ctx := testContext(t)
	s := testServer(t, dir, 2)
	c := dialRoot(t, s)
	st, err := c.CreateStream(ctx, "s")
	mustOK(t, "CreateStream", err)
	topic, err := c.CreateTopic(ctx, client.ID(st.ID), "t", 2, nil)
	mustOK(t, "CreateTopic", err)
	for p := uint32(0); p < 2; p++ {
		_, err := c.SendMessages(ctx, client.ID(st.ID), client.ID(topic.ID), wire.Partitioning{Kind: wire.PartitioningPartitionID, PartitionID: p}, messages(5, "before"))
		mustOK(t, "SendMessages", err)
	}
	c.Close()
	stopServer(t, s)
	partitions := filepath.Join(dir, "streams", strconv.Itoa(int(st.ID)), "topics", strconv.Itoa(int(topic.ID)), "partitions")
	saved := filepath.Join(t.TempDir(), "partitions")
	if err := os.CopyFS(saved, os.DirFS(partitions)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(saved, "0", partitiondir.RecordFileName)); err != nil {
		t.Fatalf("a created partition has no %s: %v", partitiondir.RecordFileName, err)
	}

	s = testServer(t, dir, 2)
	c = dialRoot(t, s)
	mustOK(t, "PurgeTopic", c.PurgeTopic(ctx, client.ID(st.ID), client.ID(topic.ID)))
	c.Close()
	stopServer(t, s)
	if err := os.RemoveAll(partitions); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(partitions, os.DirFS(saved)); err != nil {
		t.Fatal(err)
	}

	count := func(c *client.Client, p uint32) uint32 {
		t.Helper()
		polled, err := c.PollMessages(ctx, &wire.PollMessages{Consumer: client.SingleConsumer(client.ID(1)), StreamID: client.ID(st.ID),
			TopicID: client.ID(topic.ID), Partition: wire.SomePartition(p), Strategy: wire.PollingStrategy{Kind: wire.PollingFirst}, Count: 100})
		mustOK(t, "PollMessages", err)
		return polled.MessagesCount
	}
	s = testServer(t, dir, 2)
	c = dialRoot(t, s)
	for p := uint32(0); p < 2; p++ {
		if n := count(c, p); n != 0 {
			t.Fatalf("partition %d holds %d messages of before the committed purge", p, n)
		}
	}
	_, err = c.SendMessages(ctx, client.ID(st.ID), client.ID(topic.ID), wire.Partitioning{Kind: wire.PartitioningPartitionID, PartitionID: 0}, messages(3, "after"))
	mustOK(t, "SendMessages after the purge", err)
	c.Close()
	stopServer(t, s)

	s = testServer(t, dir, 1)
	c = dialRoot(t, s)
	if n := count(c, 0); n != 3 {
		t.Fatalf("partition 0 holds %d messages after another restart, want the 3 sent after the purge", n)
	}
}
