package server

import (
	"testing"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/wire"
)

// TestPollReplyLargerThanTheSendQueue: a poll whose reply (20 MB) is larger than a
// connection's send queue bound (8 MiB) is sent whole: the bound limits what a
// connection is owed, never one reply the server built.
func TestPollReplyLargerThanTheSendQueue(t *testing.T) {
	s := testServer(t, t.TempDir(), 1)
	c := dialRoot(t, s)
	ctx := testContext(t)
	st, err := c.CreateStream(ctx, "large")
	mustOK(t, "create stream", err)
	topic, err := c.CreateTopic(ctx, client.ID(st.ID), "t", 1, nil)
	mustOK(t, "create topic", err)
	const batches, perBatch, size = 2, 1000, 10_000
	batch := make([]client.Message, perBatch)
	for i := range batch {
		payload := make([]byte, size)
		payload[0] = byte(i)
		batch[i] = client.Message{Payload: payload}
	}
	for range batches {
		_, err := c.SendMessages(ctx, client.ID(st.ID), client.ID(topic.ID),
			wire.Partitioning{Kind: wire.PartitioningPartitionID, PartitionID: 0}, batch)
		mustOK(t, "send", err)
	}
	polled, err := c.PollMessages(ctx, &wire.PollMessages{
		Consumer: wire.Consumer{Kind: wire.ConsumerSingle, ID: wire.NumericIdentifier(1)},
		StreamID: client.ID(st.ID), TopicID: client.ID(topic.ID), Partition: wire.OptionalPartition{ID: 0, Set: true},
		Strategy: wire.PollingStrategy{Kind: wire.PollingFirst}, Count: batches * perBatch,
	})
	mustOK(t, "poll of 20 MB", err)
	if polled.MessagesCount != batches*perBatch {
		t.Fatalf("polled %d messages, want %d", polled.MessagesCount, batches*perBatch)
	}
	mustOK(t, "the connection goes on", c.Ping(ctx))
}
