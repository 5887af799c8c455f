package partition

import (
	"errors"
	"fmt"

	"github.com/iggy-shard/iggy-shard/vsr"
	"github.com/iggy-shard/iggy-shard/wire"
)

// The partition journal's side of a Ready (journalWrite, discard, dropAbove) and
// of its commits (applyCommitted): an op leaves the journal once the segment log
// takes it.

// preparedState is what the batches prepared and not applied add to the log:
// while the journal holds some (unappliedBatches), end (the offset after
// everything prepared) runs ahead of the log's, and timestamp is the
// base_timestamp of the last prepared batch.
type preparedState struct {
	unappliedBatches int
	end              uint64
	timestamp        uint64
}

// voidWrites fails the sends of ops whose journal write failed and marks them to be
// skipped at apply; the prepared position goes back to before them.
func (p *Partition) voidWrites(writes []vsr.Write) {
	for i := range writes {
		e := p.journal.at(writes[i].Header.Op)
		if e == nil || !e.present || e.void {
			continue
		}
		e.void = true
		if e.header.Operation == wire.OperationSendMessages {
			p.prepared.unappliedBatches--
		}
		p.finishEntry(e, wire.ErrCannotSaveMessagesToSegment)
	}
	p.recomputePrepared()
	if p.durable != nil {
		p.durable.noteCut(p.prepared.end)
	}
}

// voidUnapplied handles the log moving back under the group (a storage failure cut
// it, or a stalled log was reopened): every batch prepared and not applied was
// stamped past the new end and would fail its stamp check at apply. In a group of
// one, whose ops commit here or nowhere, they fail now (4006, as the cut batches do)
// and the next prepare is stamped at the log's end (behind a cut record in the
// journal file). A replica of a larger group holds applied batches its peers still
// have: it stops serving the partition until Recover.
func (p *Partition) voidUnapplied(cause error) {
	if p.group.core == nil || p.prepared.unappliedBatches == 0 && p.prepared.end == p.log.NextOffset() {
		return
	}
	if p.store.repl.replicaCount() > 1 {
		p.diverged = fmt.Errorf("%w: the log moved back under the group: %v", ErrStampMismatch, cause)
		return
	}
	for op := p.journal.firstOp; op <= p.journal.lastOp(); op++ {
		e := p.journal.at(op)
		if e == nil || !e.present || e.void || e.header.Operation != wire.OperationSendMessages {
			continue
		}
		e.void = true
		p.prepared.unappliedBatches--
		p.finishEntry(e, wire.ErrCannotSaveMessagesToSegment)
	}
	p.recomputePrepared()
	if p.durable != nil {
		p.durable.noteCut(p.prepared.end)
	}
}

var errLogMovedBack = errors.New("partition: the log's end moved back below the prepared batches")

// firstUnappliedBase is the base_offset of the oldest batch prepared and not applied
// (the journal must hold one).
func (p *Partition) firstUnappliedBase() uint64 {
	for op := p.journal.firstOp; op <= p.journal.lastOp(); op++ {
		if e := p.journal.at(op); e != nil && e.present && !e.void && e.header.Operation == wire.OperationSendMessages {
			bh, _ := wire.ViewBatchHeader(e.body)
			return bh.BaseOffset()
		}
	}
	panic("partition: no unapplied batch in the journal")
}

// recomputePrepared sets the prepared position from the log's end and the batches in
// the journal that will be applied.
func (p *Partition) recomputePrepared() {
	p.prepared.end, p.prepared.timestamp = p.log.NextOffset(), max(p.prepared.timestamp, p.log.LastTimestamp())
	for op := p.journal.firstOp; op <= p.journal.lastOp(); op++ {
		if e := p.journal.at(op); e != nil && e.present && !e.void && e.header.Operation == wire.OperationSendMessages {
			bh, _ := wire.ViewBatchHeader(e.body)
			p.prepared.end = bh.BaseOffset() + uint64(bh.MessageCount())
		}
	}
}

// journalWrite puts a Ready's write in the journal: on the primary the entry is
// there since it was proposed (Proposed), on a backup the body is copied, as the
// frame it came in is released once Step returns.
func (p *Partition) journalWrite(w *vsr.Write) {
	if e := p.journal.at(w.Header.Op); e != nil && e.present && e.header.Checksum == w.Header.Checksum {
		return
	}
	if w.Header.Op < p.journal.firstOp {
		return // applied already: a repair rewrote what the log holds
	}
	e := p.journal.put(&w.Header)
	p.copyBody(e, w.Body)
	if w.Header.Operation != wire.OperationSendMessages {
		return
	}
	p.prepared.unappliedBatches++
	if w.Header.Op == p.journal.lastOp() {
		bh, _ := wire.ViewBatchHeader(e.body)
		p.prepared.end = bh.BaseOffset() + uint64(bh.MessageCount())
		p.prepared.timestamp = bh.BaseTimestamp()
		return
	}
	// A batch below the journal's last op (a repair, a prepare that came late):
	// the prepared end is the last present batch's, whatever came first.
	p.recomputePrepared()
}

