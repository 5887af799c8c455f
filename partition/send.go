package partition

import (
	"errors"
	"fmt"

	"github.com/iggy-shard/iggy-shard/segment"
	"github.com/iggy-shard/iggy-shard/wire"
)

// SendCompletion learns what became of an admitted batch. Send takes one per batch
// with a token of the caller's choosing (a connection slot and request number, say),
// so the store keeps an interface value and a number, never a closure.
type SendCompletion interface {
	// SendDone runs once per admitted batch, from the store's I/O polling. err nil:
	// the batch is stored per its topic's policy and c is its confirmation (reply
	// with AppendSendReply). Otherwise err is the wire.ErrorCode to answer with: 4006
	// CannotSaveMessagesToSegment when a write or fdatasync failed and the batch was
	// cut from the log (it will never be polled; the producer may resend); 57
	// TransientNotCommitted when its outcome is not known here (outcomeUnknown) or a
	// view change cancelled its prepare (errViewCancelled): the SDK replays it.
	SendDone(token uint64, c wire.SendConfirmation, err error)
}

// Send admits one SendMessages batch into partition k on the owning shard. The
// partition is a consensus group (group.go) and the batch one prepare of it:
//
//  1. validate it (wire.ValidateBatch: layout, sizes, every frame checksum and the
//     batch checksum);
//  2. stamp it in place at prepare (wire.StampBatch: partition id, base_offset the
//     offset after everything prepared, base_timestamp the prepare's timestamp:
//     nowMicros raised to stay above the previous prepare's, since polls by
//     timestamp need batches non-decreasing);
//  3. propose it to the group, the request buffer itself the prepare's body, bound
//     to its header by request_checksum = batch_checksum; the Ready's write puts it in
//     the partition journal (in memory, or also in the journal file, fdatasynced,
//     for an enforce_fsync topic: durable.go);
//  4. once committed (at once on a single node), apply it: the log appends the
//     stamped bytes as they are, after checking the stamp is the one its own
//     position gives.
//
// A nil return means the batch is admitted and done.SendDone will run. The
// acknowledgement follows the topic's policy: with enforce_fsync once fdatasync has
// made the batch durable, and then nothing acknowledged is ever lost; without it once
// the write has completed (the batch is in the page cache: a process crash keeps it; a
// power loss before the next save, or a failed fdatasync or seal, after which the log
// cuts everything not known durable and gives those offsets again, may not). The
// reference server acknowledges a batch once committed in memory (its partition journal
// is in memory: "Write pipeline" in iggy.apache.org/docs/server/storage-engine), so
// either policy acknowledges no earlier than it does.
//
// req.Batch is the caller's buffer, stamped in place: it must stay untouched until
// SendDone has run for the batch.
//
// An error return is a wire.ErrorCode for the status of the reply, and the batch was
// not admitted: 20 ResourceNotFound when the store does not own k (the reference's
// answer to any resolution failure of a partition write, dispatch_partition_request in
// apache/iggy core/server/src/dispatch.rs), ValidateBatch's codes (3, 4009, 4027, 4039,
// ...), 58 TransientNotAccepted while the partition's in-flight window is full or it
// repairs a storage failure (SDKs retry), 4010 CannotAppendMessage when its log is
// broken.
func (s *Store) Send(k Key, req *wire.SendMessages, nowMicros uint64, done SendCompletion, token uint64) error {
	p, ok := s.partitions[k]
	if !ok {
		return wire.ErrResourceNotFound
	}
	if s.SyncDirs() != nil {
		return wire.ErrCannotAppendMessage
	}
	s.activate(p)
	if p.broken() != nil {
		return wire.ErrCannotAppendMessage
	}
	batch := req.Batch
	if err := wire.ValidateBatch(batch); err != nil {
		return err
	}
	if p.sends.n+p.journal.len()+p.proposing.queue.n >= p.logWindow() || p.journal.len()+p.proposing.queue.n >= journalEntriesMax {
		// The window may be full of batches written but not yet durable, waiting for
		// a save threshold that no refused batch will bring closer: save as soon as
		// their writes are done (settleSends).
		p.saveWanted = true
		return wire.ErrTransientNotAccepted
	}
	if !p.group.core.IsPrimary() {
		return wire.ErrTransientNotAccepted
	}
	if !p.holding() && p.proposing.queue.n == 0 && !p.positionKnown() {
		// A primary that holds ops without their bodies (committed ops it has not
		// repaired yet) cannot know the offset the next batch starts at.
		return wire.ErrTransientNotAccepted
	}
	seq, err := p.propose(proposal{operation: wire.OperationSendMessages, body: batch, nowMicros: nowMicros, done: done, token: token, syncCall: true})
	if err != nil {
		return wire.ErrTransientNotAccepted
	}
	p.afterRun()
	if e := p.proposing.queue.bySeq(seq); e != nil {
		// Not proposed yet (a Ready is out, or the pipeline is full): SendDone will
		// tell.
		e.syncCall = false
		return nil
	}
	if p.proposing.syncOp == 0 {
		err, p.proposing.syncErr = p.proposing.syncErr, nil // refused when proposed
		return err
	}
	if e := p.journal.at(p.proposing.syncOp); e != nil && e.present && e.syncCall {
		// Not applied yet (its journal write is out, or the log's window is full):
		// SendDone will tell.
		e.syncCall = false
		return nil
	}
	err, p.proposing.syncErr = p.proposing.syncErr, nil
	return err
}

