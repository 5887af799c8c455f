package vsr

import (
	"fmt"

	"github.com/iggy-shard/iggy-shard/wire"
)

// Repair: a replica that lacks bodies (or headers) of ops it must apply, or, as a
// new primary, of ops its view must carry, asks a peer for a chunk of them in
// rounds (RequestPrepares -> RepairPrepare..., RepairDone), one round at a time,
// rotating peers on retries. Above the trusted range a body is checked against
// the header the replica trusts; below it the chain is verified downward from the
// range's bottom, with the prepares received meanwhile kept as candidates. A peer
// whose journal no longer holds the ops says RangeEvicted, and the replica pulls
// a whole state instead (transfer.go).

// repairRound is the state of repair: the round running, and the prepares it
// brought below the trusted range.
type repairRound struct {
	nonce  uint64
	active bool
	peer   uint8
	// progress: the running round wrote or verified something.
	progress   bool
	candidates []repairCandidate
}

type repairCandidate struct {
	header wire.PrepareHeader
	body   []byte
}

// maybeRepair starts a repair round if committed ops (or, on a forming primary, the
// merged log's ops) are missing, and none is running.
func (c *Core) maybeRepair() {
	if !c.repair.active {
		c.startRepair()
	}
}

func (c *Core) repairLimit() uint64 {
	if c.status == StatusViewChange && c.vc.mergeDone {
		return c.op
	}
	if c.commitMax < c.op {
		return c.commitMax
	}
	return c.op
}

func (c *Core) startRepair() {
	if c.n() == 1 || c.transfer.phase != transferIdle || (c.status != StatusNormal && !(c.status == StatusViewChange && c.vc.mergeDone)) {
		return
	}
	limit := c.repairLimit()
	from := uint64(0)
	start := c.commitMin + 1
	if c.vc.mergeDone && c.commitMax >= start {
		// A forming primary needs the uncommitted bodies to start its view; the
		// committed ones it can repair once it leads.
		start = c.commitMax + 1
	}
	for op := start; op <= limit; op++ {
		s := c.slotAt(op)
		if op < c.log.trustLow || s == nil || !s.trusted || s.body == bodyNone {
			from = op
			break
		}
	}
	if from == 0 {
		c.repair.active, c.timeouts.repairAt = false, 0
		c.dropCandidates() // the round is over: nothing left to verify them for
		return
	}
	if from < c.windowLow() {
		// The next op to apply has no slot of its own: its slot holds an op of the
		// window's top, journaled and maybe acknowledged (a replica that joined a
		// view far behind its head: sim/ seed 7038202). Only a state reaches it.
		c.startTransfer(c.repairPeerFor())
		return
	}
	chunk := uint64(c.cfg.Timing.RepairChunkMax)
	to := from + chunk - 1
	if from < c.log.trustLow {
		// Below the trusted range the chain is verified downward: fetch the chunk
		// just under it.
		to = c.log.trustLow - 1
		if to+1 > from+chunk {
			from = to + 1 - chunk
		}
	} else if to > limit {
		to = limit
	}
	c.dropCandidates()
	c.repair.nonce++
	c.repair.active = true
	c.repair.progress = false
	c.timeouts.repairAt = c.now + c.cfg.Timing.RepairRetryIntervalTicks
	peer := c.repairPeerFor()
	h := c.message(peer, wire.CommandRequestPrepares)
	r := (*wire.RequestPreparesHeader)(headerPointer(h))
	r.Nonce = wire.Uint128{Lo: c.repair.nonce, Hi: uint64(c.cfg.ReplicaID) + 1}
	r.FromOp = from
	r.ToOp = to
	r.Group = c.cfg.Group
	c.seal(nil)
}

// repairPeerFor picks whom to ask: a backup asks its primary first, then rotates
// through the others on retries.
func (c *Core) repairPeerFor() uint8 {
	n := c.n()
	if c.status == StatusNormal && !c.IsPrimary() && c.repair.peer%2 == 0 {
		return c.Primary()
	}
	for k := 0; k < n; k++ {
		peer := uint8((int(c.cfg.ReplicaID) + 1 + (int(c.repair.peer)+k)%(n-1)) % n)
		if peer != c.cfg.ReplicaID {
			return peer
		}
	}
	return c.Primary()
}

