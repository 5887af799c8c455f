package server

import (
	"fmt"
	"sync/atomic"

	"github.com/iggy-shard/iggy-shard/metadata"
	"github.com/iggy-shard/iggy-shard/partition"
	"github.com/iggy-shard/iggy-shard/partitiondir"
	"github.com/iggy-shard/iggy-shard/wire"
)

// Every shard answers reads and routes partition operations from a view of the
// committed metadata of its own: a copy of the metadata state that it brings up to
// date by applying, in op order, the operations shard 0 commits.
//
// Shard 0 publishes each commit as a viewEntry appended to a singly linked list
// (the commit log), before it sends the commit's reply anywhere. A shard catches up
// by following the list from the last entry it applied: when it serves a request,
// before a partition operation another shard routed to it, and when shard 0 tells it
// a commit happened (msgViewAdvanced). An entry is immutable once published, and
// shard 0 is the list's only writer, so no lock is shared; a catch-up with nothing
// new costs one atomic load. So once a client holds the reply of a metadata write,
// any request that arrives afterwards, on any connection and shard, sees the write:
// the shard serving it catches up first.
//
// Why copies rather than one state published per commit: a commit costs each shard
// one Apply of one operation, whatever the size of the state; an immutable state
// would be copied whole at every commit. And why not the effects alone, as shard 0
// used to post them: reads need the whole state, and a shard that applies the
// operation derives the effects on its partitions itself (viewEffects, carried out
// a slice per loop turn: effects.go), and a partition is created on its owner before
// any send routed to it is served there (ensureCreated).

// viewEntry is one committed change of the metadata, or of the sessions the client
// table holds.
type viewEntry struct {
	// op is the commit's op number; 0 for an entry that only ends sessions. view
	// is the view its prepare was made in: the partition groups the op creates
	// start in it (partition.Store.CreateInView).
	op     uint64
	view   uint32
	header metadata.Header
	body   []byte
	// ended are the client ids whose sessions left the client table with this entry
	// (a logout, a closed connection, an eviction from a full table).
	ended []wire.Uint128
	// replace, when set, is a state a clustered replica installed by state
	// transfer: it replaces the view whole (op is 0).
	replace *viewReplace

	next atomic.Pointer[viewEntry]
}

// viewReplace is a transferred state as each view takes it: the metadata
// snapshot (each shard decodes its own copy) and the client table's sessions.
type viewReplace struct {
	snapshot []byte
	sessions map[wire.Uint128]uint64
}

// metaView is one shard's view of the committed metadata.
type metaView struct {
	state *metadata.State
	at    *viewEntry // the last entry applied
	// sessions mirrors the client table's session epochs, for the fence of
	// requests that never reach shard 0: from registrations since the start (a
	// connection only ever holds a session it registered since then).
	sessions map[wire.Uint128]uint64
	out      metadata.Output
	// replaced runs after the view took a transferred state, with the state it
	// had before: the shard's partitions follow the new one.
	replaced func(old *metadata.State)
}

func newMetaView(snapshot []byte, at *viewEntry) *metaView {
	state, _, err := metadata.DecodeSnapshot(snapshot)
	if err != nil {
		panic(fmt.Sprintf("server: a shard's copy of the metadata does not decode: %v", err))
	}
	return &metaView{state: state, at: at, sessions: make(map[wire.Uint128]uint64)}
}

// behind reports whether shard 0 published entries this view has not applied.
func (v *metaView) behind() bool { return v.at.next.Load() != nil }

// catchUp applies every entry published since the last one applied; effects is
// called after each operation with what it asks of the partitions, and the entry.
// It reports whether an operation changed what live sessions stand on: a user
// updated or deleted, a personal access token deleted.
func (v *metaView) catchUp(effects func(state *metadata.State, e []metadata.Effect, at *viewEntry)) (accountsChanged bool) {
	for e := v.at.next.Load(); e != nil; e = e.next.Load() {
		if e.replace != nil {
			old := v.state
			v.replaceWith(e.replace)
			if v.replaced != nil {
				v.replaced(old)
			}
			accountsChanged = true
			v.at = e
			continue
		}
		v.apply(e)
		if len(v.out.Effects) > 0 {
			effects(v.state, v.out.Effects, e)
		}
		switch e.header.Operation {
		case wire.OperationUpdateUser, wire.OperationDeleteUser, wire.OperationDeletePersonalAccessToken:
			accountsChanged = e.op != 0
		}
		v.at = e
	}
	return accountsChanged
}

func (v *metaView) replaceWith(r *viewReplace) {
	state, _, err := metadata.DecodeSnapshot(r.snapshot)
	if err != nil {
		panic(fmt.Sprintf("server: a transferred state published to the views does not decode: %v", err))
	}
	v.state = state
	v.sessions = make(map[wire.Uint128]uint64, len(r.sessions))
	for client, epoch := range r.sessions {
		v.sessions[client] = epoch
	}
}

func (v *metaView) apply(e *viewEntry) {
	v.out.Effects = v.out.Effects[:0]
	if e.op != 0 {
		switch e.header.Operation {
		case wire.OperationRegister:
			v.sessions[e.header.Client] = e.op
		default:
			v.state.Apply(e.header, e.body, &v.out)
			if e.header.Operation == wire.OperationLogout {
				delete(v.sessions, e.header.Client)
			}
		}
	}
	for _, c := range e.ended {
		delete(v.sessions, c)
	}
}

// fence checks a logged-in connection's session against the client table as the
// view mirrors it: a client id that registered again (elsewhere) or left the table
// is a zombie on every plane.
func (v *metaView) fence(client wire.Uint128, epoch uint64) wire.EvictionReason {
	current, ok := v.sessions[client]
	switch {
	case !ok:
		return wire.EvictionNoSession
	case current > epoch:
		return wire.EvictionSessionTooLow
	}
	return 0
}

// viewEffects queues what a committed operation asks of the partitions this shard
// owns (effects.go carries it out), and forgets the round-robin cursors of topics
// that are gone.
func (h *handler) viewEffects(state *metadata.State, effects []metadata.Effect, at *viewEntry) {
	revision := at.header.TimestampMicros
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
				ef := effect{kind: e.Kind, key: pk, cfg: cfg, view: at.view, revision: revision}
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
	state := h.view.state
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
	if !h.view.behind() {
		return
	}
	if h.view.catchUp(h.viewEffects) {
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
	state := h.view.state
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
