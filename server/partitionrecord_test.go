package server

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/iggy-shard/iggy-shard/client"
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
	if _, err := os.Stat(filepath.Join(saved, "0", purgeGenFileName)); err != nil {
		t.Fatalf("a created partition has no %s: %v", purgeGenFileName, err)
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

// The record round-trips, a 16-byte one (from before revisions) reads with its
// revision at its creation, an empty one as none, and a record of another size is
// refused.
func TestPartitionRecordFormat(t *testing.T) {
	dir := t.TempDir()
	if _, present, err := readPartitionRecord(dir); present || err != nil {
		t.Fatalf("no record: present %v, %v", present, err)
	}
	want := partitionRecord{generation: 3, createdRevision: 1_700_000_000_000_001, revision: 1_700_000_000_000_042}
	mustOK(t, "write", writePartitionRecord(dir, want))
	if got, present, err := readPartitionRecord(dir); got != want || !present || err != nil {
		t.Fatalf("read %+v %v %v, want %+v", got, present, err, want)
	}
	v1 := make([]byte, partitionRecordBytesV1)
	binary.LittleEndian.PutUint64(v1, 2)
	binary.LittleEndian.PutUint64(v1[8:], 1_700_000_000_000_007)
	mustOK(t, "write v1", os.WriteFile(filepath.Join(dir, purgeGenFileName), v1, 0o644))
	want = partitionRecord{generation: 2, createdRevision: 1_700_000_000_000_007, revision: 1_700_000_000_000_007}
	if got, present, err := readPartitionRecord(dir); got != want || !present || err != nil {
		t.Fatalf("read v1 %+v %v %v, want %+v", got, present, err, want)
	}
	mustOK(t, "write short", os.WriteFile(filepath.Join(dir, purgeGenFileName), v1[:12], 0o644))
	if _, _, err := readPartitionRecord(dir); err == nil {
		t.Fatal("a 12-byte record was read")
	}
	// A record whose first write a crash cut, before anything else was created
	// beside it (storage.go): none.
	mustOK(t, "write empty", os.WriteFile(filepath.Join(dir, purgeGenFileName), nil, 0o644))
	if _, present, err := readPartitionRecord(dir); present || err != nil {
		t.Fatalf("an empty record: present %v, %v; want none", present, err)
	}
}
