package segment

import (
	"errors"
	"fmt"
	"strings"

	"github.com/iggy-shard/iggy-shard/wire"
)

// RecoveryReport is what Open found and what it did about it. A clean shutdown
// yields a report with nothing but Segments set.
type RecoveryReport struct {
	Segments        int          // segments after recovery
	Truncations     []Truncation // torn or corrupt tails cut off
	RebuiltIndexes  []uint64     // base offsets of segments whose index was rebuilt from the log
	RemovedSegments []uint64     // base offsets of segments removed because the chain broke before them
	RemovedFiles    []string     // orphan .index files (no .log) removed
	Offsets         OffsetsReport
}

// Truncation is one cut: segment Segment kept its bytes before Position and lost
// DroppedBytes from there, starting at offset Offset, because of Reason.
type Truncation struct {
	Segment      uint64
	Position     int64
	DroppedBytes int64
	Offset       uint64
	Reason       error
}

func (t Truncation) String() string {
	return fmt.Sprintf("segment %s: cut %d bytes at position %d (offset %d): %v",
		segmentLogName(t.Segment), t.DroppedBytes, t.Position, t.Offset, t.Reason)
}

// Reasons a recovery walk stops, beyond the wire codes of CheckStoredBatch.
var (
	// ErrTornBatch: the file ends inside a batch (a write that did not finish).
	ErrTornBatch = errors.New("segment: batch runs past the end of the file")
	// ErrBatchTooLarge: a header claims more than Config.BatchSizeMax bytes.
	ErrBatchTooLarge = errors.New("segment: batch length above the batch size max")
	// ErrOffsetGap: a batch's base_offset is not the previous batch's end.
	ErrOffsetGap = errors.New("segment: batch base_offset breaks the offset chain")
	// ErrChainGap: a segment does not start where the one before it ends.
	ErrChainGap = errors.New("segment: segment does not start where the previous one ends")
)

// recoveryReadBytes is the read size of a recovery walk: large enough that the
// syscall count does not matter next to hashing (1 GiB = 256 reads), small enough to
// hold in memory per partition at startup.
const recoveryReadBytes = 4 << 20

// recover rebuilds the log's state from its files, following the reference's boot
// recovery (iggy.apache.org/docs/server/storage-engine, "Boot-time segment recovery")
// with one rule added by how this log seals (log.go, advanceDurable):
//
//	segment is ...                          | what recovery does
//	----------------------------------------|------------------------------------------
//	not last, index complete and consistent | trusted: sealed, read only its last header
//	  with the next segment's base offset   |
//	not last, index short/missing/wrong     | walked like the last one; if the walk does
//	                                        | not end at the next segment's base offset,
//	                                        | cut there and remove every later segment
//	last                                    | walked batch by batch from byte 0 (lengths,
//	                                        | checksums, offsets, timestamps); cut at the
//	                                        | first bad batch; index rebuilt
//	not starting at the previous end        | removed, with every later segment
//
// Cutting after a non-last segment is safe because no batch in a later segment is
// ever reported durable before that segment's seal chain (index included) is
// durable: a segment whose index is not complete on disk was never sealed, so what
// follows it was never acknowledged. A corrupt batch inside a trusted segment is
// found by the reads, which verify every batch, and is reported, never served.
func (l *Log) recover() (*RecoveryReport, error) {
	report := &RecoveryReport{}
	names, err := l.st.List("")
	if err != nil {
		return report, fmt.Errorf("segment: list partition directory: %w", err)
	}
	var bases []uint64
	logs := make(map[uint64]bool)
	for _, name := range names {
		if base, ok := parseSegmentName(name, ".log"); ok {
			bases = append(bases, base)
			logs[base] = true
		}
	}
	for _, name := range names {
		if base, ok := parseSegmentName(name, ".index"); ok && !logs[base] {
			if err := l.wait(&Request{Op: OpRemove, Name: name}); err != nil {
				return report, fmt.Errorf("segment: remove orphan index %s: %w", name, err)
			}
			report.RemovedFiles = append(report.RemovedFiles, name)
		}
	}
	// List sorts names, and equal-width decimal names sort as their numbers.

	buf := make([]byte, 0)
	for i, base := range bases {
		if i > 0 && base != l.segments[i-1].endOffset {
			if err := l.removeFrom(bases[i:], report); err != nil {
				return report, err
			}
			break
		}
		last := i == len(bases)-1
		seg, err := l.openExisting(base, last)
		if err != nil {
			return report, err
		}
		l.segments = append(l.segments, seg)
		if !last {
			trusted, err := l.trustSealed(seg, bases[i+1])
			if err != nil {
				return report, err
			}
			if trusted {
				continue
			}
		}
		buf, err = l.walk(seg, buf, report, l.timestampBefore(len(l.segments)-2), false)
		if err != nil {
			return report, err
		}
		if !last {
			if seg.endOffset != bases[i+1] {
				if err := l.removeFrom(bases[i+1:], report); err != nil {
					return report, err
				}
				break
			}
			seg.state = segmentSealed
			seg.syncedEnd = seg.endOffset
			seg.indexBytes = int64(len(seg.index))
			seg.lastBatchOffset = seg.index.offset(seg.index.len() - 1)
			l.indexes.loaded++
			l.evictIndexes()
		}
	}
	if len(l.segments) == 0 {
		// An empty log: its first segment is created with its first batch, so a
		// partition that never takes a message holds no file (thousands of them
		// are created at once, and each file costs a directory fsync and a
		// descriptor).
		l.needSegment = true
		return report, nil
	}
	last := l.segments[len(l.segments)-1]
	last.state = segmentActive
	// What recovery read may have been only in the page cache (a process crash, not
	// a power loss): make it durable before calling it durable.
	if err := l.wait(&Request{Op: OpSync, File: last.logFile}); err != nil {
		return report, fmt.Errorf("segment: fdatasync %s: %w", segmentLogName(last.baseOffset), err)
	}
	last.syncedEnd = last.endOffset
	l.durableSeg = len(l.segments) - 1
	l.nextOffset = last.endOffset
	l.writtenEnd = l.nextOffset
	l.durableEnd = l.nextOffset
	l.lastTimestamp = l.timestampBefore(len(l.segments) - 1)
	if last.sizeBytes >= l.cfg.SegmentSizeBytes {
		l.seal(last)
		l.WaitIdle()
	}
	report.Segments = len(l.segments)
	return report, nil
}

