package partition

import "errors"

// bodyBudget counts the bodies a store holds copies of, against its budget
// (Replication.BodyBudgetBytes): a backup's journal copies of the prepares it took
// (until applied and written by the log), the frames a group's Driver held while
// its Ready was out (host.go), and the batches read back for a peer's repair. The
// primary's bodies are its clients' request buffers, which the server's own limits
// bound.
//
// A copy is taken when it fits in the budget (admit). Past the budget a partition
// may still take the one body it needs next (the lowest op above its applied one
// whose body it lacks, or a first repair read), but only while nothing holds the
// store past its budget already: so every partition can always make progress, one
// at a time once the budget is spent, and the copies within the budget drain as
// their ops apply and the log writes them. A prepare refused is dropped at ingress
// (Store.Step), as a lossy network would drop it, and the primary retransmits it.
// What a store holds is thus at most its budget plus one body, however many
// partitions take prepares at once (plus, for a moment, the journal's copy of a
// body the Driver held while its Ready was out, given back at the Ready's end).
type bodyBudget struct {
	budgetBytes int64
	inUseBytes  int64
	// peakBytes is the most ever held, for tests and the documented sum.
	peakBytes int64
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
	if b.inUseBytes < 0 {
		panic("partition: more body bytes given back than taken")
	}
}

// admit reports whether a copy of n bytes may be taken: it fits in the budget,
// or it is a body its partition needs next (needed) and nothing holds the store
// past its budget yet.
func (b *bodyBudget) admit(n int, needed bool) bool {
	if b.inUseBytes+int64(n) <= b.budgetBytes {
		return true
	}
	return needed && b.inUseBytes <= b.budgetBytes
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

// copyBody gives e a copy of body, counted against the store's budget.
func (p *Partition) copyBody(e *journalEntry, body []byte) {
	p.releaseBody(e)
	e.body = append([]byte(nil), body...)
	e.copied = true
	p.copiedBytes += len(body)
	p.store.bodies.take(len(body))
}

// adoptBody gives e a copy made for it (an offset op's payload), counted against
// the store's budget.
func (p *Partition) adoptBody(e *journalEntry, body []byte) {
	p.releaseBody(e)
	e.body = body
	e.copied = true
	p.copiedBytes += len(body)
	p.store.bodies.take(len(body))
}

// releaseBody gives back e's copy, which nothing else refers to any more.
func (p *Partition) releaseBody(e *journalEntry) {
	if !e.copied {
		return
	}
	e.copied = false
	p.copiedBytes -= len(e.body)
	p.store.bodies.give(len(e.body))
}

// writeBody hands e's copy to the log, which holds it until written: it is given
// back once the log's written end passes end (releaseWritten).
func (p *Partition) writeBody(e *journalEntry, end uint64) {
	if !e.copied {
		return
	}
	e.copied = false
	p.unwritten = append(p.unwritten, unwrittenBody{sizeBytes: len(e.body), end: end})
}

// unwrittenBody is a copy the log is writing: sizeBytes, for the batch ending at
// end.
type unwrittenBody struct {
	sizeBytes int
	end       uint64
}

// releaseWritten gives back the copies the log has written (all of them once it
// is idle: a request no longer in flight refers to nothing, a cut batch included).
func (p *Partition) releaseWritten() {
	if len(p.unwritten) == 0 {
		return
	}
	idle := p.log.Idle()
	written := p.log.WrittenEnd()
	n := 0
	for ; n < len(p.unwritten) && (idle || p.unwritten[n].end <= written); n++ {
		p.copiedBytes -= p.unwritten[n].sizeBytes
		p.store.bodies.give(p.unwritten[n].sizeBytes)
	}
	if n > 0 {
		rest := copy(p.unwritten, p.unwritten[n:])
		p.unwritten = p.unwritten[:rest]
	}
}
