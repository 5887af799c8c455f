package server

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/metadata"
	"github.com/iggy-shard/iggy-shard/partition"
	"github.com/iggy-shard/iggy-shard/partitiondir"
	"github.com/iggy-shard/iggy-shard/wire"
)

// partitionDir is a partition's directory under a server's data directory.
func partitionDir(root string, stream, topic, p uint32) string {
	return filepath.Join(root, "streams", strconv.Itoa(int(stream)), "topics", strconv.Itoa(int(topic)), "partitions",
		strconv.Itoa(int(p)))
}

// statsPublished counts the partitions whose owners published their figures: each
// does once it created or opened the partition.
func statsPublished(s *Server) int {
	n := 0
	s.stats.Range(func(partition.Key, metadata.PartitionStats) { n++ })
	return n
}

// A created partition costs nothing on disk until it is written: no directory, no
// record. Its first send makes the directory with its record (of its incarnation),
// and the others stay as they were; after a restart every partition is there, the
// written one with its message, and the others take their first send.
func TestCreatedPartitionHoldsNothingUntilWritten(t *testing.T) {
	const partitions = 40
	dir := t.TempDir()
	ctx := testContext(t)
	s := testServer(t, dir, 2)
	c := dialRoot(t, s)
	st, err := c.CreateStream(ctx, "s")
	mustOK(t, "CreateStream", err)
	topic, err := c.CreateTopic(ctx, client.ID(st.ID), "t", partitions, nil)
	mustOK(t, "CreateTopic", err)
	waitUntil(t, "every partition is created", func() bool { return statsPublished(s) == partitions })
	for p := uint32(0); p < partitions; p++ {
		if _, err := os.Stat(partitionDir(dir, st.ID, topic.ID, p)); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("partition %d has a directory before anything was written in it (%v)", p, err)
		}
	}
	send := func(c *client.Client, p uint32, payload string) {
		t.Helper()
		_, err := c.SendMessages(ctx, client.ID(st.ID), client.ID(topic.ID), wire.Partitioning{Kind: wire.PartitioningPartitionID, PartitionID: p},
			[]client.Message{{Payload: []byte(payload)}})
		mustOK(t, "SendMessages", err)
	}
	send(c, 5, "first")
	rec, present, err := partitiondir.ReadRecord(partitionDir(dir, st.ID, topic.ID, 5))
	if err != nil || !present {
		t.Fatalf("partition 5 written: record present %v, %v", present, err)
	}
	details, err := c.GetTopic(ctx, client.ID(st.ID), client.ID(topic.ID))
	mustOK(t, "GetTopic", err)
	if created := details.Partitions[5].CreatedAtMicros; rec != (partitiondir.Record{CreatedRevision: created, Revision: created}) {
		t.Fatalf("partition 5's record %+v, want its incarnation %d, generation 0", rec, created)
	}
	if _, err := os.Stat(partitionDir(dir, st.ID, topic.ID, 6)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("partition 6 has a directory after a send to partition 5 (%v)", err)
	}
	c.Close()
	stopServer(t, s)

	s = testServer(t, dir, 2)
	c = dialRoot(t, s)
	if n := polledFrom(t, c, st.ID, topic.ID, 5); n != 1 {
		t.Fatalf("partition 5 holds %d messages after a restart, want 1", n)
	}
	if n := polledFrom(t, c, st.ID, topic.ID, 6); n != 0 {
		t.Fatalf("partition 6 holds %d messages, want none", n)
	}
	send(c, 6, "later")
	if _, present, err := partitiondir.ReadRecord(partitionDir(dir, st.ID, topic.ID, 6)); err != nil || !present {
		t.Fatalf("partition 6 written after a restart: record present %v, %v", present, err)
	}
}

// polledFrom counts the messages a poll from offset 0 returns.
func polledFrom(t *testing.T, c *client.Client, stream, topic, p uint32) uint32 {
	t.Helper()
	polled, err := c.PollMessages(testContext(t), &wire.PollMessages{Consumer: client.SingleConsumer(client.ID(1)), StreamID: client.ID(stream),
		TopicID: client.ID(topic), Partition: wire.SomePartition(p), Strategy: wire.PollingStrategy{Kind: wire.PollingOffset}, Count: 100})
	mustOK(t, "PollMessages", err)
	return polled.MessagesCount
}

// A record an op writes into a partition never written (a deletion of segments,
// which records its revision so that it is not carried out twice) makes the
// directory, and the partition's first file keeps that record instead of writing
// the one of its creation over it.
func TestRecordBeforeFirstWriteIsKept(t *testing.T) {
	dir := t.TempDir()
	ctx := testContext(t)
	s := testServer(t, dir, 1)
	c := dialRoot(t, s)
	st, err := c.CreateStream(ctx, "s")
	mustOK(t, "CreateStream", err)
	topic, err := c.CreateTopic(ctx, client.ID(st.ID), "t", 1, nil)
	mustOK(t, "CreateTopic", err)
	mustOK(t, "DeleteSegments", c.DeleteSegments(ctx, client.ID(st.ID), client.ID(topic.ID), 0, 1))
	pdir := partitionDir(dir, st.ID, topic.ID, 0)
	before, present, err := partitiondir.ReadRecord(pdir)
	if err != nil || !present || before.Revision <= before.CreatedRevision {
		t.Fatalf("after DeleteSegments: record %+v present %v, %v; want one at the op's revision", before, present, err)
	}
	_, err = c.SendMessages(ctx, client.ID(st.ID), client.ID(topic.ID), wire.Partitioning{Kind: wire.PartitioningPartitionID},
		[]client.Message{{Payload: []byte("x")}})
	mustOK(t, "SendMessages", err)
	if after, _, err := partitiondir.ReadRecord(pdir); err != nil || after != before {
		t.Fatalf("after the first send: record %+v (%v), want %+v", after, err, before)
	}
}
