package partition

import (
	"errors"
	"fmt"
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
	rate := s.repl.scrubBytesPerSecond()
	sc := &s.scrub
	if rate < 0 || !sc.started {
		sc.started, sc.lastNs = true, nowNs
		return 0, nil
	}
	elapsed := max(nowNs-sc.lastNs, 0)
	sc.lastNs = nowNs
	sc.credit = min(sc.credit+int64(float64(rate)*float64(elapsed)/1e9), rate)
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
