package segment

import (
	"errors"
	"fmt"

	"github.com/iggy-shard/iggy-shard/wire"
)

// Hooks tell the log's owner what became of its appends. Each is optional and runs
// from Storage.Poll (never from inside Append). Offsets are ends: "every batch below
// end", so an empty log needs no -1. Between a failure and its repair, Written and
// Durable are silent; the repair repeats both ends after Failed.
type Hooks struct {
	// Written reports that every batch below end has been written (it is in the page
	// cache or further, and reads serve it when EnforceFsync is off).
	Written func(end uint64)
	// Durable reports that every batch below end is durable: an owner acknowledges a
	// producer's batch as stored once Durable has passed its last offset.
	Durable func(end uint64)
	// Failed reports that the batches in [from, to) were not stored and never will
	// be: a write or sync failed (err says which). It is called once the damaged
	// tail is cut durably, so no crash can bring those batches back; the log's next
	// offset is from again and it accepts appends again. If the cut itself fails,
	// Failed is not called: the log is broken (Err), refuses appends, and the fate
	// of its unacknowledged batches is unknown until the partition is reopened.
	Failed func(from, to uint64, err error)
}

// Errors of Append beyond the wire codes for a malformed batch.
var (
	// ErrOffsetMismatch: the batch's base_offset is not the log's next offset.
	ErrOffsetMismatch = errors.New("segment: batch base_offset is not the log's next offset")
	// ErrTimestampRegression: the batch's base_timestamp is below its predecessor's;
	// the stamper must keep them non-decreasing (polls by timestamp binary-search them).
	ErrTimestampRegression = errors.New("segment: batch base_timestamp below the previous batch's")
	// ErrPartitionMismatch: the batch is stamped for another partition.
	ErrPartitionMismatch = errors.New("segment: batch partition_id is not this log's")
)

// Log is one partition's log: segments of stamped batches with their indexes, the
// partition's consumer offsets, and the state of every append still in flight.
//
// A Log belongs to one goroutine: the one that calls its methods and Storage.Poll.
type Log struct {
	cfg   Config
	st    Storage
	hooks Hooks
	done  func(*Request) // l.complete, bound once so requests carry it without allocating

	segments   []*segment // oldest first; the last is where appends go
	durableSeg int        // segments[:durableSeg] are durably sealed
	indexes    indexCache // which sealed segments keep their index in memory (indexcache.go)

	nextOffset    uint64
	lastTimestamp uint64
	writtenEnd    uint64
	durableEnd    uint64

	fifo             inflightRing // the appends in flight, oldest first (inflight.go)
	requestsInFlight int
	free             []*Request
	waitDepth        int // nesting of blocking waits (wait)

	unsyncedMessages uint64
	unsyncedBytes    int64
	// saveInFlight: a save's fdatasync is in the ring; saveAgain: a save came due
	// meanwhile and is issued when it completes (see save).
	saveInFlight bool
	saveAgain    bool

	// After a failed write or sync the log stops taking appends, waits until nothing
	// is in flight, then cuts what failed (rewind.go); broken: a repair failed too,
	// and the log refuses appends for good.
	failure failureState
	broken  error

	needSegment bool // the last segment is sealed; the next append opens a new one
	closed      bool
	// reserveUnsupported: the storage answered a reservation with
	// errors.ErrUnsupported, and is asked for none again (reserve.go).
	reserveUnsupported bool

	offsets consumerOffsets
	scrub   scrubCursor // where the scrubber goes on (scrub.go)
	// scrubbing is ScrubAsync's step in flight, if any (scrub.go).
	scrubbing scrubInFlight
	stats     Stats
}

// Stats counts what the log did, for tests and metrics.
type Stats struct {
	Appends            uint64
	AppendedBytes      uint64
	Syncs              uint64
	Seals              uint64
	IndexWriteFailures uint64
	Rewinds            uint64
	SegmentsDeleted    uint64
	IndexLoads         uint64 // sealed indexes read back into the cache
	IndexRebuilds      uint64 // sealed indexes rebuilt from the log on load
	LateSyncFailures   uint64 // a batch's own fdatasync failed after a later one covered it
	BatchesVerified    uint64 // batches whose checksum a read computed (verified.go)
	ScrubbedBytes      uint64 // bytes the scrubber re-verified (scrub.go)
	ScrubCorrupt       uint64 // batches the scrubber found corrupt and quarantined
	Plans              uint64 // reads answered by a plan of file runs (plan.go)
	Reservations       uint64 // space reserved ahead of the writes (reserve.go)
	ReserveFailures    uint64 // reservations that failed (the writes allocate their own)
}

