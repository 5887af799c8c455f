package segment

import "github.com/iggy-shard/iggy-shard/wire"

// A batch's checksum is verified once, when it is first read after it was
// written or recovered; the segment remembers the verified byte ranges, and a
// read of whole batches inside them is served without checking them again
// (the official SDKs do not verify on poll, so the server's check is the
// guarantee, and checking each batch on every poll cost a pass over every byte
// served). What can change a verified byte afterwards is the disk itself, and
// that is the scrubber's to find (scrub.go): it re-reads sealed segments at a
// set rate, and a batch it finds corrupt is quarantined, never served again.
// A segment truncated (a rewind) forgets what lies past the cut; a recovered
// log starts with nothing verified.

// byteRange is [start, end) of a segment's .log.
type byteRange struct{ start, end int64 }

// verifiedRangesMax bounds the ranges a segment remembers. Reads are mostly
// sequential, so the ranges of a segment merge into one or two; past the
// bound the smallest is forgotten, which only costs its batches one more
// verification. With corruptBatchesMax, a segment's checks hold at most
// 8*16 + 4*24 bytes beyond their headers (~300 bytes), and only segments that
// were read have them.
const verifiedRangesMax = 8

// corruptBatchesMax bounds the quarantined batches a segment lists. Past it
// the scrubber still forgets a corrupt batch's range, so a poll verifies it
// again and fails on it as a poll of an unverified corrupt batch always has.
const corruptBatchesMax = 4

// segmentChecks is what a segment knows about its batches' checksums; nil
// until one of its batches is verified.
type segmentChecks struct {
	verified []byteRange // sorted, disjoint, not touching
	corrupt  []corruptBatch
}

// corruptBatch is a batch the scrubber found corrupt, with what failed.
type corruptBatch struct {
	position int64
	err      error
}

func (c *segmentChecks) covers(start, end int64) bool {
	for _, r := range c.verified {
		if r.start <= start {
			if end <= r.end {
				return true
			}
			continue
		}
		return false
	}
	return false
}

// add merges [start, end) into the verified ranges.
func (c *segmentChecks) add(start, end int64) {
	v := c.verified
	i := 0
	for i < len(v) && v[i].end < start {
		i++
	}
	j := i
	for j < len(v) && v[j].start <= end {
		start, end = min(start, v[j].start), max(end, v[j].end)
		j++
	}
	if i == j {
		v = append(v, byteRange{})
		copy(v[i+1:], v[i:])
	} else {
		v = append(v[:i+1], v[j:]...)
	}
	v[i] = byteRange{start, end}
	if len(v) > verifiedRangesMax {
		smallest := 0
		for k := range v {
			if v[k].end-v[k].start < v[smallest].end-v[smallest].start {
				smallest = k
			}
		}
		v = append(v[:smallest], v[smallest+1:]...)
	}
	c.verified = v
}

// forget removes [start, end) from the verified ranges.
func (c *segmentChecks) forget(start, end int64) {
	var kept [verifiedRangesMax + 1]byteRange
	out := kept[:0]
	for _, r := range c.verified {
		if r.end <= start || r.start >= end {
			out = append(out, r)
			continue
		}
		if r.start < start {
			out = append(out, byteRange{r.start, start})
		}
		if r.end > end {
			out = append(out, byteRange{end, r.end})
		}
	}
	c.verified = c.verified[:0]
	for _, r := range out {
		c.add(r.start, r.end)
	}
}

// quarantine forgets the batch at [position, end) and lists it as corrupt.
func (c *segmentChecks) quarantine(position, end int64, err error) {
	c.forget(position, end)
	for _, b := range c.corrupt {
		if b.position == position {
			return
		}
	}
	if len(c.corrupt) < corruptBatchesMax {
		c.corrupt = append(c.corrupt, corruptBatch{position, err})
	}
}

// corruptAt returns what the scrubber found wrong with the batch at position,
// or nil.
func (c *segmentChecks) corruptAt(position int64) error {
	for _, b := range c.corrupt {
		if b.position == position {
			return b.err
		}
	}
	return nil
}

// checks returns seg's checks, making them on first use.
func (seg *segment) checksMade() *segmentChecks {
	if seg.checks == nil {
		seg.checks = &segmentChecks{}
	}
	return seg.checks
}

// forgetFrom forgets what was verified or found corrupt at or past position:
// the segment was cut there and will hold other batches.
func (seg *segment) forgetFrom(position int64) {
	c := seg.checks
	if c == nil {
		return
	}
	c.forget(position, 1<<62)
	kept := c.corrupt[:0]
	for _, b := range c.corrupt {
		if b.position < position {
			kept = append(kept, b)
		}
	}
	c.corrupt = kept
}

// verifyBatch checks the stored batch b at position of seg, unless it lies in
// a verified range, and remembers it verified. A batch the scrubber
// quarantined fails with what it found.
func (l *Log) verifyBatch(seg *segment, position int64, b []byte, base uint64) error {
	if c := seg.checks; c != nil {
		if err := c.corruptAt(position); err != nil {
			return &CorruptBatchError{Segment: seg.baseOffset, Position: position, Offset: base, Err: err}
		}
		if c.covers(position, position+int64(len(b))) {
			return nil
		}
	}
	l.stats.BatchesVerified++
	if err := checkStoredBatchAt(b, base); err != nil {
		return &CorruptBatchError{Segment: seg.baseOffset, Position: position, Offset: base, Err: err}
	}
	seg.checksMade().add(position, position+int64(len(b)))
	return nil
}

// checkStoredBatchAt verifies a stored batch and that it is the one the index
// puts at base.
func checkStoredBatchAt(b []byte, base uint64) error {
	if err := wire.CheckStoredBatch(b); err != nil {
		return err
	}
	if h, _ := wire.ViewBatchHeader(b); h.BaseOffset() != base {
		return ErrBatchMismatch
	}
	return nil
}
