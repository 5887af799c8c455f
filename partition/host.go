package partition

import (
	"fmt"

	"github.com/iggy-shard/iggy-shard/vsr"
	"github.com/iggy-shard/iggy-shard/wire"
)

// Each partition's group is driven by a vsr.Driver, the one loop that carries out a
// Core's Readies in the order vsr's package doc gives, and holds the inputs that
// come while a Ready is out. The partition is its host (groupHost):
//
//	Persist     the Ready's cut and writes into the partition journal (memory), then
//	            partition.journal (enforce_fsync) and, once that is durable,
//	            partition.state (a cluster's view state): rule 3 of the order, the
//	            journal's discards durable before the view state that caused them
//	Send        the Outbox (a replica connection)
//	Apply       the committed ops, to the segment log (applyCommitted)
//	Install     a transferred state (transfer.go)
//	OfferState  the applied state, once the log has written it (transfer.go)
//	Proposal,   a send or an offset op, stamped when proposed (propose.go)
//	Proposed
//	Advanced    the batches read back for a peer's repair go, the clock catches
//	            up, ops that waited for an installed state apply
//
// Storage completions only record what completed; the Ready whose writes are durable
// is finished (Driver.Persisted) once the storage's Poll has returned (resume): an
// install it may lead to closes the log and waits for the log's requests, and a
// request completed in the same batch as the write would have its hook still to
// run, out of every poll's reach.
type groupHost Partition

// persistState is the Ready whose durable writes are out (the Driver's): ready is
// that Ready, waits how many of its writes (journal file, view state) are not done
// yet, err the first that failed, stateGen the state record it waits for;
// stateAfterJournal: its view state is written once its journal write is durable;
// journalDeferred: its journal write waits for the file to be emptied.
type persistState struct {
	ready             *vsr.Ready
	waits             int
	err               error
	stateGen          uint64
	stateAfterJournal bool
	journalDeferred   bool
	// journalErr: a journal write failed; the partition refuses sends until
	// Recover.
	journalErr error
}

// run carries out the Readies the group's core holds (after a direct input: a
// catch-up of its clock, a transfer request) and files the group under its next
// deadline.
func (p *Partition) run() {
	p.group.driver.Run()
	p.afterRun()
}

// afterRun follows every input given to the group's Driver: the group is filed
// under its next deadline, the partition visited by PollIO, and the copies of held
// frames counted against the body budget are given back once the Driver holds
// none.
func (p *Partition) afterRun() {
	if !p.holding() {
		p.releaseHeldFrames()
		p.returnLoans()
	}
	p.store.rearm(p)
}

// holding reports whether the group's Ready is out: its Driver holds the inputs
// that come meanwhile, and the core takes none directly (a catch-up of its clock,
// a transfer request). A Driver stopped mid-Ready (a failed durable write) holds
// for good: the partition refuses everything until Recover starts a new group.
func (p *Partition) holding() bool { return p.group.driver != nil && p.group.driver.ReadyOut() }

// holdFrame gives the group's Driver a frame that came while its Ready is out: the
// Driver copies it, and the copy counts against the store's body budget until the
// Driver has fed it and let it go (frameBytesAdvanced).
func (p *Partition) holdFrame(h *wire.GenericHeader, body []byte) error {
	held := p.group.driver.InputsHeld()
	err := p.group.driver.Step(h, body)
	if p.group.driver.InputsHeld() != held {
		p.copies.heldFrameBytes += len(body)
		p.store.bodies.take(len(body))
	}
	return err
}

// frameBytesAdvanced moves the count of held frames on at an Advance: the Driver
// has let go of the frames it fed after the previous Advance, and feeds those held
// during this Ready next.
func (p *Partition) frameBytesAdvanced() {
	p.store.bodies.give(p.copies.fedFrameBytes)
	p.copies.fedFrameBytes, p.copies.heldFrameBytes = p.copies.heldFrameBytes, 0
}

// releaseHeldFrames gives back every held frame's count: the Driver holds none (it
// is idle, or stopped).
func (p *Partition) releaseHeldFrames() {
	p.store.bodies.give(p.copies.fedFrameBytes + p.copies.heldFrameBytes)
	p.copies.fedFrameBytes, p.copies.heldFrameBytes = 0, 0
}