type sealState uint8

const (
	segmentActive  sealState = iota // takes appends
	segmentSealing                  // full; waits for its writes, then its seal chain
	segmentSealed                   // log and index durable, immutable
)

// segment is one .log/.index pair.
type segment struct {
	baseOffset   uint64
	endOffset    uint64 // next offset after its last batch (appended, maybe in flight)
	sizeBytes    int64  // appended bytes, maybe in flight
	logFile      File
	indexFile    File
	index        index
	indexWritten int // bytes of index submitted to the index file
	maxTimestamp uint64
	state        sealState
	syncedEnd    uint64 // batches below it are durable in the .log
	writes       int    // appends in flight
	// chainSubmitted: the seal chain is in flight or done.
	chainSubmitted bool
	// reservedEnd: the .log's space below it was reserved (or tried: reserve.go);
	// reserving: a reservation is in flight. Nothing waits for one: whatever
	// closes a segment's files (retention, purge, a rewind, Close) waits for the
	// log to be idle first.
	reservedEnd int64
	reserving   bool

	// A sealed segment's index may be dropped from memory (index == nil) and read
	// back when a read needs it; see loadIndex.
	indexBytes      int64          // size of the .index file of a sealed segment
	lastBatchOffset uint64         // base offset of its last batch, checked on load
	lastUsed        uint64         // index cache clock
	corrupt         error          // its index could not be rebuilt: interior corruption
	checks          *segmentChecks // its verified ranges and quarantined batches; nil until a batch is verified (verified.go)
}

type purpose uint8

const (
	purposeAppendWrite purpose = iota + 1
	purposeAppendSync
	purposeSaveSync
	purposeIndexWrite
	purposeSealLogSync
	purposeSealIndexWrite
	purposeSealIndexSync
	purposeRepair
	purposeOffsetWrite
	purposeOffsetSync
	purposeRead
	purposeScrub
	purposeReserve
)

// Open recovers the log stored in st (see recovery.go) and returns it ready to
// append, with the report of what recovery found and repaired.
func Open(st Storage, cfg Config, hooks Hooks) (*Log, *RecoveryReport, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, nil, err
	}
	l := &Log{cfg: cfg, st: st, hooks: hooks, fifo: inflightRing{slots: make([]inflight, min(fifoSlotsInitial, cfg.InflightBatchesMax))}}
	l.done = l.complete
	report, err := l.recover()
	if err != nil {
		l.closeFiles()
		return nil, report, err
	}
	if err := l.loadOffsets(report); err != nil {
		l.closeFiles()
		return nil, report, err
	}
	return l, report, nil
}

// NextOffset is the offset the next appended batch must carry as base_offset.
func (l *Log) NextOffset() uint64 { return l.nextOffset }

// CurrentOffset is the newest offset the log ever assigned (the protocol's
// current_offset), and false when it never held a message. Retention and purge do
// not lower it: the offsets they removed stay used.
func (l *Log) CurrentOffset() (uint64, bool) {
	if l.nextOffset == 0 {
		return 0, false
	}
	return l.nextOffset - 1, true
}

// WrittenEnd and DurableEnd are the ends reported by Hooks.Written and Hooks.Durable.
func (l *Log) WrittenEnd() uint64 { return l.writtenEnd }

// DurableEnd: every batch below it is durable.
func (l *Log) DurableEnd() uint64 { return l.durableEnd }

// FirstOffset is the oldest offset still stored (segments before it were deleted).
func (l *Log) FirstOffset() uint64 {
	if len(l.segments) == 0 {
		return l.nextOffset // only after a purge that could not create its segment
	}
	return l.segments[0].baseOffset
}

// LastTimestamp is the base_timestamp of the newest batch (0 for an empty log).
func (l *Log) LastTimestamp() uint64 { return l.lastTimestamp }

// SizeBytes is the total size of the segments' .log files, appends in flight included.
func (l *Log) SizeBytes() int64 {
	var n int64
	for _, s := range l.segments {
		n += s.sizeBytes
	}
	return n
}

// SegmentCount is the number of segments, the open one included: 1 for a log that
// has not taken its first batch yet (the segment it will be appended to, whose
// files the batch creates).
func (l *Log) SegmentCount() int { return max(len(l.segments), 1) }

