package partition

import (
	"bytes"
	"runtime"
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

// frameLender is a test cluster's lender of the frames it steps into one store:
// a frame lent is poisoned when it comes back, as an arena buffer is reused at
// once, so that a store that kept a pointer into it writes or sends garbage.
type frameLender struct {
	frame   []byte // the frame being stepped, nil once lent
	loans   map[uint64][]byte
	next    uint64
	outMost int
	// refuse, when set, refuses every loan.
	refuse bool
}

func newFrameLender() *frameLender { return &frameLender{loans: make(map[uint64][]byte)} }

func (l *frameLender) Lend(body []byte) (uint64, bool) {
	if l.refuse || l.frame == nil || &l.frame[wire.HeaderSize] != &body[0] {
		return 0, false
	}
	l.next++
	l.loans[l.next], l.frame = l.frame, nil
	l.outMost = max(l.outMost, len(l.loans))
	return l.next, true
}

func (l *frameLender) Return(loan uint64) {
	frame, ok := l.loans[loan]
	if !ok {
		panic("partition test: a loan returned twice, or never made")
	}
	delete(l.loans, loan)
	for i := range frame {
		frame[i] = 0xA5
	}
}

// newLendingCluster is newTestCluster whose stores are lent the frames they step,
// each store at most lentMax at once.
func newLendingCluster(t *testing.T, seed uint64, cfg Config, lentMax int) *testCluster {
	c := newTestCluster(t, seed, 3, cfg)
	for i, s := range c.stores {
		s.loans.max = lentMax
		c.lenders[i] = newFrameLender()
	}
	return c
}

// checkLoansReturned checks that every store gave back every copy and frame lent
// (checkBodiesGiven), and that every replica's log holds the primary's bytes (a frame given back while still
// referred to would have been poisoned under the log's write).
func (c *testCluster) checkLoansReturned() {
	c.t.Helper()
	c.checkBodiesGiven()
	want := c.logBytes(c.leader)
	for i := range c.stores {
		if got := c.logBytes(i); !bytes.Equal(got, want) {
			c.t.Fatalf("replica %d's log (%d bytes) differs from the primary's (%d bytes)", i, len(got), len(want))
		}
	}
}

// A backup journals a prepare's body in the frame it came in, lent by its caller
// until the log has written it: no copy, no buffer of its own, and the frame given
// back, intact until then, once written (a stream of 128 KB prepares, one in flight,
// at the defaults and with enforce_fsync, whose journal file writes from the frame
// too).
func TestBackupJournalsTheLentFrame(t *testing.T) {
	for _, cfg := range []Config{{PartitionsCount: 1}, fsyncConfig()} {
		c := newLendingCluster(t, 43, cfg, LentBodiesMaxDefault)
		rec := newSendRecorder()
		const sends = 40
		for i := range sends {
			token := uint64(i + 1)
			c.send(makeBatch(t, uint64(i)*16, 16, 8<<10), 10_000+uint64(i), rec, token)
			c.settle()
			for _, s := range c.stores {
				s.WaitIdle()
			}
			c.settle()
			if _, ok := rec.acked[token]; !ok {
				t.Fatalf("enforce_fsync %v: send %d not acknowledged (failed: %v)", cfg.EnforceFsync, token, rec.failed[token])
			}
		}
		for i, s := range c.stores {
			if i == c.leader {
				continue
			}
			if _, taken := s.LentBodies(); taken < sends {
				t.Errorf("enforce_fsync %v: backup %d journaled %d of %d prepares in their frames", cfg.EnforceFsync, i, taken, sends)
			}
			if made := s.bodies.buffers.made; made != 0 {
				t.Errorf("enforce_fsync %v: backup %d made %d buffers for bodies it was lent", cfg.EnforceFsync, i, made)
			}
		}
		c.checkLoansReturned()
	}
}

// A store holds at most LentBodiesMax frames at once: the prepares a backup takes
// while its log has not written the ones before are copied past it, and a lender
// that refuses gets every body copied. The bound is reached and given back round
// after round; every frame lent comes back, and the logs agree.
func TestBackupLendsBoundedFrames(t *testing.T) {
	const rounds, perRound = 20, 2*LentBodiesMaxDefault + 2
	for _, refuse := range []bool{false, true} {
		c := newLendingCluster(t, 47, Config{PartitionsCount: 1}, LentBodiesMaxDefault)
		for _, l := range c.lenders {
			l.refuse = refuse
		}
		rec := newSendRecorder()
		want := LentBodiesMaxDefault
		if refuse {
			want = 0
		}
		sent := 0
		for r := range rounds {
			for range perRound {
				sent++
				c.send(makeBatch(t, uint64(sent-1)*4, 4, 16<<10), 10_000+uint64(sent), rec, uint64(sent))
			}
			// Frames only: no storage completion runs, so no log write ends a loan.
			for round := 0; c.deliverOne(); round++ {
				if round == 10_000 {
					t.Fatal("the frames never stop")
				}
			}
			for i, s := range c.stores {
				if i == c.leader {
					continue
				}
				out, taken := s.LentBodies()
				if out != want || taken != uint64((r+1)*want) || c.lenders[i].outMost != want {
					t.Fatalf("refuse %v, round %d: backup %d holds %d frames, took %d (at most %d at once): want %d a round",
						refuse, r, i, out, taken, c.lenders[i].outMost, want)
				}
				if copied := s.partitions[testKey].bodiesCopiedNotLent(); copied != perRound-want {
					t.Fatalf("refuse %v, round %d: backup %d holds %d bodies copied, want %d past the bound", refuse, r, i, copied, perRound-want)
				}
			}
			c.settle()
			for _, s := range c.stores {
				s.WaitIdle()
			}
			c.settle()
			if len(rec.acked) != sent {
				t.Fatalf("refuse %v, round %d: %d of %d sends acknowledged (failed: %v)", refuse, r, len(rec.acked), sent, rec.failed)
			}
			c.checkLoansReturned()
		}
	}
}

// Lending allocates no body per prepare on a backup: its steps of 1 MB prepares
// (the benchmark's batch), the collector free to empty the copies' pool, allocate
// less than a 64 KiB body in all.
func TestBackupLendingAllocatesNothingPerPrepare(t *testing.T) {
	c := newLendingCluster(t, 53, Config{PartitionsCount: 1}, LentBodiesMaxDefault)
	rec := newSendRecorder()
	backup := c.stores[1]
	var stepped, mallocs, allocBytes uint64
	var before, after runtime.MemStats
	deliver := func() bool {
		if len(c.queue) == 0 {
			return false
		}
		f := c.queue[0]
		if f.to != 1 || f.header().Command != wire.CommandPrepare {
			return c.deliverOne()
		}
		queued := len(c.queue) - 1
		runtime.ReadMemStats(&before)
		c.deliverOne()
		runtime.ReadMemStats(&after)
		stepped++
		// The test's network copies each frame the backup sends (its PrepareOk,
		// the prepare down the chain): one buffer each, not the backup's.
		var sent uint64
		for _, out := range c.queue[queued:] {
			sent += uint64(cap(out.buf))
		}
		mallocs += after.Mallocs - before.Mallocs - uint64(len(c.queue)-queued)
		allocBytes += after.TotalAlloc - before.TotalAlloc - sent
		return true
	}
	const warm, sends = 5, 20
	for i := range warm + sends {
		if i == warm {
			stepped, mallocs, allocBytes = 0, 0, 0
		}
		token := uint64(i + 1)
		c.send(makeBatch(t, uint64(i)*1000, 1000, 1000), 10_000+uint64(i), rec, token)
		for round := 0; ; round++ {
			if round == 100_000 {
				t.Fatalf("send %d never settles", token)
			}
			moved := deliver()
			for _, s := range c.stores {
				if s.PollIO() > 0 {
					moved = true
				}
			}
			if !moved {
				break
			}
		}
		for _, s := range c.stores {
			s.WaitIdle()
		}
		if _, ok := rec.acked[token]; !ok {
			t.Fatalf("send %d not acknowledged (failed: %v)", token, rec.failed[token])
		}
	}
	if stepped != sends {
		t.Fatalf("the backup stepped %d prepares of %d sends", stepped, sends)
	}
	if _, taken := backup.LentBodies(); taken < sends {
		t.Fatalf("the backup was lent %d frames of %d", taken, sends)
	}
	// What remains is small objects of the simulated disk and of the test's
	// network (its queue), a few a prepare, and no body.
	if allocBytes >= 64<<10 {
		t.Fatalf("%d prepares of 1 MB stepped on the backup allocated %d objects, %d bytes", sends, mallocs, allocBytes)
	}
	t.Logf("%d prepares of 1 MB stepped on the backup: %d objects, %d bytes allocated", sends, mallocs, allocBytes)
	c.checkLoansReturned()
}

// A loan that ends while its group's Ready is out comes back only once the Ready
// is done: the Ready's frames and journal file write may still point into the
// frame.
func TestLoanEndedDuringAReadyComesBackAfterIt(t *testing.T) {
	c := newLendingCluster(t, 59, fsyncConfig(), LentBodiesMaxDefault)
	rec := newSendRecorder()
	c.send(makeBatch(t, 0, 3, 40), 10_000, rec, 1)
	backup := c.stores[1]
	p := backup.partitions[testKey]
	for !p.holding() {
		if !c.deliverOne() {
			t.Fatal("the backup never wrote its journal")
		}
	}
	l := c.lenders[1]
	l.frame = make([]byte, 2*wire.HeaderSize)
	ticket, _ := l.Lend(l.frame[wire.HeaderSize:])
	backup.loans.out++
	p.endLoan(bodyLoan{lender: l, ticket: ticket})
	if _, ok := l.loans[ticket]; !ok {
		t.Fatal("a loan came back while its group's Ready was out")
	}
	c.settle()
	backup.WaitIdle()
	c.settle()
	if _, ok := l.loans[ticket]; ok || p.holding() {
		t.Fatalf("the loan did not come back once the Ready was done (Ready out: %v)", p.holding())
	}
	if _, ok := rec.acked[1]; !ok {
		t.Fatalf("send 1 not acknowledged (failed: %v)", rec.failed[1])
	}
	c.checkLoansReturned()
}

// A backup deleted or closed with frames on loan gives them all back, the
// journal's and those its log was writing.
func TestBackupGivesLentFramesBackWhenClosed(t *testing.T) {
	c := newLendingCluster(t, 61, Config{PartitionsCount: 1}, LentBodiesMaxDefault)
	rec := newSendRecorder()
	for i := range 3 {
		c.send(makeBatch(t, uint64(i)*4, 4, 16<<10), 10_000+uint64(i), rec, uint64(i+1))
	}
	for round := 0; c.deliverOne(); round++ {
		if round == 10_000 {
			t.Fatal("the frames never stop")
		}
	}
	for i := 1; i < 3; i++ {
		if out, _ := c.stores[i].LentBodies(); out != 3 {
			t.Fatalf("backup %d holds %d frames, want 3", i, out)
		}
	}
	if err := c.stores[1].Delete(testKey); err != nil {
		t.Fatal(err)
	}
	if err := c.stores[2].Close(); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < 3; i++ {
		if out, _ := c.stores[i].LentBodies(); out != 0 || len(c.lenders[i].loans) != 0 {
			t.Errorf("backup %d closed with %d frames on loan (its lender counts %d)", i, out, len(c.lenders[i].loans))
		}
	}
}

// bodiesCopiedNotLent counts the bodies p holds copies of, in its journal and in
// its log's writes.
func (p *Partition) bodiesCopiedNotLent() int {
	n := 0
	for op := p.journal.firstOp; op <= p.journal.lastOp(); op++ {
		if e := p.journal.at(op); e != nil && e.copied && e.loan.lender == nil {
			n++
		}
	}
	for _, u := range p.copies.unwritten {
		if u.loan.lender == nil {
			n++
		}
	}
	return n
}
