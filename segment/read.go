package segment

import (
	"errors"
	"fmt"
	"sort"

	"github.com/iggy-shard/iggy-shard/wire"
)

// PollingKind is the protocol's polling strategy kind (binary-protocol-encodings.md).
type PollingKind uint8

const (
	PollOffset    PollingKind = 1 // from Query.Value
	PollTimestamp PollingKind = 2 // from the first batch stamped at or after Query.Value µs
	PollFirst     PollingKind = 3 // from the oldest stored offset
	PollLast      PollingKind = 4 // the newest Query.Count messages
	PollNext      PollingKind = 5 // after the consumer's stored offset, or from the oldest
)

// Query is one read of the log.
type Query struct {
	Kind  PollingKind
	Value uint64 // offset (PollOffset) or µs timestamp (PollTimestamp)
	Count uint32 // messages wanted
	// The consumer whose stored offset PollNext continues after.
	ConsumerKind ConsumerKind
	ConsumerID   uint32
	// MaxBytes bounds the stored bytes one read takes into memory; the read stops
	// after the batch that crosses it (one batch is always read whole). 0 means
	// DefaultReadBytesMax.
	MaxBytes int64
}

// DefaultReadBytesMax bounds a read when Query.MaxBytes is 0: a poll of u32::MAX
// messages must not become a read of the whole partition.
const DefaultReadBytesMax = 64 << 20

// Polled is the answer to a read: stored batch records in offset order, each sent
// as [Header][Frames]. A record is a stored batch as it is (Header and Frames are its
// own bytes) or, at either end of the range, a slice of one made by wire.SliceBatch
// (Header is a recomputed header, Frames a sub-slice of the stored frames), so a
// server sends what the producer sent without re-encoding. Every batch was verified
// (wire.CheckStoredBatch) after it was read: corrupt bytes are never in a Polled.
//
// A Polled is reused from read to read: its records slice grows to the largest read
// and stays, and so does its buffer unless Alloc provides it, so steady-state reads
// do not allocate. The bytes it refers to are valid until its next use.
type Polled struct {
	Records       []Record
	MessageCount  uint32
	CurrentOffset uint64 // the partition's newest offset when read (0 when empty)
	// Alloc, when set, provides the read's buffer once the read is planned (before
	// its I/O is submitted, from inside ReadAsync or a completion that finished an
	// index load): a buffer of at least n bytes, the stored bytes the read takes.
	// The Polled holds it until TakeBuffer, so the owner of a pool of buffers can
	// lend one per read, sized to it, and take it back once the records are sent.
	// Unset, the buffer grows to the largest read and stays.
	Alloc func(n int) []byte

	buf      []byte
	runs     []readRun // the read's runs, one per segment (planRecords)
	headers  [2][wire.BatchHeaderSize]byte
	start    uint64
	limit    uint64
	pending  int
	err      error
	done     func(*Polled, error)
	log      *Log
	finished bool // Read's completion flag
}

// HoldsBuffer reports whether the Polled holds a read buffer: with Alloc, whether
// its last read took one.
func (p *Polled) HoldsBuffer() bool { return p.buf != nil }

// TakeBuffer returns the read buffer, which the Polled forgets (nil when it holds
// none): for the Alloc that lent it, once nothing refers to the records any more.
func (p *Polled) TakeBuffer() []byte {
	b := p.buf
	p.buf = nil
	// The records slice into the buffer: forget them too, or the Polled would keep
	// the buffer alive after its owner dropped it.
	clear(p.Records)
	p.Records = p.Records[:0]
	p.MessageCount = 0
	return b
}

// Record is one batch record of a read.
type Record struct {
	Segment  uint64 // base offset of the segment (its file name)
	Position int64  // file position of the stored batch in the segment's .log
	Length   int64  // length of the stored batch
	Header   []byte // the 256 header bytes to send
	Frames   []byte // the frame bytes to send after Header

	bufStart int
	offset   uint64   // base offset of the stored batch, from the index
	end      uint64   // the offset after its last message, from the index
	seg      *segment // where it is stored, for its verified ranges
}

