package segment

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// A read of whole, verified, durable batches can be answered without reading
// them: batches are stored in their wire layout, so the reply is runs of the
// segment files as they are, which the server splices to the socket (file ->
// pipe -> socket) instead of copying them through a buffer twice. PlanRead
// makes that plan, or declines and the read takes ReadAsync's copying path,
// which is the only one that may:
//
//   - cut a batch (the read starts inside one, or its count ends inside one):
//     the cut batch goes behind a recomputed header (wire.SliceBatch);
//   - touch a byte not verified yet: a batch is verified when first read after
//     it was written or recovered (verified.go), which needs its bytes in
//     memory, and once they are there a send from memory costs less than a
//     splice from the file (ring/pollreply_bench_test.go: "loopback" against
//     "splice"). The copy verifies them; the next read of them can be planned;
//   - touch a byte not durable yet: a failure's rewind cuts the log back to
//     its durable end and writes other batches there (rewind.go); a durable
//     byte is never cut, so a planned run never changes under a splice.
//
// A plan holds a descriptor of its own of each file it names (F_DUPFD_CLOEXEC,
// through the Storage's Descriptors), until Release. Nothing of the log waits
// for a plan: retention, purge, rollover, a rewind and the file cache close
// and unlink their own handles at once; the inode, and with it every byte a
// run names, lives until the plan's descriptor is closed (unlink(2): the file
// is removed once no descriptor refers to it). And the plan's descriptor is
// never closed and its number reused while a splice may name it, which
// matters because io_uring resolves a splice's input descriptor when it
// issues the request, in its worker, not when it is submitted (io_uring/
// splice.c in Linux, io_splice_get_file): the holder releases the plan only
// after the completion of every request that names its descriptors.

// PlanRunsMax bounds the runs of one plan: a read spans few segments, and one
// spanning more is copied.
const PlanRunsMax = 4

// Run is a stretch of a segment's .log sent as it is: whole batches, in
// offset order.
type Run struct {
	// FD is the plan's own descriptor of the file, valid until Plan.Release.
	FD      int
	Offset  int64  // file position of the first byte
	Length  int64  // bytes
	Segment uint64 // base offset of the segment (its file name)
}

// Plan is a read answered by the files themselves: whole stored batches,
// verified and durable, as runs of their segment files. A Plan is reused from
// read to read (its record list grows to the largest read and stays): it holds
// its descriptors from a PlanRead that planned until Release.
type Plan struct {
	Runs          []Run // in offset order; each names the plan's own descriptor
	MessageCount  uint32
	CurrentOffset uint64 // the partition's newest offset when planned
	FirstOffset   uint64 // the offset of the first message
	SizeBytes     int64  // the runs' bytes

	runs    [PlanRunsMax]Run
	records Polled // the planner's records, reused
}

// LastOffset is the offset of the plan's last message.
func (p *Plan) LastOffset() uint64 { return p.FirstOffset + uint64(p.MessageCount) - 1 }

// Holds reports whether the plan holds descriptors (it was planned and not
// released).
func (p *Plan) Holds() bool { return len(p.Runs) > 0 }

// Release closes the plan's descriptors, once no request that names them is in
// the kernel, and empties the plan. It returns the first close error (the
// descriptor is closed all the same).
func (p *Plan) Release() error {
	var err error
	for i := range p.Runs {
		if e := unix.Close(p.Runs[i].FD); e != nil && err == nil {
			err = fmt.Errorf("segment: release a plan of %s: %w", segmentLogName(p.Runs[i].Segment), e)
		}
	}
	p.reset()
	return err
}

func (p *Plan) reset() {
	clear(p.runs[:])
	p.Runs = p.runs[:0]
	p.MessageCount, p.CurrentOffset, p.FirstOffset, p.SizeBytes = 0, 0, 0, 0
	// The records point at segments: drop them, or a plan kept for the next
	// read would keep deleted segments' indexes alive.
	clear(p.records.Records)
	p.records.Records = p.records.Records[:0]
	clear(p.records.runs)
	p.records.runs = p.records.runs[:0]
}

// PlanVerdict is what PlanRead made of a read: a plan, or why it is copied.
type PlanVerdict uint8

const (
	Planned           PlanVerdict = iota
	DeclineEmpty                  // nothing to send (count 0, past the end, no match)
	DeclineCut                    // a batch would be cut: the read starts or ends inside one
	DeclineUnverified             // a batch is not verified yet: the copy verifies it
	DeclineNotDurable             // a batch is written but not durable yet
	DeclineSmall                  // fewer bytes than the caller's minimum: a copy is cheaper
	DeclineRuns                   // more than PlanRunsMax segments
	DeclineDescriptor             // the storage gives no descriptors, or could not dup one
	DeclineRepairing              // a failure's repair is pending
	DeclineClosed                 // the log is closed
	DeclineIndex                  // an index failed to load: ReadAsync reports it
	planVerdicts
)

// PlanVerdicts is the number of PlanVerdict values, for counting them.
const PlanVerdicts = int(planVerdicts)

