package partition

import (
	"github.com/iggy-shard/iggy-shard/wire"
)

// Repair of applied ops from the log. A peer that missed a few ops (a restart that
// lost the prepares sent while it probed, a dropped frame) asks for them
// (RequestPrepares); the core serves any op of its header window it holds a body
// for (vsr.Storage.Body). An op not applied yet is in the journal. An applied op's
// body is in the segment log: a batch is stored exactly as it was prepared (its
// wire layout, as stamped at prepare), so it is read back from the segment files
// (segment.Log.ReadBatch) given the base offset recentOps remembered for it; an
// offset op's payload is a few dozen bytes, kept in recentOps itself. So a
// replicated partition keeps no copy of what it applied, however large its
// batches: memory that the retained ring of the reference (evicted_ring_capacity,
// evicted_ring_bytes_max) would grow with the batch size, at 64 ops of up to 16
// MiB per partition here before. A peer that missed more than the header window
// holds, or ops whose segments retention deleted since, is answered RangeEvicted
// (vsr.RetainingStorage) and takes a state transfer.
//
// The reads block the shard, as serving a state transfer's chunk does, and are
// rare: a replica repairs a few ops after a restart or a lost frame, from batches
// that were just written and are in the page cache. A read's buffer is held until
// the Ready whose RepairPrepare carries it is done (its Advance, host.go), and counts
// against the store's body budget (memory.go) meanwhile.

// recentOps remembers the last applied ops of a replicated group, as many as the
// core's header window: where each op's batch starts in the log, or an offset op's
// payload. The ring is made on the first apply, so a partition that never takes a
// write costs nothing here.
type recentOps struct {
	entries []recentOp
	head    int // the oldest entry
	n       int
	slots   int // the ring's size: the core's JournalSlots
}

type recentOp struct {
	op       uint64
	identity wire.Uint128
	// base is a batch's base_offset; offsetBody an offset op's payload (nil for a
	// batch).
	base       uint64
	offsetBody []byte
}

// note records an applied op: a batch at base, or an offset op with its payload.
func (r *recentOps) note(h *wire.PrepareHeader, base uint64, offsetBody []byte) {
	if r.slots == 0 {
		return // a group of one: nobody repairs from it
	}
	if r.entries == nil {
		r.entries = make([]recentOp, r.slots)
	}
	if r.n > 0 && r.entries[(r.head+r.n-1)%r.slots].op+1 != h.Op {
		r.reset() // not contiguous (an installed state, a journal emptied)
	}
	if r.n == r.slots {
		r.entries[r.head] = recentOp{}
		r.head = (r.head + 1) % r.slots
		r.n--
	}
	e := &r.entries[(r.head+r.n)%r.slots]
	*e = recentOp{op: h.Op, identity: h.Checksum, base: base}
	if offsetBody != nil {
		e.offsetBody = append([]byte(nil), offsetBody...)
	}
	r.n++
}

func (r *recentOps) reset() {
	clear(r.entries)
	r.head, r.n = 0, 0
}

// at returns the entry of op, or nil.
func (r *recentOps) at(op uint64) *recentOp {
	if r.n == 0 {
		return nil
	}
	first := r.entries[r.head].op
	if op < first || op >= first+uint64(r.n) {
		return nil
	}
	return &r.entries[(r.head+int(op-first))%r.slots]
}

// appliedBody is an applied op's body for the core (journalStorage.Body): an offset
// op's payload, or its batch read back from the log. A read is refused (the core
// skips the op; the peer asks again) when it would pass the store's body budget,
// unless it is this partition's first read of the Ready and nothing holds the store
// past its budget (bodyBudget.admit): one partition's repair always progresses.
func (p *Partition) appliedBody(op uint64, identity wire.Uint128) ([]byte, bool) {
	e := p.group.recent.at(op)
	if e == nil || e.identity != identity {
		return nil, false
	}
	if e.offsetBody != nil {
		return e.offsetBody, true
	}
	s := p.store
	h, ok := p.group.core.Header(op)
	if !ok || !s.bodies.admit(int(h.Size)-wire.HeaderSize, len(p.copies.repairReads) == 0) {
		return nil, false
	}
	if p.log.Err() != nil || p.reopenErr != nil {
		return nil, false
	}
	body, err := p.log.ReadBatch(e.base, nil)
	if err != nil {
		return nil, false // deleted by retention, cut, or unreadable: the peer transfers
	}
	p.copies.repairReads = append(p.copies.repairReads, body)
	s.bodies.take(len(body))
	return body, true
}

// releaseRepairReads gives back the reads of the Ready just done.
func (p *Partition) releaseRepairReads() {
	for i, b := range p.copies.repairReads {
		p.store.bodies.give(len(b))
		p.copies.repairReads[i] = nil
	}
	p.copies.repairReads = p.copies.repairReads[:0]
}

// oldestServed is the lowest applied op whose body this replica can serve, every op
// from it up to the journal's first one included (vsr.RetainingStorage): the
// recent ops whose batches are still in the log.
func (p *Partition) oldestServed() uint64 {
	r := &p.group.recent
	below := p.journal.firstOp
	if r.n == 0 || r.entries[(r.head+r.n-1)%r.slots].op+1 != below {
		return below
	}
	first := p.log.FirstOffset()
	for i := 0; i < r.n; i++ {
		e := &r.entries[(r.head+i)%r.slots]
		if e.offsetBody != nil || e.base >= first {
			return e.op
		}
	}
	return below
}
