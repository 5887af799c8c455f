package partition

import (
	"errors"
	"sync"
)

// bodyCopies are the copies of bodies a partition holds: bytes in all, unwritten
// those the log is writing, repairReads the batches read back for the Ready in
// progress (repair.go), candidateBytes the core's repair candidates
// (candidates.go); heldFrameBytes and fedFrameBytes the frames the Driver copied
// while a Ready was out: those held during the Ready out, and those it fed after
// the previous one (host.go).
type bodyCopies struct {
	bytes          int
	unwritten      []unwrittenBody
	repairReads    [][]byte
	candidateBytes int
	heldFrameBytes int
	fedFrameBytes  int
}

// bodyBudget counts the bodies a store holds copies of, against its budget
// (Replication.BodyBudgetBytes): a backup's journal copies of the prepares it took
// (until applied and written by the log), the repair candidates its consensus
// cores keep (candidates.go), the frames a group's Driver held while its Ready was
// out (host.go), and the batches read back for a peer's repair. The primary's
// bodies are its clients' request buffers, which the server's own limits bound.
//
// A copy is taken when it fits in the budget (admitsBody). Past the budget a
// partition may still take the one body it needs next (the lowest op above its
// applied one whose body it lacks), and a group that holds repair candidates the
// rest of its repair chunk (the chain verifies a chunk from its top down: one body
// missing wastes the others), but only while nothing holds the store past its
// budget already. The group that took it past (overFor) then goes on completing
// the chunks it holds candidates of, and takes the op it needs next while it holds
// copies of ops above it (a chunk the chain reached from its top down, an op
// missing below), and nothing else passes the budget until the store is back
// within it: the excess is that group's own ops, which apply in order and drain. So every partition can always make progress, one at a
// time once the budget is spent; a prepare refused is dropped at ingress
// (Store.Step) or by its core (a candidate), as a lossy network would drop it, and
// sent again. What a store holds is thus at most its budget plus one group's repair
// chunk (RepairChunkMax batches) and the ops it needs below it, however many
// partitions take prepares or repair at once (plus, for a moment, the journal's
// copy of a body the Driver held while its Ready was out, or of a candidate being
// written, given back at the Ready's end).
type bodyBudget struct {
	budgetBytes int64
	inUseBytes  int64
	// overFor is the group whose copy took the store past its budget, until it
	// is back within.
	overFor *Partition
	// peakBytes is the most ever held, for tests and the documented sum.
	peakBytes int64
	// buffers lends the backups' journal copies their memory.
	buffers bodyBuffers
}

// bodyBuffers lends the buffers of a backup's journal copies of large bodies and
// takes them back once the log has written them (releaseWritten), so that a backup
// taking a stream of 1 MiB prepares copies each into memory it used before instead
// of a new allocation: a fresh megabyte per prepare kept a backup's collector busy
// (a third of its CPU in the sweeper and its locks, BenchmarkPinnedProduce's
// profiles), on the cores its primary and client need. The buffers sit in a
// sync.Pool, which the collector empties when they are not reused: a node at rest
// holds none (partition/doc.go's sum of resident memory is unchanged), and what
// is lent is bounded with the copies, by the store's body budget.
type bodyBuffers struct {
	free sync.Pool
	// made counts the buffers allocated, for tests.
	made uint64
}

// bodyBufferMinBytes is the smallest body lent from the pool: below it an
// allocation costs little, and a small body would waste a large buffer.
const bodyBufferMinBytes = 32 << 10

// bodyBufferGrainBytes rounds a new buffer's capacity up, so that batches of
// slightly different sizes share buffers.
const bodyBufferGrainBytes = 64 << 10

// get is a buffer of n bytes: a pooled one whose capacity fits (at least n, at most
// twice), or a new one.
func (b *bodyBuffers) get(n int) []byte {
	if n < bodyBufferMinBytes {
		return make([]byte, n)
	}
	if v, ok := b.free.Get().(*[]byte); ok && cap(*v) >= n && cap(*v) <= 2*n {
		return (*v)[:n]
	}
	b.made++
	return make([]byte, n, (n+bodyBufferGrainBytes-1)/bodyBufferGrainBytes*bodyBufferGrainBytes)
}

// put takes back a buffer get lent, which nothing refers to any more.
func (b *bodyBuffers) put(buf []byte) {
	if cap(buf) < bodyBufferMinBytes {
		return
	}
	b.free.Put(&buf)
}

// bodyBudgetDefault is a store's budget when Replication.BodyBudgetBytes is 0:
// 64 batches of the 1 MiB the SDKs' default batch of 1,000 messages of 1 KB
// comes to, enough for every group of a busy shard to keep its pipeline going.
const bodyBudgetDefault = 64 << 20

func (b *bodyBudget) take(n int) {
	b.inUseBytes += int64(n)
	b.peakBytes = max(b.peakBytes, b.inUseBytes)
}

func (b *bodyBudget) give(n int) {
	b.inUseBytes -= int64(n)
	if b.inUseBytes <= b.budgetBytes {
		b.overFor = nil
	}
	if b.inUseBytes < 0 {
		panic("partition: more body bytes given back than taken")
	}
}