// Err returns why the log is broken (a failure it could not repair: reopen the
// partition to recover), or nil.
func (l *Log) Err() error { return l.broken }

// Stats returns the log's counters.
func (l *Log) Stats() Stats { return l.stats }

// Idle reports whether none of the log's requests is in flight.
func (l *Log) Idle() bool { return l.requestsInFlight == 0 }

// WaitIdle polls the storage until none of the log's requests is in flight. The
// owner's loop normally does the polling; this is for Close, tests and tools.
func (l *Log) WaitIdle() {
	for l.requestsInFlight > 0 {
		if l.st.Poll(true) == 0 && l.requestsInFlight > 0 {
			panic("segment: storage has no request in flight but the log waits for one")
		}
	}
}

// Append writes one stamped batch (wire.StampBatch) to the log. The batch must be
// exactly one batch (batch_length == len(batch)) with base_offset == NextOffset(),
// partition_id == Config.PartitionID and base_timestamp >= LastTimestamp(); its
// checksums are the stamper's business (wire.ValidateBatch at admission) and are not
// recomputed here.
//
// Append submits the write and returns: the batch's bytes are written as they are,
// so the caller must not modify or reuse them until Hooks.Written (or Failed) has
// passed the batch. It refuses with wire.ErrTransientNotAccepted while
// InflightBatchesMax appends are in flight or while the log repairs a failed write;
// the caller retries after polling the storage.
func (l *Log) Append(batch []byte) error {
	switch {
	case l.closed:
		return wire.ErrSegmentClosed
	case l.broken != nil:
		return l.broken
	case l.failure.active || l.fifo.count == l.cfg.InflightBatchesMax:
		return wire.ErrTransientNotAccepted
	}
	header, err := wire.ViewBatchHeader(batch)
	if err != nil {
		return err
	}
	switch {
	case header.BatchLength() != uint64(len(batch)):
		return wire.ErrInvalidCommand
	case header.MessageCount() == 0:
		return wire.ErrInvalidMessagesCount
	case header.BaseOffset() != l.nextOffset:
		return ErrOffsetMismatch
	case header.PartitionID() != l.cfg.PartitionID:
		return ErrPartitionMismatch
	case header.BaseTimestamp() < l.lastTimestamp:
		return ErrTimestampRegression
	}
	if l.needSegment {
		if err := l.openSegment(l.nextOffset); err != nil {
			return err
		}
	}
	seg := l.segments[len(l.segments)-1]
	count := uint64(header.MessageCount())
	end := l.nextOffset + count

	if l.fifo.count == len(l.fifo.slots) {
		l.growFifo()
	}
	slot := (l.fifo.head + l.fifo.count) % len(l.fifo.slots)
	seq := l.fifo.headSeq + uint64(l.fifo.count)
	l.fifo.slots[slot] = inflight{seg: seg, base: l.nextOffset, end: end}
	l.fifo.count++

	l.reserveAhead(seg)
	write := l.request(OpWrite, purposeAppendWrite, seg)
	write.File = seg.logFile
	write.Offset = seg.sizeBytes
	write.Data = batch
	write.target = seq
	seg.writes++
	if l.cfg.EnforceFsync {
		write.Link = true
		sync := l.request(OpSync, purposeAppendSync, seg)
		sync.File = seg.logFile
		sync.target = seq
		l.st.Submit(write)
		l.st.Submit(sync)
	} else {
		l.st.Submit(write)
	}

	seg.index = seg.index.append(l.nextOffset, header.BaseTimestamp(), seg.sizeBytes)
	seg.sizeBytes += int64(len(batch))
	seg.endOffset = end
	seg.maxTimestamp = header.BaseTimestamp()
	l.nextOffset = end
	l.lastTimestamp = header.BaseTimestamp()
	l.stats.Appends++
	l.stats.AppendedBytes += uint64(len(batch))

	if !l.cfg.EnforceFsync {
		l.unsyncedMessages += count
		l.unsyncedBytes += int64(len(batch))
		if l.unsyncedMessages >= uint64(l.cfg.MessagesRequiredToSave) || l.unsyncedBytes >= l.cfg.SizeOfMessagesRequiredToSaveBytes {
			l.save()
		}
	}
	if seg.sizeBytes >= l.cfg.SegmentSizeBytes {
		l.seal(seg)
	}
	return nil
}