func (c *Core) onRequestPrepares(m *wire.RequestPreparesHeader) error {
	if err := c.checkGroup(m.Group); err != nil {
		return err
	}
	if m.Replica == c.cfg.ReplicaID {
		return c.drop(DropNotForRole)
	}
	to := m.ToOp
	if to > c.op {
		to = c.op
	}
	if to-m.FromOp+1 > uint64(c.cfg.Timing.RepairChunkMax) && to >= m.FromOp {
		to = m.FromOp + uint64(c.cfg.Timing.RepairChunkMax) - 1
	}
	// The journal holds the last JournalSlots ops, and none at or below a
	// checkpoint it recovered from or a state it installed.
	oldest := c.log.retainedLow
	if c.op >= uint64(len(c.log.slots)) {
		oldest = max(oldest, c.op-uint64(len(c.log.slots))+1)
	}
	if r, ok := c.cfg.Storage.(RetainingStorage); ok {
		oldest = max(oldest, min(r.OldestRetained(), c.op+1))
	}
	if m.FromOp < oldest {
		h := c.message(m.Replica, wire.CommandRangeEvicted)
		r := (*wire.RepairRangeHeader)(headerPointer(h))
		r.Nonce, r.Op, r.Group = m.Nonce, oldest, c.cfg.Group
		c.seal(nil)
		return nil
	}
	last := uint64(0)
	for op := m.FromOp; op <= to; op++ {
		s := c.slotAt(op)
		if s == nil || s.body == bodyNone {
			continue
		}
		body, ok := c.cfg.Storage.Body(op, s.header.Checksum)
		if !ok {
			continue
		}
		c.sendPrepare(m.Replica, &s.header, body, wire.CommandRepairPrepare)
		last = op
	}
	h := c.message(m.Replica, wire.CommandRepairDone)
	r := (*wire.RepairRangeHeader)(headerPointer(h))
	r.Nonce, r.Op, r.Group = m.Nonce, last, c.cfg.Group
	c.seal(nil)
	return nil
}

func (c *Core) onRepairPrepare(m *wire.PrepareHeader, body []byte) error {
	h := *m
	h.Command = wire.CommandPrepare // the identity covers the journaled command byte
	if err := c.checkPrepare(&h, body); err != nil {
		return err
	}
	switch {
	case !c.repair.active:
		return c.drop(DropStale)
	case h.Op <= c.commitMin:
		return c.drop(DropDuplicate)
	case h.Op > c.op:
		return c.drop(DropNotInLog)
	}
	s := c.slotAt(h.Op)
	dropped, reason := false, DropReason(0)
	switch {
	case h.Op >= c.log.trustLow && s != nil && s.trusted:
		if s.header.Checksum != h.Checksum {
			dropped, reason = true, DropNotInLog
			break
		}
		if s.body != bodyNone {
			dropped, reason = true, DropDuplicate
			break
		}
		c.write(s, body)
		c.repair.progress = true
		if c.status == StatusNormal && !c.IsPrimary() {
			c.sendPrepareOk(&s.header)
		}
	case h.Op >= c.log.trustLow:
		// Within the trusted range, where no trusted header names it.
		dropped, reason = true, DropNotInLog
	case len(c.repair.candidates) == c.cfg.Timing.RepairChunkMax || !c.takeCopy(h.Op, len(body)):
		dropped, reason = true, DropRepairBufferFull
	default:
		// Kept across Steps until the chain reaches it: a copy, not the frame.
		if c.repair.candidates == nil {
			c.repair.candidates = make([]repairCandidate, 0, c.cfg.Timing.RepairChunkMax)
		}
		c.repair.candidates = append(c.repair.candidates, repairCandidate{header: h, body: append([]byte(nil), body...)})
		c.verifyDown()
	}
	c.maybeStartView()
	if dropped {
		return c.drop(reason)
	}
	return nil
}

func (c *Core) onRepairRange(m *wire.RepairRangeHeader) error {
	if err := c.checkGroup(m.Group); err != nil {
		return err
	}
	if !c.repair.active || m.Nonce != (wire.Uint128{Lo: c.repair.nonce, Hi: uint64(c.cfg.ReplicaID) + 1}) {
		return c.drop(DropStale)
	}
	if m.Command == wire.CommandRangeEvicted {
		if m.Op > c.commitMin+1 {
			// The ops this replica needs next are gone from that peer's journal:
			// only a whole state brings it back.
			c.startTransfer(m.Replica)
			return nil
		}
		return c.drop(DropNothingNew) // the retry asks another peer
	}
	c.verifyDown()
	c.maybeStartView()
	if !c.repair.progress {
		// That peer had nothing for us: the retry timer asks the next one.
		return c.drop(DropNothingNew)
	}
	c.repair.active, c.timeouts.repairAt = false, 0
	c.startRepair()
	return nil
}

// dropCandidates forgets the repair candidates, and the memory they hold: each
// holds a copied body (up to a batch each, RepairChunkMax of them), and a group that
// repaired once must not keep them for the rest of its life; thousands of groups
// that never repair keep no room for them at all.
func (c *Core) dropCandidates() {
	for i := range c.repair.candidates {
		c.giveCopy(len(c.repair.candidates[i].body))
	}
	c.repair.candidates = nil
}