// CorruptBatchError reports a stored batch that failed verification on read: the
// read fails rather than serve it or skip it.
type CorruptBatchError struct {
	Segment  uint64 // base offset of the segment
	Position int64  // file position of the batch
	Offset   uint64 // the batch's base offset according to the index
	Err      error  // what failed: a wire code (checksum, layout) or a mismatch
}

func (e *CorruptBatchError) Error() string {
	return fmt.Sprintf("segment: corrupt batch in %s at position %d (offset %d): %v",
		segmentLogName(e.Segment), e.Position, e.Offset, e.Err)
}

func (e *CorruptBatchError) Unwrap() error { return e.Err }

// ErrBatchMismatch: a stored batch is intact but is not the one the index says
// is there.
var ErrBatchMismatch = fmt.Errorf("segment: stored batch does not match its index entry")

// Read answers q synchronously into out: it submits the reads and polls the storage
// until they complete. See ReadAsync for the non-blocking form.
func (l *Log) Read(q Query, out *Polled) error {
	out.finished = false
	l.ReadAsync(q, out, finishSyncRead)
	for !out.finished {
		if l.st.Poll(true) == 0 && !out.finished {
			panic("segment: storage lost a read")
		}
	}
	return out.err
}

// finishSyncRead is Read's done hook: a plain function, so Read allocates no closure.
func finishSyncRead(p *Polled, err error) { p.finished, p.err = true, err }

// ReadAsync plans q against the index, submits one read per segment touched, and
// calls done from Storage.Poll once the bytes are in out and verified (or
// immediately, before returning, when there is nothing to read). Only batches below
// the readable end are served: DurableEnd with EnforceFsync, WrittenEnd without.
func (l *Log) ReadAsync(q Query, out *Polled, done func(*Polled, error)) {
	out.Records = out.Records[:0]
	out.MessageCount = 0
	out.CurrentOffset, _ = l.CurrentOffset()
	out.err = nil
	out.log = l
	out.done = done
	if l.closed {
		done(out, wire.ErrSegmentClosed)
		return
	}
	start, ok, err := l.startOffset(q)
	if err != nil {
		done(out, err)
		return
	}
	maxBytes := q.MaxBytes
	if maxBytes <= 0 {
		maxBytes = DefaultReadBytesMax
	}
	if ok && q.Count > 0 {
		// The indexes this read loads stay until it is planned, even beyond the
		// cache size (a seal completing during a load's wait adds one). A read
		// started from a completion hook during one of those waits keeps the outer
		// read's pins: it only widens them, and gives them back to it.
		outerPinnedSince := l.indexes.pinnedSince
		if outerPinnedSince == 0 {
			l.indexes.pinnedSince = l.indexes.clock + 1
		}
		defer l.unpinIndexes(outerPinnedSince)
		if err := l.preloadIndexes(start, q.Count, maxBytes); err != nil {
			done(out, err)
			return
		}
	}
	// Loading an index waits on the storage, and a completion meanwhile may have
	// moved the ends: take them now, after the waits, and wait no more.
	end := l.readableEnd()
	if !ok || q.Count == 0 || start >= end {
		done(out, nil)
		return
	}
	limit := end
	if end-start > uint64(q.Count) {
		limit = start + uint64(q.Count)
	}
	out.start, out.limit = start, limit

	total := l.planRecords(start, limit, maxBytes, out)
	if len(out.Records) == 0 {
		done(out, nil)
		return
	}
	switch {
	case out.Alloc != nil:
		if out.buf != nil {
			panic("segment: a Polled with Alloc read again before its buffer was taken")
		}
		out.buf = out.Alloc(total)
	case cap(out.buf) < total:
		out.buf = make([]byte, total)
	}
	out.buf = out.buf[:total]
	out.pending = len(out.runs)
	for _, r := range out.runs {
		req := l.request(OpRead, purposeRead, r.seg)
		req.File = r.seg.logFile
		req.Offset = r.position
		req.Data = out.buf[r.bufStart : r.bufStart+int(r.length)]
		req.polled = out
		l.st.Submit(req)
	}
}

