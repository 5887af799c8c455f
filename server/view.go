package server

import (
	"github.com/iggy-shard/iggy-shard/metadata"
	"github.com/iggy-shard/iggy-shard/metaview"
	"github.com/iggy-shard/iggy-shard/wire"
)

// A shard's view of the committed metadata (package metaview) and what its
// partitions do as it catches up.

// viewEffects hands what a committed operation asks of the partitions to the
// shard's partition host, and forgets the round-robin cursors of topics that
// are gone.
func (h *handler) viewEffects(state *metadata.State, effects []metadata.Effect, at *metaview.Entry) {
	h.owned.ViewEffects(state, effects, at)
	for _, e := range effects {
		if e.Kind == metadata.EffectDeleteTopic || e.Kind == metadata.EffectDeleteStream {
			for key := range h.balanced {
				if key[0] == e.Stream && (e.Kind == metadata.EffectDeleteStream || key[1] == e.Topic) {
					delete(h.balanced, key)
				}
			}
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
	if h.owned.HoldsFrames() {
		h.owned.StepHeld()
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
