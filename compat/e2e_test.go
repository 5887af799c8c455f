package compat

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"testing"
	"time"
)

// The rows of the Go SDK's e2e table (apache/iggy foreign/go/tests/e2e_test.go), at the
// byte level.

// createStream sends CreateStream (202, op 128, body [u8 len][name]) and decodes the
// framed StreamDetails the SDK reads (apache/iggy
// core/binary_protocol/src/responses/streams/get_stream.rs).
func (c *rawConn) createStream(name string) uint32 {
	c.t.Helper()
	payload := c.ok("CreateStream "+name, opCreateStream, 202, appendName(nil, name))
	d := decoder{t: c.t, what: "CreateStream reply", b: payload}
	h := d.streamHeader()
	d.end()
	if h.name != name || h.topicsCount != 0 || h.sizeBytes != 0 || h.messagesCount != 0 || len(h.options) != 0 {
		c.t.Fatalf("CreateStream reply %+v, want name %q, zero counts, empty options", h, name)
	}
	return h.id
}

// createTopicBody is CreateTopic (302): Identifier [partitions_count u32][Name][options to the end].
func createTopicBody(streamID uint32, name string, partitions uint32, options []byte) []byte {
	b := binary.LittleEndian.AppendUint32(ids(streamID), partitions)
	return append(appendName(b, name), options...)
}

// createTopic creates a topic with the SDK's default (empty) options block and
// returns its TopicDetails.
func (c *rawConn) createTopic(streamID uint32, name string, partitions uint32) (topicHeader, []partitionInfo) {
	c.t.Helper()
	r := c.do(opCreateTopic, 302, createTopicBody(streamID, name, partitions, nil))
	if r.operation != 64 && r.operation != opCreateTopic {
		c.t.Fatalf("CreateTopic reply operation %d, want 64 or 132", r.operation)
	}
	payload, code := c.outcome(r)
	if code != 0 {
		c.t.Fatalf("CreateTopic %s: error code %d", name, code)
	}
	h, parts := topicDetails(c.t, "CreateTopic reply", payload)
	if h.name != name || h.partitionsCount != partitions {
		c.t.Fatalf("CreateTopic reply: name %q partitions %d, want %q and %d", h.name, h.partitionsCount, name, partitions)
	}
	for i, p := range parts {
		if p.id != uint32(i) || p.currentOffset != 0 || p.messagesCount != 0 {
			c.t.Fatalf("CreateTopic reply partition %d: %+v, want id %d and no messages", i, p, i)
		}
	}
	return h, parts
}

// getTopic reads GetTopic (300); an empty body is "not found".
func (c *rawConn) getTopic(streamID, topicID uint32) (topicHeader, []partitionInfo) {
	c.t.Helper()
	body := c.ok("GetTopic", opNonReplicated, codeGetTopic, ids(streamID, topicID))
	if len(body) == 0 {
		c.t.Fatalf("GetTopic %d/%d: empty body (not found)", streamID, topicID)
	}
	return topicDetails(c.t, "GetTopic", body)
}

// send sends a batch to an explicit partition and returns the confirmations,
// checking what the SDK checks: reply op 160, not framed, non-empty.
func (c *rawConn) send(streamID, topicID, partitionID uint32, payloads ...[]byte) []confirmation {
	c.t.Helper()
	body := sendBody(ids(streamID), ids(topicID), partitionID, uint64(time.Now().UnixMicro()), payloads...)
	return c.sendRaw(body)
}

func (c *rawConn) sendRaw(body []byte) []confirmation {
	c.t.Helper()
	f := c.stamp(opSendMessages, 101, body)
	if f.request != c.requestCounter {
		c.t.Fatalf("send stamped %d, counter %d: partition ops carry the counter unchanged", f.request, c.requestCounter)
	}
	c.write(f)
	r := c.read(f)
	payload, code := c.outcome(r)
	if code != 0 {
		c.t.Fatalf("SendMessages: error code %d", code)
	}
	if r.operation != opSendMessages || len(payload) == 0 {
		c.t.Fatalf("SendMessages reply: %v, want op 160 and a non-empty body", r)
	}
	return confirmations(c.t, payload)
}

func payloads(prefix string, from, n int) [][]byte {
	ps := make([][]byte, n)
	for i := range ps {
		ps[i] = []byte(fmt.Sprintf("%s %d", prefix, from+i))
	}
	return ps
}

// poll runs PollMessages (100) and decodes the reply.
func (c *rawConn) poll(body []byte) (uint32, uint64, []polledMessage) {
	c.t.Helper()
	payload := c.ok("PollMessages", opNonReplicated, codePollMessages, body)
	return polledMessages(c.t, payload)
}

