package partition

import (
	"fmt"

	"github.com/iggy-shard/iggy-shard/vsr"
	"github.com/iggy-shard/iggy-shard/wire"
)

// Proposals. A send or a replicated offset op becomes a prepare through the group's
// vsr.Driver: the partition queues it here under a sequence number, the Driver's
// token, and asks the Driver to propose it (Driver.Propose). The Driver asks for it
// at the moment it proposes it (Proposal: a batch is stamped then, at the group's
// prepared position) and reports what became of it (Proposed: the journal entry, or
// the refusal). That is at once when no Ready is out and the pipeline has room;
// otherwise after the Ready's Advance, in order, with the others that waited, so
// that they share the next journal write and its fdatasync (group commit). A
// proposal also waits while the primary lacks the body of an op it holds
// (ProposalWaits): it cannot know the offset its batch starts at.
//
// The queue holds the proposals the Driver has not proposed yet, oldest first: the
// Driver proposes and answers them in the order it took them.

// proposingState is a partition's sends and offset ops on their way into its
// group.
type proposingState struct {
	// queue holds the sends and offset ops the Driver has not proposed yet, seq
	// the last one's sequence number.
	queue proposalQueue
	seq   uint64
	// lastTimestamp is the timestamp of the last prepare this replica proposed,
	// lastOp its op.
	lastTimestamp uint64
	lastOp        uint64
	// syncErr and offsetErr carry the result of an op applied within the call that
	// proposed it (Send, StoreConsumerOffset, DeleteConsumerOffset), or of its
	// refusal when proposed (syncErr); syncOp is the op it was proposed as (0: it
	// was refused).
	syncErr   error
	offsetErr error
	syncOp    uint64
}

// proposal is a send or an offset op the Driver has not proposed yet.
type proposal struct {
	// body is the batch, in the caller's request buffer (stamped in place at
	// Proposal), or an offset op's payload (a copy made for it).
	body       []byte
	done       SendCompletion
	offsetDone OffsetCompletion
	token      uint64 // the caller's
	seq        uint64 // the Driver's token
	nowMicros  uint64
	operation  wire.Operation
	// syncCall: the call that queued it is still running and returns a refusal
	// itself (Send, the offset ops).
	syncCall bool
}

type proposalQueue struct{ growRing[proposal] }

func (q *proposalQueue) push(e proposal) { q.growRing.push(e, 4) }

// bySeq is the queued proposal of seq, or nil when the Driver has answered it.
func (q *proposalQueue) bySeq(seq uint64) *proposal {
	for i := q.n - 1; i >= 0; i-- {
		if e := q.at(i); e.seq == seq {
			return e
		}
	}
	return nil
}

// propose queues e and asks the group's Driver to propose it; the caller runs
// afterRun. It returns e's sequence number, or why the Driver did not take it (it
// holds too many: never before Send's own bounds; or it stopped).
func (p *Partition) propose(e proposal) (uint64, error) {
	p.proposing.seq++
	e.seq = p.proposing.seq
	p.proposing.queue.push(e)
	if !p.holding() {
		p.catchUp()
	}
	p.proposing.syncOp, p.proposing.syncErr = 0, nil
	if err := p.group.driver.Propose(e.seq); err != nil {
		p.proposing.queue.popBack() // refused at once, never answered
		return 0, err
	}
	return e.seq, nil
}

// stampBatch stamps a validated batch at the group's prepared position, as the
// Driver proposes it: base_offset is the offset after everything prepared,
// base_timestamp the prepare's timestamp, which the Core makes strictly increasing
// and which is first raised to the last prepared batch's so that batch timestamps
// never go back. The body is the batch in the request buffer itself.
func (p *Partition) stampBatch(batch []byte, nowMicros uint64) (vsr.Proposal, []byte, uint64) {
	if p.prepared.unappliedBatches > 0 && p.firstUnappliedBase() != p.log.NextOffset() {
		// The log moved back under the batches waiting to be applied (a repair cut
		// it; its Failed hook may come later): they can no longer apply.
		p.voidUnapplied(errLogMovedBack)
	}
	if p.prepared.unappliedBatches == 0 {
		// Nothing prepared waits: the log's end is the position (it moves back when
		// a storage failure cut batches, and a durable journal records that).
		if end := p.log.NextOffset(); end != p.prepared.end {
			if p.durable != nil {
				p.durable.noteCut(end)
			}
			p.prepared.end = end
		}
	}
	timestamp := max(nowMicros, p.prepared.timestamp, p.log.LastTimestamp())
	last := p.proposing.lastTimestamp
	if p.group.core.Op() != p.proposing.lastOp {
		// The head is not this replica's own last proposal (it led no view before,
		// or another replica did since): the Core raises above the head's timestamp.
		if h, ok := p.group.core.Header(p.group.core.Op()); ok {
			last = max(last, h.Timestamp)
		}
	}
	if timestamp <= last {
		timestamp = last + 1
	}
	wire.StampBatch(batch, uint64(p.key.PartitionID), p.prepared.end, timestamp)
	header, _ := wire.ViewBatchHeader(batch)
	return vsr.Proposal{RequestChecksum: wire.Uint128{Lo: header.BatchChecksum()}, Operation: wire.OperationSendMessages}, batch, timestamp
}

