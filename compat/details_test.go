package compat

import (
	"bytes"
	"testing"
)

// Field-level rules of the reference server where the public command page is silent
// (flag bytes, the CreateUser status echo, GetSnapshot): apache/iggy
// core/server/src/dispatch.rs and core/metadata/src/stm/.

// Only a flag byte of 1 means "present"; auto_commit is true for any non-zero
// byte. A plain consumer whose partition flag is not 1 polls partition 0.
func TestFlagBytes(t *testing.T) {
	addr := startServer(t)
	c := dialRoot(t, addr)
	streamID := c.createStream("flags")
	topic, _ := c.createTopic(streamID, "t", 2)
	c.send(streamID, topic.id, 0, payloads("p0", 0, 2)...)
	c.send(streamID, topic.id, 1, payloads("p1", 0, 2)...)

	body := pollBody(consumer(consumerSingle, 1), ids(streamID), ids(topic.id), 1, true, strategyNext, 0, 1, false)
	flagAt := len(consumer(consumerSingle, 1)) + 2*6
	body[flagAt] = 2 // not 1: the partition id that follows is ignored
	pid, _, msgs := c.poll(body)
	if pid != 0 || len(msgs) != 1 || string(msgs[0].payload) != "p0 0" {
		t.Fatalf("poll with partition flag 2: partition %d, %d messages, want partition 0's first", pid, len(msgs))
	}
	body[len(body)-1] = 7 // auto_commit: any non-zero byte
	c.poll(body)
	target := offsetTarget(consumer(consumerSingle, 1), ids(streamID), ids(topic.id), 0, true)
	if got := decodeConsumerOffset(t, c.ok("GetConsumerOffset", opNonReplicated, codeGetConsumerOffset, target)); got.storedOffset != 0 {
		t.Fatalf("auto_commit 7 stored %d, want 0", got.storedOffset)
	}
	c.fails("store into an empty partition", opStoreConsumerOffset, 121,
		storeOffsetBody(offsetTarget(consumer(consumerSingle, 2), ids(streamID), ids(c.createTopicWith(streamID, "empty", 1, nil).id), 0, true), 0, 1), 4100)
}

// CreateUser with a status other than 1/2 stores an active user and echoes the raw
// byte (errata "Create user status", Go quirk Q6).
func TestCreateUserStatusEcho(t *testing.T) {
	addr := startServer(t)
	c := dialRoot(t, addr)
	d := decoder{t: t, what: "CreateUser reply", b: c.ok("CreateUser", opCreateUser, 33, createUserBody("zero-status", "secret1", 0, nil))}
	id := d.u32()
	d.u64()
	if status := d.u8(); status != 0 {
		t.Errorf("CreateUser reply status byte %d, want the 0 sent", status)
	}
	if got := decodeUserDetails(t, c.ok("GetUser", opNonReplicated, codeGetUser, ids(id))); got.status != userActive {
		t.Errorf("stored status %d, want 1 (active)", got.status)
	}
	dial(t, addr).login("zero-status", "secret1")
}

// GetSnapshot with no types is not refused: an archive with no entries.
func TestSnapshotWithoutTypes(t *testing.T) {
	addr := startServer(t)
	c := dialRoot(t, addr)
	body := c.ok("GetSnapshot with 0 types", opNonReplicated, codeGetSnapshot, []byte{1, 0})
	if !bytes.HasPrefix(body, []byte("PK\x05\x06")) {
		t.Errorf("snapshot of no sections: % x, want an empty ZIP archive (end of central directory only)", body[:min(len(body), 8)])
	}
}

// Partition and group bookkeeping: counts 0 or above 1000 are 2015, deleting more
// than exist is 2019, new partitions take max id + 1, GetTopic reports at least
// one segment per partition, GetConsumerGroups lists headers without a count.
func TestPartitionAndGroupBookkeeping(t *testing.T) {
	addr := startServer(t)
	c := dialRoot(t, addr)
	streamID := c.createStream("books")
	topic, _ := c.createTopic(streamID, "t", 2)
	c.fails("CreatePartitions 0", opCreatePartitions, 402, u32Body(ids(streamID, topic.id), 0), 2015)
	c.fails("CreatePartitions 1001", opCreatePartitions, 402, u32Body(ids(streamID, topic.id), 1001), 2015)
	c.fails("DeletePartitions 0", opDeletePartitions, 403, u32Body(ids(streamID, topic.id), 0), 2015)
	c.fails("DeletePartitions 3 of 2", opDeletePartitions, 403, u32Body(ids(streamID, topic.id), 3), 2019)
	c.ok("CreatePartitions 2", opCreatePartitions, 402, u32Body(ids(streamID, topic.id), 2))
	_, parts := c.getTopic(streamID, topic.id)
	for i, p := range parts {
		if p.id != uint32(i) || p.segmentsCount < 1 {
			t.Errorf("partition %d: %+v, want id %d and at least one segment", i, p, i)
		}
	}

	if got := c.ok("GetConsumerGroups with none", opNonReplicated, 601, ids(streamID, topic.id)); len(got) != 0 {
		t.Fatalf("GetConsumerGroups with none: % x", got)
	}
	for _, name := range []string{"g0", "g1"} {
		c.ok("CreateConsumerGroup", opCreateConsumerGroup, 602, appendName(ids(streamID, topic.id), name))
	}
	d := decoder{t: t, what: "GetConsumerGroups", b: c.ok("GetConsumerGroups", opNonReplicated, 601, ids(streamID, topic.id))}
	for i := range uint32(2) {
		id, partitions, members, name := d.u32(), d.u32(), d.u32(), d.name()
		if id != i || partitions != 4 || members != 0 || name != "g"+string(rune('0'+i)) {
			t.Errorf("group %d: id %d partitions %d members %d name %q", i, id, partitions, members, name)
		}
	}
	d.end()
	c.fails("GetConsumerGroups in a missing stream", opNonReplicated, 601, ids(99, 0), 1009)
	c.fails("GetConsumerGroups in a missing topic", opNonReplicated, 601, ids(streamID, 99), 2010)

	c.ok("UpdateStream rename", opUpdateStream, 204, appendName(ids(streamID), "renamed"))
	d = decoder{t: t, what: "GetStream", b: c.ok("GetStream by the new name", opNonReplicated, codeGetStream, stringID(nil, "renamed"))}
	if h := d.streamHeader(); h.id != streamID {
		t.Fatalf("GetStream renamed: %+v", h)
	}
}