func (v PlanVerdict) String() string {
	switch v {
	case Planned:
		return "planned"
	case DeclineEmpty:
		return "empty"
	case DeclineCut:
		return "cut"
	case DeclineUnverified:
		return "unverified"
	case DeclineNotDurable:
		return "not durable"
	case DeclineSmall:
		return "small"
	case DeclineRuns:
		return "runs"
	case DeclineDescriptor:
		return "descriptor"
	case DeclineRepairing:
		return "repairing"
	case DeclineClosed:
		return "closed"
	case DeclineIndex:
		return "index"
	}
	return fmt.Sprintf("PlanVerdict(%d)", uint8(v))
}

// Descriptors is a Storage whose files are the operating system's, which can
// give a plan a descriptor of its own of a file: OSStorage, a CachedStorage
// over one, the shard's ring storage. SimDisk is not one: a log over it
// plans nothing.
type Descriptors interface {
	// DupDescriptor returns a new descriptor of the file behind f
	// (F_DUPFD_CLOEXEC), the caller's to close.
	DupDescriptor(f File) (int, error)
}

// ErrNoDescriptors: the storage under a CachedStorage is not Descriptors.
var ErrNoDescriptors = errors.New("segment: the storage has no descriptors to give")

// PlanRead answers q like ReadAsync, with the same batches, as a plan of file
// runs into plan when every batch of the answer is whole, verified, durable
// and its runs at least minBytes long; otherwise it declines, holds nothing,
// and the caller reads with ReadAsync (which reports an index that fails to
// load: PlanRead only declines then). It never waits for I/O but to load a
// cold index, as ReadAsync does, and allocates nothing once plan's record list
// has grown. plan must not hold descriptors.
func (l *Log) PlanRead(q Query, minBytes int64, plan *Plan) PlanVerdict {
	if plan.Holds() {
		panic("segment: PlanRead into a plan that holds descriptors")
	}
	plan.reset()
	switch {
	case l.closed:
		return DeclineClosed
	case l.failure.active:
		return DeclineRepairing
	}
	descriptors, ok := l.st.(Descriptors)
	if !ok {
		return DeclineDescriptor
	}
	start, ok, err := l.startOffset(q)
	switch {
	case err != nil:
		return DeclineIndex
	case !ok || q.Count == 0:
		return DeclineEmpty
	}
	maxBytes := q.MaxBytes
	if maxBytes <= 0 {
		maxBytes = DefaultReadBytesMax
	}
	// The indexes stay loaded while the plan is made (ReadAsync says why).
	outerPinnedSince := l.indexes.pinnedSince
	if outerPinnedSince == 0 {
		l.indexes.pinnedSince = l.indexes.clock + 1
	}
	defer l.unpinIndexes(outerPinnedSince)
	if err := l.preloadIndexes(start, q.Count, maxBytes); err != nil {
		return DeclineIndex
	}
	end := l.readableEnd()
	if start >= end || l.failure.active {
		return DeclineEmpty
	}
	limit := end
	if end-start > uint64(q.Count) {
		limit = start + uint64(q.Count)
	}
	out := &plan.records
	total := l.planRecords(start, limit, maxBytes, out)
	records := out.Records
	if len(records) == 0 {
		return DeclineEmpty
	}
	first, last := &records[0], &records[len(records)-1]
	switch {
	case first.offset != start || last.end > limit:
		return DeclineCut
	case last.end > l.durableEnd:
		return DeclineNotDurable
	case int64(total) < minBytes:
		return DeclineSmall
	case len(out.runs) > PlanRunsMax:
		return DeclineRuns
	}
	for _, r := range out.runs {
		c := r.seg.checks
		// A quarantined batch is no longer in a verified range (quarantine).
		if c == nil || !c.covers(r.position, r.position+r.length) {
			return DeclineUnverified
		}
	}
	for _, r := range out.runs {
		fd, err := descriptors.DupDescriptor(r.seg.logFile)
		if err != nil {
			_ = plan.Release() // the ones taken so far
			return DeclineDescriptor
		}
		plan.Runs = append(plan.Runs, Run{FD: fd, Offset: r.position, Length: r.length, Segment: r.seg.baseOffset})
	}
	plan.MessageCount = uint32(last.end - start)
	plan.CurrentOffset, _ = l.CurrentOffset()
	plan.FirstOffset = start
	plan.SizeBytes = int64(total)
	l.stats.Plans++
	return Planned
}

// DupDescriptor implements Descriptors.
func (s *OSStorage) DupDescriptor(f File) (int, error) {
	fd, err := unix.FcntlInt(uintptr(s.fd(f)), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("segment: dup a descriptor: %w", err)
	}
	return fd, nil
}

// DupDescriptor implements Descriptors when the storage it wraps does: the
// file is opened again if the cache had closed it. The new descriptor is the
// caller's and does not count against the cache's budget: the caller bounds
// how many it holds (partition's plans: Replication.Plans.PlansMax).
func (s *CachedStorage) DupDescriptor(h File) (int, error) {
	inner, ok := s.inner.(Descriptors)
	if !ok {
		return -1, ErrNoDescriptors
	}
	f := s.file(h)
	if f.inner == 0 {
		if err := s.reopen(f); err != nil {
			return -1, err
		}
		s.cache.pushFront(f)
	} else if f.pins == 0 {
		unlink(f)
		s.cache.pushFront(f) // just used
	}
	fd, err := inner.DupDescriptor(f.inner)
	s.cache.trim()
	return fd, err
}
