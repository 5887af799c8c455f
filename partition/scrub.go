package partition

import (
	"errors"
	"fmt"

	"github.com/iggy-shard/iggy-shard/segment"
)

// ScrubBytesPerSecondDefault is Replication.ScrubBytesPerSecond's default: a
// shard's partitions are re-verified at 8 MiB/s, about a day for 700 GB of
// sealed segments, at a cost of a few milliseconds of CPU a second (xxh3 runs
// at several GB/s) and reads mostly from the page cache.
const ScrubBytesPerSecondDefault = 8 << 20

// scrubStepBytesMax bounds one partition's step of a Scrub call: each is one
// blocking read, and partitions take their steps in turn.
const scrubStepBytesMax = 1 << 20

// storeScrub paces the store's scrubber (segment.Log.Scrub): credit grows with
// time at the rate, up to one second's worth, and each step spends what it
// read.
type storeScrub struct {
	lastNs  int64
	started bool
	credit  int64
	next    int    // the index in order of the partition whose step is next
	buf     []byte // every step's read, the largest step's size (~1 MiB)

	// ScrubAsync's: the partition whose step is in flight (nil when none),
	// what the steps verified and found since the last call, and the steps'
	// completion, bound once.
	inFlight  *Partition
	doneBytes int64
	errs      []error
	onDone    segment.ScrubDone
}

func (r Replication) scrubBytesPerSecond() int64 {
	if r.ScrubBytesPerSecond == 0 {
		return ScrubBytesPerSecondDefault
	}
	return r.ScrubBytesPerSecond
}

// Scrub re-verifies the partitions' sealed segments at
// Replication.ScrubBytesPerSecond, at time nowNs (any monotonic nanosecond
// clock; the first call only starts it): call it on a timer, say every
// 100 ms. Partitions take steps in turn, each one read of at most 1 MiB. A
// batch found corrupt is quarantined (never served again: its polls fail with
// segment.CorruptBatchError) and reported in err, with the others; the pass
// goes on. It returns the bytes verified.
func (s *Store) Scrub(nowNs int64) (scrubbedBytes int64, err error) {
	if !s.scrubCredit(nowNs) {
		return 0, nil
	}
	sc := &s.scrub
	var errs []error
	for idle := 0; sc.credit > 0 && idle < len(s.order); {
		if sc.next >= len(s.order) {
			sc.next = 0
		}
		p := s.order[sc.next]
		sc.next++
		var n int64
		var err error
		n, sc.buf, err = p.log.Scrub(min(sc.credit, scrubStepBytesMax), sc.buf)
		if err != nil {
			errs = append(errs, fmt.Errorf("partition %v: %w", p.key, err))
		}
		if n == 0 {
			idle++ // nothing sealed, or a failed read: the next one
			continue
		}
		idle = 0
		sc.credit -= n
		scrubbedBytes += n
	}
	return scrubbedBytes, errors.Join(errs...)
}

// scrubCredit adds the credit the time since the last call earned, and
// reports false on the first call (which only starts the clock) or when the
// scrubber is off.
func (s *Store) scrubCredit(nowNs int64) bool {
	rate := s.repl.scrubBytesPerSecond()
	sc := &s.scrub
	if rate < 0 || !sc.started {
		sc.started, sc.lastNs = true, nowNs
		return false
	}
	elapsed := max(nowNs-sc.lastNs, 0)
	sc.lastNs = nowNs
	sc.credit = min(sc.credit+int64(float64(rate)*float64(elapsed)/1e9), rate)
	return true
}

// ScrubAsync is Scrub without waiting for reads: each step's read goes
// through the partition's storage (the shard's disk ring) and its batches are
// verified in its completion, from PollIO, which starts the next step while
// credit remains. One step is in flight at a time. It returns the bytes
// verified and the corruption found (and read errors) since the last call;
// the first call only starts the clock. Call it on a timer, as Scrub, and not
// both.
func (s *Store) ScrubAsync(nowNs int64) (scrubbedBytes int64, err error) {
	sc := &s.scrub
	if sc.onDone == nil {
		sc.onDone = s.scrubStepDone
	}
	if s.scrubCredit(nowNs) && sc.inFlight == nil {
		s.scrubNext()
	}
	scrubbedBytes, err = sc.doneBytes, errors.Join(sc.errs...)
	sc.doneBytes = 0
	clear(sc.errs)
	sc.errs = sc.errs[:0]
	return scrubbedBytes, err
}

// ScrubInFlight reports whether a step of ScrubAsync is in flight: its
// caller's timer keeps running while one is, though the call returned no
// bytes yet (they come with the next call).
func (s *Store) ScrubInFlight() bool { return s.scrub.inFlight != nil }

// scrubNext starts the next step, the partitions taking turns, while credit
// remains; a partition with nothing to scrub now passes its turn.
func (s *Store) scrubNext() {
	sc := &s.scrub
	for idle := 0; sc.credit > 0 && idle < len(s.order); idle++ {
		if sc.next >= len(s.order) {
			sc.next = 0
		}
		p := s.order[sc.next]
		sc.next++
		started, buf, err := p.log.ScrubAsync(min(sc.credit, scrubStepBytesMax), sc.buf, sc.onDone)
		sc.buf = buf
		if err != nil {
			sc.errs = append(sc.errs, fmt.Errorf("partition %v: %w", p.key, err))
		}
		if started {
			sc.inFlight = p
			s.activate(p) // its completion comes from PollIO
			return
		}
	}
}

// scrubStepDone is a step's completion: it counts what the step verified and
// starts the next. A step that verified nothing (a failed read) starts none:
// the next call does, so a failing disk is not read in a loop.
func (s *Store) scrubStepDone(n int64, buf []byte, err error) {
	sc := &s.scrub
	p := sc.inFlight
	sc.inFlight = nil
	sc.buf = buf
	if err != nil {
		sc.errs = append(sc.errs, fmt.Errorf("partition %v: %w", p.key, err))
	}
	sc.credit -= n
	sc.doneBytes += n
	if n > 0 {
		s.scrubNext()
	}
}
