package compat

import (
	"encoding/binary"
	"testing"

	"github.com/zeebo/xxh3"
)

// Reply element layouts of apache/iggy core/binary_protocol/src/responses/, decoded by
// hand.

// streamHeader is StreamResponse (apache/iggy
// core/binary_protocol/src/responses/streams/mod.rs).
type streamHeader struct {
	id            uint32
	createdAt     uint64
	topicsCount   uint32
	sizeBytes     uint64
	messagesCount uint64
	name          string
	options       []byte
}

func (d *decoder) streamHeader() streamHeader {
	d.t.Helper()
	return streamHeader{
		id: d.u32(), createdAt: d.u64(), topicsCount: d.u32(), sizeBytes: d.u64(),
		messagesCount: d.u64(), name: d.name(), options: d.take(int(d.u32())),
	}
}

// optionValue is a TLV value: its kind byte and its bytes.
type optionValue struct {
	kind  uint8
	value []byte
}

// topicHeader is the topic header of apache/iggy
// core/binary_protocol/src/responses/topics/.
type topicHeader struct {
	id              uint32
	createdAt       uint64
	partitionsCount uint32
	messageExpiry   uint64
	compression     uint8
	maxTopicSize    uint64
	sizeBytes       uint64
	messagesCount   uint64
	name            string
	explicit        map[string]optionValue
	derived         map[string]optionValue
}

func (d *decoder) topicHeader() topicHeader {
	d.t.Helper()
	h := topicHeader{
		id: d.u32(), createdAt: d.u64(), partitionsCount: d.u32(), messageExpiry: d.u64(),
		compression: d.u8(), maxTopicSize: d.u64(), sizeBytes: d.u64(), messagesCount: d.u64(),
		name: d.name(),
	}
	h.explicit = d.optionsBlock()
	h.derived = d.optionsBlock()
	return h
}

// optionsBlock reads a u32-prefixed TLV block
// (iggy.apache.org/docs/binary-protocol/encodings, "Options block").
func (d *decoder) optionsBlock() map[string]optionValue {
	d.t.Helper()
	block := decoder{t: d.t, what: d.what + " options block", b: d.take(int(d.u32()))}
	m := map[string]optionValue{}
	for !block.done() {
		if kind := block.u8(); kind != 2 {
			d.t.Fatalf("%s: option key kind %d, want 2 (String)", d.what, kind)
		}
		key := string(block.take(int(block.u32())))
		kind := block.u8()
		value := block.take(int(block.u32()))
		if _, dup := m[key]; dup {
			d.t.Fatalf("%s: option %q twice", d.what, key)
		}
		m[key] = optionValue{kind: kind, value: value}
	}
	return m
}

// partitionInfo is PartitionResponse (apache/iggy
// core/binary_protocol/src/responses/topics/get_topic.rs).
type partitionInfo struct {
	id            uint32
	createdAt     uint64
	segmentsCount uint32
	currentOffset uint64
	sizeBytes     uint64
	messagesCount uint64
}

func (d *decoder) partitionInfo() partitionInfo {
	d.t.Helper()
	return partitionInfo{
		id: d.u32(), createdAt: d.u64(), segmentsCount: d.u32(), currentOffset: d.u64(),
		sizeBytes: d.u64(), messagesCount: d.u64(),
	}
}

// topicDetails is a TopicHeader followed by exactly partitions_count PartitionInfos,
// with nothing after them (the Go SDK reads partitions to the end of the body).
func topicDetails(t testing.TB, what string, body []byte) (topicHeader, []partitionInfo) {
	t.Helper()
	d := decoder{t: t, what: what, b: body}
	h := d.topicHeader()
	var parts []partitionInfo
	for range h.partitionsCount {
		parts = append(parts, d.partitionInfo())
	}
	d.end()
	return h, parts
}

// consumerGroupHeader and its members are apache/iggy
// core/binary_protocol/src/responses/consumer_groups/.
type consumerGroupHeader struct {
	id              uint32
	partitionsCount uint32
	membersCount    uint32
	name            string
}

type consumerGroupMember struct {
	id         uint32
	partitions []uint32
}

func consumerGroupDetails(t testing.TB, what string, body []byte) (consumerGroupHeader, []consumerGroupMember) {
	t.Helper()
	d := decoder{t: t, what: what, b: body}
	h := consumerGroupHeader{id: d.u32(), partitionsCount: d.u32(), membersCount: d.u32(), name: d.name()}
	var members []consumerGroupMember
	for range h.membersCount {
		m := consumerGroupMember{id: d.u32()}
		for range d.u32() {
			m.partitions = append(m.partitions, d.u32())
		}
		members = append(members, m)
	}
	d.end()
	return h, members
}

// assignment is SyncConsumerGroupResponse (apache/iggy
// core/binary_protocol/src/responses/consumer_groups/): exactly 12 + 4·P bytes.
func assignment(t testing.TB, body []byte) (generation uint64, partitions []uint32) {
	t.Helper()
	d := decoder{t: t, what: "Assignment", b: body}
	generation = d.u64()
	for range d.u32() {
		partitions = append(partitions, d.u32())
	}
	d.end()
	return generation, partitions
}

// confirmation is one send confirmation (apache/iggy
// core/binary_protocol/src/responses/messages/send_messages.rs).
type confirmation struct {
	streamID, topicID, partitionID uint32
	baseOffset                     uint64
}

func confirmations(t testing.TB, body []byte) []confirmation {
	t.Helper()
	d := decoder{t: t, what: "send confirmations", b: body}
	var cs []confirmation
	for range d.u32() {
		cs = append(cs, confirmation{streamID: d.u32(), topicID: d.u32(), partitionID: d.u32(), baseOffset: d.u64()})
	}
	d.end()
	return cs
}