// logWindow is the log's in-flight window, which bounds the sends admitted and not
// acknowledged (those not applied yet are further bounded by journalEntriesMax).
func (p *Partition) logWindow() int {
	if p.cfg.InflightBatchesMax == 0 {
		return logWindowDefault
	}
	return p.cfg.InflightBatchesMax
}

// logWindowDefault is segment's default InflightBatchesMax.
const logWindowDefault = 4096

// appendError is the status of a send whose apply the log refused for good.
func appendError(err error) error {
	var code wire.ErrorCode
	if errors.As(err, &code) {
		return code
	}
	return wire.ErrCannotAppendMessage
}

// AppendSendReply appends the SendMessages reply body for one stored batch:
// [count u32 = 1][stream_id u32][topic_id u32][partition_id u32][base_offset u64].
func AppendSendReply(dst []byte, c wire.SendConfirmation) []byte {
	return wire.AppendSendConfirmations(dst, c)
}

// pendingSend is an admitted batch not yet acknowledged.
type pendingSend struct {
	base, end uint64 // offsets [base, end)
	done      SendCompletion
	token     uint64
}

// sendQueue holds a partition's pending sends in offset order, in a ring that grows
// to the most ever pending (bounded by the log's in-flight window) and is then
// reused, so admitting a batch allocates nothing.
type sendQueue struct{ growRing[pendingSend] }

func (q *sendQueue) push(e pendingSend) { q.growRing.push(e, 16) }

// acknowledge completes, in order, every pending send that ends at or below end.
func (p *Partition) acknowledge(end uint64) {
	for p.sends.n > 0 && p.sends.front().end <= end {
		e := p.sends.popFront()
		e.done.SendDone(e.token, wire.SendConfirmation{
			StreamID:    p.key.StreamID,
			TopicID:     p.key.TopicID,
			PartitionID: p.key.PartitionID,
			BaseOffset:  e.base,
		}, nil)
	}
}

// failSends fails every pending send at or above offset from, newest first.
func (p *Partition) failSends(from uint64, code wire.ErrorCode) {
	for p.sends.n > 0 && p.sends.back().base >= from {
		e := p.sends.popBack()
		e.done.SendDone(e.token, wire.SendConfirmation{}, code)
	}
}

// ackEnd is how far sends may be acknowledged under the topic's policy.
func (p *Partition) ackEnd() uint64 {
	if p.cfg.EnforceFsync {
		return p.log.DurableEnd()
	}
	return p.log.WrittenEnd()
}

// The log's hooks. Written and Durable are silent while the log repairs a failure,
// and a repair that has nothing to cut reports nothing, so settleSends catches up
// after every poll.
func (p *Partition) onWritten(end uint64) {
	if !p.cfg.EnforceFsync {
		p.acknowledge(end)
	}
	p.releaseWritten()
	p.noteChanged()
	if p.group.state != nil {
		p.maybeCheckpoint()
	}
}

func (p *Partition) onDurable(end uint64) {
	if p.cfg.EnforceFsync {
		p.acknowledge(end)
	}
	if p.group.state != nil {
		p.maybeCheckpoint()
	}
}

func (p *Partition) onFailed(from, _ uint64, err error) {
	p.lastFailure = err
	p.failSends(from, wire.ErrCannotSaveMessagesToSegment)
	p.voidUnapplied(err)
	// The cut is durable and the log takes appends again: what it kept below from is
	// reported by ends that may have moved while the hooks were silent.
	p.acknowledge(p.ackEnd())
}