// RepairCandidateBytes is the size of the bodies the core holds as repair
// candidates: what a CopyBudget has let it keep.
func (c *Core) RepairCandidateBytes() int {
	n := 0
	for i := range c.repair.candidates {
		n += len(c.repair.candidates[i].body)
	}
	return n
}

// CopyBudget is a Storage that bounds the copies of bodies its core keeps across
// Steps (repair candidates, below the chain of trusted headers until the chain
// reaches them) together with what its host copies: a host of many groups (a
// shard's partitions) bounds them all at once.
type CopyBudget interface {
	// TakeCopy reports whether the core may keep a copy of op's body, n bytes;
	// false drops the body (DropRepairBufferFull) and a later round fetches it.
	TakeCopy(op uint64, n int) bool
	// GiveCopy gives back a copy of n bytes the core let go.
	GiveCopy(n int)
}

func (c *Core) takeCopy(op uint64, n int) bool {
	b, ok := c.cfg.Storage.(CopyBudget)
	return !ok || b.TakeCopy(op, n)
}

func (c *Core) giveCopy(n int) {
	if b, ok := c.cfg.Storage.(CopyBudget); ok {
		b.GiveCopy(n)
	}
}

// dropCandidate forgets repair candidate i and gives back its copy.
func (c *Core) dropCandidate(i int) {
	c.giveCopy(len(c.repair.candidates[i].body))
	last := len(c.repair.candidates) - 1
	c.repair.candidates[i] = c.repair.candidates[last]
	c.repair.candidates[last] = repairCandidate{}
	c.repair.candidates = c.repair.candidates[:last]
}

// unchainedToApplied: h, the op above the applied one, does not chain to the
// applied op's header this replica holds.
func (c *Core) unchainedToApplied(h *wire.PrepareHeader) bool {
	if h.Op != c.commitMin+1 {
		return false
	}
	a := c.appliedSlot(c.commitMin)
	return a != nil && h.Parent != a.header.Checksum
}

// verifyDown extends the trusted range downward while the slot (or a repair
// candidate) below it is the parent the chain names.
func (c *Core) verifyDown() {
	for c.log.trustLow > c.commitMin+1 {
		top := c.slotAt(c.log.trustLow)
		if top == nil {
			return
		}
		expected := top.header.Parent
		op := c.log.trustLow - 1
		if op < c.windowLow() {
			// Its slot is op+JournalSlots's, which this replica may have
			// acknowledged: the ops below the window come only with a state.
			return
		}
		// The chain down from a view's log must reach the applied op: one that
		// does not (its op above the applied one chains elsewhere) is a peer's log
		// no view has (committed.go), installed before the chain could be checked
		// this far down. Trust stops above it: nothing of it is applied, and a
		// later view's log replaces it.
		if s := c.slotAt(op); s != nil && s.header.Checksum == expected {
			if c.unchainedToApplied(&s.header) {
				return
			}
			s.trusted = true
			c.log.trustLow = op
			continue
		}
		found := false
		for i := range c.repair.candidates {
			cand := &c.repair.candidates[i]
			if cand.header.Op == op && cand.header.Checksum == expected && c.unchainedToApplied(&cand.header) {
				c.dropCandidate(i)
				c.drops[DropContradictsCommitted]++
				return
			}
			if cand.header.Op == op && cand.header.Checksum == expected {
				c.discard(op)
				s := &c.log.slots[op%uint64(len(c.log.slots))]
				*s = slot{header: cand.header, trusted: true}
				c.write(s, cand.body)
				// Written: the Ready's write carries the body now.
				c.dropCandidate(i)
				c.log.trustLow = op
				c.repair.progress = true
				found = true
				break
			}
		}
		if !found {
			if s := c.slotAt(op); s != nil {
				c.discard(op)
			}
			return
		}
	}
	// The applied op must be the parent of the first unapplied one: committed ops
	// are in every later view's log. No peer's input reaches here unchecked (the
	// logs installed and the chain walked above are checked against the applied
	// op, committed.go): failing it is our bug.
	if c.commitMin > 0 && c.log.trustLow == c.commitMin+1 {
		if top, below := c.slotAt(c.log.trustLow), c.slotAt(c.commitMin); top != nil && below != nil && below.trusted && top.header.Parent != below.header.Checksum {
			panic(fmt.Sprintf("vsr: replica %d: op %d does not chain to applied op %d: a committed op changed", c.cfg.ReplicaID, c.log.trustLow, c.commitMin))
		}
	}
}

// onRepairTimeout: the round got no answer in time; the next one asks the next
// peer.
func (c *Core) onRepairTimeout() {
	c.timeouts.repairAt = 0
	c.repair.active = false
	c.repair.peer++
	c.startRepair()
}
