package client

import (
	"context"
	"errors"

	"github.com/iggy-shard/iggy-shard/wire"
)

// Producer sends to one topic and picks the partition on the client, as the Go SDK does
// (apache/iggy foreign/go), so the server always receives an explicit partition id:
//
//   - wire.PartitioningPartitionID: that partition;
//   - wire.PartitioningBalanced: round-robin, partition = cursor % count, cursor++;
//   - wire.PartitioningMessagesKey: XXH32(key, seed 0) % count, the server's own
//     placement, so a key lands on the same partition from every SDK.
//
// count is the topic's partitions_count from GetTopic, fetched on first use and
// again after this Client changed partitions, deleted a topic or stream, lost its
// connection, or a send failed with wire.ErrPartitionNotFound. A topic with no
// partitions (or a missing one) fails with wire.ErrTopicIdNotFound. A Producer is
// safe for concurrent use; its sends take turns with every other call of its Client.
type Producer struct {
	c            *Client
	stream       wire.Identifier
	topic        wire.Identifier
	partitioning wire.Partitioning

	// Guarded by c.mu.
	partitionsCount uint32
	countKnown      bool
	countGen        uint64
	cursor          uint32
}

// NewProducer returns a producer for a topic. partitioning's key is copied.
func (c *Client) NewProducer(stream, topic wire.Identifier, partitioning wire.Partitioning) *Producer {
	partitioning.Key = append([]byte(nil), partitioning.Key...)
	return &Producer{c: c, stream: stream, topic: topic, partitioning: partitioning}
}

// Send sends messages as one batch to the partition the producer's partitioning
// picks. The confirmations are a view valid until the next call on the Client.
func (p *Producer) Send(ctx context.Context, messages []Message) (wire.SendConfirmations, error) {
	return p.SendWith(ctx, p.partitioning, messages)
}

// SendWith is Send with another partitioning for this batch, e.g. a per-batch key.
func (p *Producer) SendWith(ctx context.Context, partitioning wire.Partitioning, messages []Message) (wire.SendConfirmations, error) {
	c := p.c
	c.mu.Lock()
	defer c.mu.Unlock()
	partition, err := p.resolve(ctx, partitioning)
	if err != nil {
		return wire.SendConfirmations{}, err
	}
	target := wire.Partitioning{Kind: wire.PartitioningPartitionID, PartitionID: partition}
	confirmations, err := c.sendLocked(ctx, p.stream, p.topic, target, messages)
	if errors.Is(err, wire.ErrPartitionNotFound) {
		p.countKnown = false
	}
	return confirmations, err
}

// resolve picks the partition; the caller holds c.mu.
func (p *Producer) resolve(ctx context.Context, partitioning wire.Partitioning) (uint32, error) {
	switch partitioning.Kind {
	case wire.PartitioningPartitionID:
		return partitioning.PartitionID, nil
	case wire.PartitioningBalanced:
	case wire.PartitioningMessagesKey:
		if len(partitioning.Key) == 0 || len(partitioning.Key) > 255 {
			return 0, wire.ErrInvalidKeyValueLength
		}
	default:
		return 0, wire.ErrInvalidCommand
	}
	count, err := p.count(ctx)
	if err != nil {
		return 0, err
	}
	if partitioning.Kind == wire.PartitioningMessagesKey {
		return wire.PartitionForKey(partitioning.Key, count), nil
	}
	partition := p.cursor % count
	p.cursor++
	return partition, nil
}

// count returns the topic's partition count, from the cache while it is current.
func (p *Producer) count(ctx context.Context) (uint32, error) {
	c := p.c
	if p.countKnown && p.countGen == c.topologyGen {
		return p.partitionsCount, nil
	}
	gen := c.topologyGen
	topic, err := decodeInto[wire.TopicDetails](c.callLocked(ctx, wire.CodeGetTopic,
		&wire.GetTopic{StreamID: p.stream, TopicID: p.topic}))
	if err != nil {
		return 0, err
	}
	if topic.PartitionsCount == 0 {
		return 0, wire.ErrTopicIdNotFound
	}
	p.partitionsCount, p.countKnown, p.countGen = topic.PartitionsCount, true, gen
	return p.partitionsCount, nil
}