// readRun is a stretch of consecutive batches of one segment: one read, or one
// run of a Plan.
type readRun struct {
	seg      *segment
	position int64
	length   int64
	bufStart int
}

// planRecords lists in out.Records the stored batches overlapping [start,
// limit), in offset order, stopping after the batch that crosses maxBytes, and
// in out.runs the runs of consecutive batches (one per segment touched). It
// returns their bytes. The indexes the range touches are loaded
// (preloadIndexes); a segment whose index is not ends the list.
func (l *Log) planRecords(start, limit uint64, maxBytes int64, out *Polled) int {
	out.runs = out.runs[:0]
	si := sort.Search(len(l.segments), func(i int) bool { return l.segments[i].baseOffset > start }) - 1
	if si < 0 {
		si = 0
	}
	total := 0
	offset := start
	for ; si < len(l.segments) && offset < limit && int64(total) < maxBytes; si++ {
		seg := l.segments[si]
		if seg.index == nil && seg.endOffset != seg.baseOffset {
			break // its index failed to load (preloadIndexes): the read ends here
		}
		i := seg.index.floor(offset)
		if i < 0 {
			i = 0
		}
		n := seg.index.len()
		runStarted := false
		for ; i < n && int64(total) < maxBytes; i++ {
			batchOffset := seg.index.offset(i)
			if batchOffset >= limit {
				break
			}
			position := seg.index.position(i)
			next := seg.sizeBytes
			if i+1 < n {
				next = seg.index.position(i + 1)
			}
			length := next - position
			if !runStarted {
				runStarted = true
				out.runs = append(out.runs, readRun{seg: seg, position: position, bufStart: total})
			}
			out.runs[len(out.runs)-1].length += length
			if i+1 < n {
				offset = seg.index.offset(i + 1)
			} else {
				offset = seg.endOffset
			}
			out.Records = append(out.Records, Record{Segment: seg.baseOffset, Position: position, Length: length, bufStart: total, offset: batchOffset, end: offset, seg: seg})
			total += int(length)
		}
	}
	return total
}

// unpinIndexes ends a read's pins (restoring an outer read's, if it ran inside one)
// and trims the cache back to its size.
func (l *Log) unpinIndexes(outerPinnedSince uint64) {
	l.indexes.pinnedSince = outerPinnedSince
	l.evictIndexes()
}

// readableEnd is the end of what reads may serve.
func (l *Log) readableEnd() uint64 {
	end := l.writtenEnd
	if l.cfg.EnforceFsync {
		end = l.durableEnd
	}
	if l.failure.active {
		end = min(end, l.failure.rewindTo)
	}
	return end
}

// preloadIndexes loads the indexes of the sealed segments a read of count messages
// from start may touch, before the read is planned: planning must not wait. It
// stops where the read will, at count messages or maxBytes of segments, never at
// the cache size: a read that stopped there would answer short with more messages
// readable, and a poll of "everything" would silently miss the rest of the log.
// The read pins what it loads, so the cache holds more than IndexCacheSegments for
// as long as the read is planned; the memory is bounded by the read itself (24
// bytes of index per stored batch of at least minBatchSizeBytes, under maxBytes).
// A segment whose index cannot be loaded fails the read if it is the first, and
// ends it otherwise.
func (l *Log) preloadIndexes(start uint64, count uint32, maxBytes int64) error {
	si := sort.Search(len(l.segments), func(i int) bool { return l.segments[i].baseOffset > start }) - 1
	si = max(si, 0)
	limit := start + uint64(count)
	if limit < start {
		limit = ^uint64(0)
	}
	var covered int64
	for n := 0; si < len(l.segments) && l.segments[si].baseOffset < limit && covered < maxBytes; si, n = si+1, n+1 {
		seg := l.segments[si]
		if err := l.loadIndex(seg); err != nil {
			if n == 0 {
				return err
			}
			return nil
		}
		if n > 0 {
			// The first segment is read from start, maybe near its end: counting
			// it whole could stop the preload before the planning stops.
			covered += seg.sizeBytes
		}
	}
	return nil
}

