package vsr

import "github.com/iggy-shard/iggy-shard/wire"

// The log: the headers of the last JournalSlots ops in a ring of slots (op at
// op % JournalSlots), chained by hash from each op to its parent, with where each
// body is. The bodies are the caller's (Storage); a slot only says whether its body
// is absent, being written in the current Ready, or durable.

// bodyState is where a slot's body is: absent, in the current Ready's writes, or
// durable.
type bodyState uint8

const (
	bodyNone bodyState = iota
	bodyWriting
	bodyDurable
)

type slot struct {
	header wire.PrepareHeader
	// trusted: the header belongs to the log of the replica's log view (or of a
	// newer view), verified by the hash chain from a canonical head. Only trusted
	// slots are reported in a DoViewChange, applied or acknowledged.
	trusted bool
	body    bodyState
	// faulty: the replica journaled this op (and may have acknowledged it), but
	// its entry was found corrupt at recovery, so its header is unknown
	// (CoreRecovered.Faulty). The op is neither present nor nacked in a
	// DoViewChange, and is repaired from a peer once a view names its header.
	// header.Op is the op; nothing else of the header is known.
	faulty bool
}

// slotLog is the replica's log: the slots, how far down from the head the hash
// chain is verified, and the head's identity and timestamp, which the next prepare
// chains on.
type slotLog struct {
	slots []slot
	// trustLow: every slot in [trustLow, op] holds a trusted header.
	trustLow uint64
	// retainedLow is the lowest op the journal can hold: above a recovered
	// checkpoint or an installed state.
	retainedLow uint64
	// checkpointOp is the op of the caller's last durable checkpoint
	// (CoreConfig.ReportsCheckpoints).
	checkpointOp uint64

	lastPrepareChecksum wire.Uint128
	lastTimestamp       uint64
}

func (c *Core) slotAt(op uint64) *slot {
	if op == 0 {
		return nil
	}
	s := &c.log.slots[op%uint64(len(c.log.slots))]
	if s.header.Op != op {
		return nil
	}
	return s
}

// windowLow is the lowest op whose slot no op up to the head shares: the journal
// holds [windowLow, op].
func (c *Core) windowLow() uint64 {
	if slots := uint64(len(c.log.slots)); c.op >= slots {
		return c.op - slots + 1
	}
	return 1
}

func (c *Core) write(s *slot, body []byte) {
	c.rd.Writes = append(c.rd.Writes, Write{Header: s.header, Body: body})
	s.body = bodyWriting
	c.out.dirtySlots = append(c.out.dirtySlots, s.header.Op)
}

// discard forgets the slot of op and has the caller remove its journal entry. A
// faulty slot has no entry to remove: the caller's journal keeps the damaged
// region until the op's repaired body replaces it (removing it would take the
// intact entries above it along, in a journal that is one sequence).
func (c *Core) discard(op uint64) {
	if s := c.slotAt(op); s != nil {
		faulty := s.faulty
		*s = slot{}
		if !faulty {
			c.rd.Discards = append(c.rd.Discards, op)
		}
	}
}

func (c *Core) truncateAbove(op uint64) {
	for k := op + 1; k <= c.op; k++ {
		if s := c.slotAt(k); s != nil {
			*s = slot{}
		}
	}
	if op < c.op || c.op == 0 {
		c.rd.Truncate = true
		c.rd.TruncateAbove = op
	}
	// Ready.Discards of higher ops are covered by the truncation.
}
