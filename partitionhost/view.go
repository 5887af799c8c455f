package partitionhost

import (
	"github.com/iggy-shard/iggy-shard/metadata"
	"github.com/iggy-shard/iggy-shard/metaview"
	"github.com/iggy-shard/iggy-shard/partition"
	"github.com/iggy-shard/iggy-shard/partitiondir"
)

// What a shard's partitions do as its view of the metadata catches up.

// ViewEffects queues what a committed operation asks of the partitions this shard
// owns (effects.go carries it out).
func (h *Host) ViewEffects(state *metadata.State, effects []metadata.Effect, at *metaview.Entry) {
	revision := at.Header.TimestampMicros
	for _, e := range effects {
		k := partition.Key{StreamID: e.Stream, TopicID: e.Topic, PartitionID: e.First}
		var cfg partition.Config
		var topic *metadata.Topic
		if st := state.Stream(e.Stream); st != nil {
			topic = st.Topic(e.Topic)
		}
		if topic != nil {
			cfg = partition.ConfigFromTopicOptions(topic.Options, topic.PartitionsCount())
		}
		switch e.Kind {
		case metadata.EffectCreatePartitions, metadata.EffectDeletePartitions:
			for p := e.First; p < e.First+e.Count; p++ {
				pk := partition.Key{StreamID: e.Stream, TopicID: e.Topic, PartitionID: p}
				if h.ownerOf(pk) != h.index {
					continue
				}
				ef := effect{kind: e.Kind, key: pk, cfg: cfg, view: at.View, revision: revision}
				if topic != nil && int(p) < len(topic.Partitions) {
					ef.createdAt = topic.Partitions[p].CreatedAtMicros
					ef.purgeGeneration = topic.PurgeGeneration
				}
				h.queueEffect(ef)
			}
			if topic != nil {
				h.queueEffect(effect{key: k, cfg: cfg, reconfig: true})
			}
		case metadata.EffectDeleteSegments:
			if h.ownerOf(k) == h.index {
				ef := effect{kind: e.Kind, key: k, count: e.Count, revision: revision}
				if topic != nil {
					ef.purgeGeneration = topic.PurgeGeneration
				}
				h.queueEffect(ef)
			}
		case metadata.EffectUpdateTopic:
			if topic != nil {
				h.queueEffect(effect{key: k, cfg: cfg, reconfig: true})
			}
		default: // whole topics and streams, purges, group offsets: on what this shard owns
			h.queueEffect(effect{kind: e.Kind, key: k, group: e.Group, purgeGeneration: e.Generation, revision: revision})
		}
	}
}

// FollowReplacedView brings the shard's partitions to a state its view took
// whole (state transfer): those it owns and the state no longer has, or has in
// another incarnation, are deleted; those the state has and the shard lacks are
// created (or opened: record.go); those it has in the same incarnation are
// brought to the state's purge generation (a purge committed while this node was
// behind).
func (h *Host) FollowReplacedView(_ *metadata.State) {
	const everything = ^uint64(0) // the state is newer than any partition here
	h.RunAllEffects()             // of the ops before the state, in their order
	state := h.shard.ViewState()
	present := make(map[partition.Key]bool)
	EachPartition(state, func(k partition.Key, c partition.Config, createdAt, purgeGeneration uint64) {
		if h.ownerOf(k) != h.index {
			return
		}
		present[k] = true
		if open, ok := h.OpenCreatedAt(k); ok && open != createdAt {
			h.applyEffect(&effect{kind: metadata.EffectDeletePartitions, key: k, revision: everything})
		}
		if h.Store.Has(k) {
			if err := h.settle(k, partitiondir.Record{Generation: purgeGeneration, CreatedRevision: createdAt}); err != nil {
				h.log.Error("partition record", "partition", k.String(), "err", err)
			}
			h.PublishStats(k)
			return
		}
		h.applyEffect(&effect{kind: metadata.EffectCreatePartitions, key: k, cfg: c, createdAt: createdAt, purgeGeneration: purgeGeneration,
			revision: createdAt})
	})
	for _, k := range h.Store.Keys(nil) {
		if !present[k] {
			h.applyEffect(&effect{kind: metadata.EffectDeletePartitions, key: k, revision: everything})
		}
	}
}

// EachPartition visits every partition of the state with its topic's config and purge
// generation.
func EachPartition(st *metadata.State, visit func(k partition.Key, c partition.Config, createdAt, purgeGeneration uint64)) {
	counts := st.Counts()
	found := uint32(0)
	for sid := uint32(0); found < counts.Streams && sid < metadata.StreamIDLimit; sid++ {
		stream := st.Stream(sid)
		if stream == nil {
			continue
		}
		found++
		topicsFound := 0
		for tid := uint32(0); topicsFound < stream.TopicsCount() && tid < metadata.TopicIDLimit; tid++ {
			topic := stream.Topic(tid)
			if topic == nil {
				continue
			}
			topicsFound++
			c := partition.ConfigFromTopicOptions(topic.Options, topic.PartitionsCount())
			for _, p := range topic.Partitions {
				visit(partition.Key{StreamID: sid, TopicID: tid, PartitionID: p.ID}, c, p.CreatedAtMicros, topic.PurgeGeneration)
			}
		}
	}
}