// Sync asks for every written batch to be made durable now (a save ahead of the
// thresholds). With EnforceFsync it has nothing to do.
func (l *Log) Sync() {
	if !l.cfg.EnforceFsync && !l.failure.active && l.broken == nil && !l.closed {
		l.save()
	}
}

// save issues the save-threshold fdatasync of the open segment. A sync covers the
// writes that completed before it started, so it proves durable what was written by
// now: writtenEnd, within this segment.
//
// The open segment's index is not written here, only at its seal and at Close, each
// time after the .log's fdatasync: a complete index on disk then proves the log under
// it durable, which is what recovery trusts a segment on. An index written ahead (as
// a hint) could survive a crash that the log bytes it points at did not.
//
// At most one save is in flight: one that comes due meanwhile waits for it and then
// covers everything written by then. An fdatasync of a file takes milliseconds on a
// busy disk (a device cache flush), longer than the batches that bring the next
// save due, and without the wait they piled up in the kernel's io-wq workers (8 in
// flight at once per log were seen), which a disk ring's writes share: an append's
// write then waited tens of milliseconds for a worker. The next sync starts no later
// than the one before it ends, and no acknowledgement waits for a save (an
// EnforceFsync log syncs each append in its own chain instead).
func (l *Log) save() {
	l.unsyncedMessages, l.unsyncedBytes = 0, 0
	if l.saveInFlight {
		l.saveAgain = true
		return
	}
	if len(l.segments) == 0 {
		return // nothing was ever appended
	}
	seg := l.segments[len(l.segments)-1]
	if seg.state != segmentActive {
		return // its seal chain makes it durable
	}
	target := min(l.writtenEnd, seg.endOffset)
	if target <= seg.syncedEnd {
		return
	}
	sync := l.request(OpSync, purposeSaveSync, seg)
	sync.File = seg.logFile
	sync.target = target
	l.saveInFlight = true
	l.st.Submit(sync)
	l.stats.Syncs++
}

func (l *Log) writeIndexTail(seg *segment) {
	if seg.indexWritten == len(seg.index) {
		return
	}
	w := l.request(OpWrite, purposeIndexWrite, seg)
	w.File = seg.indexFile
	w.Offset = int64(seg.indexWritten)
	w.Data = seg.index[seg.indexWritten:]
	seg.indexWritten = len(seg.index)
	l.st.Submit(w)
}

// seal closes seg to appends. Its seal chain (fdatasync .log, write the whole .index,
// fdatasync .index) starts once its appends have completed: a sync covers only writes
// that completed before it, and io_uring orders nothing that is not linked.
func (l *Log) seal(seg *segment) {
	seg.state = segmentSealing
	l.needSegment = true
	l.maybeSubmitSealChain(seg)
}

// maybeSubmitSealChain starts seg's seal chain once its appends have completed,
// unless a failure is about to cut into it: a durable, complete index over a log
// with a hole would make recovery trust the hole. Sealing segments below a failure
// are sealed as usual (even while the log waits to rewind), and rewind starts the
// chains it held back.
func (l *Log) maybeSubmitSealChain(seg *segment) {
	if seg.state != segmentSealing || seg.writes != 0 || seg.chainSubmitted {
		return
	}
	if l.failure.active && l.failure.rewindTo < seg.endOffset {
		return
	}
	l.submitSealChain(seg)
}

// submitSealChain writes the whole index rather than its tail: an unlinked index
// write of an earlier tail may still be in flight, and the chain's sync must cover
// every byte of the index, which is what makes the segment trusted at recovery.
func (l *Log) submitSealChain(seg *segment) {
	seg.chainSubmitted = true
	logSync := l.request(OpSync, purposeSealLogSync, seg)
	logSync.File = seg.logFile
	logSync.Link = true
	indexWrite := l.request(OpWrite, purposeSealIndexWrite, seg)
	indexWrite.File = seg.indexFile
	indexWrite.Data = seg.index
	indexWrite.Link = true
	indexSync := l.request(OpSync, purposeSealIndexSync, seg)
	indexSync.File = seg.indexFile
	seg.indexWritten = len(seg.index)
	l.st.Submit(logSync)
	l.st.Submit(indexWrite)
	l.st.Submit(indexSync)
	l.stats.Seals++
}

