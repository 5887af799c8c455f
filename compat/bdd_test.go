package compat

import (
	"bytes"
	"testing"
	"time"
)

// The expectations of the Go SDK's BDD tcp_test (apache/iggy bdd/go), at the byte
// level.

// Duplicate names: 1012 / 2013 / 5004 (on either channel: the SDK treats a status
// and a committed result alike).
func TestDuplicateNames(t *testing.T) {
	addr := startServer(t)
	c := dialRoot(t, addr)
	streamID := c.createStream("dup")
	c.fails("CreateStream with a taken name", opCreateStream, 202, appendName(nil, "dup"), 1012)
	topic, _ := c.createTopic(streamID, "dup-topic", 1)
	c.fails("CreateTopic with a taken name", opCreateTopic, 302, createTopicBody(streamID, "dup-topic", 1, nil), 2013)
	group := appendName(ids(streamID, topic.id), "dup-group")
	c.ok("CreateConsumerGroup", opCreateConsumerGroup, 602, group)
	c.fails("CreateConsumerGroup with a taken name", opCreateConsumerGroup, 602, group, 5004)

	other := c.createStream("other")
	c.fails("UpdateStream to a taken name", opUpdateStream, 204, appendName(ids(other), "dup"), 1012)
	second, _ := c.createTopic(streamID, "second", 1)
	c.fails("UpdateTopic to a taken name", opUpdateTopic, 304, appendName(ids(streamID, second.id), "dup-topic"), 2013)
}

// Missing stream / topic / group on writes: 1009 / 2010 / 5000; partition ops and
// segments too. Metadata writes arrive as committed results or status; both are
// what the SDK surfaces.
func TestMissingObjectsOnWrites(t *testing.T) {
	addr := startServer(t)
	c := dialRoot(t, addr)
	streamID := c.createStream("present")
	topic, _ := c.createTopic(streamID, "present", 1)
	const missing = 77
	for _, tc := range []struct {
		what      string
		operation uint8
		code      uint32
		body      []byte
		want      uint32
	}{
		{"CreateTopic in a missing stream", opCreateTopic, 302, createTopicBody(missing, "t", 1, nil), 1009},
		{"DeleteStream missing", opDeleteStream, 203, ids(missing), 1009},
		{"UpdateStream missing", opUpdateStream, 204, appendName(ids(missing), "x"), 1009},
		{"DeleteTopic in a missing stream", opDeleteTopic, 303, ids(missing, 0), 1009},
		{"DeleteTopic missing", opDeleteTopic, 303, ids(streamID, missing), 2010},
		{"UpdateTopic missing", opUpdateTopic, 304, appendName(ids(streamID, missing), "x"), 2010},
		{"CreatePartitions in a missing stream", opCreatePartitions, 402, u32Body(ids(missing, 0), 1), 1009},
		{"CreatePartitions in a missing topic", opCreatePartitions, 402, u32Body(ids(streamID, missing), 1), 2010},
		{"DeletePartitions in a missing topic", opDeletePartitions, 403, u32Body(ids(streamID, missing), 1), 2010},
		{"DeleteSegments in a missing stream", opDeleteSegments, 503, u32Body(u32Body(ids(missing, 0), 0), 1), 1009},
		{"DeleteSegments in a missing topic", opDeleteSegments, 503, u32Body(u32Body(ids(streamID, missing), 0), 1), 2010},
		{"DeleteSegments of a missing partition", opDeleteSegments, 503, u32Body(u32Body(ids(streamID, topic.id), 9), 1), 3007},
		{"CreateConsumerGroup in a missing stream", opCreateConsumerGroup, 602, appendName(ids(missing, 0), "g"), 1009},
		{"CreateConsumerGroup in a missing topic", opCreateConsumerGroup, 602, appendName(ids(streamID, missing), "g"), 2010},
		{"DeleteConsumerGroup missing", opDeleteConsumerGroup, 603, ids(streamID, topic.id, missing), 5000},
		{"DeleteConsumerGroup in a missing stream", opDeleteConsumerGroup, 603, ids(missing, 0, 0), 1009},
		{"JoinConsumerGroup missing", opJoinConsumerGroup, 604, ids(streamID, topic.id, missing), 5000},
		{"JoinConsumerGroup in a missing topic", opJoinConsumerGroup, 604, ids(streamID, missing, 0), 2010},
		{"LeaveConsumerGroup missing", opLeaveConsumerGroup, 605, ids(streamID, topic.id, missing), 5000},
	} {
		r := c.do(tc.operation, tc.code, tc.body)
		if _, got := c.outcome(r); got != tc.want {
			t.Errorf("%s: error code %d (%v), want %d", tc.what, got, r, tc.want)
		}
	}

	now := uint64(time.Now().UnixMicro())
	c.fails("send to a missing partition", opSendMessages, 101, sendBody(ids(streamID), ids(topic.id), 5, now, []byte("x")), 20)
	c.fails("send to a missing stream", opSendMessages, 101, sendBody(ids(missing), ids(0), 0, now, []byte("x")), 20)

	group := offsetTarget(consumer(consumerGroup, missing), ids(streamID), ids(topic.id), 0, true)
	c.fails("delete an offset of a missing group", opDeleteConsumerOffset, 122, deleteOffsetBody(group, 1), 20)
	inMissingStream := offsetTarget(consumer(consumerSingle, 1), ids(missing), ids(0), 0, true)
	c.fails("delete an offset in a missing stream", opDeleteConsumerOffset, 122, deleteOffsetBody(inMissingStream, 1), 20)
}

