package segment

import (
	"fmt"
	"sort"

	"github.com/iggy-shard/iggy-shard/wire"
)

// The scrubber re-reads sealed segments, oldest first and round again, and
// verifies every batch: bit rot under a range that reads trust (verified.go)
// is found within one round, and the batch is quarantined, never served
// again. Its pace is its caller's: Scrub reads about maxBytes a call, so a
// caller calling it on a timer with bytes = rate * elapsed keeps a rate
// (partition.Store.Scrub).

// scrubCursor is where the next Scrub starts: the batch at or after position
// in the sealed segment whose base offset is at or after segment.
type scrubCursor struct {
	segment  uint64
	position int64
}

// Scrub verifies the whole batches of sealed segments from where the last
// call stopped, about maxBytes of them (at least one batch, at most the rest
// of a segment), with one blocking read into buf, which it grows when short
// and returns (the caller keeps one for all its logs: a log keeps none). It
// returns the bytes it verified (0 when no segment is sealed) and the first
// corruption it found, a CorruptBatchError, after quarantining that batch; an
// I/O error leaves the cursor where it was.
func (l *Log) Scrub(maxBytes int64, buf []byte) (int64, []byte, error) {
	if l.closed {
		return 0, buf, wire.ErrSegmentClosed
	}
	step, ok, err := l.planScrub(maxBytes)
	if !ok {
		return 0, buf, err
	}
	buf = step.buffer(buf)
	r := &Request{Op: OpRead, File: step.seg.logFile, Offset: step.start, Data: buf}
	if err := l.wait(r); err != nil {
		return 0, buf, step.readError(err)
	}
	n, found := l.finishScrub(step, buf, r.Result)
	return n, buf, found
}

// ScrubDone learns what a step of ScrubAsync found: the bytes verified, the
// caller's buffer back, and the first corruption found (a CorruptBatchError,
// quarantined) or the read's error.
type ScrubDone func(scrubbedBytes int64, buf []byte, err error)

// ScrubAsync is a step of Scrub that does not wait for its read: it submits
// it into buf (grown when short: the caller leaves it untouched until done
// runs) and verifies the batches in the read's completion, which calls done
// from Storage.Poll. It reports false, and done never runs, when there is no
// step to take now (the log is closed, nothing is sealed, the cursor is at a
// segment's end, or an index failed to load, which err reports). One step of
// a log is in flight at a time. Loading a cold index before the read still
// waits, as a poll's does.
func (l *Log) ScrubAsync(maxBytes int64, buf []byte, done ScrubDone) (bool, []byte, error) {
	if l.closed {
		return false, buf, wire.ErrSegmentClosed
	}
	if l.scrubbing.done != nil {
		panic("segment: ScrubAsync while a step is in flight")
	}
	step, ok, err := l.planScrub(maxBytes)
	if !ok {
		return false, buf, err
	}
	buf = step.buffer(buf)
	r := l.request(OpRead, purposeScrub, step.seg)
	r.File = step.seg.logFile
	r.Offset = step.start
	r.Data = buf
	l.scrubbing = scrubInFlight{step: step, done: done}
	l.st.Submit(r)
	return true, buf, nil
}

// scrubInFlight is ScrubAsync's step while its read is in flight.
type scrubInFlight struct {
	step scrubStep
	done ScrubDone
}

// completeScrub is the completion of ScrubAsync's read.
func (l *Log) completeScrub(r *Request) {
	step, done := l.scrubbing.step, l.scrubbing.done
	l.scrubbing = scrubInFlight{}
	buf, result, readErr := r.Data, r.Result, r.Err
	l.release(r) // done may start the next step
	switch {
	case readErr != nil:
		done(0, buf, step.readError(readErr))
	case step.seg.index == nil:
		// The index left the cache during the read: the step is taken again
		// at the next call, from the same place.
		done(0, buf, nil)
	default:
		n, found := l.finishScrub(step, buf, result)
		done(n, buf, found)
	}
}

