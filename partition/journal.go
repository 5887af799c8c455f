package partition

import "github.com/iggy-shard/iggy-shard/wire"

// journal is a partition group's in-memory journal: the prepares this replica holds
// and has not applied yet, oldest first, op after op. The segment log holds the
// applied ones (and serves them to polls); an op leaves the journal once applied, so
// the journal is bounded by what is prepared and not applied, at most
// journalEntriesMax (Send refuses beyond it with 58, which the SDKs retry).
//
// A body is the caller's request buffer on the primary (the batch stamped in place,
// no copy), or, on a backup and for consumer-offset ops, a copy in the entry's own
// buffer. An entry's buffer may still be in the log's write queue after the op was
// applied (the log writes the bytes it was given), so a buffer is reused only once
// the log reports the batch written; otherwise the entry takes a new one.
type journal struct {
	ring []journalEntry
	head int
	n    int
	// firstOp is the op of the entry at head (the lowest unapplied op); with n == 0
	// it is the op the next put must carry.
	firstOp uint64
}

type journalEntry struct {
	header wire.PrepareHeader
	body   []byte
	// present: the entry holds op's prepare (a gap a repair has not filled does not).
	present bool
	// void: its journal file write failed; its send was failed and it is not applied.
	void bool
	// own is the entry's buffer, kept across uses; ownEnd is the offset end of the
	// batch last applied from it: reusable once the log has written up to there.
	own    []byte
	ownEnd uint64
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
		e := &j.ring[(j.head+j.n)%len(j.ring)]
		own, ownEnd := e.own, e.ownEnd
		*e = journalEntry{own: own, ownEnd: ownEnd}
		j.n++
	}
	e := &j.ring[(j.head+int(h.Op-j.firstOp))%len(j.ring)]
	own, ownEnd := e.own, e.ownEnd
	*e = journalEntry{header: *h, present: true, own: own, ownEnd: ownEnd}
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
	// The old ring's free slots' buffers are not carried over.
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

// popFront drops the oldest entry, keeping its buffer for reuse.
func (j *journal) popFront() {
	e := &j.ring[j.head]
	own, ownEnd := e.own, e.ownEnd
	*e = journalEntry{own: own, ownEnd: ownEnd}
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
		own, ownEnd := e.own, e.ownEnd
		*e = journalEntry{own: own, ownEnd: ownEnd}
		j.n--
	}
}

// copyBody gives e a copy of body in its own buffer. writtenEnd is the log's written
// end: the buffer is reused only when the batch it last held is written.
func (e *journalEntry) copyBody(body []byte, writtenEnd uint64) {
	if cap(e.own) < len(body) || e.ownEnd > writtenEnd {
		e.own = make([]byte, len(body), max(len(body), 512))
		e.ownEnd = 0
	}
	e.own = e.own[:len(body)]
	copy(e.own, body)
	e.body = e.own
}