// Missing objects on reads: an empty status-0 body for GetStream, GetTopic,
// GetConsumerGroup and GetConsumerOffset (the SDK turns the first three into
// 1009 / 2010 / 5000 and the last into nil); GetTopics of a missing stream is a
// zero count; GetConsumerGroup in a missing stream or topic is status 1009 / 2010.
func TestMissingObjectsOnReads(t *testing.T) {
	addr := startServer(t)
	c := dialRoot(t, addr)
	streamID := c.createStream("present")
	topic, _ := c.createTopic(streamID, "present", 1)
	const missing = 77
	for _, tc := range []struct {
		what string
		code uint32
		body []byte
	}{
		{"GetStream missing", codeGetStream, ids(missing)},
		{"GetStream by a missing name", codeGetStream, stringID(nil, "nope")},
		{"GetTopic in a missing stream", codeGetTopic, ids(missing, 0)},
		{"GetTopic missing", codeGetTopic, ids(streamID, missing)},
		{"GetConsumerGroup missing", codeGetConsumerGroup, ids(streamID, topic.id, missing)},
		{"GetConsumerOffset of a missing group", codeGetConsumerOffset, offsetTarget(consumer(consumerGroup, missing), ids(streamID), ids(topic.id), 0, true)},
		{"GetConsumerOffset in a missing stream", codeGetConsumerOffset, offsetTarget(consumer(consumerSingle, 1), ids(missing), ids(0), 0, true)},
		{"SyncConsumerGroup of a missing group", codeSyncConsumerGroup, ids(streamID, topic.id, missing)},
	} {
		if got := c.ok(tc.what, opNonReplicated, tc.code, tc.body); len(got) != 0 {
			t.Errorf("%s: % x, want an empty body", tc.what, got)
		}
	}
	if got := c.ok("GetTopics of a missing stream", opNonReplicated, codeGetTopics, ids(missing)); !bytes.Equal(got, []byte{0, 0, 0, 0}) {
		t.Errorf("GetTopics of a missing stream: % x, want 00 00 00 00", got)
	}
	c.fails("GetConsumerGroup in a missing stream", opNonReplicated, codeGetConsumerGroup, ids(missing, 0, 0), 1009)
	c.fails("GetConsumerGroup in a missing topic", opNonReplicated, codeGetConsumerGroup, ids(streamID, missing, 0), 2010)
	c.fails("GetConsumerOffset of a missing partition", opNonReplicated, codeGetConsumerOffset,
		offsetTarget(consumer(consumerSingle, 1), ids(streamID), ids(topic.id), 9, true), 3007)
}

