package partition

import "errors"

// bodyBudget counts the bodies a store holds copies of, against its budget
// (Replication.BodyBudgetBytes): a backup's journal copies of the prepares it took
// (until applied and written by the log), the frames a group's Driver held while
// its Ready was out (host.go), and the batches read back for a peer's repair. The
// primary's bodies are its clients' request buffers, which the server's own limits
// bound.
//
// A prepare whose copy would pass the budget is dropped at ingress (Store.Step),
// as a lossy network would drop it, unless its partition holds no copy yet: so
// every partition can always take its next op, and the primary retransmits the
// rest once the log has written what it holds. What a store holds is thus at most
// the budget plus one batch per partition that takes prepares at that moment.
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

// full reports whether n more bytes would pass the budget.
func (b *bodyBudget) full(n int) bool { return b.inUseBytes+int64(n) > b.budgetBytes }

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