// openSegment creates the segment starting at baseOffset and makes it the last.
func (l *Log) openSegment(baseOffset uint64) error {
	var prealloc int64
	if l.cfg.PreallocateSegments {
		prealloc = l.cfg.SegmentSizeBytes
	}
	logFile, logSize, err := l.st.Open(segmentLogName(baseOffset), true, prealloc)
	if err != nil {
		return fmt.Errorf("segment: %w: %v", wire.ErrCannotCreateSegmentLogFile, err)
	}
	indexFile, indexSize, err := l.st.Open(segmentIndexName(baseOffset), true, 0)
	if err != nil {
		_ = l.st.Close(logFile)
		return fmt.Errorf("segment: %w: %v", wire.ErrCannotCreateSegmentIndexFile, err)
	}
	seg := &segment{
		baseOffset: baseOffset,
		endOffset:  baseOffset,
		logFile:    logFile,
		indexFile:  indexFile,
		syncedEnd:  baseOffset,
		// The whole segment is reserved already: nothing to reserve ahead.
		reservedEnd: prealloc,
	}
	if logSize != 0 || indexSize != 0 {
		// Left over from a rewind whose removal did not happen before a crash, say:
		// the new segment starts empty.
		if err := l.wait(&Request{Op: OpTruncate, File: logFile}); err != nil {
			return fmt.Errorf("segment: %w: truncate leftover: %v", wire.ErrCannotCreateSegmentLogFile, err)
		}
		if err := l.wait(&Request{Op: OpTruncate, File: indexFile}); err != nil {
			return fmt.Errorf("segment: %w: truncate leftover: %v", wire.ErrCannotCreateSegmentIndexFile, err)
		}
	}
	l.segments = append(l.segments, seg)
	l.needSegment = false
	return nil
}

// request takes a request from the free list (allocating only when the list is empty:
// the list grows to the most requests ever in flight and then stays).
func (l *Log) request(op Op, p purpose, seg *segment) *Request {
	var r *Request
	if n := len(l.free); n > 0 {
		r = l.free[n-1]
		l.free = l.free[:n-1]
	} else {
		r = new(Request)
	}
	*r = Request{Op: op, purpose: p, seg: seg, Done: l.done}
	l.requestsInFlight++
	return r
}

func (l *Log) release(r *Request) {
	*r = Request{}
	l.free = append(l.free, r)
}

// wait submits r and polls until it completes: for the cold paths (recovery, Close,
// retention, consumer offsets on load), where the owner is not serving yet or a
// blocking step is rare and bounded. Completions of other requests that arrive
// meanwhile run their own hooks as usual.
func (l *Log) wait(r *Request) error {
	finished := false
	r.Done = func(*Request) { finished = true }
	l.st.Submit(r)
	// No rewind starts inside a wait (the caller may be in the middle of planning
	// over the segments a rewind would change); a failure that became ready to
	// repair meanwhile is repaired when the wait ends.
	l.waitDepth++
	for !finished {
		if l.st.Poll(true) == 0 && !finished {
			panic("segment: storage lost a request")
		}
	}
	l.waitDepth--
	if l.waitDepth == 0 {
		l.repairWhenQuiet()
	}
	return r.Err
}