// startOffset resolves a query to the first offset to read, and false when nothing
// can match (a timestamp after every batch).
func (l *Log) startOffset(q Query) (uint64, bool, error) {
	first := l.FirstOffset()
	end := l.readableEnd()
	var start uint64
	switch q.Kind {
	case PollOffset:
		start = q.Value
	case PollTimestamp:
		offset, ok, err := l.offsetAtTimestamp(q.Value)
		if err != nil || !ok {
			return 0, false, err
		}
		start = offset
	case PollFirst:
		start = first
	case PollLast:
		if end-first > uint64(q.Count) {
			start = end - uint64(q.Count)
		} else {
			start = first
		}
	case PollNext:
		if stored, ok := l.ConsumerOffset(q.ConsumerKind, q.ConsumerID); ok {
			start = stored + 1
		} else {
			start = first
		}
	default:
		return 0, false, nil
	}
	return max(start, first), true, nil
}

// offsetAtTimestamp returns the base offset of the first batch stamped at or after
// ts. Segments are in offset order and timestamps never decrease along the log, so
// the first segment whose newest batch is at or after ts holds it.
func (l *Log) offsetAtTimestamp(ts uint64) (uint64, bool, error) {
	si := sort.Search(len(l.segments), func(i int) bool {
		s := l.segments[i]
		return s.endOffset > s.baseOffset && s.maxTimestamp >= ts
	})
	if si == len(l.segments) {
		return 0, false, nil
	}
	s := l.segments[si]
	if err := l.loadIndex(s); err != nil {
		return 0, false, err
	}
	i := s.index.firstAtOrAfterTimestamp(ts)
	if i == s.index.len() {
		return 0, false, nil
	}
	return s.index.offset(i), true, nil
}

// completeRead is the Done hook of a read request.
func (l *Log) completeRead(r *Request) {
	p := r.polled
	if r.Err != nil && p.err == nil {
		p.err = fmt.Errorf("segment: read %s at %d: %w", segmentLogName(r.seg.baseOffset), r.Offset, r.Err)
	} else if r.Result != int64(len(r.Data)) && p.err == nil {
		p.err = &CorruptBatchError{Segment: r.seg.baseOffset, Position: r.Offset + r.Result, Err: ErrTornBatch}
	}
	l.release(r)
	p.pending--
	if p.pending > 0 {
		return
	}
	if l.failure.active && l.failure.rewindTo < p.limit {
		// A failure arrived while the read was in flight: serve nothing the rewind
		// is about to cut.
		p.limit = max(p.start, l.failure.rewindTo)
		kept := p.Records[:0]
		for _, rec := range p.Records {
			if rec.offset < p.limit && p.start < p.limit {
				kept = append(kept, rec)
			}
		}
		p.Records = kept
	}
	if p.err == nil {
		p.err = p.finish(l)
	}
	if p.err != nil {
		p.Records = p.Records[:0]
		p.MessageCount = 0
	}
	p.done(p, p.err)
}

