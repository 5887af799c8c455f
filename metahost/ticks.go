package metahost

import (
	"github.com/iggy-shard/iggy-shard/vsr"
	"github.com/iggy-shard/iggy-shard/wire"
)

// The metadata plane in a cluster (cluster.enabled): the same group, of as many
// replicas as the roster has nodes, on shard 0 of every node. What the server
// does for it that a single node does not need (the plane's own part is in
// package metaplane):
//
//   - Frames from the other replicas reach shard 0 from whichever shard owns the
//     peer's connection (server/cluster.go), retained there; the plane copies what it
//     keeps, so a frame goes back to its shard once stepped.
//   - The core is ticked on shard 0's grid of 10 ms ticks (server/ticks.go), which sleeps
//     until the core's next deadline; the plane's Driver holds the ticks that
//     fall due while a Ready is out, and gives them afterwards.
//   - A Ready's messages leave through Shard.SendReplica.
//   - State transfer: a replica asked for its state offers its snapshot (with the
//     client table) and its client table as the ISM1 artifacts; one that receives
//     a state writes it as its snapshot, cuts its journal to the ops above it
//     (which it may have acknowledged), and has every shard's view replaced by it
//     (package metaview).
//
// The journal stays in op order, while a backup may be handed a write beyond a gap
// (a body retransmitted before the repair of the ops below it): the journal is
// then rewritten with a marker for the ops it lacks in front of that entry, so the
// write is durable at its own position before the Ready that acknowledges it is
// advanced; a restart reads the marker as a hole and reports its ops as faulty,
// as it does a corrupt entry (metafiles/journal.go).

const (
	// clusterTicksCatchUpMax bounds the ticks given at once after shard 0 was
	// held up: a stall does not fire every timer of the stalled time in a burst.
	// The core never sleeps longer (metaSleepTicksMax).
	clusterTicksCatchUpMax = 100
)

// StepReplicaFrame steps a frame of the metadata group from peer into the
// plane, which copies what it keeps: the caller gives the frame back to its
// shard after.
func (r *Router) StepReplicaFrame(peer uint8, header *wire.GenericHeader, body []byte) {
	if err := r.plane.Step(header, body); err != nil {
		r.log.Debug("replica frame refused by the metadata group", "peer", peer, "command", header.Command.String(), "err", err)
	}
}

// TickTo gives a clustered core the grid ticks up to target (shard 0's turn),
// and reports whether a tick it had work at (NextTickDue) fell among them.
func (r *Router) TickTo(target uint64) (due bool) {
	p := r.plane
	if !p.Clustered || target <= p.tickTarget {
		return false
	}
	// The core takes them now (its Driver holds them while a Ready is out). Its
	// clock is read for deadlines (a login waiting for the primary), which count
	// from now.
	due = p.tickTarget < r.dueTick && r.dueTick <= target
	p.tickTarget = target
	p.tickTo()
	return due
}

// NextTickDue is the grid tick at which a clustered core next has something to
// do (none on a single node); shard 0 sleeps until then.
func (r *Router) NextTickDue() (uint64, bool) {
	r.dueTick = 0
	if !r.plane.Clustered {
		return 0, false
	}
	t, ok := r.plane.nextTickDue()
	if ok {
		r.dueTick = t
	}
	return t, ok
}

// metaSleepTicksMax bounds how long the metadata core goes without a tick: its
// catch-up (clusterTicksCatchUpMax) then always covers the sleep.
const metaSleepTicksMax = clusterTicksCatchUpMax

// nextTickDue is the grid tick at which the metadata core next has something to do
// on a tick: a deadline of the core (NextDeadline), a bounded wait for the primary,
// a snapshot to try again; at the latest the next multiple of metaSleepTicksMax (a
// fixed tick, so that asking again asks for the same).
func (m *Plane) nextTickDue() (uint64, bool) {
	now := m.Core().Now()
	in := (m.tickedTo/metaSleepTicksMax+1)*metaSleepTicksMax - m.tickedTo
	due := func(at uint64) {
		if at <= now {
			in = 1
		} else {
			in = min(in, at-now)
		}
	}
	if d := m.Core().NextDeadline(); d != 0 {
		due(d)
	}
	m.BarrierDeadlines(due)
	if t, ok := m.NextRetryTick(); ok {
		due(t)
	}
	return m.tickedTo + in, true
}

// Ticks is how many ticks the core was given (tests).
func (m *Plane) Ticks() uint64 { return m.ticks }

// tickTo gives the metadata core the grid ticks up to m.tickTarget, with the
// liveness of the replicas heard from meanwhile at the ticks they were heard (see
// ticks.go); at most clusterTicksCatchUpMax after a stall, the rest dropped.
func (m *Plane) tickTo() {
	if n := m.tickTarget - m.tickedTo; m.tickTarget > m.tickedTo && n > clusterTicksCatchUpMax {
		m.tickedTo = m.tickTarget - clusterTicksCatchUpMax
	}
	if m.lastHeardNs != nil {
		var heard [vsr.ReplicasMax]struct {
			at uint64
			id uint8
		}
		n := 0
		for id := range m.heardNs {
			ns := m.lastHeardNs[id].Load()
			if ns == m.heardNs[id] {
				continue
			}
			m.heardNs[id] = ns
			at := min(max(m.tickOf(ns), m.tickedTo), max(m.tickTarget, m.tickedTo))
			i := n
			for ; i > 0 && heard[i-1].at > at; i-- {
				heard[i] = heard[i-1]
			}
			heard[i].at, heard[i].id = at, uint8(id)
			n++
		}
		for _, h := range heard[:n] {
			m.tickCore(h.at)
			m.NoteLiveness(h.id)
		}
	}
	m.tickCore(m.tickTarget)
}

// tickCore ticks the metadata core up to grid tick to.
func (m *Plane) tickCore(to uint64) {
	for ; m.tickedTo < to; m.tickedTo++ {
		m.Tick()
		m.ticks++
	}
}
