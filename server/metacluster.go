package server

import (
	"github.com/iggy-shard/iggy-shard/shard"
	"github.com/iggy-shard/iggy-shard/vsr"
)

// The metadata plane in a cluster (cluster.enabled): the same group, of as many
// replicas as the roster has nodes, on shard 0 of every node. What the server
// does for it that a single node does not need (the plane's own part is in
// package metaplane):
//
//   - Frames from the other replicas reach shard 0 from whichever shard owns the
//     peer's connection (cluster.go), retained there; the plane copies what it
//     keeps, so a frame goes back to its shard once stepped.
//   - The core is ticked on shard 0's grid of 10 ms ticks (ticks.go), which sleeps
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

// replicaInbound is one replica frame on its way to shard 0: retained on the
// shard that owns the peer's connection, released there.
type replicaInbound struct {
	frame shard.RetainedReplicaFrame
	owner int
}

// replicaFrameIn steps a frame of the metadata group into the plane, which copies
// what it keeps, and gives the frame back to its shard.
func (r *metaRouter) replicaFrameIn(in *replicaInbound) {
	f := &in.frame
	if err := r.plane.Step(f.Header, f.Body); err != nil {
		r.h.log.Debug("replica frame refused by the metadata group", "peer", f.Peer, "command", f.Header.Command.String(), "err", err)
	}
	r.releaseReplicaFrame(in)
}

// tickTo gives the metadata core the grid ticks up to m.tickTarget, with the
// liveness of the replicas heard from meanwhile at the ticks they were heard (see
// ticks.go); at most clusterTicksCatchUpMax after a stall, the rest dropped.
func (m *metaPlane) tickTo() {
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
func (m *metaPlane) tickCore(to uint64) {
	for ; m.tickedTo < to; m.tickedTo++ {
		m.Tick()
		m.ticks++
	}
}
