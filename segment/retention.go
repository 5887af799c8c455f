package segment

import (
	"fmt"
	"slices"

	"github.com/iggy-shard/iggy-shard/wire"
)

// Retention removes whole sealed segments, oldest first, never the open one and never
// one still being sealed: the log stays a contiguous run of offsets that only loses
// its oldest end. Removal waits for the log's requests in flight (a read of a segment
// must not lose its file under it); it is a maintenance step, run every minute or on
// an operator's request, so the wait costs nothing that matters.

// RemovedSegment is one segment deleted by retention.
type RemovedSegment struct {
	BaseOffset uint64
	EndOffset  uint64 // next offset after its last batch
	SizeBytes  int64
}

// ApplyRetention deletes the sealed segments that message_expiry and max size
// condemn, at time nowMicros (µs since the Unix epoch, the clock of base_timestamp):
// a sealed segment whose newest batch is older than MessageExpiryMicros, and, while
// the log is larger than MaxSizeBytes, the oldest sealed segments. Time is an input
// so that tests and simulations decide what "now" is.
func (l *Log) ApplyRetention(nowMicros uint64) ([]RemovedSegment, error) {
	if l.closed {
		return nil, wire.ErrSegmentClosed
	}
	l.WaitIdle()
	size := l.SizeBytes()
	n := 0
	for ; n < len(l.segments)-1; n++ {
		s := l.segments[n]
		if s.state != segmentSealed {
			break
		}
		expired := l.cfg.MessageExpiryMicros != 0 && s.maxTimestamp <= nowMicros &&
			nowMicros-s.maxTimestamp > l.cfg.MessageExpiryMicros
		tooLarge := size > l.cfg.MaxSizeBytes
		if !expired && !tooLarge {
			break
		}
		size -= s.sizeBytes
	}
	return l.removeOldest(n)
}

// DeleteOldestSegments deletes the count oldest sealed segments (DELETE_SEGMENTS);
// it deletes fewer when fewer are sealed, and reports which.
func (l *Log) DeleteOldestSegments(count int) ([]RemovedSegment, error) {
	if l.closed {
		return nil, wire.ErrSegmentClosed
	}
	if count < 0 {
		return nil, wire.ErrInvalidSegmentsCount
	}
	l.WaitIdle()
	n := 0
	for n < count && n < len(l.segments)-1 && l.segments[n].state == segmentSealed {
		n++
	}
	return l.removeOldest(n)
}

// OldestSealedEnd is where the count oldest sealed segments end (the offset after
// their last batch), and how many of them there are: fewer when fewer are sealed,
// and none (end 0) when count is 0 or none is. It resolves a DELETE_SEGMENTS count
// into an offset that DeleteSegmentsBelow honours on any replica whose log holds
// the same batches, however its own deletions went.
func (l *Log) OldestSealedEnd(count int) (end uint64, n int, err error) {
	if l.closed {
		return 0, 0, wire.ErrSegmentClosed
	}
	if count < 0 {
		return 0, 0, wire.ErrInvalidSegmentsCount
	}
	l.WaitIdle()
	for n < count && n < len(l.segments)-1 && l.segments[n].state == segmentSealed {
		end = l.segments[n].endOffset
		n++
	}
	return end, n, nil
}

// DeleteSegmentsBelow deletes the oldest sealed segments that hold no offset at or
// above below: whole segments only, never the open one, so a segment that
// straddles below stays whole and no message at or above it goes. Applied again,
// it finds nothing more to delete.
func (l *Log) DeleteSegmentsBelow(below uint64) ([]RemovedSegment, error) {
	if l.closed {
		return nil, wire.ErrSegmentClosed
	}
	l.WaitIdle()
	n := 0
	for n < len(l.segments)-1 && l.segments[n].state == segmentSealed && l.segments[n].endOffset <= below {
		n++
	}
	return l.removeOldest(n)
}

func (l *Log) removeOldest(n int) ([]RemovedSegment, error) {
	if n == 0 {
		return nil, nil
	}
	removed := make([]RemovedSegment, 0, n)
	for _, s := range l.segments[:n] {
		if err := l.deleteSegmentFiles(s); err != nil {
			// The ones before are gone: keep the log consistent with the disk.
			l.dropOldest(len(removed))
			return removed, err
		}
		removed = append(removed, RemovedSegment{BaseOffset: s.baseOffset, EndOffset: s.endOffset, SizeBytes: s.sizeBytes})
	}
	l.dropOldest(n)
	return removed, nil
}

// deleteSegmentFiles closes and removes a segment's files, the .log last: recovery
// removes an .index without its .log, while a .log without its .index is a segment
// to rebuild, so a crash between the two leaves a state recovery reads right.
func (l *Log) deleteSegmentFiles(s *segment) error {
	l.forgetIndex(s)
	_ = l.st.Close(s.logFile)
	_ = l.st.Close(s.indexFile)
	s.logFile, s.indexFile = 0, 0
	if err := l.wait(&Request{Op: OpRemove, Name: segmentIndexName(s.baseOffset)}); err != nil {
		return fmt.Errorf("segment: %w: remove %s: %v", wire.ErrCannotDeleteFile, segmentIndexName(s.baseOffset), err)
	}
	if err := l.wait(&Request{Op: OpRemove, Name: segmentLogName(s.baseOffset)}); err != nil {
		return fmt.Errorf("segment: %w: remove %s: %v", wire.ErrCannotDeleteFile, segmentLogName(s.baseOffset), err)
	}
	l.stats.SegmentsDeleted++
	return nil
}

func (l *Log) dropOldest(n int) {
	copy(l.segments, l.segments[n:])
	clear(l.segments[len(l.segments)-n:])
	l.segments = l.segments[:len(l.segments)-n]
	l.durableSeg = max(0, l.durableSeg-n)
}

// Purge deletes every message and every consumer offset (PURGE_TOPIC, PURGE_STREAM).
// The offset counter does not restart: the log goes on, empty, from NextOffset, so an
// offset is never given to two different messages (the reference server keeps the same
// frontier for the same reason: the offset_frontier of each partition's superblock,
// apache/iggy core/journal/src/).
func (l *Log) Purge() error {
	if l.closed {
		return wire.ErrSegmentClosed
	}
	if l.broken != nil {
		return l.broken
	}
	l.WaitIdle()
	if l.failure.active {
		return wire.ErrTransientNotAccepted
	}
	for kind := Consumer; kind <= ConsumerGroup; kind++ {
		for _, id := range sortedIDs(l.offsets.byKind[kind]) {
			if err := l.DeleteConsumerOffset(kind, id); err != nil {
				return err
			}
		}
	}
	next := l.nextOffset
	for len(l.segments) > 0 {
		if err := l.deleteSegmentFiles(l.segments[0]); err != nil {
			l.dropOldest(1)
			if len(l.segments) == 0 {
				l.needSegment = true
			}
			return err
		}
		l.dropOldest(1)
	}
	l.fifo.head, l.fifo.count, l.fifo.written = 0, 0, 0
	l.unsyncedMessages, l.unsyncedBytes = 0, 0
	l.lastTimestamp = 0
	if err := l.openSegment(next); err != nil {
		l.broken = err
		return err
	}
	l.durableSeg = 0
	return nil
}

func sortedIDs(m map[uint32]*storedOffset) []uint32 {
	ids := make([]uint32, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}