// settleSends acknowledges what the log's ends allow once the log is idle, and fails
// everything pending when the log is broken. An idle log is not repairing: a failure
// starts its repair as soon as nothing is in flight, and the repair's own requests
// keep it busy until the cut is done, so its ends can be trusted.
func (p *Partition) settleSends() {
	if p.journal.len() > 0 && !p.holding() && p.group.core != nil {
		// Committed ops that waited for the log's window, and the sends behind them.
		p.applyCommitted()
		p.run()
	}
	if p.durable != nil && !p.holding() {
		p.durable.maybeCompact(p)
	}
	if p.saveWanted && p.log.Idle() {
		p.saveWanted = false
		p.log.Sync()
	}
	p.releaseWritten()
	if p.sends.n == 0 {
		return
	}
	if p.broken() != nil {
		p.failSends(0, wire.ErrCannotSaveMessagesToSegment)
		return
	}
	if !p.log.Idle() {
		return
	}
	p.acknowledge(p.ackEnd())
	if p.sends.n > 0 && p.cfg.EnforceFsync && !p.holding() {
		// (Not while the journal file's write is out: its completion applies to the
		// log the reopen closes.)
		p.recoverStalledDurability()
	}
}

// recoverStalledDurability handles an enforce_fsync log that is idle, so every
// append's linked fdatasync has completed, yet whose durable end stays below batches
// it wrote and will never move again. segment gets there when a seal chain fails
// (the .log fdatasync, the .index write or its fdatasync) after the segment's own
// appends were already durable: the failure has nothing to cut, so the log clears it
// without submitting the chain again, the segment stays "sealing" for good, and the
// durable end may never cross into the next segment (TestRandomSendsAndPolls seed 28
// hits it at its seventh step). A pending batch that was not failed had its own linked
// fdatasync succeed, or the failure would have cut it, so it is durable: reopening
// the log runs recovery over what is on disk, and the pending batches it kept are
// acknowledged, the others fail.
func (p *Partition) recoverStalledDurability() {
	p.lastFailure = errDurabilityStalled
	_ = p.log.Close()
	p.releaseWritten()
	log, _, err := segment.Open(p.storage, p.logConfig(p.cfg), p.hooks)
	if err != nil {
		p.reopenErr = fmt.Errorf("%w: reopen: %v", errDurabilityStalled, err)
		p.failSends(0, wire.ErrCannotSaveMessagesToSegment)
		return // p.log stays closed until Recover
	}
	p.log = log
	p.acknowledge(log.NextOffset())
	p.voidUnapplied(errDurabilityStalled)
	p.failSends(0, wire.ErrCannotSaveMessagesToSegment)
}

var errDurabilityStalled = errors.New("partition: durable end stalled below written batches; log reopened")

// broken returns why the partition refuses sends until Recover: its log could not
// repair a storage failure, or could not be reopened.
func (p *Partition) broken() error {
	switch {
	case p.reopenErr != nil:
		return p.reopenErr
	case p.persist.journalErr != nil:
		return p.persist.journalErr
	case p.diverged != nil:
		return p.diverged
	}
	return p.log.Err()
}

// quiesce drains the partition's group before its log closes: the Ready out
// finished, every waiting send prepared, every committed op applied, polling the
// storage for what they wait on. Then the group stops: what cannot be applied (a
// broken log, ops only the peers can commit) is answered with its outcome unknown
// (outcomeUnknown), and the proposals its Driver still holds are refused.
func (p *Partition) quiesce() {
	if p.group.core == nil {
		return
	}
	for range quiesceRoundsMax {
		if p.group.driver.Err() != nil {
			break
		}
		if p.holding() {
			if p.pollStorage(true) == 0 && p.holding() {
				panic("partition: a Ready out waits on a storage with nothing in flight")
			}
			continue
		}
		p.run()
		if p.proposing.queue.n == 0 && p.journal.len() == 0 && !p.holding() {
			break
		}
		if p.proposing.queue.n == 0 && !p.holding() && p.journal.firstOp > p.committedOp {
			break // prepared, not committed: only the peers can commit them
		}
		if p.broken() != nil {
			break
		}
		if p.pollStorage(true) == 0 {
			p.log.Sync() // nothing in flight: the window waits for a save
		}
		p.settleSends()
	}
	p.group.driver.Stop(nil)
	p.releaseHeldFrames()
	p.failUnapplied()
	p.journal.reset(p.journal.lastOp() + 1)
	p.prepared.unappliedBatches = 0
}

// quiesceRoundsMax bounds quiesce: each round completes at least one storage
// request or applies an op, and a partition holds at most journalEntriesMax ops and
// the log's window of requests.
const quiesceRoundsMax = 1 << 20