// SendAndPollRoundTrip: a topic with 2 partitions; 3 sends of 4 messages to
// partition 0 are each confirmed on the right ids with strictly increasing
// base_offset; an Offset(0) poll of 12 returns the 12 messages in order.
func TestSendAndPollRoundTrip(t *testing.T) {
	addr := startServer(t)
	c := dialRoot(t, addr)
	streamID := c.createStream("round-trip")
	topic, _ := c.createTopic(streamID, "events", 2)

	origin := uint64(time.Now().UnixMicro())
	lastBase := int64(-1)
	for i := range 3 {
		body := sendBody(ids(streamID), ids(topic.id), 0, origin+uint64(i)*100, payloads("message", 4*i, 4)...)
		cs := c.sendRaw(body)
		if len(cs) == 0 {
			t.Fatalf("send %d: no confirmation", i)
		}
		for _, conf := range cs {
			if conf.streamID != streamID || conf.topicID != topic.id || conf.partitionID != 0 {
				t.Fatalf("send %d confirmed %+v, want stream %d topic %d partition 0", i, conf, streamID, topic.id)
			}
			if int64(conf.baseOffset) <= lastBase {
				t.Fatalf("send %d: base_offset %d after %d, want strictly increasing", i, conf.baseOffset, lastBase)
			}
			lastBase = int64(conf.baseOffset)
		}
		if cs[0].baseOffset != uint64(4*i) {
			t.Errorf("send %d: base_offset %d, want %d", i, cs[0].baseOffset, 4*i)
		}
	}

	partitionID, current, msgs := c.poll(pollBody(consumer(consumerSingle, 1), ids(streamID), ids(topic.id), 0, true, strategyOffset, 0, 12, false))
	if partitionID != 0 || current != 11 {
		t.Errorf("poll prefix: partition %d current_offset %d, want 0 and 11", partitionID, current)
	}
	if len(msgs) != 12 {
		t.Fatalf("polled %d messages, want 12", len(msgs))
	}
	for i, m := range msgs {
		if m.offset != uint64(i) || string(m.payload) != fmt.Sprintf("message %d", i) {
			t.Fatalf("message %d: offset %d payload %q", i, m.offset, m.payload)
		}
		if want := origin + uint64(i/4)*100 + uint64(i%4); m.originTimestamp != want {
			t.Errorf("message %d: origin timestamp %d, want %d", i, m.originTimestamp, want)
		}
		if m.id[6]>>4 != 4 {
			t.Errorf("message %d: id % x is not the UUID v4 sent", i, m.id)
		}
	}

	// GetTopic now reports the partition's figures.
	_, parts := c.getTopic(streamID, topic.id)
	if parts[0].currentOffset != 11 || parts[0].messagesCount != 12 || parts[1].messagesCount != 0 {
		t.Errorf("GetTopic partitions after the sends: %+v", parts)
	}
}

// ResolvesBalancedAndKeyPartitioning: the SDK resolves both client-side and sends
// kind 2: balanced from a cursor at 0, a key as XXH32(key) % count. The key's
// two sends land on the same partition, and that partition holds both.
func TestBalancedAndKeyPartitioning(t *testing.T) {
	addr := startServer(t)
	c := dialRoot(t, addr)
	streamID := c.createStream("partitioning")
	topic, _ := c.createTopic(streamID, "orders", 3)

	cs := c.send(streamID, topic.id, 0%topic.partitionsCount, []byte("balanced"))
	if len(cs) != 1 || cs[0].partitionID >= 3 {
		t.Fatalf("balanced send confirmed %+v, want one confirmation on a partition < 3", cs)
	}

	key := []byte("order-key-1")
	keyed := xxh32(key) % topic.partitionsCount
	first := c.send(streamID, topic.id, keyed, []byte("keyed 1"))
	second := c.send(streamID, topic.id, keyed, []byte("keyed 2"))
	if first[0].partitionID != keyed || second[0].partitionID != keyed {
		t.Fatalf("keyed sends confirmed on %d and %d, want both on %d", first[0].partitionID, second[0].partitionID, keyed)
	}
	_, _, msgs := c.poll(pollBody(consumer(consumerSingle, 1), ids(streamID), ids(topic.id), keyed, true, strategyFirst, 0, 10, false))
	var got []string
	for _, m := range msgs {
		got = append(got, string(m.payload))
	}
	want := []string{"keyed 1", "keyed 2"}
	if keyed == 0 {
		want = []string{"balanced", "keyed 1", "keyed 2"}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("partition %d holds %q, want %q", keyed, got, want)
	}
}