// Persist implements vsr.Host: the cut and the writes go into the journal; the
// journal file and the view state, when the Ready has them, are written (the file
// first) and the Ready finishes once both are durable (resume).
func (h *groupHost) Persist(rd *vsr.Ready) bool {
	p := (*Partition)(h)
	if rd.Truncate {
		p.dropAbove(rd.TruncateAbove)
		if p.durable != nil {
			p.durable.noteDiscard(rd.TruncateAbove+1, true)
		}
	}
	for _, op := range rd.Discards {
		p.discard(op)
		if p.durable != nil {
			p.durable.noteDiscard(op, false)
		}
	}
	for i := range rd.Writes {
		p.journalWrite(&rd.Writes[i])
	}
	needJournal := p.durable != nil && (len(rd.Writes) > 0 || p.durable.cutPending || len(p.durable.discards) > 0)
	needState := p.group.state != nil && (rd.State != nil || rd.ViewHeaders != nil)
	if !needJournal && !needState {
		return true // the in-memory journal has it
	}
	// The Ready's other frames go once the writes are durable. A prepare this
	// backup forwards down the chain has its body in the frame it came in, which
	// the caller releases when Step returns: it goes with the journal's copy.
	for i := range rd.Messages {
		m := &rd.Messages[i]
		if m.Header.Command != wire.CommandPrepare {
			continue
		}
		ph := m.Header.Prepare()
		if e := p.journal.at(ph.Op); e != nil && e.present && e.header.Checksum == ph.Checksum {
			m.Body = e.body
		}
	}
	p.persist.ready = rd
	p.persist.waits, p.persist.err = 0, nil
	if needState {
		p.persist.waits++
	}
	if needJournal {
		// The journal first, the view state once it is durable: a restart that
		// finds the new log view must find the entries of the old one it
		// discarded gone (the file's discard records), else it would take a stale
		// entry for the new view's.
		p.persist.waits++
		p.persist.stateAfterJournal = needState
		if p.durable.compacting {
			p.persist.journalDeferred = true // the file is being emptied: written after (resume)
		} else {
			p.durable.submit(p, rd.Writes)
		}
	} else {
		p.persistView()
	}
	return false
}

// persistView writes the view state (and view headers) of the Ready persisting.
func (p *Partition) persistView() {
	rd := p.persist.ready
	ds := p.group.state.wanted.durable
	if rd.State != nil {
		ds = *rd.State
	}
	p.persist.stateGen = p.group.state.persistView(ds, rd.ViewHeaders)
}

// onJournalDurable is the completion of the journal file write of the Ready
// persisting: the view state that waited for it is written next.
func (p *Partition) onJournalDurable(err error) {
	if p.persist.stateAfterJournal {
		p.persist.stateAfterJournal = false
		if err == nil {
			p.persistView()
		} else {
			p.persist.waits-- // the state is not written after a failed journal
		}
	}
	p.persistWriteDone(err)
}

// persistWriteDone counts one of the persisting Ready's durable writes (journal
// file, view state) done; the Ready finishes after the storage's Poll (resume).
func (p *Partition) persistWriteDone(err error) {
	if err != nil && p.persist.err == nil {
		p.persist.err = err
	}
	p.persist.waits--
	if p.persist.waits == 0 {
		p.activity.resumeWanted = true
	}
}

// resume does what storage completions left for after the storage's Poll: the
// journal write that waited for the file to be emptied goes, the Ready whose writes
// are durable finishes, a group whose durable state could not be written stops,
// and the group runs (a journal file emptied, a state file created). Every poll of
// a partition's storage outside the log's own waits goes through pollStorage,
// which calls it.
func (p *Partition) resume() {
	for p.activity.resumeWanted {
		p.activity.resumeWanted = false
		if p.group.state != nil && p.group.state.openErr != nil {
			p.group.state.failOpen()
		}
		if p.durable != nil && p.durable.openErr != nil {
			p.durable.failOpen()
		}
		if p.persist.ready != nil {
			if p.persist.journalDeferred && !p.durable.compacting {
				p.persist.journalDeferred = false
				if p.persist.journalErr != nil {
					p.onJournalDurable(p.persist.journalErr) // the emptying failed
				} else {
					p.durable.submit(p, p.persist.ready.Writes)
				}
			}
			if p.persist.waits == 0 {
				p.finishPersist()
			}
			continue
		}
		if p.group.driver == nil || p.group.driver.Err() != nil {
			continue
		}
		if p.persist.journalErr != nil {
			p.failGroup(p.persist.journalErr) // a checkpoint or the file's emptying failed
			continue
		}
		p.run()
	}
}

