package segment

import "fmt"

// failureState is a failure being repaired. After a failed write or sync the log
// stops taking appends (active), waits until nothing is in flight, then cuts
// everything from rewindTo on; err is the failure, repairsInFlight the repair's
// requests, cutFrom and cutTo what the rewind in progress cuts, reported when
// durable.
type failureState struct {
	active          bool
	rewindTo        uint64
	err             error
	repairsInFlight int
	cutFrom, cutTo  uint64
}

// fail records that batches from at on are lost or suspect. A failed write loses
// its own batch and everything after it (later appends may be on disk, but a log
// with a hole is no log). A failed sync proves nothing about any byte it covered,
// and on Linux the kernel may have dropped the dirty pages already, so everything
// in that file not known durable goes: at is the failing segment's synced end. It
// must not be the log's durable end, which other segments' syncs may still move
// past it before the rewind.
func (l *Log) fail(at uint64, err error) {
	if !l.failure.active {
		l.failure.active = true
		l.failure.rewindTo = at
		l.failure.err = err
		return
	}
	l.failure.rewindTo = min(l.failure.rewindTo, at)
}

// repairWhenQuiet starts the rewind after a failure once none of the log's requests
// is in flight, or ends the failure when there is nothing to cut.
func (l *Log) repairWhenQuiet() {
	if l.failure.active && l.waitDepth == 0 && l.requestsInFlight == 0 && l.failure.repairsInFlight == 0 && l.broken == nil {
		if l.failure.rewindTo < l.nextOffset {
			l.rewind()
		} else {
			// Everything from rewindTo on was already durable: nothing to cut.
			l.failure.active = false
			l.failure.err = nil
			l.reportProgress()
		}
	}
}

// reportProgress repeats the written and durable ends after a failure, during
// which the hooks were silent: batches below the cut that completed meanwhile are
// acknowledged now rather than at the next append.
func (l *Log) reportProgress() {
	if l.hooks.Written != nil {
		l.hooks.Written(l.writtenEnd)
	}
	if l.hooks.Durable != nil {
		l.hooks.Durable(l.durableEnd)
	}
}

// rewind cuts the log back to rewindTo once nothing is in flight: later segments
// are removed, the segment holding rewindTo is truncated there (log, then fdatasync,
// and its index) and becomes the open segment again. Appends resume when that is
// done; if it fails too, the log is broken.
func (l *Log) rewind() {
	// Durable batches are never cut: the durable end only moves over batches whose
	// bytes a completed sync covered.
	to, from := max(l.failure.rewindTo, l.durableEnd), l.nextOffset
	i := len(l.segments) - 1
	for i > 0 && l.segments[i].baseOffset > to {
		i--
	}
	seg := l.segments[i]
	if seg.baseOffset > to {
		panic(fmt.Sprintf("segment: rewind to %d below the first segment %d", to, seg.baseOffset))
	}
	// A cut at a sealed segment whose index left the cache (the cut sits at its
	// end) reads the index back first, before any repair is submitted: the wait
	// must not complete repairs of a rewind not yet set up. The depth keeps that
	// wait from starting this rewind again.
	l.waitDepth++
	err := l.loadIndex(seg)
	l.waitDepth--
	if err != nil {
		l.broken = fmt.Errorf("segment: repair after %v: %w", l.failure.err, err)
		return
	}
	for _, s := range l.segments[i+1:] {
		l.removeSegmentFiles(s)
	}
	clear(l.segments[i+1:])
	l.segments = l.segments[:i+1]
	l.durableSeg = min(l.durableSeg, i)

	if seg.state == segmentSealed {
		l.indexes.loaded--
	}
	n := seg.index.floor(to) + 1
	if n > 0 && seg.index.offset(n-1) == to {
		n-- // the batch at `to` goes too
	}
	position := seg.sizeBytes
	if n < seg.index.len() {
		position = seg.index.position(n)
	}
	seg.index = seg.index[:n*indexEntrySize]
	seg.indexWritten = min(seg.indexWritten, len(seg.index))
	seg.sizeBytes = position
	seg.reservedEnd = min(seg.reservedEnd, position) // the truncation frees what is past it
	seg.forgetFrom(position)
	seg.endOffset = to
	seg.syncedEnd = min(seg.syncedEnd, to)
	seg.state = segmentActive
	seg.chainSubmitted = false
	seg.maxTimestamp = 0
	if n > 0 {
		seg.maxTimestamp = seg.index.timestamp(n - 1)
	}
	l.needSegment = seg.sizeBytes >= l.cfg.SegmentSizeBytes
	if l.needSegment {
		seg.state = segmentSealing
	}

	truncateLog := l.request(OpTruncate, purposeRepair, seg)
	truncateLog.File = seg.logFile
	truncateLog.Offset = position
	truncateLog.Link = true
	syncLog := l.request(OpSync, purposeRepair, seg)
	syncLog.File = seg.logFile
	truncateIndex := l.request(OpTruncate, purposeRepair, seg)
	truncateIndex.File = seg.indexFile
	truncateIndex.Offset = int64(len(seg.index))
	l.failure.repairsInFlight += 3
	l.st.Submit(truncateLog)
	l.st.Submit(syncLog)
	l.st.Submit(truncateIndex)
	// The chains held back while the failure was pending: every segment before seg
	// is whole.
	for _, s := range l.segments {
		l.maybeSubmitSealChain(s)
	}

	// Drop the queue entries past the cut; what remains is written (nothing is in
	// flight), possibly not durable yet.
	for l.fifo.count > 0 {
		last := &l.fifo.slots[(l.fifo.head+l.fifo.count-1)%len(l.fifo.slots)]
		if last.end <= to {
			break
		}
		*last = inflight{}
		l.fifo.count--
	}
	l.fifo.written = min(l.fifo.written, l.fifo.count)
	l.nextOffset = to
	l.writtenEnd = min(l.writtenEnd, to)
	l.durableEnd = min(l.durableEnd, to)
	l.lastTimestamp = l.timestampBefore(i)
	l.unsyncedMessages, l.unsyncedBytes = 0, 0
	l.stats.Rewinds++
	l.offsets.clampTo(l)
	l.flushDirtyOffsets()

	l.failure.cutFrom, l.failure.cutTo = to, from
}

// timestampBefore returns the newest batch timestamp in segments[:i+1].
func (l *Log) timestampBefore(i int) uint64 {
	for ; i >= 0; i-- {
		if s := l.segments[i]; s.endOffset > s.baseOffset {
			return s.maxTimestamp
		}
	}
	return 0
}

// removeSegmentFiles closes a segment cut by a rewind and removes its files, as
// part of the repair.
func (l *Log) removeSegmentFiles(s *segment) {
	l.forgetIndex(s)
	_ = l.st.Close(s.logFile)
	_ = l.st.Close(s.indexFile)
	for _, name := range [2]string{segmentIndexName(s.baseOffset), segmentLogName(s.baseOffset)} {
		r := l.request(OpRemove, purposeRepair, s)
		r.Name = name
		l.failure.repairsInFlight++
		l.st.Submit(r)
	}
}
