package client

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

// sendReply checks a SendMessages body the way a server admits it (metadata decode,
// then every checksum) and confirms it, or answers the admission error as a status.
func sendReply(t testing.TB, req *wire.RequestHeader, body []byte) []byte {
	var send wire.SendMessages
	if err := send.Decode(body); err != nil {
		t.Errorf("server: SendMessages body: %v", err)
		return denial(req, wire.ErrInvalidCommand)
	}
	if err := wire.ValidateBatch(send.Batch); err != nil {
		t.Errorf("server: batch: %v", err)
		return denial(req, wire.ErrInvalidBatchChecksum)
	}
	partition := send.Partitioning.PartitionID
	return reply(req, wire.AppendSendConfirmations(nil, wire.SendConfirmation{
		StreamID: send.StreamID.Numeric, TopicID: send.TopicID.Numeric, PartitionID: partition, BaseOffset: 100}))
}

func TestSendMessagesBuildsAValidBatch(t *testing.T) {
	var batches [][]byte
	s := newFakeServer(t, session(func(req *wire.RequestHeader, body []byte) ([]byte, bool) {
		var send wire.SendMessages
		if err := send.Decode(body); err == nil {
			batches = append(batches, append([]byte(nil), send.Batch...))
		}
		return sendReply(t, req, body), false
	}))
	c := loggedIn(t, s)
	headers, err := wire.AppendTLV(nil, wire.HeaderString, []byte("k"), wire.HeaderString, []byte("v"))
	if err != nil {
		t.Fatal(err)
	}
	messages := []Message{
		{ID: wire.Uint128{Lo: 7}, Payload: []byte("first"), TimestampMicros: 1_000_500},
		{Payload: []byte("second"), UserHeaders: headers, TimestampMicros: 1_000_000},
	}
	confirmations, err := c.SendMessages(testContext(t), ID(2), ID(3), wire.Partitioning{Kind: wire.PartitioningPartitionID, PartitionID: 4}, messages)
	if err != nil {
		t.Fatal(err)
	}
	if confirmations.Len() != 1 || confirmations.At(0) != (wire.SendConfirmation{StreamID: 2, TopicID: 3, PartitionID: 4, BaseOffset: 100}) {
		t.Fatalf("confirmations %d %+v", confirmations.Len(), confirmations.At(0))
	}
	if len(batches) != 1 {
		t.Fatalf("%d batches", len(batches))
	}
	header, _ := wire.ViewBatchHeader(batches[0])
	if header.OriginTimestamp() != 1_000_000 || header.MessageCount() != 2 {
		t.Fatalf("origin %d count %d", header.OriginTimestamp(), header.MessageCount())
	}
	i := 0
	for it := wire.Frames(batches[0]); it.Next(); i++ {
		f := it.Frame()
		if !bytes.Equal(f.Payload(), messages[i].Payload) || !bytes.Equal(f.UserHeaders(), messages[i].UserHeaders) {
			t.Fatalf("frame %d: payload %q headers %x", i, f.Payload(), f.UserHeaders())
		}
		if f.OffsetDelta() != uint32(i) {
			t.Fatalf("frame %d offset delta %d", i, f.OffsetDelta())
		}
		id := f.ID()
		switch i {
		case 0:
			if id != (wire.Uint128{Lo: 7}) || f.TimestampDelta() != 500 {
				t.Fatalf("frame 0: id %v delta %d", id, f.TimestampDelta())
			}
		case 1:
			var raw [16]byte
			id.Put(raw[:])
			if id.IsZero() || raw[6]>>4 != 4 || raw[8]>>6 != 2 {
				t.Fatalf("frame 1: id % x is not a UUID v4", raw)
			}
		}
	}
}

// SendBatch forwards a batch built elsewhere unchanged.
func TestSendBatch(t *testing.T) {
	s := newFakeServer(t, session(func(req *wire.RequestHeader, body []byte) ([]byte, bool) {
		return sendReply(t, req, body), false
	}))
	c := loggedIn(t, s)
	var bb wire.BatchBuilder
	bb.Reset(nil)
	if err := bb.Append(wire.Uint128{Lo: 1}, 5, []byte("p"), nil); err != nil {
		t.Fatal(err)
	}
	batch, err := bb.Finish()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.SendBatch(testContext(t), ID(0), ID(0), wire.Partitioning{Kind: wire.PartitioningBalanced}, batch); err != nil {
		t.Fatal(err)
	}
	last := s.recorded()
	var send wire.SendMessages
	if err := send.Decode(last[len(last)-1].body); err != nil || !bytes.Equal(send.Batch, batch) ||
		send.Partitioning.Kind != wire.PartitioningBalanced {
		t.Fatalf("forwarded %+v: %v", send, err)
	}
}

