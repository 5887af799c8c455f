package compat

import (
	"slices"
	"testing"
	"time"
)

// ConsumerGroupFlow (the Go SDK's group polling, apache/iggy foreign/go): create the
// group (details with its id), join, Sync returns every partition to the sole member,
// group polls with Next + auto-commit and an explicit partition visit each owned
// partition once, leave, delete.
func TestConsumerGroupFlow(t *testing.T) {
	addr := startServer(t)
	c := dialRoot(t, addr)
	streamID := c.createStream("groups")
	topic, _ := c.createTopic(streamID, "t", 3)
	for p := range uint32(3) {
		c.send(streamID, topic.id, p, payloads(string(rune('a'+p)), 0, 2)...)
	}

	body := appendName(ids(streamID, topic.id), "workers")
	h, members := consumerGroupDetails(t, "CreateConsumerGroup reply", c.ok("CreateConsumerGroup", opCreateConsumerGroup, 602, body))
	if h.name != "workers" || h.partitionsCount != 3 || h.membersCount != 0 || len(members) != 0 {
		t.Fatalf("CreateConsumerGroup reply %+v, want workers, 3 partitions, no members", h)
	}
	if h.id != 0 {
		t.Errorf("first group id %d, want 0 (ids are 0-based)", h.id)
	}
	group := ids(streamID, topic.id, h.id)

	// Before joining, Sync is empty: the SDK maps that to 5006 and joins.
	if got := c.ok("Sync before join", opNonReplicated, codeSyncConsumerGroup, group); len(got) != 0 {
		t.Fatalf("Sync before join: % x, want empty", got)
	}
	if payload := c.ok("JoinConsumerGroup", opJoinConsumerGroup, 604, group); len(payload) != 0 {
		t.Fatalf("Join payload % x, want empty", payload)
	}
	c.ok("JoinConsumerGroup again (idempotent)", opJoinConsumerGroup, 604, group)
	generation, owned := assignment(t, c.ok("Sync", opNonReplicated, codeSyncConsumerGroup, group))
	slices.Sort(owned)
	if !slices.Equal(owned, []uint32{0, 1, 2}) {
		t.Fatalf("sole member owns %v (generation %d), want [0 1 2]", owned, generation)
	}
	_, members = consumerGroupDetails(t, "GetConsumerGroup", c.ok("GetConsumerGroup", opNonReplicated, codeGetConsumerGroup, group))
	if len(members) != 1 || len(members[0].partitions) != 3 {
		t.Fatalf("GetConsumerGroup members %+v, want one member with 3 partitions", members)
	}

	groupConsumer := consumer(consumerGroup, h.id)
	seen := map[uint32]bool{}
	for _, p := range owned {
		pid, _, msgs := c.poll(pollBody(groupConsumer, ids(streamID), ids(topic.id), p, true, strategyNext, 0, 10, true))
		if pid != p {
			t.Fatalf("group poll of partition %d answered for %d", p, pid)
		}
		if seen[pid] {
			t.Fatalf("partition %d visited twice", pid)
		}
		seen[pid] = true
		want := []string{string(rune('a'+p)) + " 0", string(rune('a'+p)) + " 1"}
		var got []string
		for _, m := range msgs {
			got = append(got, string(m.payload))
		}
		if !slices.Equal(got, want) {
			t.Fatalf("group poll of partition %d: %q, want %q", p, got, want)
		}
	}
	// Auto-commit stored the offsets: Next now returns nothing, and the group's
	// offset reads back through GetConsumerOffset.
	for _, p := range owned {
		_, _, msgs := c.poll(pollBody(groupConsumer, ids(streamID), ids(topic.id), p, true, strategyNext, 0, 10, true))
		if len(msgs) != 0 {
			t.Fatalf("second Next poll of partition %d returned %d messages", p, len(msgs))
		}
		target := offsetTarget(groupConsumer, ids(streamID), ids(topic.id), p, true)
		got := decodeConsumerOffset(t, c.ok("GetConsumerOffset of the group", opNonReplicated, codeGetConsumerOffset, target))
		if got.storedOffset != 1 || got.partitionID != p {
			t.Fatalf("group offset on partition %d: %+v, want stored 1", p, got)
		}
	}

	// A group poll must name a partition (the SDK always does): without the flag the
	// reply is the 16-byte prefix with no messages, not an error (handle_poll_messages
	// in apache/iggy core/server/src/dispatch.rs).
	reply := c.ok("group poll without a partition", opNonReplicated, codePollMessages, pollBody(groupConsumer, ids(streamID), ids(topic.id), 0, false, strategyNext, 0, 10, true))
	if len(reply) != 16 {
		t.Fatalf("group poll without a partition: % x, want the 16-byte prefix alone", reply)
	}
	if _, _, msgs := polledMessages(t, reply); len(msgs) != 0 {
		t.Fatalf("group poll without a partition returned messages")
	}

	if payload := c.ok("LeaveConsumerGroup", opLeaveConsumerGroup, 605, group); len(payload) != 0 {
		t.Fatalf("Leave payload % x, want empty", payload)
	}
	if got := c.ok("Sync after leave", opNonReplicated, codeSyncConsumerGroup, group); len(got) != 0 {
		t.Fatalf("Sync after leave: % x, want empty", got)
	}
	// A poll of a partition the client no longer owns gets the resync sentinel.
	pid, _, msgs := c.poll(pollBody(groupConsumer, ids(streamID), ids(topic.id), 0, true, strategyNext, 0, 10, true))
	if pid != 0xFFFFFFFF || len(msgs) != 0 {
		t.Fatalf("poll after leave: partition %#x with %d messages, want 0xFFFFFFFF and none", pid, len(msgs))
	}
	c.fails("leave again", opLeaveConsumerGroup, 605, group, 5006)
	if payload := c.ok("DeleteConsumerGroup", opDeleteConsumerGroup, 603, group); len(payload) != 0 {
		t.Fatalf("Delete payload % x, want empty", payload)
	}
	if got := c.ok("GetConsumerGroup after delete", opNonReplicated, codeGetConsumerGroup, group); len(got) != 0 {
		t.Fatalf("GetConsumerGroup after delete: % x, want empty", got)
	}
}