// admit reports whether a copy of n bytes may be taken: it fits in the budget,
// or it is a body its partition needs next (needed) and nothing holds the store
// past its budget yet. For the copies that are not of a partition's ops (a frame
// held, a batch read for a peer's repair).
func (b *bodyBudget) admit(n int, needed bool) bool {
	if b.inUseBytes+int64(n) <= b.budgetBytes {
		return true
	}
	return needed && b.inUseBytes <= b.budgetBytes
}

// admitsBody reports whether p may take a copy of op's body, n bytes: a prepare's
// at ingress, or a repair candidate's its core would keep (repair: the body came
// by repair). See bodyBudget.
func (p *Partition) admitsBody(op uint64, n int, repair bool) bool {
	b := &p.store.bodies
	switch {
	case b.inUseBytes+int64(n) <= b.budgetBytes:
		return true
	case b.overFor == p:
		return repair && p.copies.candidateBytes > 0 || op == p.bodyNeededOp() && p.holdsCopiesAbove(op)
	case b.overFor != nil || b.inUseBytes > b.budgetBytes:
		return false
	}
	return op == p.bodyNeededOp() || repair && p.copies.candidateBytes > 0
}

// holdsCopiesAbove reports whether p's journal holds a copied body of an op above
// op, which cannot apply before op does.
func (p *Partition) holdsCopiesAbove(op uint64) bool {
	for o := p.journal.lastOp(); o > op; o-- {
		if e := p.journal.at(o); e != nil && e.present && e.copied {
			return true
		}
	}
	return false
}

// takeBody counts a copy of n bytes of p's ops, and p as the group past the
// budget when it takes the store past it.
func (p *Partition) takeBody(n int) {
	b := &p.store.bodies
	b.take(n)
	if b.inUseBytes > b.budgetBytes && b.overFor == nil {
		b.overFor = p
	}
}

// bodyNeededOp is the lowest op above the applied one whose body p's journal
// lacks: nothing more applies here until it has it.
func (p *Partition) bodyNeededOp() uint64 {
	op := p.journal.firstOp
	for ; op <= p.journal.lastOp(); op++ {
		if e := p.journal.at(op); e == nil || !e.present {
			break
		}
	}
	return op
}

// errBodyBudget drops a prepare at ingress: its copy would pass the store's body
// budget.
var errBodyBudget = errors.New("partition: body budget spent: prepare dropped, the primary retransmits it")

// copyBody gives e a copy of body, counted against the store's budget: the frame
// body came in itself when its lender lends it (lend.go), else a copy.
func (p *Partition) copyBody(e *journalEntry, body []byte) {
	p.releaseBody(e)
	if loan, ok := p.store.borrow(body); ok {
		e.body, e.loan = body, loan
	} else {
		e.body = p.store.bodies.buffers.get(len(body))
		copy(e.body, body)
	}
	e.copied = true
	p.copies.bytes += len(body)
	p.takeBody(len(body))
}

// adoptBody gives e a copy made for it (an offset op's payload), counted against
// the store's budget.
func (p *Partition) adoptBody(e *journalEntry, body []byte) {
	p.releaseBody(e)
	e.body = body
	e.copied = true
	p.copies.bytes += len(body)
	p.takeBody(len(body))
}

// releaseBody gives back e's copy, which nothing else refers to any more.
func (p *Partition) releaseBody(e *journalEntry) {
	if !e.copied {
		return
	}
	e.copied = false
	p.copies.bytes -= len(e.body)
	p.store.bodies.give(len(e.body))
	if e.loan.lender != nil {
		p.endLoan(e.loan)
		e.loan = bodyLoan{}
	}
}

// writeBody hands e's copy to the log, which holds it until written: it is given
// back once the log's written end passes end (releaseWritten).
func (p *Partition) writeBody(e *journalEntry, end uint64) {
	if !e.copied {
		return
	}
	e.copied = false
	p.copies.unwritten = append(p.copies.unwritten, unwrittenBody{body: e.body, end: end, loan: e.loan})
	e.loan = bodyLoan{}
}

// unwrittenBody is a copy the log is writing: body, the batch ending at end; loan
// the frame it is when lent.
type unwrittenBody struct {
	body []byte
	end  uint64
	loan bodyLoan
}

// releaseWritten gives back the copies the log has written (all of them once it
// is idle: a request no longer in flight refers to nothing, a cut batch included).
func (p *Partition) releaseWritten() {
	if len(p.copies.unwritten) == 0 {
		return
	}
	idle := p.log.Idle()
	written := p.log.WrittenEnd()
	n := 0
	for ; n < len(p.copies.unwritten) && (idle || p.copies.unwritten[n].end <= written); n++ {
		body := p.copies.unwritten[n].body
		p.copies.bytes -= len(body)
		p.store.bodies.give(len(body))
		// Written (segment.Log.Append's contract), applied and out of the journal:
		// nothing else refers to it.
		if loan := p.copies.unwritten[n].loan; loan.lender != nil {
			p.endLoan(loan)
		} else {
			p.store.bodies.buffers.put(body)
		}
	}
	if n > 0 {
		rest := copy(p.copies.unwritten, p.copies.unwritten[n:])
		clear(p.copies.unwritten[rest:])
		p.copies.unwritten = p.copies.unwritten[:rest]
	}
}