// polledBody builds a PollMessages reply: count messages from firstOffset in one
// stamped record.
func polledBody(t testing.TB, partition uint32, firstOffset uint64, count int) []byte {
	var bb wire.BatchBuilder
	bb.Reset(nil)
	for i := range count {
		if err := bb.Append(wire.Uint128{Lo: uint64(i + 1)}, 10, []byte(fmt.Sprintf("m%d", firstOffset+uint64(i))), nil); err != nil {
			t.Fatal(err)
		}
	}
	batch, err := bb.Finish()
	if err != nil {
		t.Fatal(err)
	}
	wire.StampBatch(batch, uint64(partition), firstOffset, 99)
	p := wire.PolledMessages{PartitionID: partition, CurrentOffset: firstOffset + uint64(count) - 1,
		MessagesCount: uint32(count), Records: batch}
	return p.Append(nil)
}

func TestPollMessagesViewAndCopy(t *testing.T) {
	var next uint64
	s := newFakeServer(t, session(func(req *wire.RequestHeader, body []byte) ([]byte, bool) {
		var poll wire.PollMessages
		if err := poll.Decode(body); err != nil {
			t.Errorf("poll body: %v", err)
		}
		out := reply(req, polledBody(t, poll.Partition.ID, next, 3))
		next += 3
		return out, false
	}))
	c := loggedIn(t, s)
	ctx := testContext(t)
	req := wire.PollMessages{Consumer: SingleConsumer(ID(1)), StreamID: ID(0), TopicID: ID(0),
		Partition: wire.SomePartition(2), Strategy: wire.PollingStrategy{Kind: wire.PollingOffset}, Count: 3}
	kept, err := c.PollMessagesCopy(ctx, &req, nil)
	if err != nil {
		t.Fatal(err)
	}
	view, err := c.PollMessages(ctx, &req)
	if err != nil {
		t.Fatal(err)
	}
	check := func(p wire.PolledMessages, first uint64) {
		t.Helper()
		if p.PartitionID != 2 || p.MessagesCount != 3 {
			t.Fatalf("polled partition %d count %d", p.PartitionID, p.MessagesCount)
		}
		want := first
		for it := p.Messages(); it.Next(); want++ {
			m := it.Message()
			if m.Offset != want || string(m.Payload()) != fmt.Sprintf("m%d", want) {
				t.Fatalf("message at %d: offset %d payload %q", want, m.Offset, m.Payload())
			}
		}
		if want != first+3 {
			t.Fatalf("iterated to %d", want)
		}
	}
	check(kept, 0) // still intact after the second poll reused the reply buffer
	check(view, 3)
}

// topicServer answers GetTopic with a topic of *partitions partitions, confirms
// sends to the partition they name, and counts GetTopic calls.
func topicServer(t *testing.T, partitions *uint32, getTopics *int, sent *[]uint32) handlerFunc {
	return session(func(req *wire.RequestHeader, body []byte) ([]byte, bool) {
		switch {
		case req.NonReplicatedCode == wire.CodeGetTopic:
			*getTopics++
			d := wire.TopicDetails{TopicHeader: wire.TopicHeader{Name: []byte("t"), PartitionsCount: *partitions},
				Partitions: make([]wire.PartitionInfo, *partitions)}
			return reply(req, d.Append(nil)), false
		case req.Operation == wire.OperationSendMessages:
			var send wire.SendMessages
			if err := send.Decode(body); err != nil || send.Partitioning.Kind != wire.PartitioningPartitionID {
				t.Errorf("send partitioning %+v: %v", send.Partitioning, err)
			}
			if send.Partitioning.PartitionID >= *partitions {
				return denial(req, wire.ErrPartitionNotFound), false
			}
			*sent = append(*sent, send.Partitioning.PartitionID)
			return sendReply(t, req, body), false
		}
		return reply(req, nil), false
	})
}