// pollStorage runs the completions of p's storage (Storage.Poll), then what they
// left to do (resume).
func (p *Partition) pollStorage(wait bool) int {
	n := p.storage.Poll(wait)
	p.resume()
	return n
}

// finishPersist finishes the Ready whose journal write and view state are durable.
// A failed write in a group of more than one stops the group: the Ready's
// acknowledgements must not go out, and its ops may commit elsewhere. In a group
// of one, whose ops commit here or nowhere, the ops written are failed (4006, as a
// failed log fdatasync fails its batches) and skipped at apply, and a cut record
// voids whatever of them the file kept; the Ready goes on.
func (p *Partition) finishPersist() {
	rd, err := p.persist.ready, p.persist.err
	p.persist.ready, p.persist.err = nil, nil
	if p.group.driver.Err() != nil {
		return // stopped meanwhile
	}
	if err != nil {
		if p.store.repl.replicaCount() > 1 {
			p.failGroup(fmt.Errorf("partition %v: journal write: %w", p.key, err))
			return
		}
		p.voidWrites(rd.Writes)
	}
	p.group.driver.Persisted(nil)
	p.afterRun()
	if p.persist.journalErr != nil {
		p.activity.resumeWanted = true // a checkpoint failed meanwhile: the group stops
	}
}

// failGroup stops the group for good after a durable write failed: the partition
// refuses everything until Recover starts a new group. The Driver stops (a Ready
// out goes no further, and the proposals it holds fail), and the ops prepared and
// not applied are answered with their outcome unknown (57 in a cluster: their
// prepares went down the chain before this replica's write, and may commit).
func (p *Partition) failGroup(err error) {
	if p.persist.journalErr == nil {
		p.persist.journalErr = err
	}
	p.group.driver.Stop(p.persist.journalErr)
	p.releaseHeldFrames()
	p.failUnapplied()
	p.journal.reset(p.journal.lastOp() + 1)
	p.prepared.unappliedBatches = 0
}

// Send implements vsr.Host.
func (h *groupHost) Send(m *vsr.Message) {
	p := (*Partition)(h)
	out := p.store.repl.Outbox
	if out == nil {
		return
	}
	p.store.counts.framesSent++
	if p.store.prepareOutbox != nil {
		if done, token, ok := p.sendOf(m); ok {
			p.store.prepareOutbox.SendPrepareOf(p.key, m, done, token)
			return
		}
	}
	out.SendReplica(p.key, m)
}

// Apply implements vsr.Host: the committed ops are in the journal; they are
// applied in order, but for those the log's window makes wait (settleSends applies
// them) and those a state on its way will replace.
func (h *groupHost) Apply(committed []wire.PrepareHeader) bool {
	p := (*Partition)(h)
	for i := range committed {
		c := &committed[i]
		e := p.journal.at(c.Op)
		if e == nil || !e.present || e.header.Checksum != c.Checksum {
			panic("partition: a committed op is not in the journal")
		}
		p.committedOp = c.Op
	}
	p.applyCommitted()
	return true
}

// Install implements vsr.Host (transfer.go). A state that cannot be installed
// stops the group.
func (h *groupHost) Install(in *vsr.StateInstall) bool {
	p := (*Partition)(h)
	if err := p.install(in); err != nil {
		p.failGroup(fmt.Errorf("partition %v: %w", p.key, err))
		return false
	}
	return true
}

// Forwarded implements vsr.Host: partition groups forward no logins.
func (h *groupHost) Forwarded([]vsr.ForwardOutcome) {
	panic("partition: a partition group was answered a forward it never made")
}

// Advanced implements vsr.Host: the frames that carried the batches read back for
// a peer's repair are out, the clock catches up with the shard's before the held
// inputs are fed (as it does before any input), and the committed ops that waited
// for a state on its way apply above it.
func (h *groupHost) Advanced() {
	p := (*Partition)(h)
	p.releaseRepairReads()
	p.frameBytesAdvanced()
	p.catchUp()
	p.applyCommitted()
}