// discard drops one journal entry the core no longer counts as its log's (a stale
// op of an older view, replaced by the one the hash chain names; the ops above it
// stay): its batch will never be in the log, and its request is answered as a view
// change cancels one (errViewCancelled).
func (p *Partition) discard(op uint64) {
	e := p.journal.at(op)
	if e == nil || !e.present {
		return
	}
	if !e.void && e.header.Operation == wire.OperationSendMessages {
		p.prepared.unappliedBatches--
	}
	p.finishEntry(e, errViewCancelled)
	p.releaseBody(e)
	*e = journalEntry{}
	p.recomputePrepared()
}

// dropAbove drops the journal entries above op (a view change truncated them):
// their batches will never be in the log, and their requests are answered as a
// view change cancels one (errViewCancelled).
func (p *Partition) dropAbove(op uint64) {
	p.journal.truncateAbove(op, func(e *journalEntry) {
		if e.present && !e.void && e.header.Operation == wire.OperationSendMessages {
			p.prepared.unappliedBatches--
		}
		p.finishEntry(e, errViewCancelled)
	})
	p.recomputePrepared()
}

// errViewCancelled answers a request whose prepare the group's canonical log
// replaced or truncated (discard, dropAbove): 57 TransientNotCommitted, which the
// SDKs replay with the same request, as the reference answers a request a view
// change cancels (build_result_rejection_reply in apache/iggy
// core/consensus/src/plane_helpers.rs). The replay is safe without a client table
// (a partition op has none): the prepare is off the log that commits, so it never
// applies and the replay's batch is the only one. Not 4006, which says the
// partition's storage failed: nothing did, and the SDKs do not replay it, so a
// failover would reach the producer as an error.
const errViewCancelled = wire.ErrTransientNotCommitted

// applyCommitted applies the committed ops in order, until one waits for the log's
// in-flight window (it is retried from settleSends).
func (p *Partition) applyCommitted() {
	if p.group.core != nil && p.group.core.Transferring() {
		// A state is on its way: it was asked for as of the op applied now (at
		// least), and what is applied meanwhile would be cut from under the core
		// by the install. The ops wait in the journal; those above the installed
		// state apply after it.
		return
	}
	for p.journal.len() > 0 && p.journal.firstOp <= p.committedOp {
		e := p.journal.front()
		if !p.apply(e) {
			return
		}
		p.journal.popFront()
	}
}

// apply applies one committed op; false when the log cannot take it yet.
func (p *Partition) apply(e *journalEntry) bool {
	if e.void {
		return true // failed when its journal write did
	}
	switch e.header.Operation {
	case wire.OperationSendMessages:
		if err := p.checkStamp(e); err != nil {
			if e.done == nil && !e.syncCall && p.requestTransfer() {
				// A backup whose log does not continue the primary's: it takes the
				// primary's state, which drops this op from the journal.
				return false
			}
			p.prepared.unappliedBatches--
			if e.done == nil && !e.syncCall {
				// A backup whose log does not continue where the primary's did: it
				// must not serve a different batch under the same offsets.
				p.diverged = err
			}
			p.lastFailure = err
			p.finishEntry(e, wire.ErrCannotSaveMessagesToSegment)
			return true
		}
		bh, _ := wire.ViewBatchHeader(e.body)
		base, end := bh.BaseOffset(), bh.BaseOffset()+uint64(bh.MessageCount())
		if err := p.log.Append(e.body); err != nil {
			if err == wire.ErrTransientNotAccepted {
				// The window may be full of batches written but not yet durable,
				// waiting for a save threshold: save as soon as their writes are done.
				p.saveWanted = true
				return false
			}
			p.prepared.unappliedBatches--
			p.finishEntry(e, appendError(err))
			return true
		}
		p.prepared.unappliedBatches--
		p.writeBody(e, end)
		p.noteApplied(e.header.Op, end, false)
		p.group.recent.note(&e.header, base, nil)
		if e.done != nil {
			p.sends.push(pendingSend{base: base, end: end, done: e.done, token: e.token})
			e.done = nil
		}
	case wire.OperationStoreConsumerOffset, wire.OperationDeleteConsumerOffset:
		c, offset, err := decodeOffsetOp(e.header.Operation, e.body)
		if err == nil {
			if e.header.Operation == wire.OperationStoreConsumerOffset {
				err = p.log.StoreConsumerOffset(c.segmentKind(), c.ID, offset)
			} else {
				err = p.log.DeleteConsumerOffset(c.segmentKind(), c.ID)
			}
		}
		if e.syncCall {
			p.proposing.offsetErr = err
		}
		if e.offsetDone != nil {
			if err != nil {
				err = statusOf(err)
			}
			e.offsetDone.OffsetDone(e.token, err)
			e.offsetDone = nil
		}
		p.noteApplied(e.header.Op, p.log.NextOffset(), true)
		p.group.recent.note(&e.header, 0, e.body)
	case wire.OperationDeleteSegments:
		// A deletion cut short by a failure is finished when the partition
		// opens again (Recover, a restart): its record is written first.
		err := p.applyDeleteSegments(e.body)
		if e.offsetDone != nil {
			e.offsetDone.OffsetDone(e.token, err)
			e.offsetDone = nil
		}
		p.noteApplied(e.header.Op, p.log.NextOffset(), true)
		p.group.recent.note(&e.header, 0, e.body)
	}
	return true
}

