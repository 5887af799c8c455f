package client_test

// These examples need a running server (cmd/iggy-shard, or any Iggy 0.11.0 server)
// on 127.0.0.1:8090 with the root user iggy/iggy. go test compiles them but, having
// no Output comment, does not run them.

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/wire"
)

// Connect, log in and create a stream and a topic.
func ExampleDial() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, "127.0.0.1:8090", client.WithCredentials("iggy", "iggy"))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	stream, err := c.CreateStream(ctx, "orders")
	switch {
	case errors.Is(err, wire.ErrStreamNameAlreadyExists):
		fmt.Println("stream exists")
	case err != nil:
		log.Fatal(err)
	default:
		fmt.Println("created stream", stream.ID)
	}
	options, err := client.TopicOptions{CompressionAlgorithm: "none", MessageExpiryMicros: uint64(7 * 24 * time.Hour / time.Microsecond)}.Block()
	if err != nil {
		log.Fatal(err)
	}
	topic, err := c.CreateTopic(ctx, client.NameID("orders"), "created", 3, options)
	if err != nil && !errors.Is(err, wire.ErrTopicNameAlreadyExists) {
		log.Fatal(err)
	}
	if topic != nil {
		fmt.Println("topic", topic.ID, "with", len(topic.Partitions), "partitions")
	}
}

// A refused login is an eviction carrying its reason and the SDKs' error code.
func ExampleEvictionError() {
	c, err := client.Dial(context.Background(), "127.0.0.1:8090", client.WithCredentials("iggy", "wrong"))
	var ev *client.EvictionError
	switch {
	case errors.As(err, &ev):
		fmt.Println("evicted:", ev.Reason, "->", ev.Code, errors.Is(err, wire.ErrInvalidCredentials))
	case err != nil:
		log.Fatal(err)
	default:
		c.Close()
	}
}

// A producer sends batches; with a messages key every message of an order lands on
// the partition XXH32(key) picks, as with every other Iggy SDK.
func ExampleProducer() {
	ctx := context.Background()
	c, err := client.Dial(ctx, "127.0.0.1:8090", client.WithCredentials("iggy", "iggy"))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	p := c.NewProducer(client.NameID("orders"), client.NameID("created"),
		wire.Partitioning{Kind: wire.PartitioningBalanced})
	// One slice reused for every batch: the send itself allocates nothing.
	batch := make([]client.Message, 100)
	for round := range 10 {
		for i := range batch {
			batch[i] = client.Message{Payload: fmt.Appendf(batch[i].Payload[:0], "order %d", round*100+i)}
		}
		confirmations, err := p.Send(ctx, batch)
		if err != nil {
			log.Fatal(err)
		}
		if confirmations.Len() > 0 {
			c := confirmations.At(0)
			fmt.Println("partition", c.PartitionID, "from offset", c.BaseOffset)
		}
	}
	// Per-batch keys: every message of order 42 goes to one partition.
	key := wire.Partitioning{Kind: wire.PartitioningMessagesKey, Key: []byte("order-42")}
	if _, err := p.SendWith(ctx, key, batch[:1]); err != nil {
		log.Fatal(err)
	}
}

// A consumer group member polls its assigned partitions with auto-commit, walking
// the messages in place.
func ExampleConsumer() {
	ctx := context.Background()
	c, err := client.Dial(ctx, "127.0.0.1:8090", client.WithCredentials("iggy", "iggy"))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	stream, topic := client.NameID("orders"), client.NameID("created")
	if _, err := c.CreateConsumerGroup(ctx, stream, topic, "billing"); err != nil &&
		!errors.Is(err, wire.ErrConsumerGroupNameAlreadyExists) {
		log.Fatal(err)
	}
	k := c.NewConsumer(client.ConsumerConfig{
		Consumer:   client.GroupConsumer(client.NameID("billing")),
		Stream:     stream,
		Topic:      topic,
		Strategy:   wire.PollingStrategy{Kind: wire.PollingNext},
		BatchSize:  100,
		AutoCommit: true,
	})
	for range 10 {
		polled, err := k.Poll(ctx)
		if err != nil {
			log.Fatal(err)
		}
		for it := polled.Messages(); it.Next(); {
			m := it.Message()
			fmt.Printf("partition %d offset %d: %s\n", polled.PartitionID, m.Offset, m.Payload())
		}
	}
}

