package compat

import "testing"

// A plain consumer named by a string, as the SDKs allow (Consumer{Kind: single, ID:
// "orders-reader"}: kind 1 then a string identifier), keeps its offsets under the
// XXH32 (seed 0) of its name, as the reference resolves a named consumer
// (apache/iggy core/server/src/dispatch.rs, polling_consumer_from_wire, with
// calculate_32 of core/common/src/utils/hash.rs): a store by name is read back by
// name and by that number, and a Next poll by name with auto-commit starts after
// it and commits what it returned. (The server used to answer such a poll empty and
// refuse the store with 20.)
func TestNamedPlainConsumerOffsets(t *testing.T) {
	addr := startServer(t)
	c := dialRoot(t, addr)
	streamID := c.createStream("named")
	topic, _ := c.createTopic(streamID, "t", 1)
	c.send(streamID, topic.id, 0, payloads("m", 0, 6)...)
	name := "orders-reader"
	named := append([]byte{consumerSingle}, stringID(nil, name)...)
	byName := offsetTarget(named, ids(streamID), ids(topic.id), 0, true)
	byNumber := offsetTarget(consumer(consumerSingle, xxh32([]byte(name))), ids(streamID), ids(topic.id), 0, true)

	c.ok("StoreConsumerOffset by name", opStoreConsumerOffset, 121, storeOffsetBody(byName, 1, 1))
	for what, target := range map[string][]byte{"by name": byName, "by the name's XXH32": byNumber} {
		got := decodeConsumerOffset(t, c.ok("GetConsumerOffset "+what, opNonReplicated, codeGetConsumerOffset, target))
		if got != (consumerOffset{partitionID: 0, currentOffset: 5, storedOffset: 1}) {
			t.Fatalf("GetConsumerOffset %s: %+v, want partition 0, current 5, stored 1", what, got)
		}
	}
	_, _, msgs := c.poll(pollBody(named, ids(streamID), ids(topic.id), 0, true, strategyNext, 0, 2, true))
	if len(msgs) != 2 || msgs[0].offset != 2 || msgs[1].offset != 3 {
		t.Fatalf("Next poll by name returned %d messages (%+v), want offsets 2 and 3", len(msgs), msgs)
	}
	got := decodeConsumerOffset(t, c.ok("GetConsumerOffset after the poll", opNonReplicated, codeGetConsumerOffset, byNumber))
	if got.storedOffset != 3 {
		t.Fatalf("after an auto-committed poll by name the name's offset is %d, want 3", got.storedOffset)
	}
}
