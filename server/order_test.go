package server

import (
	"fmt"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/partition"
	"github.com/iggy-shard/iggy-shard/wire"
)

// orderTopic creates stream "order" with a topic of partitionsCount partitions and
// returns, for each shard, a partition it owns.
func orderTopic(t *testing.T, s *Server, partitionsCount uint32) (ownedBy []uint32) {
	t.Helper()
	c := dialRoot(t, s)
	ctx := testContext(t)
	st, err := c.CreateStream(ctx, "order")
	if err != nil {
		t.Fatal(err)
	}
	topic, err := c.CreateTopic(ctx, wire.StringIdentifier([]byte("order")), "t", partitionsCount, nil)
	if err != nil {
		t.Fatal(err)
	}
	ownedBy = make([]uint32, s.shardCount)
	found := make([]bool, s.shardCount)
	for p := range partitionsCount {
		owner := s.ownerOf(partition.Key{StreamID: st.ID, TopicID: topic.ID, PartitionID: p})
		if !found[owner] {
			ownedBy[owner], found[owner] = p, true
		}
	}
	for shard, ok := range found {
		if !ok {
			t.Fatalf("no partition of %d on shard %d: raise the count", partitionsCount, shard)
		}
	}
	return ownedBy
}

func sendBody(t *testing.T, partitionID uint32, payload string) []byte {
	t.Helper()
	var bb wire.BatchBuilder
	if err := bb.Append(wire.Uint128{Lo: 1}, uint64(time.Now().UnixMicro()), []byte(payload), nil); err != nil {
		t.Fatal(err)
	}
	batch, err := bb.Finish()
	if err != nil {
		t.Fatal(err)
	}
	req := wire.SendMessages{StreamID: wire.StringIdentifier([]byte("order")), TopicID: wire.StringIdentifier([]byte("t")),
		Partitioning: wire.Partitioning{Kind: wire.PartitioningPartitionID, PartitionID: partitionID}, MessagesCount: 1, Batch: batch}
	b, err := req.Append(nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// mixedPipeline encodes count requests (PING, GET_STREAMS, GET_TOPIC,
// SEND_MESSAGES to partitions of every shard, POLL_MESSAGES, STORE_CONSUMER_OFFSET,
// CREATE_STREAM in turn) of one session, each carrying its index in timestamp.
func mixedPipeline(t *testing.T, count int, client wire.Uint128, session uint64, ownedBy []uint32, names string) []byte {
	stream := wire.StringIdentifier([]byte("order"))
	topic := wire.StringIdentifier([]byte("t"))
	getTopic, _ := stream.Append(nil)
	getTopic, _ = topic.Append(getTopic)
	consumer := wire.Consumer{Kind: wire.ConsumerSingle, ID: wire.NumericIdentifier(7)}
	var pipelined []byte
	request := uint64(1) // replicated requests are numbered from 1
	for i := range count {
		q := rawRequest{client: client, session: session, timestamp: uint64(i), request: request}
		part := ownedBy[(i/7)%len(ownedBy)]
		switch i % 7 {
		case 0:
			q.op, q.code = wire.OperationNonReplicated, wire.CodePing
		case 1:
			q.op, q.code = wire.OperationNonReplicated, wire.CodeGetStreams
		case 2:
			q.op, q.code, q.body = wire.OperationNonReplicated, wire.CodeGetTopic, getTopic
		case 3:
			q.op, q.body = wire.OperationSendMessages, sendBody(t, part, fmt.Sprint("message ", i))
		case 4:
			poll := wire.PollMessages{Consumer: consumer, StreamID: stream, TopicID: topic,
				Partition: wire.OptionalPartition{ID: part, Set: true}, Strategy: wire.PollingStrategy{Kind: wire.PollingFirst}, Count: 10}
			q.op, q.code = wire.OperationNonReplicated, wire.CodePollMessages
			q.body, _ = poll.Append(nil)
		case 5:
			store := wire.StoreConsumerOffset{Consumer: consumer, StreamID: stream, TopicID: topic,
				Partition: wire.OptionalPartition{ID: part, Set: true}, Offset: 0}
			q.op = wire.OperationStoreConsumerOffset
			q.body, _ = store.Append(nil)
		case 6:
			request++
			q.request = request
			q.op, q.body = wire.OperationCreateStream, createStreamBody(t, fmt.Sprint(names, i))
		}
		pipelined = append(pipelined, q.frame()...)
	}
	return pipelined
}

// readInOrder reads count replies and checks that each echoes the next index and
// none is an error.
func readInOrder(t *testing.T, r *rawConn, count int) {
	t.Helper()
	for i := range count {
		h, _ := r.reply()
		if h.Timestamp != uint64(i) {
			t.Fatalf("reply %d echoes the timestamp of request %d", i, h.Timestamp)
		}
		if h.Status != 0 {
			t.Fatalf("reply %d (request kind %d): status %d", i, i%7, h.Status)
		}
	}
}

// TestPipelinedRepliesInRequestOrder: one logged-in connection pipelines 1000
// mixed requests (mixedPipeline) while it reads; every reply echoes the next index.
func TestPipelinedRepliesInRequestOrder(t *testing.T) {
	s := testServer(t, t.TempDir(), 2)
	ownedBy := orderTopic(t, s, 8)
	r := dialRaw(t, s)
	client := wire.Uint128{Lo: 0x0dde, Hi: 1}
	pipelined := mixedPipeline(t, 1000, client, r.login(client), ownedBy, "s-")
	written := make(chan error, 1)
	go func() {
		r.conn.SetWriteDeadline(time.Now().Add(30 * time.Second))
		_, err := r.conn.Write(pipelined)
		written <- err
	}()
	readInOrder(t, r, 1000)
	if err := <-written; err != nil {
		t.Fatal(err)
	}
}

// TestPipelineWrittenBeforeReading: a client writes 300 mixed requests (about
// 100 KB) before it reads any reply, as some pipelining clients do; the connection
// is throttled, never closed, and every reply comes back in order.
func TestPipelineWrittenBeforeReading(t *testing.T) {
	s := testServer(t, t.TempDir(), 2)
	ownedBy := orderTopic(t, s, 8)
	for round := range 3 {
		r := dialRaw(t, s)
		client := wire.Uint128{Lo: 0x0dde, Hi: uint64(round + 1)}
		pipelined := mixedPipeline(t, 300, client, r.login(client), ownedBy, fmt.Sprintf("r%d-", round))
		r.conn.SetWriteDeadline(time.Now().Add(30 * time.Second))
		if _, err := r.conn.Write(pipelined); err != nil {
			t.Fatal(err)
		}
		readInOrder(t, r, 300)
	}
}

// TestFirstPingThenPipelinedPings: a fresh connection's first request (a PING,
// which detours through shard 0 behind the connection's registration) is answered
// before the 100 PINGs pipelined behind it.
func TestFirstPingThenPipelinedPings(t *testing.T) {
	s := testServer(t, t.TempDir(), 2)
	for attempt := range 4 { // connections land on both shards
		r := dialRaw(t, s)
		var pipelined []byte
		for i := range 101 {
			q := rawRequest{client: wire.Uint128{Lo: 42}, op: wire.OperationNonReplicated, code: wire.CodePing, timestamp: uint64(i), request: uint64(i)}
			pipelined = append(pipelined, q.frame()...)
		}
		if _, err := r.conn.Write(pipelined); err != nil {
			t.Fatal(err)
		}
		for i := range 101 {
			if h, _ := r.reply(); h.Timestamp != uint64(i) {
				t.Fatalf("connection %d: reply %d answers ping %d", attempt, i, h.Timestamp)
			}
		}
	}
}

// TestLargeBatchProducersAreNotDropped: many connections pipeline 10 MB batches at
// once. Their shard throttles them (a connection may retain 4 MiB of requests), and
// what the kernel delivered before each throttle took effect waits in the
// connection's backlog: no connection is reset, every batch is acknowledged.
func TestLargeBatchProducersAreNotDropped(t *testing.T) {
	s := testServer(t, t.TempDir(), 2)
	ownedBy := orderTopic(t, s, 8)
	const producers, batches, messagesPerBatch, messageBytes = 12, 3, 10, 1 << 20
	payload := make([]byte, messageBytes)
	errs := make(chan error, producers)
	for p := range producers {
		r := dialRaw(t, s)
		client := wire.Uint128{Lo: 0xb16, Hi: uint64(p + 1)}
		session := r.login(client)
		go func() {
			errs <- func() error {
				var pipelined []byte
				for b := range batches {
					var bb wire.BatchBuilder
					for range messagesPerBatch {
						if err := bb.Append(wire.Uint128{Lo: 1}, uint64(time.Now().UnixMicro()), payload, nil); err != nil {
							return err
						}
					}
					batch, err := bb.Finish()
					if err != nil {
						return err
					}
					req := wire.SendMessages{StreamID: wire.StringIdentifier([]byte("order")), TopicID: wire.StringIdentifier([]byte("t")),
						Partitioning:  wire.Partitioning{Kind: wire.PartitioningPartitionID, PartitionID: ownedBy[p%len(ownedBy)]},
						MessagesCount: messagesPerBatch, Batch: batch}
					body, err := req.Append(nil)
					if err != nil {
						return err
					}
					q := rawRequest{client: client, session: session, request: 1, timestamp: uint64(b), op: wire.OperationSendMessages, body: body}
					pipelined = append(pipelined, q.frame()...)
				}
				written := make(chan error, 1)
				go func() {
					r.conn.SetWriteDeadline(time.Now().Add(60 * time.Second))
					_, err := r.conn.Write(pipelined)
					written <- err
				}()
				for b := range batches {
					frame := r.frameOrNil()
					if frame == nil {
						return fmt.Errorf("producer %d: connection lost before reply %d", p, b)
					}
					h, err := wire.DecodeReplyHeader(frame, 64<<20)
					if err != nil {
						return fmt.Errorf("producer %d reply %d: %v", p, b, err)
					}
					if h.Status != 0 || h.Timestamp != uint64(b) {
						return fmt.Errorf("producer %d reply %d: status %d, timestamp %d", p, b, h.Status, h.Timestamp)
					}
				}
				return <-written
			}()
		}()
	}
	for range producers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