// RefreshesPartitionCountAfterPartitionChanges (apache/iggy
// foreign/go/tests/e2e_test.go): with a balanced cursor the first send goes to 0; after
// CreatePartitions(+2) the next goes to 1; after DeletePartitions(2) the next goes to
// 0.
func TestPartitionCountRefresh(t *testing.T) {
	addr := startServer(t)
	c := dialRoot(t, addr)
	streamID := c.createStream("refresh")
	topic, _ := c.createTopic(streamID, "t", 1)
	cursor := uint32(0)
	balanced := func() uint32 {
		h, parts := c.getTopic(streamID, topic.id)
		if h.partitionsCount == 0 || int(h.partitionsCount) != len(parts) {
			t.Fatalf("GetTopic: partitions_count %d with %d partitions", h.partitionsCount, len(parts))
		}
		p := cursor % h.partitionsCount
		cursor++
		cs := c.send(streamID, topic.id, p, []byte("m"))
		if len(cs) != 1 || cs[0].partitionID != p {
			t.Fatalf("send to %d confirmed %+v", p, cs)
		}
		return p
	}
	if p := balanced(); p != 0 {
		t.Fatalf("first balanced send to %d, want 0", p)
	}

	r := c.do(opCreatePartitions, 402, u32Body(ids(streamID, topic.id), 2))
	if r.operation != 65 && r.operation != opCreatePartitions {
		t.Fatalf("CreatePartitions reply operation %d, want 65 or 136", r.operation)
	}
	if payload, code := c.outcome(r); code != 0 || len(payload) != 0 {
		t.Fatalf("CreatePartitions: code %d payload % x, want success with an empty payload", code, payload)
	}
	if p := balanced(); p != 1 {
		t.Fatalf("balanced send after CreatePartitions(+2) to %d, want 1", p)
	}

	if payload := c.ok("DeletePartitions", opDeletePartitions, 403, u32Body(ids(streamID, topic.id), 2)); len(payload) != 0 {
		t.Fatalf("DeletePartitions payload % x, want empty", payload)
	}
	if p := balanced(); p != 0 {
		t.Fatalf("balanced send after DeletePartitions(2) to %d, want 0", p)
	}
	// The deleted partition is gone: a send there is status 20 (BDD expectation).
	body := sendBody(ids(streamID), ids(topic.id), 1, uint64(time.Now().UnixMicro()), []byte("x"))
	c.fails("send to a deleted partition", opSendMessages, 101, body, 20)
}

// storeOffsetBody is StoreConsumerOffset (121): target, [offset u64][ack u8].
func storeOffsetBody(target []byte, offset uint64, ack uint8) []byte {
	return append(binary.LittleEndian.AppendUint64(append([]byte(nil), target...), offset), ack)
}

// deleteOffsetBody is DeleteConsumerOffset (122): target, [ack u8].
func deleteOffsetBody(target []byte, ack uint8) []byte {
	return append(append([]byte(nil), target...), ack)
}

// StoresAndReadsConsumerOffsets: store 3 after 5 messages, read it back as the
// 20-byte ConsumerOffset, delete it; afterwards the read is empty and a second
// delete is 3021.
func TestConsumerOffsets(t *testing.T) {
	addr := startServer(t)
	c := dialRoot(t, addr)
	streamID := c.createStream("offsets")
	topic, _ := c.createTopic(streamID, "t", 1)
	c.send(streamID, topic.id, 0, payloads("m", 0, 5)...)
	target := offsetTarget(consumer(consumerSingle, 7), ids(streamID), ids(topic.id), 0, true)

	if got := c.ok("GetConsumerOffset before store", opNonReplicated, codeGetConsumerOffset, target); len(got) != 0 {
		t.Fatalf("GetConsumerOffset with nothing stored: % x, want empty", got)
	}
	r := c.do(opStoreConsumerOffset, 121, storeOffsetBody(target, 3, 1))
	if r.operation != opStoreConsumerOffset || string(r.body) != "\x00\x00\x00\x00" {
		t.Fatalf("StoreConsumerOffset: %v, want op 161 and body 00 00 00 00", r)
	}
	got := decodeConsumerOffset(t, c.ok("GetConsumerOffset", opNonReplicated, codeGetConsumerOffset, target))
	if got != (consumerOffset{partitionID: 0, currentOffset: 4, storedOffset: 3}) {
		t.Fatalf("GetConsumerOffset %+v, want partition 0, current 4, stored 3", got)
	}
	r = c.do(opDeleteConsumerOffset, 122, deleteOffsetBody(target, 1))
	if r.operation != opDeleteConsumerOffset || string(r.body) != "\x00\x00\x00\x00" {
		t.Fatalf("DeleteConsumerOffset: %v, want op 162 and body 00 00 00 00", r)
	}
	if got := c.ok("GetConsumerOffset after delete", opNonReplicated, codeGetConsumerOffset, target); len(got) != 0 {
		t.Fatalf("GetConsumerOffset after delete: % x, want empty", got)
	}
	c.fails("delete a never-stored offset", opDeleteConsumerOffset, 122, deleteOffsetBody(target, 1), 3021)
	c.fails("store above the current offset", opStoreConsumerOffset, 121, storeOffsetBody(target, 5, 1), 4100)
}

