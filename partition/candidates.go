package partition

// The consensus core's repair candidates (vsr.CopyBudget): the bodies it copies
// and keeps across Steps while it repairs below the chain of headers it trusts,
// until the chain reaches them. They count against the store's body budget with
// the partition's own copies, and are admitted as they are (admitsBody).

// TakeCopy implements vsr.CopyBudget.
func (j *journalStorage) TakeCopy(op uint64, n int) bool {
	p := (*Partition)(j)
	if !p.admitsBody(op, n, true) {
		return false
	}
	p.takeBody(n)
	p.copies.candidateBytes += n
	return true
}

// GiveCopy implements vsr.CopyBudget.
func (j *journalStorage) GiveCopy(n int) {
	p := (*Partition)(j)
	p.copies.candidateBytes -= n
	p.store.bodies.give(n)
}

// releaseCandidates gives back what the core of a stopped group held.
func (p *Partition) releaseCandidates() {
	b := &p.store.bodies
	if p.copies.candidateBytes > 0 {
		b.give(p.copies.candidateBytes)
		p.copies.candidateBytes = 0
	}
	if b.overFor == p {
		b.overFor = nil
	}
}