// openExisting opens a segment's files. The last segment's index is read whole (the
// walk compares it with the one it rebuilds); of the others only the last entry is
// read, all that trustSealed needs: their indexes load when a read needs them.
func (l *Log) openExisting(base uint64, whole bool) (*segment, error) {
	logFile, logSize, err := l.st.Open(segmentLogName(base), false, 0)
	if err != nil {
		return nil, fmt.Errorf("segment: open %s: %w", segmentLogName(base), err)
	}
	indexFile, indexSize, err := l.st.Open(segmentIndexName(base), true, 0)
	if err != nil {
		_ = l.st.Close(logFile)
		return nil, fmt.Errorf("segment: open %s: %w", segmentIndexName(base), err)
	}
	seg := &segment{
		baseOffset: base,
		endOffset:  base,
		sizeBytes:  logSize,
		logFile:    logFile,
		indexFile:  indexFile,
		syncedEnd:  base,
	}
	// An index never needs more entries than the log has room for batches; reading
	// more than that would be an allocation the input does not justify.
	readBytes := min(indexSize, (logSize/minBatchSizeBytes+1)*indexEntrySize)
	readBytes -= readBytes % indexEntrySize
	seg.indexBytes = readBytes
	readAt := int64(0)
	if !whole && readBytes > 0 {
		readAt = readBytes - indexEntrySize
		if indexSize != readBytes {
			readAt = -1 // torn or oversized: not trusted, walked
		}
	}
	if readBytes > 0 && readAt >= 0 {
		data := make([]byte, readBytes-readAt)
		r := &Request{Op: OpRead, File: indexFile, Offset: readAt, Data: data}
		if err := l.wait(r); err != nil {
			return nil, fmt.Errorf("segment: read %s: %w", segmentIndexName(base), err)
		}
		data = data[:r.Result-r.Result%indexEntrySize]
		seg.index = index(data)
	}
	seg.indexWritten = len(seg.index)
	return seg, nil
}

