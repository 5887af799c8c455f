package partition

import "github.com/iggy-shard/iggy-shard/wire"

// A backup's journal needs the body of each prepare it takes beyond Step: the
// frame it came in is the caller's, released when Step returns, so the body is
// copied (memory.go). A caller whose frames live in buffers of their own (the
// shard's arena: a large replica frame is received straight into one) can lend
// the frame instead, through StepLending: the journal keeps the frame's bytes, the
// log writes them from there, and the frame goes back to its lender once nothing
// refers to it. On a backup taking 1 MB prepares the copy was a pass over every
// byte on the core its primary and client share (BenchmarkPinnedProduce).
//
// A loan is bounded: a store holds at most Replication.LentBodiesMax frames at
// once (the arena has few buffers of a large frame's class, and its connections
// need them to receive the next frames), and the lender may refuse one; either
// way the body is copied, as without a lender. A lent body counts against the
// body budget like a copy.
//
// A loan ends when its body is written by the log (releaseWritten) or leaves the
// journal without going there (releaseBody). The frame goes back only while the
// group has no Ready out: a Ready's frames (a prepare forwarded down the chain, a
// repair answer read from the journal) and its journal file write may point into
// the body until the Ready is done, and an arena buffer, unlike a heap copy, is
// reused at once. The loans ended meanwhile wait in the partition's list until
// afterRun finds no Ready out, or until the partition closes (its storage quiet).
// The lender may hold the frame past its loan: a forward the Outbox sent from it
// without a copy keeps it until the send is done (server/framelend.go).

// BodyLender lends the store the frame of a replica-plane frame given to
// StepLending, past the call.
type BodyLender interface {
	// Lend keeps the frame whose body is body (the one StepLending was given)
	// after StepLending returns, and names the loan; ok false when it cannot, or
	// body is not in that frame's memory (the store copies it then). Called at
	// most once per StepLending, during it.
	Lend(body []byte) (loan uint64, ok bool)
	// Return ends a loan: nothing in the store refers to the frame any more.
	Return(loan uint64)
}

// LentBodiesMaxDefault is Replication.LentBodiesMax when 0. The prepares of a
// default batch (1,000 messages of 1 KB come to ~1.06 MB with the headers)
// arrive in the arena's 1.25 MiB class (shard.ArenaConfigDefault: 64 buffers a
// shard), which the connections also receive their large batches into. Four
// in flight on one shard's backups covers a producer with a batch or two in
// flight per partition, and leaves the rest of the class to receiving; past it
// a backup copies.
const LentBodiesMaxDefault = 4

// bodyLoan is a frame lent to the store; lender nil when none is.
type bodyLoan struct {
	lender BodyLender
	ticket uint64
}

// lending is the store's side of the loans: the frame being stepped (offer, with
// its lender), the loans out and their bound.
type lending struct {
	offer       []byte
	offerLender BodyLender
	out         int
	max         int
	// lent counts the loans taken, for tests.
	lent uint64
}

// StepLending is Step for a frame whose lender may let the store keep it: a
// prepare's body is then journaled and written from the frame itself, not a copy
// (see BodyLender). A frame not lent is the caller's again when StepLending
// returns, as with Step.
func (s *Store) StepLending(k Key, h *wire.GenericHeader, body []byte, lender BodyLender) error {
	s.loans.offer, s.loans.offerLender = body, lender
	err := s.Step(k, h, body)
	s.loans.offer, s.loans.offerLender = nil, nil
	return err
}

// borrow lends body to the journal when it is the frame being stepped and a loan
// is allowed; false: copy it.
func (s *Store) borrow(body []byte) (bodyLoan, bool) {
	l := &s.loans
	if l.offerLender == nil || len(body) == 0 || len(l.offer) != len(body) || &l.offer[0] != &body[0] || l.out >= l.max {
		return bodyLoan{}, false
	}
	ticket, ok := l.offerLender.Lend(body)
	if !ok {
		return bodyLoan{}, false
	}
	loan := bodyLoan{lender: l.offerLender, ticket: ticket}
	l.offer, l.offerLender = nil, nil // lent once
	l.out++
	l.lent++
	return loan, true
}

// endLoan ends p's loan of a frame: given back now if p's group has no Ready out,
// else once it has none (returnLoans).
func (p *Partition) endLoan(loan bodyLoan) {
	if p.holding() {
		p.loansEnded = append(p.loansEnded, loan)
		return
	}
	p.store.giveBack(loan)
}

// returnLoans gives back the loans that ended while p's group had a Ready out.
func (p *Partition) returnLoans() {
	for i, loan := range p.loansEnded {
		p.store.giveBack(loan)
		p.loansEnded[i] = bodyLoan{}
	}
	p.loansEnded = p.loansEnded[:0]
}

func (s *Store) giveBack(loan bodyLoan) {
	s.loans.out--
	loan.lender.Return(loan.ticket)
}

// LentBodies is how many frames the store holds on loan now, and has taken since
// it was made: for metrics and tests.
func (s *Store) LentBodies() (out int, taken uint64) { return s.loans.out, s.loans.lent }
