package server

import (
	"sync/atomic"
	"time"

	"github.com/iggy-shard/iggy-shard/shard"
	"github.com/iggy-shard/iggy-shard/wire"
)

// Heartbeats. A consumer group member that stops talking keeps its partitions from
// the other members, so the reference server evicts a member whose connection was
// silent for 1.2 heartbeat intervals (30 s by default: 36 s) with reason 13
// StaleClient (run_heartbeat_verifier in apache/iggy core/server/src/dispatch.rs;
// the Go SDK, apache/iggy foreign/go/client, pings every 5 s). Any request
// counts, PING included; a client that is in no group is never evicted for silence.
//
//	conn shard: every request     session.seen = NowNs     (an atomic both shards see)
//	shard 0, every interval/5:    for each session silent > 1.2 x interval that is
//	                              a group member: post msgEvictStale to its shard,
//	                              with the seen it judged
//	conn shard:                   seen unchanged? Eviction frame (13), close; the
//	                              close removes the memberships (clientGone, committed)
//
// The conn shard asks whether a request arrived since shard 0's look, not whether
// the session is still silent by its own clock: that clock was read at the start of
// its turn, and may be older than shard 0's, so a silence shard 0 saw cross the
// bound may not have crossed it there yet. The member would stay until the next
// look, and where time stands still (a test's clock) forever.

// staleAfterNs is how long a group member may be silent.
func (h *handler) staleAfterNs() int64 {
	return int64(h.srv.heartbeatInterval) * 6 / 5
}

// checkHeartbeats runs on shard 0 from Tick: at most every interval/5 it looks for
// silent group members and asks their shards to evict them.
func (h *handler) checkHeartbeats() {
	now := h.shard.NowNs()
	if now < h.heartbeatDueNs {
		return
	}
	every := int64(h.srv.heartbeatInterval) / 5
	h.heartbeatDueNs = now + every
	h.shard.WakeAt(h.heartbeatDueNs)
	staleAfter := h.staleAfterNs()
	state := h.meta.Plane().State()
	h.meta.EachSession(func(client wire.Uint128, conn shard.ConnID, seen *atomic.Int64) {
		if seen == nil {
			return
		}
		seenNs := seen.Load()
		if now-seenNs <= staleAfter || state.ClientGroupsCount(client) == 0 {
			return
		}
		h.post(conn.Shard(), shard.Message{Conn: conn, Kind: msgEvictStale, Value: uint64(seenNs)})
	})
}

// evictStale evicts a connection shard 0 found silent since judgedSeenNs, unless a
// request arrived since (the decision crossed it).
func (h *handler) evictStale(id shard.ConnID, judgedSeenNs int64) {
	c := h.shard.Conn(id)
	if c == nil {
		return
	}
	sess, _ := c.Value.(*session)
	if sess == nil || !sess.bound || sess.seen.Load() != judgedSeenNs {
		return
	}
	h.log.Info("connection evicted: consumer group member missed its heartbeats", "conn", id.String(),
		"silent", time.Duration(h.shard.NowNs()-sess.seen.Load()).String())
	c.Evict(sess.client, wire.EvictionStaleClient)
}