// scrubStep is one step of the scrubber: batches first..last of seg's index,
// the bytes [start, end) of its .log.
type scrubStep struct {
	seg         *segment
	first, last int
	start, end  int64
}

func (st scrubStep) buffer(buf []byte) []byte {
	if cap(buf) < int(st.end-st.start) {
		buf = make([]byte, st.end-st.start)
	}
	return buf[:st.end-st.start]
}

func (st scrubStep) readError(err error) error {
	return fmt.Errorf("segment: scrub %s at %d: %w", segmentLogName(st.seg.baseOffset), st.start, err)
}

// planScrub finds the scrubber's next step, about maxBytes long from the
// cursor: false when there is none now (nothing sealed, or the cursor was
// at a segment's end and moved on), or its index failed to load (err).
func (l *Log) planScrub(maxBytes int64) (scrubStep, bool, error) {
	seg := l.scrubSegment()
	if seg == nil {
		return scrubStep{}, false, nil
	}
	if err := l.loadIndex(seg); err != nil {
		l.scrub.segment, l.scrub.position = seg.baseOffset+1, 0 // its reads fail already; go on
		return scrubStep{}, false, err
	}
	n := seg.index.len()
	first := sort.Search(n, func(i int) bool { return seg.index.position(i) >= l.scrub.position })
	if first == n {
		l.scrub.segment, l.scrub.position = seg.baseOffset+1, 0
		return scrubStep{}, false, nil
	}
	start := seg.index.position(first)
	last := first
	end := seg.sizeBytes
	for i := first + 1; i < n; i++ {
		if seg.index.position(i)-start >= maxBytes {
			end = seg.index.position(i)
			break
		}
		last = i
	}
	return scrubStep{seg: seg, first: first, last: last, start: start, end: end}, true, nil
}

// finishScrub verifies a step's batches, read bytes of them in buf, and moves
// the cursor past them: it returns the bytes verified and the first
// corruption found, after quarantining every corrupt batch.
func (l *Log) finishScrub(st scrubStep, buf []byte, read int64) (int64, error) {
	seg := st.seg
	n := seg.index.len()
	var found error
	for i := st.first; i <= st.last; i++ {
		position := seg.index.position(i)
		next := st.end
		if i+1 < n && i < st.last {
			next = seg.index.position(i + 1)
		}
		b := buf[min(position-st.start, read):min(next-st.start, read)]
		err := error(ErrTornBatch)
		if int64(len(b)) == next-position {
			err = checkStoredBatchAt(b, seg.index.offset(i))
		}
		if err != nil {
			l.stats.ScrubCorrupt++
			seg.checksMade().quarantine(position, next, err)
			if found == nil {
				found = &CorruptBatchError{Segment: seg.baseOffset, Position: position, Offset: seg.index.offset(i), Err: err}
			}
			continue
		}
		seg.checksMade().add(position, next)
	}
	l.stats.ScrubbedBytes += uint64(st.end - st.start)
	l.scrub.segment, l.scrub.position = seg.baseOffset, st.end
	return st.end - st.start, found
}

// scrubSegment is the sealed segment the cursor is in, or the oldest sealed
// one when it ran past the last (a new round), or nil when none is sealed.
func (l *Log) scrubSegment() *segment {
	for _, seg := range l.segments {
		if seg.state != segmentSealed {
			break // sealed segments are a prefix of the log
		}
		if seg.baseOffset > l.scrub.segment {
			l.scrub.segment, l.scrub.position = seg.baseOffset, 0
			return seg
		}
		if seg.baseOffset == l.scrub.segment && l.scrub.position < seg.sizeBytes {
			return seg
		}
	}
	if len(l.segments) == 0 || l.segments[0].state != segmentSealed {
		return nil
	}
	l.scrub.segment, l.scrub.position = l.segments[0].baseOffset, 0
	return l.segments[0]
}
