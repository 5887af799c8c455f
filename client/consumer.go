package client

import (
	"context"
	"errors"
	"time"

	"github.com/iggy-shard/iggy-shard/wire"
)

// NoAssignedPartition is the PartitionID of an empty poll result when the consumer
// group gave this member no partition. It is the Go SDK's local marker and never
// travels on the wire.
const NoAssignedPartition uint32 = 0xFFFFFFFE

// assignmentTTL is how long a group assignment is trusted before it is synced again
// (the Go SDK's value).
const assignmentTTL = 5 * time.Second

// ConsumerConfig describes what a Consumer polls.
type ConsumerConfig struct {
	// Consumer is SingleConsumer(id) or GroupConsumer(group).
	Consumer      wire.Consumer
	Stream, Topic wire.Identifier
	// Partition names the partition to poll. Unset, a single consumer polls
	// partition 0 (the server's rule) and a group consumer polls the partitions the
	// group assigned it, round-robin, joining the group first when it is not yet a
	// member.
	Partition wire.OptionalPartition
	// Strategy is where polling starts; see Consumer.Poll for how it moves on.
	Strategy wire.PollingStrategy
	// BatchSize is the most messages one poll asks for.
	BatchSize uint32
	// AutoCommit asks the server to store the consumer offset with every poll.
	AutoCommit bool
}

// Consumer polls one topic and keeps its place. Offset, First, Last and Timestamp
// strategies move on locally: after a poll that returned messages from a fixed
// partition, the next poll asks for Offset(last + 1). Next is the server's stored
// offset: use it with AutoCommit, or Commit what you processed. A Consumer is safe
// for concurrent use, but the PolledMessages view it returns is valid only until the
// next call on its Client.
type Consumer struct {
	c   *Client
	cfg ConsumerConfig

	// Guarded by c.mu.
	strategy   wire.PollingStrategy
	assignment []uint32
	assignedAt time.Time
	roundRobin int
	lastPolled uint32
}

// NewConsumer returns a consumer for cfg.
func (c *Client) NewConsumer(cfg ConsumerConfig) *Consumer {
	return &Consumer{c: c, cfg: cfg, strategy: cfg.Strategy}
}

func (k *Consumer) groupAssigned() bool {
	return k.cfg.Consumer.Kind == wire.ConsumerGroup && !k.cfg.Partition.Set
}

// Poll fetches the next messages. For a group consumer without a fixed partition it
// syncs the assignment when it is older than 5 s (joining when the server says this
// client is not a member), polls the next assigned partition, and on a stale
// assignment (error 5006 or 5009, or the server's resync sentinel) syncs and tries
// once more, as the Go SDK does. A member with no partition gets an empty result
// whose PartitionID is NoAssignedPartition.
func (k *Consumer) Poll(ctx context.Context) (wire.PolledMessages, error) {
	c := k.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if !k.groupAssigned() {
		return k.pollPartition(ctx, k.cfg.Partition)
	}
	for attempt := 0; attempt < 2; attempt++ {
		if k.assignment == nil || time.Since(k.assignedAt) > assignmentTTL {
			if err := k.sync(ctx); err != nil {
				return wire.PolledMessages{}, err
			}
		}
		if len(k.assignment) == 0 {
			return wire.PolledMessages{PartitionID: NoAssignedPartition}, nil
		}
		partition := k.assignment[k.roundRobin%len(k.assignment)]
		k.roundRobin++
		polled, err := k.pollPartition(ctx, wire.SomePartition(partition))
		stale := errors.Is(err, wire.ErrConsumerGroupMemberNotFound) ||
			errors.Is(err, wire.ErrConsumerGroupPartitionNotOwned) ||
			err == nil && polled.PartitionID == wire.PollPartitionResync && polled.MessagesCount == 0
		if !stale {
			return polled, err
		}
		k.assignment = nil
	}
	return wire.PolledMessages{PartitionID: NoAssignedPartition}, nil
}

// pollPartition polls once; the caller holds c.mu.
func (k *Consumer) pollPartition(ctx context.Context, partition wire.OptionalPartition) (wire.PolledMessages, error) {
	req := wire.PollMessages{
		Consumer:   k.cfg.Consumer,
		StreamID:   k.cfg.Stream,
		TopicID:    k.cfg.Topic,
		Partition:  partition,
		Strategy:   k.strategy,
		Count:      k.cfg.BatchSize,
		AutoCommit: k.cfg.AutoCommit,
	}
	polled, err := k.c.pollLocked(ctx, &req)
	if err != nil {
		return polled, err
	}
	k.lastPolled = polled.PartitionID
	if polled.MessagesCount > 0 && !k.groupAssigned() && k.strategy.Kind != wire.PollingNext {
		var last uint64
		for it := polled.Messages(); it.Next(); {
			last = it.Message().Offset
		}
		k.strategy = wire.PollingStrategy{Kind: wire.PollingOffset, Value: last + 1}
	}
	return polled, nil
}

// sync refreshes the group assignment, joining first when this client is not a
// member; the caller holds c.mu.
func (k *Consumer) sync(ctx context.Context) error {
	c := k.c
	target := wire.GroupTarget{StreamID: k.cfg.Stream, TopicID: k.cfg.Topic, GroupID: k.cfg.Consumer.ID}
	a, err := decodeInto[wire.Assignment](c.callLocked(ctx, wire.CodeSyncConsumerGroup, &wire.SyncConsumerGroup{GroupTarget: target}))
	if errors.Is(err, wire.ErrConsumerGroupMemberNotFound) {
		if _, err := c.callLocked(ctx, wire.CodeJoinConsumerGroup, &wire.JoinConsumerGroup{GroupTarget: target}); err != nil {
			return err
		}
		a, err = decodeInto[wire.Assignment](c.callLocked(ctx, wire.CodeSyncConsumerGroup, &wire.SyncConsumerGroup{GroupTarget: target}))
	}
	if err != nil {
		return err
	}
	k.assignment = append(k.assignment[:0:0], a.PartitionIDs...)
	if k.assignment == nil {
		k.assignment = []uint32{}
	}
	k.assignedAt = time.Now()
	return nil
}

// Commit stores offset as this consumer's offset for the partition it polled last,
// replicated before the reply (wire.AckQuorum).
func (k *Consumer) Commit(ctx context.Context, offset uint64) error {
	c := k.c
	c.mu.Lock()
	defer c.mu.Unlock()
	req := wire.StoreConsumerOffset{
		Consumer:  k.cfg.Consumer,
		StreamID:  k.cfg.Stream,
		TopicID:   k.cfg.Topic,
		Partition: wire.SomePartition(k.lastPolled),
		Offset:    offset,
		Ack:       wire.AckQuorum,
	}
	_, err := c.callLocked(ctx, wire.CodeStoreConsumerOffset, &req)
	return err
}
