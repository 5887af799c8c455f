package compat

import (
	"bytes"
	"fmt"
	"testing"
	"time"
)

// The SDK resends the identical frame after a transient result (the Go SDK, apache/iggy
// foreign/go/internal/vsr); metadata writes are deduplicated by (client, request), so
// the replay gets the cached reply rather than a second apply
// (iggy.apache.org/docs/binary-protocol/framing, "Operation discriminants").
func TestMetadataReplayGetsTheCachedReply(t *testing.T) {
	addr := startServer(t)
	c := dialRoot(t, addr)
	f := c.stamp(opCreateStream, 202, appendName(nil, "once"))
	c.write(f)
	first := c.read(f)
	c.write(f)
	second := c.read(f)
	if _, code := c.outcome(second); code != 0 || !bytes.Equal(first.body, second.body) {
		t.Fatalf("replayed CreateStream: first %v, replay %v; want the same successful reply", first, second)
	}
	d := decoder{t: t, what: "GetStreams", b: c.ok("GetStreams", opNonReplicated, codeGetStreams, nil)}
	d.streamHeader()
	d.end()

	// The request number is a watermark, not a sequence: a jump is admissible.
	c.requestCounter += 10
	c.ok("CreateStream after a gap in request numbers", opCreateStream, 202, appendName(nil, "after-gap"))
}

// Poll strategies over several stored batches
// (iggy.apache.org/docs/binary-protocol/encodings, "Polling strategy"), including a
// poll that starts inside a batch: the record is a slice with the original base_offset
// and deltas and a batch checksum that verifies.
func TestPollStrategies(t *testing.T) {
	addr := startServer(t)
	c := dialRoot(t, addr)
	streamID := c.createStream("strategies")
	topic, _ := c.createTopic(streamID, "t", 1)
	for i := range 3 {
		c.send(streamID, topic.id, 0, payloads("m", 3*i, 3)...)
	}
	stream, topicID := ids(streamID), ids(topic.id)
	single := consumer(consumerSingle, 3)
	offsetsOf := func(msgs []polledMessage) []uint64 {
		var out []uint64
		for _, m := range msgs {
			if want := fmt.Sprintf("m %d", m.offset); string(m.payload) != want {
				t.Fatalf("offset %d carries %q, want %q", m.offset, m.payload, want)
			}
			out = append(out, m.offset)
		}
		return out
	}
	for _, tc := range []struct {
		what     string
		strategy uint8
		value    uint64
		count    uint32
		want     string
	}{
		{"First 2", strategyFirst, 0, 2, "[0 1]"},
		{"Last 2", 4, 0, 2, "[7 8]"},
		{"Offset 4 count 4 (inside a batch, across two)", strategyOffset, 4, 4, "[4 5 6 7]"},
		{"Offset past the end", strategyOffset, 50, 10, "[]"},
		{"Timestamp 0", 2, 0, 100, "[0 1 2 3 4 5 6 7 8]"},
		{"Timestamp in the future", 2, uint64(time.Now().Add(time.Hour).UnixMicro()), 100, "[]"},
	} {
		pid, current, msgs := c.poll(pollBody(single, stream, topicID, 0, true, tc.strategy, tc.value, tc.count, false))
		if got := fmt.Sprint(offsetsOf(msgs)); got != tc.want && !(tc.want == "[]" && len(msgs) == 0) {
			t.Errorf("%s: offsets %s, want %s", tc.what, got, tc.want)
		}
		if pid != 0 || current != 8 {
			t.Errorf("%s: prefix partition %d current %d, want 0 and 8", tc.what, pid, current)
		}
	}

	// Next starts at 0 without a stored offset, auto-commit moves it on.
	for _, want := range []string{"[0 1 2 3]", "[4 5 6 7]", "[8]", "[]"} {
		_, _, msgs := c.poll(pollBody(single, stream, topicID, 0, true, strategyNext, 0, 4, true))
		if got := fmt.Sprint(offsetsOf(msgs)); got != want && !(want == "[]" && len(msgs) == 0) {
			t.Fatalf("Next with auto-commit: %s, want %s", got, want)
		}
	}
	// A plain consumer without a partition flag polls partition 0.
	pid, _, msgs := c.poll(pollBody(consumer(consumerSingle, 4), stream, topicID, 0, false, strategyFirst, 0, 1, false))
	if pid != 0 || len(msgs) != 1 {
		t.Fatalf("poll without a partition: partition %d, %d messages", pid, len(msgs))
	}
	// Poll denials are typed status codes.
	c.fails("poll a missing partition", opNonReplicated, codePollMessages, pollBody(single, stream, topicID, 7, true, strategyFirst, 0, 1, false), 3007)
	c.fails("poll a missing topic", opNonReplicated, codePollMessages, pollBody(single, stream, ids(9), 0, true, strategyFirst, 0, 1, false), 2010)
	c.fails("poll a missing stream", opNonReplicated, codePollMessages, pollBody(single, ids(9), topicID, 0, true, strategyFirst, 0, 1, false), 1009)
}

