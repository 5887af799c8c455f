package partition

import "github.com/iggy-shard/iggy-shard/wire"

// journal is a partition group's in-memory journal: the prepares this replica holds
// and has not applied yet, oldest first, op after op. The segment log holds the
// applied ones (and serves them to polls); an op leaves the journal once applied, so
// the journal is bounded by what is prepared and not applied, at most
// journalEntriesMax (Send refuses beyond it with 58, which the SDKs retry).
//
// A body is the caller's request buffer on the primary (the batch stamped in place,
// no copy), or, on a backup and for consumer-offset ops, a copy made for the entry
// and counted against the store's body budget (memory.go). A copy may still be in
// the log's write queue after the op was applied (the log writes the bytes it was
// given): it is counted until the log reports it written (Partition.writeBody).
type journal struct {
	ring []journalEntry
	head int
	n    int
	// firstOp is the op of the entry at head (the lowest unapplied op); with n == 0
	// it is the op the next put must carry.
	firstOp uint64
	// drop gives back an entry's copy when the entry leaves without its body going
	// to the log (Partition.releaseBody, bound once).
	drop func(*journalEntry)
}

type journalEntry struct {
	header wire.PrepareHeader
	body   []byte
	// present: the entry holds op's prepare (a gap a repair has not filled does not).
	present bool
	// void: its journal file write failed; its send was failed and it is not applied.
	void bool
	// copied: body is a copy counted against the store's body budget; loan the
	// frame it is, when lent (lend.go).
	copied bool
	loan   bodyLoan
	// The send waiting for this op on the primary (done nil otherwise). syncCall: the
	// send is being admitted by the current Send call, which returns its result.
	done     SendCompletion
	token    uint64
	syncCall bool
	// offsetDone: the deferred offset op's caller (ReplicateConsumerOffset), told
	// with token once it is applied or failed.
	offsetDone OffsetCompletion
}

// journalEntriesMax bounds the ops a partition holds prepared and not applied: past
// the consensus pipeline (vsr.PipelineDepthMax) it only buffers what waits for the
// log's in-flight window, which a larger journal would not drain any faster.
const journalEntriesMax = 1024

func (j *journal) len() int { return j.n }

// lastOp is the highest op the journal holds a slot for (firstOp-1 when empty).
func (j *journal) lastOp() uint64 { return j.firstOp + uint64(j.n) - 1 }

// put returns the entry of op, filled with h and marked present. Ops come in order
// on the primary and in the normal case on a backup; a repair may fill an op below
// the last, or leave a gap that a later repair fills (the entries between are not
// present). An op below firstOp is applied already: put returns nil.
func (j *journal) put(h *wire.PrepareHeader) *journalEntry {
	if h.Op < j.firstOp {
		return nil
	}
	for h.Op > j.lastOp() {
		j.grow()
		j.ring[(j.head+j.n)%len(j.ring)] = journalEntry{}
		j.n++
	}
	e := &j.ring[(j.head+int(h.Op-j.firstOp))%len(j.ring)]
	j.drop(e)
	*e = journalEntry{header: *h, present: true}
	return e
}

func (j *journal) grow() {
	if j.n < len(j.ring) {
		return
	}
	grown := make([]journalEntry, max(16, 2*len(j.ring)))
	for i := 0; i < j.n; i++ {
		grown[i] = j.ring[(j.head+i)%len(j.ring)]
	}
	j.ring, j.head = grown, 0
}

// at returns the entry of op, or nil when the journal does not hold it.
func (j *journal) at(op uint64) *journalEntry {
	if j.n == 0 || op < j.firstOp || op >= j.firstOp+uint64(j.n) {
		return nil
	}
	return &j.ring[(j.head+int(op-j.firstOp))%len(j.ring)]
}

// front is the oldest entry; the journal must not be empty.
func (j *journal) front() *journalEntry { return &j.ring[j.head] }

// popFront drops the oldest entry (applied, or void), giving back its copy unless
// the log took it (Partition.writeBody).
func (j *journal) popFront() {
	e := &j.ring[j.head]
	j.drop(e)
	*e = journalEntry{}
	j.head = (j.head + 1) % len(j.ring)
	j.n--
	j.firstOp++
}

// truncateAbove drops every entry above op (a view change cut them); it returns the
// entries dropped so that their sends can be failed, newest first, through fn.
func (j *journal) truncateAbove(op uint64, fn func(*journalEntry)) {
	for j.n > 0 && j.firstOp+uint64(j.n)-1 > op {
		e := &j.ring[(j.head+j.n-1)%len(j.ring)]
		fn(e)
		j.drop(e)
		*e = journalEntry{}
		j.n--
	}
}

// reset drops every entry (giving back their copies): the journal is empty, its
// next op firstOp.
func (j *journal) reset(firstOp uint64) {
	for j.n > 0 {
		e := &j.ring[j.head]
		j.drop(e)
		*e = journalEntry{}
		j.head = (j.head + 1) % len(j.ring)
		j.n--
	}
	j.head, j.firstOp = 0, firstOp
	if len(j.ring) > journalRingKept {
		j.ring = nil // a burst grew it: an idle partition keeps a small one
	}
}

// journalRingKept is the ring size reset keeps: a pipeline's worth of entries (of
// about 330 bytes each) and the ops waiting behind it in the common case.
const journalRingKept = 64
