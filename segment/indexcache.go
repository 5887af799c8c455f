package segment

import "fmt"

// indexCache keeps the sealed segments' indexes in memory up to
// Config.IndexCacheSegments of them, evicting the least recently used: clock ticks
// on every index use, loaded counts the sealed segments whose index is resident,
// and while a read is planned (pinnedSince != 0) the indexes used since are not
// evicted.
type indexCache struct {
	clock       uint64
	loaded      int
	pinnedSince uint64
}

// loadIndex makes seg's index resident. Sealed segments beyond the cache
// (Config.IndexCacheSegments) keep only their bounds in memory; the first read that
// needs one reads its .index back with a blocking read (a cold segment, once), and
// checks it: entries consistent with the log and ending at the batch recovery
// verified. An index that fails is rebuilt from the log; a log that cannot be walked
// to its end has interior corruption, which every read of the segment then reports
// (CorruptBatchError), never serving it.
func (l *Log) loadIndex(seg *segment) error {
	l.indexes.clock++
	seg.lastUsed = l.indexes.clock
	if seg.index != nil || seg.state != segmentSealed {
		return nil
	}
	if seg.corrupt != nil {
		return seg.corrupt
	}
	l.stats.IndexLoads++
	data := make([]byte, seg.indexBytes)
	r := &Request{Op: OpRead, File: seg.indexFile, Data: data}
	if err := l.wait(r); err != nil {
		return fmt.Errorf("segment: read %s: %w", segmentIndexName(seg.baseOffset), err)
	}
	x := index(data[:r.Result-r.Result%indexEntrySize])
	n := x.len()
	if n > 0 && checkIndex(x, seg.baseOffset, seg.sizeBytes) == n && x.offset(n-1) == seg.lastBatchOffset {
		seg.index = x
		seg.indexWritten = len(x)
	} else if err := l.rebuildSealedIndex(seg); err != nil {
		seg.corrupt = err
		return err
	}
	l.indexes.loaded++
	l.evictIndexes()
	return nil
}

// forgetIndex takes a segment leaving the log out of the index cache's count.
func (l *Log) forgetIndex(s *segment) {
	if s.state == segmentSealed && s.index != nil {
		l.indexes.loaded--
	}
	s.index = nil
}

// evictIndexes drops the least recently used sealed indexes beyond the cache size.
// Segments still sealing or open always keep theirs. The scan is linear in the
// segment count, and runs only when an index is loaded or a segment sealed.
func (l *Log) evictIndexes() {
	for l.indexes.loaded > l.cfg.IndexCacheSegments {
		var victim *segment
		for _, s := range l.segments {
			pinned := l.indexes.pinnedSince != 0 && s.lastUsed >= l.indexes.pinnedSince
			if s.state == segmentSealed && s.index != nil && !pinned && (victim == nil || s.lastUsed < victim.lastUsed) {
				victim = s
			}
		}
		if victim == nil {
			return
		}
		victim.index = nil
		l.indexes.loaded--
	}
}