// Polling by hand with an explicit strategy, and keeping the messages past the next
// call with PollMessagesCopy.
func ExampleClient_PollMessagesCopy() {
	ctx := context.Background()
	c, err := client.Dial(ctx, "127.0.0.1:8090", client.WithCredentials("iggy", "iggy"))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	req := wire.PollMessages{
		Consumer:  client.SingleConsumer(client.ID(1)),
		StreamID:  client.NameID("orders"),
		TopicID:   client.NameID("created"),
		Partition: wire.SomePartition(0),
		Strategy:  wire.PollingStrategy{Kind: wire.PollingOffset, Value: 0},
		Count:     10,
	}
	var kept []byte
	polled, err := c.PollMessagesCopy(ctx, &req, kept)
	if err != nil {
		log.Fatal(err)
	}
	kept = polled.Records // recycle this buffer in the next PollMessagesCopy
	_ = kept
	// Other calls on c do not disturb polled.
	if err := c.Ping(ctx); err != nil {
		log.Fatal(err)
	}
	for it := polled.Messages(); it.Next(); {
		fmt.Println(it.Message().Offset)
	}
	// Store how far this consumer got, replicated before the reply.
	store := wire.StoreConsumerOffset{Consumer: req.Consumer, StreamID: req.StreamID, TopicID: req.TopicID,
		Partition: req.Partition, Offset: 9, Ack: wire.AckQuorum}
	if err := c.StoreConsumerOffset(ctx, &store); err != nil {
		log.Fatal(err)
	}
}

// An options block for CreateTopic, read back entry by entry. (This one runs without
// a server.)
func ExampleTopicOptions() {
	block, err := client.TopicOptions{CompressionAlgorithm: "gzip", MaxTopicSizeBytes: 1 << 30}.Block()
	if err != nil {
		log.Fatal(err)
	}
	it := wire.NewTLVIterator(block)
	for e, ok := it.Next(); ok; e, ok = it.Next() {
		fmt.Printf("%s: %v, %d bytes\n", e.Key, e.ValueKind, len(e.Value))
	}
	// Output:
	// compression_algorithm: string, 4 bytes
	// max_topic_size: uint64, 8 bytes
}

// Keep four batches in flight on one connection; wait on each batch four sends
// later, and resend what the producer could not confirm.
func ExampleDialPipelinedProducer() {
	ctx := context.Background()
	p, err := client.DialPipelinedProducer(ctx, "127.0.0.1:8090", client.NameID("orders"), client.NameID("created"),
		wire.Partitioning{Kind: wire.PartitioningBalanced}, client.PipelineOptions{InFlightMax: 4},
		client.WithCredentials("iggy", "iggy"))
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()

	batch := []client.Message{{Payload: []byte("order 1")}, {Payload: []byte("order 2")}}
	window := make([]client.Pending, 0, 4)
	settle := func(pd client.Pending) {
		confirmation, err := pd.Wait(ctx)
		switch {
		case errors.Is(err, client.ErrNotAcknowledged):
			fmt.Println("request", pd.Request(), "may not be stored: send it again on a new producer")
		case err != nil:
			fmt.Println("request", pd.Request(), "refused:", err)
		default:
			fmt.Println("stored at partition", confirmation.PartitionID, "offset", confirmation.BaseOffset)
		}
	}
	for range 100 {
		if len(window) == cap(window) {
			settle(window[0])
			window = append(window[:0], window[1:]...)
		}
		pd, err := p.Send(ctx, batch)
		if err != nil {
			log.Fatal(err)
		}
		window = append(window, pd)
	}
	for _, pd := range window {
		settle(pd)
	}
}