// ConsumerOffsetAckLevelsOverTheRawPath: raw 121 with ack 1 (offset 2) and ack 0
// (offset 4) both succeed and are visible through 120 at once; raw 122 with ack 1
// succeeds.
func TestConsumerOffsetAckLevels(t *testing.T) {
	addr := startServer(t)
	c := dialRoot(t, addr)
	streamID := c.createStream("ack-levels")
	topic, _ := c.createTopic(streamID, "t", 1)
	c.send(streamID, topic.id, 0, payloads("m", 0, 5)...)
	target := offsetTarget(consumer(consumerSingle, 1), ids(streamID), ids(topic.id), 0, true)
	for _, step := range []struct {
		ack    uint8
		offset uint64
	}{{1, 2}, {0, 4}} {
		if payload := c.ok(fmt.Sprintf("store %d with ack %d", step.offset, step.ack), opStoreConsumerOffset, 121, storeOffsetBody(target, step.offset, step.ack)); len(payload) != 0 {
			t.Fatalf("store payload % x, want empty", payload)
		}
		got := decodeConsumerOffset(t, c.ok("GetConsumerOffset", opNonReplicated, codeGetConsumerOffset, target))
		if got.storedOffset != step.offset {
			t.Fatalf("after storing %d with ack %d, GetConsumerOffset says %d", step.offset, step.ack, got.storedOffset)
		}
	}
	c.ok("delete with ack 1", opDeleteConsumerOffset, 122, deleteOffsetBody(target, 1))
}

// Messages with user headers and large payloads come back byte for byte, with a
// server-stamped base_timestamp taken at append time (µs since the epoch).
func TestPayloadsHeadersAndTimestamps(t *testing.T) {
	addr := startServer(t)
	c := dialRoot(t, addr)
	streamID := c.createStream("bytes")
	topic, _ := c.createTopic(streamID, "t", 1)

	large := make([]byte, 1<<20)
	for i := range large {
		large[i] = byte(i * 7)
	}
	bodies := [][]byte{[]byte("small"), large, {0}}
	// The Go SDK encodes its header map itself; to the server the block is opaque.
	headers := [][]byte{[]byte("\x01\x00\x00\x00k\x02\x01\x00\x00\x00v"), nil, bytes.Repeat([]byte{0xab}, 1000)}
	metadata := append(append(ids(streamID), ids(topic.id)...), 2, 4, 0, 0, 0, 0)
	metadata = binary.LittleEndian.AppendUint32(metadata, uint32(len(bodies)))
	body := binary.LittleEndian.AppendUint32(nil, uint32(len(metadata)))
	body = append(append(body, metadata...), batchWithHeaders(uint64(time.Now().UnixMicro()), bodies, headers)...)

	before := uint64(time.Now().UnixMicro())
	c.sendRaw(body)
	after := uint64(time.Now().UnixMicro())

	_, _, msgs := c.poll(pollBody(consumer(consumerSingle, 1), ids(streamID), ids(topic.id), 0, true, strategyFirst, 0, 10, false))
	if len(msgs) != 3 {
		t.Fatalf("polled %d messages, want 3", len(msgs))
	}
	for i, m := range msgs {
		if !bytes.Equal(m.payload, bodies[i]) || !bytes.Equal(m.userHeaders, headers[i]) {
			t.Errorf("message %d: payload %d bytes, headers % x; want %d bytes and % x", i, len(m.payload), m.userHeaders, len(bodies[i]), headers[i])
		}
		if m.timestamp < before || m.timestamp > after {
			t.Errorf("message %d: base_timestamp %d outside the send window [%d, %d]", i, m.timestamp, before, after)
		}
	}
	h, parts := c.getTopic(streamID, topic.id)
	if h.messagesCount != 3 || h.sizeBytes == 0 || parts[0].sizeBytes == 0 || parts[0].currentOffset != 2 {
		t.Errorf("GetTopic after the send: messages %d size %d, partition %+v", h.messagesCount, h.sizeBytes, parts[0])
	}
}