func TestProducerPartitioning(t *testing.T) {
	partitions := uint32(3)
	getTopics := 0
	var sent []uint32
	s := newFakeServer(t, topicServer(t, &partitions, &getTopics, &sent))
	c := loggedIn(t, s)
	ctx := testContext(t)
	msgs := []Message{{Payload: []byte("x")}}

	balanced := c.NewProducer(ID(0), ID(0), wire.Partitioning{Kind: wire.PartitioningBalanced})
	for range 4 {
		if _, err := balanced.Send(ctx, msgs); err != nil {
			t.Fatal(err)
		}
	}
	key := []byte("order-key-1")
	keyed := c.NewProducer(ID(0), ID(0), wire.Partitioning{Kind: wire.PartitioningMessagesKey, Key: key})
	for range 2 {
		if _, err := keyed.Send(ctx, msgs); err != nil {
			t.Fatal(err)
		}
	}
	fixed := c.NewProducer(ID(0), ID(0), wire.Partitioning{Kind: wire.PartitioningPartitionID, PartitionID: 1})
	if _, err := fixed.Send(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	keyPartition := wire.PartitionForKey(key, 3)
	want := []uint32{0, 1, 2, 0, keyPartition, keyPartition, 1}
	if fmt.Sprint(sent) != fmt.Sprint(want) {
		t.Fatalf("partitions %v, want %v", sent, want)
	}
	if getTopics != 2 {
		t.Fatalf("%d GetTopic calls, want one per producer that needs the count", getTopics)
	}

	// CreatePartitions through this client refreshes the count: the cursor keeps
	// going over 5 partitions.
	partitions = 5
	if err := c.CreatePartitions(ctx, ID(0), ID(0), 2); err != nil {
		t.Fatal(err)
	}
	sent = nil
	for range 3 {
		if _, err := balanced.Send(ctx, msgs); err != nil {
			t.Fatal(err)
		}
	}
	if fmt.Sprint(sent) != fmt.Sprint([]uint32{4, 0, 1}) || getTopics != 3 {
		t.Fatalf("after CreatePartitions: %v (GetTopic %d)", sent, getTopics)
	}

	// Partitions deleted behind the client's back: PartitionNotFound drops the
	// cached count, the next send refetches it.
	partitions = 1
	_, err := balanced.Send(ctx, msgs)
	mustCode(t, err, wire.ErrPartitionNotFound)
	if _, err := balanced.Send(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	if getTopics != 4 {
		t.Fatalf("GetTopic %d after PartitionNotFound", getTopics)
	}

	// A topic without partitions is TopicIdNotFound, as in the Go SDK.
	partitions = 0
	if err := c.DeletePartitions(ctx, ID(0), ID(0), 1); err != nil {
		t.Fatal(err)
	}
	_, err = balanced.Send(ctx, msgs)
	mustCode(t, err, wire.ErrTopicIdNotFound)
}

func TestConsumerAdvancesOffset(t *testing.T) {
	var polls []wire.PollMessages
	s := newFakeServer(t, session(func(req *wire.RequestHeader, body []byte) ([]byte, bool) {
		if req.Operation == wire.OperationStoreConsumerOffset {
			return reply(req, nil), false
		}
		var poll wire.PollMessages
		if err := poll.Decode(body); err != nil {
			t.Errorf("poll: %v", err)
		}
		polls = append(polls, poll)
		if poll.Strategy.Kind == wire.PollingFirst {
			return reply(req, polledBody(t, 0, 0, 2)), false
		}
		return reply(req, polledBody(t, 0, poll.Strategy.Value, 2)), false
	}))
	c := loggedIn(t, s)
	k := c.NewConsumer(ConsumerConfig{Consumer: SingleConsumer(ID(1)), Stream: ID(0), Topic: ID(0),
		Strategy: wire.PollingStrategy{Kind: wire.PollingFirst}, BatchSize: 2})
	ctx := testContext(t)
	for range 3 {
		if _, err := k.Poll(ctx); err != nil {
			t.Fatal(err)
		}
	}
	want := []wire.PollingStrategy{{Kind: wire.PollingFirst}, {Kind: wire.PollingOffset, Value: 2}, {Kind: wire.PollingOffset, Value: 4}}
	for i, p := range polls {
		if p.Strategy != want[i] || p.Count != 2 || p.Partition.Set {
			t.Fatalf("poll %d: %+v", i, p)
		}
	}
	if err := k.Commit(ctx, 5); err != nil {
		t.Fatal(err)
	}
	frames := s.recorded()
	var store wire.StoreConsumerOffset
	if err := store.Decode(frames[len(frames)-1].body); err != nil || store.Offset != 5 || store.Ack != wire.AckQuorum ||
		!store.Partition.Set || store.Partition.ID != 0 {
		t.Fatalf("commit %+v: %v", store, err)
	}
}

// A group consumer joins when Sync says it is not a member, then polls its
// partitions round-robin with an explicit partition, and re-syncs on the resync
// sentinel.
func TestConsumerGroupFlow(t *testing.T) {
	joined := false
	resyncs := 0
	var polled []uint32
	s := newFakeServer(t, session(func(req *wire.RequestHeader, body []byte) ([]byte, bool) {
		switch {
		case req.Operation == wire.OperationJoinConsumerGroup:
			joined = true
			return reply(req, nil), false
		case req.NonReplicatedCode == wire.CodeSyncConsumerGroup:
			if !joined {
				return reply(req, nil), false // not a member: empty body
			}
			resyncs++
			a := wire.Assignment{Generation: 1, PartitionIDs: []uint32{0, 2}}
			return reply(req, a.Append(nil)), false
		case req.NonReplicatedCode == wire.CodePollMessages:
			var poll wire.PollMessages
			if err := poll.Decode(body); err != nil || !poll.Partition.Set || !poll.AutoCommit ||
				poll.Consumer.Kind != wire.ConsumerGroup {
				t.Errorf("group poll %+v: %v", poll, err)
			}
			polled = append(polled, poll.Partition.ID)
			if len(polled) == 3 {
				p := wire.PolledMessages{PartitionID: wire.PollPartitionResync}
				return reply(req, p.Append(nil)), false
			}
			return reply(req, polledBody(t, poll.Partition.ID, 0, 1)), false
		}
		return reply(req, nil), false
	}))
	c := loggedIn(t, s)
	k := c.NewConsumer(ConsumerConfig{Consumer: GroupConsumer(ID(0)), Stream: ID(0), Topic: ID(0),
		Strategy: wire.PollingStrategy{Kind: wire.PollingNext}, BatchSize: 10, AutoCommit: true})
	ctx := testContext(t)
	var partitions []uint32
	for range 3 {
		p, err := k.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		partitions = append(partitions, p.PartitionID)
	}
	// Third poll hit the sentinel on partition 0, re-synced, and polled partition 2.
	if fmt.Sprint(polled) != fmt.Sprint([]uint32{0, 2, 0, 2}) || fmt.Sprint(partitions) != fmt.Sprint([]uint32{0, 2, 2}) {
		t.Fatalf("server saw %v, consumer got %v", polled, partitions)
	}
	if !joined || resyncs != 2 {
		t.Fatalf("joined %v, syncs after join %d", joined, resyncs)
	}
}

// A member without partitions gets an empty result, not an error.
func TestConsumerGroupNoPartitions(t *testing.T) {
	s := newFakeServer(t, session(func(req *wire.RequestHeader, body []byte) ([]byte, bool) {
		if req.NonReplicatedCode == wire.CodeSyncConsumerGroup {
			a := wire.Assignment{Generation: 3}
			return reply(req, a.Append(nil)), false
		}
		t.Errorf("unexpected request op %v code %v", req.Operation, req.NonReplicatedCode)
		return reply(req, nil), false
	}))
	c := loggedIn(t, s)
	k := c.NewConsumer(ConsumerConfig{Consumer: GroupConsumer(NameID("g")), Stream: ID(0), Topic: ID(0),
		Strategy: wire.PollingStrategy{Kind: wire.PollingNext}, BatchSize: 1})
	p, err := k.Poll(testContext(t))
	if err != nil || p.PartitionID != NoAssignedPartition || p.MessagesCount != 0 {
		t.Fatalf("poll = %+v, %v", p, err)
	}
}

func TestTopicOptionsBlock(t *testing.T) {
	block, err := TopicOptions{CompressionAlgorithm: "gzip", MessageExpiryMicros: 7, SegmentSizeBytes: 1 << 20}.Block()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	it := wire.NewTLVIterator(block)
	for e, ok := it.Next(); ok; e, ok = it.Next() {
		v := string(e.Value)
		if e.ValueKind == wire.HeaderUint64 {
			v = fmt.Sprint(binary.LittleEndian.Uint64(e.Value))
		}
		got[string(e.Key)] = v
	}
	if it.Err() != nil || fmt.Sprint(got) != "map[compression_algorithm:gzip message_expiry:7 segment_size:1048576]" {
		t.Fatalf("block %v: %v", got, it.Err())
	}
	if _, err := wire.ResolveCreateTopicOptions(block, 1); err != nil {
		t.Fatalf("the catalog refuses the block: %v", err)
	}
	if empty, err := (TopicOptions{}).Block(); err != nil || empty != nil {
		t.Fatalf("empty options = %x, %v", empty, err)
	}
}
