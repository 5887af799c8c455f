package server

import (
	"github.com/iggy-shard/iggy-shard/config"
	"github.com/iggy-shard/iggy-shard/vsr"
)

// The consensus ticks of a shard: its partition groups' (partition.Store.Tick) and,
// on shard 0 of a cluster, the metadata core's, both on one grid of 10 ms ticks
// (the reference server's tick, iggy.apache.org/docs/clustering/configuration)
// counted from the shard's start.
//
// An idle shard does not wake for every tick. After each turn it asks each
// consumer when it next has something to do on a tick (Store.TicksUntilDue; for
// the metadata core its next deadline: a commit broadcast, a heartbeat timeout, a
// retransmission, a bounded wait) and sleeps until the earliest (Shard.WakeAt), or
// until an input wakes it. Whenever it runs, before it hands anything an input, it
// gives each consumer the ticks elapsed since it last did (they do nothing until the
// one that falls due), so that an input is stepped at the right time and a timer
// never fires early. A replica heard from meanwhile (any frame, on any shard of the
// node) is noted at the tick it was heard, between the ticks before and after it:
// a backup's heartbeat timeout counts from then, as if it had been ticked all along.
//
// An idle node of a cluster so wakes for its consensus a few times a second (the
// metadata primary's Commit every commit broadcast interval, the keep-alive of the
// partition groups it leads, and the same from its peers), however many partitions
// it holds; it ticked every 10 ms, at two phases, before.

// consensusTickNs is the grid's period.
const consensusTickNs = int64(config.ClusterTick)

// shardConsensus is what a shard keeps for the consensus groups it runs: their
// ticks, and in a cluster what it was told of its peers and of the metadata
// group's leader.
type shardConsensus struct {
	// grid is the shard's consensus ticks.
	grid tickGrid
	// inboundFree are records of replica frames retained for another shard
	// (retainInbound).
	inboundFree []*replicaInbound
	// heardNs is, by replica, the last frame time (clusterState.lastHeardNs) this
	// shard's groups were told of (catchUpTicks); nil on a single node.
	heardNs []int64
	// leaderSinceNs is when this shard first saw its node lead the metadata group
	// (0: it does not), alignDueNs when its partitions may next take over
	// (alignGroups).
	leaderSinceNs, alignDueNs int64
	// alignIntervalNs is the partition groups' heartbeat timeout.
	alignIntervalNs int64
}

// storeTicksCatchUpMax bounds the ticks a store is given at once after the shard
// was held up (a stall, not a sleep: a sleep ends at the store's next deadline);
// the rest are dropped, so the timers run late, never early.
const storeTicksCatchUpMax = 1000

// tickGrid is a shard's grid and what its store was given of it.
type tickGrid struct {
	originNs int64
	// storeAt is the grid tick the store was ticked to; storeDue the tick its next
	// work falls due, when storeArmed (the store said when, after the last turn).
	storeAt, storeDue uint64
	storeArmed        bool
	counts            tickCounts
}

// tickCounts are what a shard's ticks cost, for the tests that hold an idle node
// to constant work whatever its partitions.
type tickCounts struct {
	// storeTicks are the store's Ticks run, storeSkipped the ticks passed over
	// while it had nothing due; metaTicks the metadata core's.
	storeTicks, storeSkipped, metaTicks uint64
	// dueTurns count the turns in which a tick's work fell due (store or
	// metadata core).
	dueTurns uint64
}

// tickAt is the last grid tick at or before ns.
func (g *tickGrid) tickAt(ns int64) uint64 {
	if ns <= g.originNs {
		return 0
	}
	return uint64((ns - g.originNs) / consensusTickNs)
}

// timeOf is when grid tick t falls.
func (g *tickGrid) timeOf(t uint64) int64 { return g.originNs + int64(t)*consensusTickNs }

// catchUpTicks gives the store, and the metadata core on shard 0, the ticks elapsed
// up to now, with the liveness of the replicas heard from meanwhile at the ticks
// they were heard. Every entry of the handler runs it before it hands anything an
// input; it costs a comparison when nothing elapsed.
func (h *handler) catchUpTicks() {
	g := &h.consensus.grid
	target := g.tickAt(h.shard.NowNs())
	if h.meta != nil && h.meta.TickTo(target) {
		g.counts.dueTurns++
	}
	due := g.storeArmed && g.storeDue <= target && g.storeAt < g.storeDue
	if h.consensus.heardNs != nil {
		h.noteLiveness(target)
	}
	h.advanceStore(target)
	if due {
		g.counts.dueTurns++
		h.owned.IOWanted = true // the tick that fell due may have driven groups: their writes, their frames
	}
}

// noteLiveness tells the store of every replica heard from since it was last told,
// at the tick it was heard (whichever shard's connection carried the frame: a frame
// of any group from a group's primary keeps its backups from electing), the ticks
// before it given first.
func (h *handler) noteLiveness(target uint64) {
	cl := h.srv.cluster
	var heard [vsr.ReplicasMax]struct {
		at uint64
		id uint8
	}
	n := 0
	for id := range h.consensus.heardNs {
		ns := cl.lastHeardNs[id].Load()
		if ns == h.consensus.heardNs[id] {
			continue
		}
		h.consensus.heardNs[id] = ns
		at := min(max(h.consensus.grid.tickAt(ns), h.consensus.grid.storeAt), target)
		i := n
		for ; i > 0 && heard[i-1].at > at; i-- { // in the order they were heard
			heard[i] = heard[i-1]
		}
		heard[i].at, heard[i].id = at, uint8(id)
		n++
	}
	for _, r := range heard[:n] {
		h.advanceStore(r.at)
		h.owned.Store.NoteLiveness(r.id)
	}
}

// advanceStore gives the store the ticks up to grid tick to: none while it has
// nothing due (its deadlines count from its own clock), at most
// storeTicksCatchUpMax.
func (h *handler) advanceStore(to uint64) {
	g := &h.consensus.grid
	if to <= g.storeAt {
		return
	}
	n := to - g.storeAt
	if !g.storeArmed {
		g.storeAt = to
		g.counts.storeSkipped += n
		return
	}
	if n > storeTicksCatchUpMax {
		g.counts.storeSkipped += n - storeTicksCatchUpMax
		g.storeAt = to - storeTicksCatchUpMax
	}
	for ; g.storeAt < to; g.storeAt++ {
		h.owned.Store.Tick()
		g.counts.storeTicks++
	}
}

// scheduleTicks asks for a turn at the earliest grid tick at which the store or
// the metadata core has something to do; none when neither has.
func (h *handler) scheduleTicks() {
	g := &h.consensus.grid
	wake, armed := uint64(0), false
	if n, ok := h.owned.Store.TicksUntilDue(); ok {
		g.storeDue, g.storeArmed = g.storeAt+n, true
		wake, armed = g.storeDue, true
	} else {
		g.storeArmed = false
	}
	if h.meta != nil {
		if t, ok := h.meta.NextTickDue(); ok && (!armed || t < wake) {
			wake, armed = t, true
		}
	}
	if armed {
		h.shard.WakeAt(g.timeOf(wake))
	}
	if scrubbing, dueNs := h.owned.Scrubbing(); scrubbing {
		h.shard.WakeAt(dueNs)
	}
}