// requestTransfer asks the group's primary for its state, on a backup of a group of
// more than one replica whose log cannot take the primary's next batch. It reports
// whether a transfer is under way (the core must be in normal status, as a backup).
// While a Ready is out (an apply of its commits) the Driver holds the request and it
// reports whether it will be; otherwise the core takes it at once and the caller
// runs the Driver: applies are not nested in a run of their own.
func (p *Partition) requestTransfer() bool {
	if p.store.repl.replicaCount() == 1 || p.group.core == nil {
		return false
	}
	if p.holding() {
		return p.group.driver.RequestTransfer(p.journal.firstOp - 1)
	}
	p.catchUp()
	return p.group.core.RequestTransfer(p.journal.firstOp - 1)
}

// checkStamp is the apply-time check every replica makes of a batch: its stamp is
// the one this replica derives from its own position (base_offset its log's next
// offset, partition_id its own, base_timestamp the prepare's and not below its log's
// last), and the header still binds the body. On the primary it is its own check: it
// fails only for batches stamped before a storage failure cut the log back.
func (p *Partition) checkStamp(e *journalEntry) error {
	bh, err := wire.ViewBatchHeader(e.body)
	if err != nil {
		return fmt.Errorf("%w: op %d: %v", ErrBatchBinding, e.header.Op, err)
	}
	switch {
	case bh.BaseOffset() != p.log.NextOffset():
		return fmt.Errorf("%w: op %d: base_offset %d, the log's next offset is %d", ErrStampMismatch, e.header.Op, bh.BaseOffset(), p.log.NextOffset())
	case bh.PartitionID() != uint64(p.key.PartitionID):
		return fmt.Errorf("%w: op %d: partition_id %d", ErrStampMismatch, e.header.Op, bh.PartitionID())
	case bh.BaseTimestamp() != e.header.Timestamp || bh.BaseTimestamp() < p.log.LastTimestamp():
		return fmt.Errorf("%w: op %d: base_timestamp %d, prepare timestamp %d, log's last %d", ErrStampMismatch, e.header.Op, bh.BaseTimestamp(), e.header.Timestamp, p.log.LastTimestamp())
	case e.header.RequestChecksum != (wire.Uint128{Lo: bh.BatchChecksum()}):
		return fmt.Errorf("%w: op %d", ErrBatchBinding, e.header.Op)
	}
	return nil
}

// finishEntry ends an entry's send with err: returned by the Send call that admitted
// it when it is still running, otherwise through SendDone. A deferred offset op is
// answered 57 TransientNotCommitted when err is 57 (outcomeUnknown: its prepare may
// commit in a new view or a replay; errViewCancelled: a view change cancelled it),
// else 58 (it will never apply, its journal write or the log failed: the client asks
// again, at whichever replica leads then). As for a send, 58 never answers an op
// that may yet be in the log.
func (p *Partition) finishEntry(e *journalEntry, err error) {
	if e.offsetDone != nil {
		code := wire.ErrTransientNotAccepted
		if err == wire.ErrTransientNotCommitted {
			code = wire.ErrTransientNotCommitted
		}
		e.offsetDone.OffsetDone(e.token, code)
		e.offsetDone = nil
		return
	}
	switch {
	case e.syncCall:
		if e.header.Operation == wire.OperationSendMessages {
			p.proposing.syncErr = err
		} else {
			p.proposing.offsetErr = err
		}
	case e.done != nil:
		e.done.SendDone(e.token, wire.SendConfirmation{}, err)
	}
	e.done = nil
}

// failUnapplied answers every op prepared here and not applied, which leaves the
// journal with its fate unknown (outcomeUnknown); those not proposed yet are the
// Driver's, and its Stop answers them (58: never admitted).
func (p *Partition) failUnapplied() {
	code := p.outcomeUnknown()
	for op := p.journal.firstOp; op <= p.journal.lastOp(); op++ {
		if e := p.journal.at(op); e != nil {
			p.finishEntry(e, code)
		}
	}
}

// outcomeUnknown is the answer to an op prepared here that leaves the journal
// neither applied nor known never to apply (its group stopped, its store closed):
// 57 TransientNotCommitted (outcome unknown: replay the same request) when it may
// still take effect, as in a group of more than one replica, where its prepare
// may be in a peer's journal and a new view commits it, and with a journal file,
// which a restart replays; otherwise, in a group of one whose ops commit here or
// nowhere, 4006 CannotSaveMessagesToSegment for a send (it will never be polled).
// Never 58, which says the request was not admitted.
func (p *Partition) outcomeUnknown() wire.ErrorCode {
	if p.store.repl.replicaCount() > 1 || p.durable != nil {
		return wire.ErrTransientNotCommitted
	}
	return wire.ErrCannotSaveMessagesToSegment
}
