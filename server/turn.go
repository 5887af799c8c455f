package server

import (
	"github.com/iggy-shard/iggy-shard/partitionhost"
	"github.com/iggy-shard/iggy-shard/shard"
)

// A shard's turn: what its handler does each loop turn (Tick) and as it stops.

// alignGroups keeps the partitions this shard owns led by the node that leads the
// metadata group, the node GetClusterMetadata names and the SDKs write to: once this
// node has led it for a heartbeat timeout, the groups it backs take over
// (partition.Store.LeadGroups), a bounded number per heartbeat timeout so that a
// takeover is no storm of view changes. Groups created by a metadata op start in
// its view and need none; those that changed view apart from the metadata group
// (a failover of one and not the other) come back this way.
func (h *handler) alignGroups() {
	c := h.srv.cluster
	if c == nil {
		return
	}
	now := h.shard.NowNs()
	if l := c.leader.Load(); l == 0 || uint8(l-1) != c.self {
		h.consensus.leaderSinceNs = 0
		return
	}
	if h.consensus.leaderSinceNs == 0 {
		h.consensus.leaderSinceNs = now
		return
	}
	interval := h.consensus.alignIntervalNs
	if now-h.consensus.leaderSinceNs < interval || now < h.consensus.alignDueNs {
		return
	}
	h.consensus.alignDueNs = now + interval
	if moved := h.owned.Store.LeadGroups(alignGroupsMax); moved > 0 {
		h.log.Info("partitions taken over to follow the metadata leader", "groups", moved)
		h.owned.IOWanted = true
	}
}

// alignGroupsMax bounds the partition groups a shard takes over per heartbeat
// timeout.
const alignGroupsMax = 64

// Tick implements shard.Ticker: each loop turn with disk work it submits the
// partitions' queued requests to the shard's disk ring and runs the completions the
// ring posted (the disk ring's eventfd woke the loop). It reports true while completed
// requests still wait for their hooks, so that the loop does not block meanwhile.
func (h *handler) Tick(_ *shard.Shard) bool {
	if h.stopped {
		return false
	}
	h.catchUpTicks()
	h.serveCalls()
	effectsWait := false
	if h.owned.EffectsPending() {
		effectsWait = h.owned.RunEffects(partitionhost.EffectsPerTurnMax, partitionhost.EffectsTurnBudget)
		h.owned.IOWanted = true // the new directories are made durable this turn (Store.SyncDirs)
	}
	if h.owned.HoldsFrames() {
		h.owned.ExpireHeld()
	}
	h.alignGroups()
	h.owned.RetryGroupOffsetDeletes()
	h.owned.RetrySegmentDeletes()
	h.owned.ScrubIfDue()
	h.owned.ApplyRetentionIfDue()
	h.owned.DropIdlePollMemoryIfDue()
	if h.owned.IOWanted || h.owned.Disk.InFlight() > 0 || h.owned.Disk.Ready() {
		h.owned.IOWanted = h.owned.Store.PollIO() > 0
		h.owned.Store.TakeChanged(h.owned.PublishStats)
		h.flushOutbox()
	}
	if h.meta != nil {
		for _, task := range h.srv.transport.metaTasks.take() {
			task(h)
		}
		h.checkHeartbeats()
		h.meta.FinishJournal()
		h.meta.FinishPasswordChecks()
		h.flushOutbox()
	}
	if len(h.outbox) > 0 {
		h.flushOutbox()
	}
	h.scheduleTicks()
	// Requests a completion hook queued after its log was polled (a save after a
	// write, the next read) go to the kernel now, or the loop would sleep on them.
	h.owned.Disk.Flush()
	return h.owned.Disk.Ready() || effectsWait
}

// Stop implements shard.Stopper: on the shard's own thread (the disk ring belongs to
// it), every partition is closed, making what was written durable. Replies of sends
// that complete now have no shard left to go to.
func (h *handler) Stop(_ *shard.Shard) {
	h.srv.transport.calls.inboxes[h.index].close() // no call is taken any more: those waiting are answered
	if h.meta != nil {
		h.srv.transport.metaTasks.close() // the callers of those waiting wait on the runtime's end
		// The writes first: a login among them may hand its password to the
		// workers again, whose checks are then abandoned with the others, and so
		// are the new passwords still with the workers.
		h.meta.StopJournal()
		h.meta.AbandonPasswordChecks()
		h.flushOutbox()
	}
	h.owned.RunAllEffects() // committed: their partitions are as the metadata says at the next start
	h.stopped = true
	if err := h.owned.Close(); err != nil {
		h.log.Error("closing partitions", "err", err)
	}
}