// Proposal implements vsr.Host: the proposal at the head of the queue, a batch
// stamped now, or an offset op timestamped after the group's head.
func (h *groupHost) Proposal(token uint64) (vsr.Proposal, []byte, uint64) {
	p := (*Partition)(h)
	e := p.proposalAt(token)
	if e.operation == wire.OperationSendMessages {
		return p.stampBatch(e.body, e.nowMicros)
	}
	timestamp := p.proposing.lastTimestamp + 1
	if head, ok := p.group.core.Header(p.group.core.Op()); ok {
		timestamp = max(timestamp, head.Timestamp+1)
	}
	return vsr.Proposal{RequestChecksum: wire.BodyChecksum(e.body), Operation: e.operation}, e.body, timestamp
}

// ProposalWaits implements vsr.ProposalGate: a batch waits while the journal lacks
// the body of an op above the applied one (a primary that has not repaired what
// its view holds), whose length the batch's base_offset depends on.
func (h *groupHost) ProposalWaits(token uint64) bool {
	p := (*Partition)(h)
	return p.proposalAt(token).operation == wire.OperationSendMessages && !p.positionKnown()
}

// proposalAt is the head of the queue, which the Driver's token must name.
func (p *Partition) proposalAt(token uint64) *proposal {
	if p.proposing.queue.n == 0 || p.proposing.queue.front().seq != token {
		panic(fmt.Sprintf("partition %v: the Driver asks for proposal %d out of order", p.key, token))
	}
	return p.proposing.queue.front()
}

// Proposed implements vsr.Host: a proposal prepared as op goes into the journal,
// where its caller waits for it; one refused is answered (58, or 4006 for a send
// a stopped group never prepared, as its prepared ones fail).
func (h *groupHost) Proposed(token, op uint64, err error) {
	p := (*Partition)(h)
	p.proposalAt(token)
	e := p.proposing.queue.popFront()
	if err != nil {
		code := wire.ErrTransientNotAccepted
		if p.group.driver.Err() != nil && e.operation == wire.OperationSendMessages {
			code = wire.ErrCannotSaveMessagesToSegment
		}
		switch {
		case e.syncCall:
			p.proposing.syncErr = code
		case e.done != nil:
			e.done.SendDone(e.token, wire.SendConfirmation{}, code)
		case e.offsetDone != nil:
			e.offsetDone.OffsetDone(e.token, code)
		}
		return
	}
	header, _ := p.group.core.Header(op)
	j := p.journal.put(&header)
	if e.operation == wire.OperationSendMessages {
		bh, _ := wire.ViewBatchHeader(e.body)
		if header.Timestamp != bh.BaseTimestamp() {
			panic("partition: the core's prepare timestamp differs from the batch's stamp")
		}
		j.body = e.body
		j.done, j.token, j.syncCall = e.done, e.token, e.syncCall
		p.prepared.timestamp = header.Timestamp
		p.prepared.end = bh.BaseOffset() + uint64(bh.MessageCount())
		p.prepared.unappliedBatches++
	} else {
		p.adoptBody(j, e.body)
		j.offsetDone, j.token = e.offsetDone, e.token
		j.syncCall = e.syncCall && e.offsetDone == nil
	}
	p.proposing.lastTimestamp, p.proposing.lastOp = header.Timestamp, op
	if e.syncCall {
		p.proposing.syncOp = op
	}
}