// trustSealed decides whether a non-last segment can be taken on its index: every
// entry consistent, and the last batch's header (the only read) agreeing with the
// index, with the file size and with the next segment's base offset.
func (l *Log) trustSealed(seg *segment, nextBase uint64) (bool, error) {
	n := seg.index.len()
	if n != 1 || seg.index.offset(0) < seg.baseOffset || seg.index.offset(0) >= nextBase ||
		seg.index.position(0) < 0 || seg.index.position(0)+minBatchSizeBytes > seg.sizeBytes {
		return false, nil
	}
	lastPosition := seg.index.position(n - 1)
	var header [wire.BatchHeaderSize]byte
	r := &Request{Op: OpRead, File: seg.logFile, Offset: lastPosition, Data: header[:]}
	if err := l.wait(r); err != nil {
		return false, fmt.Errorf("segment: read %s at %d: %w", segmentLogName(seg.baseOffset), lastPosition, err)
	}
	if r.Result != wire.BatchHeaderSize {
		return false, nil
	}
	h, _ := wire.ViewBatchHeader(header[:])
	if h.BaseOffset() != seg.index.offset(n-1) ||
		h.BatchLength() != uint64(seg.sizeBytes-lastPosition) ||
		h.MessageCount() == 0 ||
		h.BaseOffset()+uint64(h.MessageCount()) != nextBase ||
		h.BaseTimestamp() != seg.index.timestamp(n-1) {
		return false, nil
	}
	seg.endOffset = nextBase
	seg.maxTimestamp = h.BaseTimestamp()
	seg.state = segmentSealed
	seg.syncedEnd = nextBase
	seg.lastBatchOffset = h.BaseOffset()
	seg.index = nil // loaded, and checked whole, when a read needs it
	seg.indexWritten = 0
	return true, nil
}

// walk reads seg's log from byte 0, checking each batch (wire.CheckStoredBatch, the
// offset chain, the partition, timestamps non-decreasing from previousTimestamp),
// and rebuilds its index. At the first bad batch it truncates the log there and
// records why; with sealed set (rebuilding a sealed segment's index, which must not
// change) it returns a CorruptBatchError instead. The index file is rewritten when it
// differs from the rebuilt one. buf is reused between segments.
func (l *Log) walk(seg *segment, buf []byte, report *RecoveryReport, previousTimestamp uint64, sealed bool) ([]byte, error) {
	rebuilt := make(index, 0, len(seg.index))
	var position int64
	expected := seg.baseOffset
	var reason error
	chunkStart, chunkLen := int64(0), 0
	for position < seg.sizeBytes {
		// Make sure the header, then the whole batch, is in the buffer.
		need := int64(wire.BatchHeaderSize)
		if seg.sizeBytes-position < need {
			reason = ErrTornBatch
			break
		}
		if position+need > chunkStart+int64(chunkLen) {
			var err error
			buf, chunkLen, err = l.readChunk(seg, buf, position, need)
			if err != nil {
				return buf, err
			}
			chunkStart = position
		}
		h, _ := wire.ViewBatchHeader(buf[position-chunkStart:])
		length := h.BatchLength()
		if length > uint64(l.cfg.BatchSizeMax) {
			reason = ErrBatchTooLarge
			break
		}
		if length > uint64(seg.sizeBytes-position) {
			reason = ErrTornBatch
			break
		}
		if position+int64(length) > chunkStart+int64(chunkLen) {
			var err error
			buf, chunkLen, err = l.readChunk(seg, buf, position, int64(length))
			if err != nil {
				return buf, err
			}
			chunkStart = position
			h, _ = wire.ViewBatchHeader(buf)
		}
		batch := buf[position-chunkStart : position-chunkStart+int64(length)]
		if err := wire.CheckStoredBatch(batch); err != nil {
			reason = err
			break
		}
		if h.BaseOffset() != expected {
			reason = ErrOffsetGap
			break
		}
		if h.PartitionID() != l.cfg.PartitionID {
			reason = ErrPartitionMismatch
			break
		}
		if h.BaseTimestamp() < previousTimestamp {
			reason = ErrTimestampRegression
			break
		}
		rebuilt = rebuilt.append(expected, h.BaseTimestamp(), position)
		expected += uint64(h.MessageCount())
		previousTimestamp = h.BaseTimestamp()
		seg.maxTimestamp = previousTimestamp
		position += int64(length)
	}
	if sealed && (position < seg.sizeBytes || expected != seg.endOffset) {
		if reason == nil {
			reason = ErrOffsetGap
		}
		return buf, &CorruptBatchError{Segment: seg.baseOffset, Position: position, Offset: expected, Err: reason}
	}
	if position < seg.sizeBytes {
		report.Truncations = append(report.Truncations, Truncation{
			Segment:      seg.baseOffset,
			Position:     position,
			DroppedBytes: seg.sizeBytes - position,
			Offset:       expected,
			Reason:       reason,
		})
		if err := l.wait(&Request{Op: OpTruncate, File: seg.logFile, Offset: position}); err != nil {
			return buf, fmt.Errorf("segment: truncate %s at %d: %w", segmentLogName(seg.baseOffset), position, err)
		}
		if err := l.wait(&Request{Op: OpSync, File: seg.logFile}); err != nil {
			return buf, fmt.Errorf("segment: fdatasync %s: %w", segmentLogName(seg.baseOffset), err)
		}
		seg.sizeBytes = position
		seg.forgetFrom(position)
	}
	seg.endOffset = expected
	if string(rebuilt) != string(seg.index) {
		if report != nil {
			report.RebuiltIndexes = append(report.RebuiltIndexes, seg.baseOffset)
		}
		if err := l.wait(&Request{Op: OpTruncate, File: seg.indexFile}); err != nil {
			return buf, fmt.Errorf("segment: truncate %s: %w", segmentIndexName(seg.baseOffset), err)
		}
		if len(rebuilt) > 0 {
			if err := l.wait(&Request{Op: OpWrite, File: seg.indexFile, Data: rebuilt}); err != nil {
				return buf, fmt.Errorf("segment: write %s: %w", segmentIndexName(seg.baseOffset), err)
			}
		}
		if err := l.wait(&Request{Op: OpSync, File: seg.indexFile}); err != nil {
			return buf, fmt.Errorf("segment: fdatasync %s: %w", segmentIndexName(seg.baseOffset), err)
		}
	}
	seg.index = rebuilt
	seg.indexWritten = len(rebuilt)
	return buf, nil
}