// Two members split the partitions disjointly; when one disconnects its
// membership is released (the reference server logs a dropped connection out) and
// the other member is assigned everything at a newer generation. Group ids only
// grow: a group created after a delete gets a new id.
func TestConsumerGroupMembersAndDisconnect(t *testing.T) {
	addr := startServer(t)
	first := dialRoot(t, addr)
	second := dialRoot(t, addr)
	streamID := first.createStream("members")
	topic, _ := first.createTopic(streamID, "t", 3)
	h, _ := consumerGroupDetails(t, "CreateConsumerGroup", first.ok("CreateConsumerGroup", opCreateConsumerGroup, 602, appendName(ids(streamID, topic.id), "g")))
	group := ids(streamID, topic.id, h.id)
	first.ok("join first", opJoinConsumerGroup, 604, group)
	second.ok("join second", opJoinConsumerGroup, 604, group)

	_, a := assignment(t, first.ok("Sync first", opNonReplicated, codeSyncConsumerGroup, group))
	generation, b := assignment(t, second.ok("Sync second", opNonReplicated, codeSyncConsumerGroup, group))
	all := append(append([]uint32(nil), a...), b...)
	slices.Sort(all)
	if !slices.Equal(all, []uint32{0, 1, 2}) || len(a) == 0 || len(b) == 0 {
		t.Fatalf("assignments %v and %v, want a disjoint split of [0 1 2]", a, b)
	}
	// A member polling a partition it does not own gets the resync sentinel.
	pid, _, _ := second.poll(pollBody(consumer(consumerGroup, h.id), ids(streamID), ids(topic.id), a[0], true, strategyNext, 0, 1, false))
	if pid != 0xFFFFFFFF {
		t.Fatalf("poll of a partition owned by the other member answered for %d, want 0xFFFFFFFF", pid)
	}

	// Offsets of a partition the member does not own are refused with status 20.
	notOwned := offsetTarget(consumer(consumerGroup, h.id), ids(streamID), ids(topic.id), a[0], true)
	second.fails("store a group offset on a partition owned by the other member", opStoreConsumerOffset, 121, storeOffsetBody(notOwned, 0, 1), 20)

	first.conn.Close()
	// The release is asynchronous to the close; the SDK notices by re-syncing. Bounded.
	deadline := time.Now().Add(10 * time.Second)
	for {
		g, owned := assignment(t, second.ok("Sync after the other left", opNonReplicated, codeSyncConsumerGroup, group))
		if len(owned) == 3 {
			if g <= generation {
				t.Errorf("generation %d after a membership change, was %d", g, generation)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the disconnected member still holds partitions: second owns %v", owned)
		}
		time.Sleep(20 * time.Millisecond)
	}

	second.ok("DeleteConsumerGroup", opDeleteConsumerGroup, 603, group)
	again, _ := consumerGroupDetails(t, "CreateConsumerGroup again", second.ok("CreateConsumerGroup", opCreateConsumerGroup, 602, appendName(ids(streamID, topic.id), "g")))
	if again.id <= h.id {
		t.Errorf("group re-created with id %d after deleting %d; group ids only grow", again.id, h.id)
	}
}
