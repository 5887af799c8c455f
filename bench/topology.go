package bench

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/wire"
)

// stream is one bench stream with its one topic, as the run set it up, and what the
// actors learn about it while they run.
type stream struct {
	name         string
	id, topicID  uint32
	groupID      uint32   // the stream's consumer group, for the group kinds
	partitionIDs []uint32 // ascending

	// produced counts, per partition index, the messages the server confirmed.
	produced []atomic.Uint64
	// producersLeft counts down as this stream's producers finish; at zero
	// producersDone closes and produced is final.
	producersLeft atomic.Int64
	producersDone chan struct{}

	// groupTrackers and groupConsumed are the consumer group's, shared by its members.
	groupTrackers []*partitionTracker
	groupConsumed atomic.Uint64
}

func (s *stream) identifiers() (wire.Identifier, wire.Identifier) {
	return client.ID(s.id), client.ID(s.topicID)
}

// partitionIndex maps a partition id the server named to its index.
func (s *stream) partitionIndex(id uint32) (int, bool) {
	for i, p := range s.partitionIDs {
		if p == id {
			return i, true
		}
	}
	return 0, false
}

func (s *stream) producedTotal() uint64 {
	var n uint64
	for i := range s.produced {
		n += s.produced[i].Load()
	}
	return n
}

// final reports whether every producer of the stream has finished.
func (s *stream) final() bool {
	select {
	case <-s.producersDone:
		return true
	default:
		return false
	}
}

func (s *stream) producerFinished() {
	if s.producersLeft.Add(-1) == 0 {
		close(s.producersDone)
	}
}

func streamName(i int) string { return fmt.Sprintf("%s%d", StreamNamePrefix, i+1) }

// setupStreams creates the run's streams, each with one topic of cfg.Partitions
// partitions and, for the group kinds, one consumer group. A bench stream left by an
// earlier run (--keep-streams) is deleted first, so that consumers start from
// offset 0 and the counts are the run's own.
func setupStreams(ctx context.Context, admin *client.Client, cfg *Config) ([]*stream, error) {
	streams := make([]*stream, cfg.Streams)
	for i := range streams {
		name := streamName(i)
		err := admin.DeleteStream(ctx, client.NameID(name))
		if err != nil && !errors.Is(err, wire.ErrStreamNameNotFound) && !errors.Is(err, wire.ErrStreamIdNotFound) {
			return nil, fmt.Errorf("deleting the old stream %s: %w", name, err)
		}
		details, err := admin.CreateStream(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("creating stream %s: %w", name, err)
		}
		topic, err := admin.CreateTopic(ctx, client.ID(details.ID), TopicName, uint32(cfg.Partitions), nil)
		if err != nil {
			return nil, fmt.Errorf("creating topic %s/%s with %d partitions: %w", name, TopicName, cfg.Partitions, err)
		}
		if len(topic.Partitions) != cfg.Partitions {
			return nil, fmt.Errorf("topic %s/%s has %d partitions, asked for %d", name, TopicName, len(topic.Partitions), cfg.Partitions)
		}
		s := &stream{name: name, id: details.ID, topicID: topic.ID, producersDone: make(chan struct{})}
		for _, p := range topic.Partitions {
			s.partitionIDs = append(s.partitionIDs, p.ID)
		}
		s.produced = make([]atomic.Uint64, cfg.Partitions)
		if cfg.Kind.groups() {
			group, err := admin.CreateConsumerGroup(ctx, client.ID(s.id), client.ID(s.topicID), GroupName)
			if err != nil {
				return nil, fmt.Errorf("creating consumer group %s on %s: %w", GroupName, name, err)
			}
			s.groupID = group.ID
			s.groupTrackers = make([]*partitionTracker, cfg.Partitions)
			for p := range s.groupTrackers {
				s.groupTrackers[p] = new(partitionTracker)
			}
		}
		streams[i] = s
	}
	return streams, nil
}

// deleteStreams removes the run's streams; it goes on past a failure and reports
// the first.
func deleteStreams(ctx context.Context, admin *client.Client, streams []*stream) error {
	var first error
	for _, s := range streams {
		if s == nil {
			continue
		}
		if err := admin.DeleteStream(ctx, client.ID(s.id)); err != nil && first == nil {
			first = fmt.Errorf("deleting stream %s: %w", s.name, err)
		}
	}
	return first
}