// complete is every log request's Done hook.
func (l *Log) complete(r *Request) {
	l.requestsInFlight--
	seg := r.seg
	switch r.purpose {
	case purposeAppendWrite:
		seg.writes--
		e := l.entry(r.target)
		if r.Err != nil {
			l.fail(e.base, fmt.Errorf("segment: write %s at %d: %w", segmentLogName(seg.baseOffset), r.Offset, r.Err))
		} else {
			e.written = true
			if l.cfg.TrustWrites {
				seg.checksMade().add(r.Offset, r.Offset+int64(len(r.Data)))
			}
			l.advanceWritten()
		}
		l.maybeSubmitSealChain(seg)
	case purposeAppendSync:
		if r.target < l.fifo.headSeq {
			// Already retired: a seal chain's fdatasync of the whole segment, which
			// started after this batch's write completed, made it durable first (a
			// ring runs the two syncs in any order).
			if r.Err != nil && !errors.Is(r.Err, ErrCanceled) {
				l.stats.LateSyncFailures++
			}
		} else if r.Err == nil {
			l.entry(r.target).durable = true
			l.advanceDurable()
		} else if !errors.Is(r.Err, ErrCanceled) {
			l.fail(seg.syncedEnd, fmt.Errorf("segment: fdatasync %s: %w", segmentLogName(seg.baseOffset), r.Err))
		}
	case purposeSaveSync:
		l.saveInFlight = false
		if r.Err != nil {
			l.fail(seg.syncedEnd, fmt.Errorf("segment: fdatasync %s: %w", segmentLogName(seg.baseOffset), r.Err))
		} else if seg.state != segmentSealed {
			seg.syncedEnd = max(seg.syncedEnd, r.target)
			l.advanceDurable()
		}
		if l.saveAgain {
			l.saveAgain = false
			l.Sync()
		}
	case purposeIndexWrite:
		// Only Close writes the open segment's index this way; recovery rebuilds the
		// last segment's index anyway, so a failed write loses nothing.
		if r.Err != nil {
			l.stats.IndexWriteFailures++
		}
	case purposeSealLogSync, purposeSealIndexWrite:
		if r.Err != nil && !errors.Is(r.Err, ErrCanceled) {
			l.fail(seg.syncedEnd, fmt.Errorf("segment: seal %s: %s: %w", segmentLogName(seg.baseOffset), r.purposeName(), r.Err))
		}
	case purposeSealIndexSync:
		if r.Err == nil {
			if seg.state == segmentSealing {
				seg.state = segmentSealed
				seg.syncedEnd = seg.endOffset
				seg.indexBytes = int64(len(seg.index))
				seg.lastBatchOffset = seg.index.offset(seg.index.len() - 1)
				l.indexes.loaded++
				l.evictIndexes()
				l.advanceDurable()
			}
		} else if !errors.Is(r.Err, ErrCanceled) {
			l.fail(seg.syncedEnd, fmt.Errorf("segment: seal %s: %s: %w", segmentLogName(seg.baseOffset), r.purposeName(), r.Err))
		}
	case purposeRepair:
		l.failure.repairsInFlight--
		if r.Err != nil && !errors.Is(r.Err, ErrCanceled) && l.broken == nil {
			l.broken = fmt.Errorf("segment: repair after %v failed: %s: %w", l.failure.err, r.Op, r.Err)
		}
		if l.failure.repairsInFlight == 0 && l.broken == nil {
			// Only now, with the cut durable, can no crash bring the batches back.
			err := l.failure.err
			l.failure.active = false
			l.failure.err = nil
			if l.hooks.Failed != nil {
				l.hooks.Failed(l.failure.cutFrom, l.failure.cutTo, err)
			}
			l.reportProgress()
		}
	case purposeOffsetWrite, purposeOffsetSync:
		if l.offsets.complete(r) {
			l.writeOffset(r.stored)
		}
	case purposeReserve:
		l.completeReserve(r)
	case purposeRead:
		l.completeRead(r) // releases r: the read's done hook may start another read
		l.repairWhenQuiet()
		return
	case purposeScrub:
		l.completeScrub(r) // releases r: the step's done hook may start another
		l.repairWhenQuiet()
		return
	default:
		panic(fmt.Sprintf("segment: completion of unknown purpose %d", r.purpose))
	}
	l.release(r)
	l.repairWhenQuiet()
}

func (r *Request) purposeName() string {
	switch r.purpose {
	case purposeSealLogSync:
		return "fdatasync log"
	case purposeSealIndexWrite:
		return "write index"
	case purposeSealIndexSync:
		return "fdatasync index"
	}
	return r.Op.String()
}

// Close waits for every request in flight, writes and syncs the open segment's
// index and log, and closes the files. The log refuses everything afterwards.
func (l *Log) Close() error {
	if l.closed {
		return nil
	}
	l.WaitIdle()
	var err error
	if l.broken == nil && !l.failure.active && len(l.segments) > 0 {
		seg := l.segments[len(l.segments)-1]
		if seg.state == segmentActive {
			// The log first, then its index (see save).
			if e := l.wait(&Request{Op: OpSync, File: seg.logFile}); e != nil {
				err = fmt.Errorf("segment: close: fdatasync %s: %w", segmentLogName(seg.baseOffset), e)
			} else {
				l.writeIndexTail(seg)
				l.WaitIdle()
				if e := l.wait(&Request{Op: OpSync, File: seg.indexFile}); e != nil {
					err = fmt.Errorf("segment: close: fdatasync %s: %w", segmentIndexName(seg.baseOffset), e)
				}
			}
		}
	} else if l.broken != nil {
		err = l.broken
	}
	l.offsets.close(l)
	l.closeFiles()
	l.closed = true
	return err
}

func (l *Log) closeFiles() {
	for _, s := range l.segments {
		_ = l.st.Close(s.logFile)
		_ = l.st.Close(s.indexFile)
	}
}