// finish verifies every batch read that was not verified before (verified.go)
// and slices the ones at either end of the range.
func (p *Polled) finish(l *Log) error {
	slot := 0
	for i := range p.Records {
		rec := &p.Records[i]
		b := p.buf[rec.bufStart : rec.bufStart+int(rec.Length)]
		expectedOffset := rec.offset
		if err := l.verifyBatch(rec.seg, rec.Position, b, expectedOffset); err != nil {
			return err
		}
		h, _ := wire.ViewBatchHeader(b)
		if h.BaseOffset() >= p.start && h.LastOffset() < p.limit {
			rec.Header = b[:wire.BatchHeaderSize:wire.BatchHeaderSize]
			rec.Frames = b[wire.BatchHeaderSize:]
			p.MessageCount += h.MessageCount()
			continue
		}
		hdr := &p.headers[slot]
		slot++
		frames, count, err := wire.SliceBatch(hdr, b, p.start, uint32(p.limit-p.start))
		if err != nil {
			return &CorruptBatchError{Segment: rec.Segment, Position: rec.Position, Offset: expectedOffset, Err: err}
		}
		if count == 0 {
			// The planner picks batches overlapping the range by the index; one that
			// does not disagrees with its index about its message count.
			return &CorruptBatchError{Segment: rec.Segment, Position: rec.Position, Offset: expectedOffset, Err: ErrBatchMismatch}
		}
		rec.Header = hdr[:]
		rec.Frames = frames
		p.MessageCount += count
	}
	return nil
}

// AppendTo appends every record as it goes on the wire ([Header][Frames] each) to
// dst: the poll reply body after its 16-byte prefix, for tests and a simple server
// path that does not send vectored.
func (p *Polled) AppendTo(dst []byte) []byte {
	for _, r := range p.Records {
		dst = append(dst, r.Header...)
		dst = append(dst, r.Frames...)
	}
	return dst
}

// ErrBatchNotStored: ReadBatch found no written batch starting at the offset asked
// for (deleted by retention, cut by a failure, not written yet, or an offset inside
// a batch).
var ErrBatchNotStored = errors.New("segment: no written batch starts at this offset")

// ReadBatch reads the stored batch whose base_offset is base, whole and exactly as
// stored, into buf (grown when too short) and returns it, verified
// (wire.CheckStoredBatch, and its base_offset). It blocks on the storage like Read,
// and serves any written batch, durable or not: a replica's repair of a peer from
// its log, which needs the prepare's body byte for byte.
func (l *Log) ReadBatch(base uint64, buf []byte) ([]byte, error) {
	if l.closed {
		return nil, wire.ErrSegmentClosed
	}
	if base < l.FirstOffset() || base >= l.writtenEnd || l.failure.active && base >= l.failure.rewindTo {
		return nil, ErrBatchNotStored
	}
	si := sort.Search(len(l.segments), func(i int) bool { return l.segments[i].baseOffset > base }) - 1
	if si < 0 {
		return nil, ErrBatchNotStored
	}
	seg := l.segments[si]
	if err := l.loadIndex(seg); err != nil {
		return nil, err
	}
	i := seg.index.floor(base)
	if i < 0 || seg.index.offset(i) != base {
		return nil, ErrBatchNotStored
	}
	position := seg.index.position(i)
	next := seg.sizeBytes
	if i+1 < seg.index.len() {
		next = seg.index.position(i + 1)
	}
	length := next - position
	if cap(buf) < int(length) {
		buf = make([]byte, length)
	}
	buf = buf[:length]
	r := &Request{Op: OpRead, File: seg.logFile, Offset: position, Data: buf}
	err := l.wait(r)
	read := r.Result
	switch {
	case err != nil:
		return nil, fmt.Errorf("segment: read %s at %d: %w", segmentLogName(seg.baseOffset), position, err)
	case read != length:
		return nil, &CorruptBatchError{Segment: seg.baseOffset, Position: position + read, Offset: base, Err: ErrTornBatch}
	}
	if err := wire.CheckStoredBatch(buf); err != nil {
		return nil, &CorruptBatchError{Segment: seg.baseOffset, Position: position, Offset: base, Err: err}
	}
	if h, _ := wire.ViewBatchHeader(buf); h.BaseOffset() != base {
		return nil, &CorruptBatchError{Segment: seg.baseOffset, Position: position, Offset: base, Err: ErrBatchMismatch}
	}
	return buf, nil
}