// consumerOffset is the GetConsumerOffset reply
// (iggy.apache.org/docs/binary-protocol/commands): 20 bytes.
type consumerOffset struct {
	partitionID   uint32
	currentOffset uint64
	storedOffset  uint64
}

func decodeConsumerOffset(t testing.TB, body []byte) consumerOffset {
	t.Helper()
	d := decoder{t: t, what: "ConsumerOffset", b: body}
	o := consumerOffset{partitionID: d.u32(), currentOffset: d.u64(), storedOffset: d.u64()}
	d.end()
	return o
}

// polledMessage is one message as the Go SDK materialises it from a poll reply.
type polledMessage struct {
	offset          uint64
	id              [16]byte
	timestamp       uint64 // the batch's server-stamped base_timestamp
	originTimestamp uint64
	payload         []byte
	userHeaders     []byte
}

// polledMessages decodes PolledMessages (apache/iggy
// core/binary_protocol/src/responses/messages/poll_messages.rs) with the Go decoder's
// rules: batch records tile the body, frames tile each record, frame reserved is zero,
// and the frame total equals the prefix's messages_count. It also verifies the
// checksums a server re-stamps (the SDK does not; the reference server's records
// verify).
func polledMessages(t testing.TB, body []byte) (partitionID uint32, currentOffset uint64, msgs []polledMessage) {
	t.Helper()
	d := decoder{t: t, what: "PolledMessages", b: body}
	partitionID, currentOffset = d.u32(), d.u64()
	want := d.u32()
	for !d.done() {
		if len(body)-d.off < 256 {
			t.Fatalf("poll reply: %d bytes left, less than a batch header", len(body)-d.off)
		}
		batchLength := binary.LittleEndian.Uint64(body[d.off+32:])
		if batchLength < 256 || batchLength > uint64(len(body)-d.off) {
			t.Fatalf("poll reply: batch_length %d with %d bytes left", batchLength, len(body)-d.off)
		}
		record := d.take(int(batchLength))
		msgs = append(msgs, batchRecord(t, record)...)
	}
	if uint32(len(msgs)) != want {
		t.Fatalf("poll reply: prefix says %d messages, records hold %d", want, len(msgs))
	}
	return partitionID, currentOffset, msgs
}

func batchRecord(t testing.TB, record []byte) []polledMessage {
	t.Helper()
	d := decoder{t: t, what: "batch record", b: record}
	partitionID, baseOffset, baseTimestamp, origin := d.u64(), d.u64(), d.u64(), d.u64()
	batchLength, batchChecksum, count := d.u64(), d.u64(), d.u32()
	for i, b := range d.take(204) {
		if b != 0 {
			t.Fatalf("batch header reserved byte %d = %d", 52+i, b)
		}
	}
	var frameChecksums []byte
	var msgs []polledMessage
	for !d.done() {
		start := d.off
		checksum := d.u64()
		var m polledMessage
		copy(m.id[:], d.take(16))
		offsetDelta, timestampDelta := d.u32(), d.u32()
		headersLen, payloadLen := d.u32(), d.u32()
		if reserved := d.u64(); reserved != 0 {
			t.Fatalf("frame reserved %d (the Go SDK rejects non-zero)", reserved)
		}
		m.payload = d.take(int(payloadLen))
		m.userHeaders = d.take(int(headersLen))
		if got := xxh3.Hash(record[start+8 : d.off]); got != checksum {
			t.Fatalf("frame at offset delta %d: checksum %#x, bytes hash to %#x", offsetDelta, checksum, got)
		}
		frameChecksums = binary.LittleEndian.AppendUint64(frameChecksums, checksum)
		m.offset = baseOffset + uint64(offsetDelta)
		m.timestamp = baseTimestamp
		m.originTimestamp = origin + uint64(timestampDelta)
		msgs = append(msgs, m)
	}
	if uint32(len(msgs)) != count {
		t.Fatalf("batch record: message_count %d, frames %d", count, len(msgs))
	}
	if batchLength != uint64(len(record)) {
		t.Fatalf("batch record: batch_length %d, record %d bytes", batchLength, len(record))
	}
	seal := make([]byte, 0, 44+len(frameChecksums))
	seal = binary.LittleEndian.AppendUint64(seal, partitionID)
	seal = binary.LittleEndian.AppendUint64(seal, baseOffset)
	seal = binary.LittleEndian.AppendUint64(seal, baseTimestamp)
	seal = binary.LittleEndian.AppendUint64(seal, origin)
	seal = binary.LittleEndian.AppendUint64(seal, batchLength)
	seal = binary.LittleEndian.AppendUint32(seal, count)
	seal = append(seal, frameChecksums...)
	if got := xxh3.Hash(seal); got != batchChecksum {
		t.Fatalf("batch record at base offset %d: batch_checksum %#x, fields hash to %#x", baseOffset, batchChecksum, got)
	}
	return msgs
}

// clusterNode is one ClusterMetadata node (apache/iggy
// core/binary_protocol/src/responses/system/get_cluster_metadata.rs).
type clusterNode struct {
	name, ip                            string
	tcpPort, quicPort, httpPort, wsPort uint16
	role, status                        uint8
}

func clusterMetadata(t testing.TB, body []byte) (name string, nodes []clusterNode) {
	t.Helper()
	d := decoder{t: t, what: "ClusterMetadata", b: body}
	name = d.str32()
	for range d.u32() {
		nodes = append(nodes, clusterNode{
			name: d.str32(), ip: d.str32(),
			tcpPort: d.u16(), quicPort: d.u16(), httpPort: d.u16(), wsPort: d.u16(),
			role: d.u8(), status: d.u8(),
		})
	}
	d.end()
	return name, nodes
}
