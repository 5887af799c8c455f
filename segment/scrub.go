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
	seg := l.scrubSegment()
	if seg == nil {
		return 0, buf, nil
	}
	if err := l.loadIndex(seg); err != nil {
		l.scrub.segment, l.scrub.position = seg.baseOffset+1, 0 // its reads fail already; go on
		return 0, buf, err
	}
	n := seg.index.len()
	first := sort.Search(n, func(i int) bool { return seg.index.position(i) >= l.scrub.position })
	if first == n {
		l.scrub.segment, l.scrub.position = seg.baseOffset+1, 0
		return 0, buf, nil
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
	if cap(buf) < int(end-start) {
		buf = make([]byte, end-start)
	}
	buf = buf[:end-start]
	r := &Request{Op: OpRead, File: seg.logFile, Offset: start, Data: buf}
	if err := l.wait(r); err != nil {
		return 0, buf, fmt.Errorf("segment: scrub %s at %d: %w", segmentLogName(seg.baseOffset), start, err)
	}
	var found error
	for i := first; i <= last; i++ {
		position := seg.index.position(i)
		next := end
		if i+1 < n && i < last {
			next = seg.index.position(i + 1)
		}
		b := buf[min(position-start, r.Result):min(next-start, r.Result)]
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
	l.stats.ScrubbedBytes += uint64(end - start)
	l.scrub.segment, l.scrub.position = seg.baseOffset, end
	return end - start, buf, found
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
