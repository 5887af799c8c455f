package server

import (
	"fmt"
	"maps"
	"slices"

	"github.com/iggy-shard/iggy-shard/metaplane"
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
//     (view.go).
//
// The journal stays in op order, while a backup may be handed a write beyond a gap
// (a body retransmitted before the repair of the ops below it): the journal is
// then rewritten with a marker for the ops it lacks in front of that entry, so the
// write is durable at its own position before the Ready that acknowledges it is
// advanced; a restart reads the marker as a hole and reports its ops as faulty,
// as it does a corrupt entry (journal.go).

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

// installStateFiles writes a transferred state: inline in sync mode (done), else
// on the writer, completed through m.StateInstalled.
//
// The core keeps the ops above the installed one as journaled (Core.installed):
// this replica may have acknowledged them, so the journal keeps them, durably,
// entries and holes as they are (installedJournal), before the Advance that has
// the core resume from the state. Emptying the journal would lose them to a crash
// right after the install, and a view change could then lose a committed op.
//
// The snapshot is replaced first: a crash before the journal's replacement leaves
// the new snapshot with the old journal, which holds the same ops above the
// state's op (the restart skips those below it, scanMetaJournal). A restart
// would refuse it if its entry at the state's op, or the one after, were of
// another log: such entries are first marked as holes in the old journal (the
// bridge of planInstalledJournal), which either snapshot then reads.
func (m *metaPlane) installStateFiles(in *metaplane.Install) (bool, error) {
	f := m.files
	if f.sync && f.out == nil && len(f.queue) == 0 {
		t, result := f.installTask(in)
		return true, result(t.work(nil))
	}
	f.submit(func() *journalTask {
		t, result := f.installTask(in)
		t.then = func(err error) { m.StateInstalled(result(err)) }
		return t
	})
	return false, nil
}

// installTask is the file work of an install; result brings the journal and its
// index along.
func (m *metaFiles) installTask(in *metaplane.Install) (*journalTask, func(error) error) {
	journal, store := m.journal, m.store
	firstOp, ends, holes := m.journalFirstOp, slices.Clone(m.journalEnds), maps.Clone(m.holes)
	var (
		kept     *installedJournal
		reopened metaJournal
	)
	t := &journalTask{
		work: func(func()) error {
			raw, err := store.ReadFile(journalFileName)
			if err != nil {
				return fmt.Errorf("metadata journal read: %w", err)
			}
			var bridge *installedJournal
			if kept, bridge, err = planInstalledJournal(raw, firstOp, ends, holes, in.At); err != nil {
				return err
			}
			if bridge != nil {
				b, err := layJournal(raw, nil, bridge.pieces)
				if err != nil {
					return err
				}
				if err := store.ReplaceFile(journalFileName, b); err != nil {
					return fmt.Errorf("metadata journal rewrite: %w", err)
				}
			}
			if err := store.ReplaceFile(snapshotFileName, in.Snapshot); err != nil {
				return fmt.Errorf("metadata snapshot: %w", err)
			}
			reopened, err = replaceJournal(store, journal, raw, nil, kept.pieces)
			return err
		},
	}
	result := func(err error) error {
		if err != nil {
			return err
		}
		m.journal = reopened
		m.setJournalIndex(kept.firstOp, kept.ends, kept.holes)
		m.log.Info("metadata journal kept by the install", "op", in.At.Op, "journal_ops_kept", len(kept.ends), "faulty_ops", len(kept.holes))
		return nil
	}
	return t, result
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