// PurgeStream (205, op 131), PurgeTopic (305, op 135) and DeleteSegments (503,
// op 138): framed empty successes; purged partitions poll empty.
func TestPurgeAndDeleteSegments(t *testing.T) {
	addr := startServer(t)
	c := dialRoot(t, addr)
	streamID := c.createStream("purge")
	a, _ := c.createTopic(streamID, "a", 1)
	b, _ := c.createTopic(streamID, "b", 1)
	c.send(streamID, a.id, 0, payloads("m", 0, 3)...)
	c.send(streamID, b.id, 0, payloads("m", 0, 3)...)

	r := c.do(opDeleteSegments, 503, u32Body(u32Body(ids(streamID, a.id), 0), 1))
	switch r.operation {
	case 68:
		if !bytes.Equal(r.body, []byte{0, 0, 0, 0}) {
			t.Fatalf("DeleteSegments reply op 68 body % x, want 00 00 00 00", r.body)
		}
	case opDeleteSegments:
		if r.status != 0 || len(r.body) != 0 {
			t.Fatalf("DeleteSegments reply op 138: %v, want status 0 and an empty body (the SDK does not strip op 138)", r)
		}
	default:
		t.Fatalf("DeleteSegments reply op %d, want 68 or 138", r.operation)
	}

	empty := func(topicID uint32) bool {
		_, _, msgs := c.poll(pollBody(consumer(consumerSingle, 1), ids(streamID), ids(topicID), 0, true, strategyFirst, 0, 10, false))
		return len(msgs) == 0
	}
	if payload := c.ok("PurgeTopic", 135, 305, ids(streamID, a.id)); len(payload) != 0 {
		t.Fatalf("PurgeTopic payload % x", payload)
	}
	if !empty(a.id) || empty(b.id) {
		t.Fatalf("after PurgeTopic a: a empty %v, b empty %v; want true, false", empty(a.id), empty(b.id))
	}
	c.ok("PurgeStream", 131, 205, ids(streamID))
	if !empty(b.id) {
		t.Fatalf("after PurgeStream b still has messages")
	}
	c.fails("PurgeStream missing", 131, 205, ids(99), 1009)
	c.fails("PurgeTopic missing", 135, 305, ids(streamID, 99), 2010)
	// Sends after a purge are accepted.
	if cs := c.send(streamID, a.id, 0, []byte("again")); len(cs) != 1 {
		t.Fatalf("send after purge: %+v", cs)
	}
}

// An older metadata request replayed after newer ones is never applied twice: the
// answer is its original reply (still cached) or 59 RequestAlreadyApplied (apache/iggy
// core/common/src/error/iggy_error.rs).
func TestOlderMetadataReplayIsNotReapplied(t *testing.T) {
	addr := startServer(t)
	c := dialRoot(t, addr)
	first := c.stamp(opCreateStream, 202, appendName(nil, "first"))
	c.write(first)
	original := c.read(first)
	c.ok("CreateStream second", opCreateStream, 202, appendName(nil, "second"))
	c.ok("DeleteStream first", opDeleteStream, 203, ids(0))

	c.write(first)
	replay := c.read(first)
	_, code := c.outcome(replay)
	if !(code == 0 && bytes.Equal(replay.body, original.body)) && code != 59 {
		t.Fatalf("replay of request %d: %v, want the original reply %v or code 59", first.request, replay, original)
	}
	d := decoder{t: t, what: "GetStreams", b: c.ok("GetStreams", opNonReplicated, codeGetStreams, nil)}
	if h := d.streamHeader(); h.name != "second" {
		t.Fatalf("GetStreams lists %q, want only second", h.name)
	}
	d.end()
}

// A pre-commit denial echoes the request's operation byte (apache/iggy
// core/server/src/dispatch.rs, build_deny_reply).
func TestDenialEchoesTheRequestOperation(t *testing.T) {
	addr := startServer(t)
	c := dialRoot(t, addr)
	streamID := c.createStream("denials")
	for _, tc := range []struct {
		what string
		op   uint8
		code uint32
		body []byte
	}{
		{"CreateTopic with 1001 partitions", opCreateTopic, 302, createTopicBody(streamID, "t", 1001, nil)},
		{"CreatePartitions of 0", opCreatePartitions, 402, u32Body(ids(streamID, 0), 0)},
		{"CreateStream with an option", opCreateStream, 202, option(appendName(nil, "x"), "k", kindString, []byte("v"))},
	} {
		r := c.do(tc.op, tc.code, tc.body)
		if r.status == 0 || r.operation != tc.op {
			t.Errorf("%s: %v, want a status denial on operation %d", tc.what, r, tc.op)
		}
	}
}