// Streams and topics read back through the list and detail replies, by numeric and by
// string identifier (apache/iggy core/binary_protocol/src/responses/streams/ and
// topics/).
func TestStreamAndTopicReads(t *testing.T) {
	addr := startServer(t)
	c := dialRoot(t, addr)
	first := c.createStream("alpha")
	second := c.createStream("beta")
	if first != 0 || second != 1 {
		t.Fatalf("stream ids %d, %d; want 0 and 1 (0-based, lowest free)", first, second)
	}
	t0, _ := c.createTopic(second, "t0", 2)
	t1, _ := c.createTopic(second, "t1", 1)
	if t0.id != 0 || t1.id != 1 {
		t.Fatalf("topic ids %d, %d; want 0 and 1", t0.id, t1.id)
	}
	c.send(second, t0.id, 1, []byte("hello"))

	d := decoder{t: t, what: "GetStreams", b: c.ok("GetStreams", opNonReplicated, codeGetStreams, nil)}
	a, b := d.streamHeader(), d.streamHeader()
	d.end()
	if a.id != 0 || a.name != "alpha" || a.topicsCount != 0 || b.id != 1 || b.name != "beta" || b.topicsCount != 2 {
		t.Fatalf("GetStreams: %+v, %+v", a, b)
	}
	if b.messagesCount != 1 {
		t.Errorf("GetStreams: beta messages_count %d, want 1", b.messagesCount)
	}

	for _, id := range [][]byte{ids(second), stringID(nil, "beta")} {
		d := decoder{t: t, what: "GetStream", b: c.ok("GetStream", opNonReplicated, codeGetStream, id)}
		h := d.streamHeader()
		if h.id != 1 || h.topicsCount != 2 {
			t.Fatalf("GetStream header %+v", h)
		}
		for i := range h.topicsCount {
			th := d.topicHeader()
			if th.id != i {
				t.Fatalf("GetStream topic %d has id %d (ascending ids)", i, th.id)
			}
		}
		d.end()
	}

	d = decoder{t: t, what: "GetTopics", b: c.ok("GetTopics", opNonReplicated, codeGetTopics, ids(second))}
	if n := d.u32(); n != 2 {
		t.Fatalf("GetTopics count %d, want 2", n)
	}
	if h0, h1 := d.topicHeader(), d.topicHeader(); h0.name != "t0" || h0.partitionsCount != 2 || h1.name != "t1" {
		t.Fatalf("GetTopics: %+v, %+v", h0, h1)
	}
	d.end()

	h, parts := topicDetails(t, "GetTopic by name", c.ok("GetTopic", opNonReplicated, codeGetTopic, stringID(stringID(nil, "beta"), "t0")))
	if h.id != 0 || len(parts) != 2 || parts[1].messagesCount != 1 || parts[1].segmentsCount < 1 {
		t.Fatalf("GetTopic by name: %+v %+v", h, parts)
	}

	c.ok("DeleteStream", opDeleteStream, 203, ids(first))
	if again := c.createStream("gamma"); again != 0 {
		t.Errorf("stream created after deleting 0 has id %d, want 0 (lowest free slot)", again)
	}
}

// Every call while not logged in: reads get status 40 in a reply; a replicated request
// on a connection with no bound session is evicted with reason 1 NoSession
// (iggy.apache.org/docs/binary-protocol/framing, "EvictionHeader"), which the SDK
// surfaces as 40 (apache/iggy core/common/src/error/eviction.rs).
func TestCallsWithoutLogin(t *testing.T) {
	addr := startServer(t)
	c := dial(t, addr)
	for _, code := range []uint32{codeGetStreams, codeGetStream, codeGetTopic, codePollMessages, codeGetConsumerOffset, codeSyncConsumerGroup} {
		if r := c.get(code, nil); r.command != commandReply || r.status != 40 {
			t.Errorf("code %d before login: %v, want status 40", code, r)
		}
	}
	f := c.stamp(opCreateStream, 202, appendName(nil, "nope"))
	c.write(f)
	r, err := c.tryRead(f)
	if err != nil {
		t.Fatalf("CreateStream without a session: %v", err)
	}
	if r.command != commandEviction || r.reason != 1 {
		t.Fatalf("CreateStream without a session: %v, want eviction reason 1", r)
	}
}
