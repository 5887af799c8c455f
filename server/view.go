package server

import (
	"github.com/iggy-shard/iggy-shard/metadata"
	"github.com/iggy-shard/iggy-shard/metaview"
	"github.com/iggy-shard/iggy-shard/partition"
	"github.com/iggy-shard/iggy-shard/partitiondir"
	"github.com/iggy-shard/iggy-shard/wire"
)

// A shard's view of the committed metadata (package metaview) and what its
// partitions do as it catches up.

// viewEffects queues what a committed operation asks of the partitions this shard
// owns (effects.go carries it out), and forgets the round-robin cursors of topics
// that are gone.
func (h *handler) viewEffects(state *metadata.State, effects []metadata.Effect, at *metaview.Entry) {
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
				if h.srv.ownerOf(pk) != h.index {
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
			if h.srv.ownerOf(k) == h.index {
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
		if e.Kind == metadata.EffectDeleteTopic || e.Kind == metadata.EffectDeleteStream {
			for key := range h.balanced {
				if key[0] == e.Stream && (e.Kind == metadata.EffectDeleteStream || key[1] == e.Topic) {
					delete(h.balanced, key)
				}
			}
		}
	}
}

// followReplacedView brings the shard's partitions to a state its view took
// whole (state transfer): those it owns and the state no longer has, or has in
// another incarnation, are deleted; those the state has and the shard lacks are
// created (or opened: partitionrecord.go); those it has in the same incarnation are
// brought to the state's purge generation (a purge committed while this node was
// behind).
func (h *handler) followReplacedView(_ *metadata.State) {
	const everything = ^uint64(0) // the state is newer than any partition here
	h.runAllEffects()             // of the ops before the state, in their order
	state := h.view.State
	present := make(map[partition.Key]bool)
	eachPartition(state, func(k partition.Key, c partition.Config, createdAt, purgeGeneration uint64) {
		if h.srv.ownerOf(k) != h.index {
			return
		}
		present[k] = true
		if open, ok := h.openCreatedAt(k); ok && open != createdAt {
			h.applyEffect(&effect{kind: metadata.EffectDeletePartitions, key: k, revision: everything})
		}
		if h.owned.store.Has(k) {
			if err := h.settle(k, partitiondir.Record{Generation: purgeGeneration, CreatedRevision: createdAt}); err != nil {
				h.log.Error("partition record", "partition", k.String(), "err", err)
			}
			h.publishStats(k)
			return
		}
		h.applyEffect(&effect{kind: metadata.EffectCreatePartitions, key: k, cfg: c, createdAt: createdAt, purgeGeneration: purgeGeneration,
			revision: createdAt})
	})
	for _, k := range h.owned.store.Keys(nil) {
		if !present[k] {
			h.applyEffect(&effect{kind: metadata.EffectDeletePartitions, key: k, revision: everything})
		}
	}
}

// catchUpView brings the shard's view up to date.
func (h *handler) catchUpView() {
	if !h.view.Behind() {
		return
	}
	if h.view.CatchUp(h.viewEffects) {
		h.endRevokedSessions()
	}
	if len(h.owned.hold.frames) > 0 {
		h.stepHeld()
	}
}

// endRevokedSessions evicts this shard's sessions whose user was deleted or
// deactivated, or whose personal access token was deleted, at once: the reference
// checks an account only at login, a broker that loses nothing does not let a
// revoked account go on. A deleted user or token ends with NoSession (the SDKs
// report Unauthenticated), a deactivated user with UserInactive.
func (h *handler) endRevokedSessions() {
	state := h.view.State
	for id, sess := range h.bound {
		reason := wire.EvictionReason(0)
		switch u := state.User(sess.userID); {
		case u == nil:
			reason = wire.EvictionNoSession
		case u.Status != wire.UserActive:
			reason = wire.EvictionUserInactive
		case sess.token != nil && !hasToken(u, *sess.token):
			reason = wire.EvictionNoSession
		}
		if reason == 0 {
			continue
		}
		delete(h.bound, id)
		if c := h.shard.Conn(id); c != nil {
			h.log.Info("connection evicted: its account was revoked", "conn", id.String(), "user", sess.userID,
				"reason", reason.String())
			evict(c, sess.client, reason)
		}
	}
}

func hasToken(u *metadata.User, hash metadata.TokenHash) bool {
	for i := range u.Tokens {
		if u.Tokens[i].Hash == hash {
			return true
		}
	}
	return false
}