// readChunk reads at least need bytes (more when the file has them, up to a chunk)
// at position into buf, growing it when need exceeds its size.
func (l *Log) readChunk(seg *segment, buf []byte, position, need int64) ([]byte, int, error) {
	size := max(need, min(recoveryReadBytes, seg.sizeBytes-position))
	if int64(cap(buf)) < size {
		buf = make([]byte, size)
	}
	buf = buf[:size]
	r := &Request{Op: OpRead, File: seg.logFile, Offset: position, Data: buf}
	if err := l.wait(r); err != nil {
		return buf, 0, fmt.Errorf("segment: read %s at %d: %w", segmentLogName(seg.baseOffset), position, err)
	}
	if r.Result < need {
		return buf, 0, fmt.Errorf("segment: read %s at %d: %d bytes of %d: the file shrank under recovery",
			segmentLogName(seg.baseOffset), position, r.Result, need)
	}
	return buf, int(r.Result), nil
}

// removeFrom removes the segments with the given bases, which follow a break in the
// chain and so were never acknowledged.
func (l *Log) removeFrom(bases []uint64, report *RecoveryReport) error {
	for _, base := range bases {
		for _, name := range [2]string{segmentLogName(base), segmentIndexName(base)} {
			if err := l.wait(&Request{Op: OpRemove, Name: name}); err != nil {
				return fmt.Errorf("segment: remove %s: %w", name, err)
			}
		}
		report.RemovedSegments = append(report.RemovedSegments, base)
	}
	return nil
}

// String is a one-line summary of a report for logs.
func (r *RecoveryReport) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d segments", r.Segments)
	for _, t := range r.Truncations {
		b.WriteString("; " + t.String())
	}
	if len(r.RebuiltIndexes) > 0 {
		fmt.Fprintf(&b, "; rebuilt %d indexes", len(r.RebuiltIndexes))
	}
	if len(r.RemovedSegments) > 0 {
		fmt.Fprintf(&b, "; removed segments %v", r.RemovedSegments)
	}
	return b.String()
}

// rebuildSealedIndex rebuilds the index of a sealed segment whose .index failed its
// check on load, from the log, without changing the log.
func (l *Log) rebuildSealedIndex(seg *segment) error {
	previousTimestamp := uint64(0)
	for i, s := range l.segments {
		if s == seg {
			previousTimestamp = l.timestampBefore(i - 1)
			break
		}
	}
	seg.index = nil
	if _, err := l.walk(seg, nil, nil, previousTimestamp, true); err != nil {
		seg.index = nil
		return err
	}
	seg.indexBytes = int64(len(seg.index))
	l.stats.IndexRebuilds++
	return nil
}
