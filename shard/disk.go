package shard

import (
	"errors"
	"fmt"
	"io"

	"golang.org/x/sys/unix"

	"github.com/iggy-shard/iggy-shard/ring"
	"github.com/iggy-shard/iggy-shard/segment"
)

// Disk carries the file I/O of every partition log of one shard through the shard's
// disk ring: each log gets a DiskStorage (a segment.Storage) from Open, and all of them
// share the ring, its submission queue and one table of requests in flight.
//
// Why a second ring rather than the connection ring: a log waits for its own I/O in
// places (Close, a read of consumer offsets, WaitIdle), and a wait on the connection
// ring would have to take socket completions out from under the loop and park them.
// On the disk ring a wait sees disk completions only. The loop still never blocks on
// it: the disk ring signals an eventfd on every completion, the shard keeps a read of
// that eventfd armed on its connection ring, and a completion thus wakes the loop,
// which lets the handler reap (Handler Tick -> partition.Store.PollIO).
//
//	connection ring: recv, send, accept, msg_ring ... read(diskEventFd) ─┐
//	disk ring:       write, read, fdatasync, fallocate ── CQE ── eventfd ┘
//
// What goes where: reads, writes, fdatasyncs and reservations are SQEs
// (IORING_OP_READ, _WRITE, _FSYNC with DATASYNC, _FALLOCATE with KEEP_SIZE); link
// chains are IOSQE_IO_LINK chains; truncations and removals are blocking calls
// completed at the next Poll (rare, and IORING_OP_FTRUNCATE needs Linux 6.9); open,
// list and close are blocking (once per segment). A write of at least
// AsyncWriteBytesMin is marked IOSQE_ASYNC: the kernel would otherwise copy a large
// buffered write into the page cache inline, on the shard's thread, during the
// submit.
type Disk struct {
	ring        *ring.Ring
	table       *ring.Table[diskEntry]
	inFlightMax uint32

	waiting    []diskEntry // submitted, not in the SQ yet, in submission order
	chainOwner *DiskStorage
	chainOpen  bool // the last SQE prepared had IOSQE_IO_LINK
	inRing     int
	ready      int // completed requests whose Done hooks have not run
	cqes       [64]ring.CQE
	enters     uint64 // io_uring_enter calls (Stats.DiskRingEnters)
	// progress counts requests put in the ring, completed and whose hooks ran: the
	// shard's loop sees disk work move by it (wait.go).
	progress uint64

	// AsyncWriteBytesMin: writes at least this large go to the kernel's workers
	// (IOSQE_ASYNC); 0 leaves every write to the kernel's choice.
	AsyncWriteBytesMin int
}

type diskEntry struct {
	req     *segment.Request
	storage *DiskStorage
}

// diskChainMax is the longest link chain a log submits (a seal: fdatasync log, write
// index, fdatasync index). A chain starts only when the SQ and the table have room for
// all of it, so it is not cut in two for want of room, and no other log's request
// joins it: those wait until the chain has been submitted.
const diskChainMax = 3

// NewDisk returns a Disk over r, with at most inFlightMax requests in the ring at once
// (more wait in submission order). r must belong to the calling thread.
func NewDisk(r *ring.Ring, inFlightMax uint32) *Disk {
	return &Disk{ring: r, table: ring.NewTable[diskEntry](inFlightMax), inFlightMax: inFlightMax}
}

// Open returns a storage for the partition directory dir (created when missing).
func (d *Disk) Open(dir string) (*DiskStorage, error) {
	files, err := segment.NewOSStorage(dir)
	if err != nil {
		return nil, err
	}
	return &DiskStorage{disk: d, files: files}, nil
}

// Ready reports whether completed requests wait for their storage's Poll, or requests
// wait for room in the ring: the owner should poll again without blocking.
func (d *Disk) Ready() bool { return d.ready > 0 || (len(d.waiting) > 0 && d.inRing == 0) }

// InFlight returns how many requests are in the ring or waiting for it.
func (d *Disk) InFlight() int { return d.inRing + len(d.waiting) }

// Flush moves waiting requests into the SQ and submits them, without waiting.
func (d *Disk) Flush() {
	d.pump()
	d.enter(false)
}

// Reap takes every posted completion off the ring and hands each to its storage,
// whose next Poll runs its Done hook.
func (d *Disk) Reap() {
	for {
		n := d.ring.ReapCQEs(d.cqes[:])
		for i := range d.cqes[:n] {
			cqe := &d.cqes[i]
			value, last, ok := d.table.Complete(cqe)
			if !ok {
				panic(fmt.Sprintf("shard: disk completion with unknown user_data %#x", cqe.UserData))
			}
			if !last {
				continue
			}
			e := *value
			d.inRing--
			e.storage.inRing--
			e.storage.finish(e.req, cqe)
		}
		if n < len(d.cqes) {
			return
		}
	}
}

func (d *Disk) pump() {
	n := 0
	for n < len(d.waiting) {
		if d.chainOpen && d.waiting[n].storage != d.chainOwner {
			// Another log's link chain is open in the SQ: nothing may join it. The
			// next submit closes it (the kernel ends a chain at the batch's end).
			break
		}
		if !d.prepare(d.waiting[n]) {
			break
		}
		d.waiting[n].storage.queued--
		n++
	}
	if n > 0 {
		rest := copy(d.waiting, d.waiting[n:])
		clear(d.waiting[rest:])
		d.waiting = d.waiting[:rest]
	}
}

// prepare puts e in the SQ, or reports false when there is no room yet.
func (d *Disk) prepare(e diskEntry) bool {
	r := e.req
	if d.chainOpen && d.chainOwner != e.storage {
		return false
	}
	if !d.chainOpen && r.Link {
		if d.ring.SQSpaceLeft() < diskChainMax {
			d.enter(false)
		}
		if d.ring.SQSpaceLeft() < diskChainMax || uint32(d.table.InUse())+diskChainMax > d.inFlightMax {
			return false
		}
	}
	userData, ok := d.table.Add(e)
	if !ok {
		return false
	}
	sqe, err := d.ring.GetSQE()
	if err != nil {
		d.table.Release(userData)
		return false
	}
	fd := e.storage.files.FD(r.File)
	switch r.Op {
	case segment.OpWrite:
		sqe.PrepareWrite(fd, r.Data, uint64(r.Offset))
		if d.AsyncWriteBytesMin > 0 && len(r.Data) >= d.AsyncWriteBytesMin {
			sqe.Flags |= ring.SQEAsync
		}
	case segment.OpRead:
		sqe.PrepareRead(fd, r.Data, uint64(r.Offset))
	case segment.OpSync:
		sqe.PrepareFsync(fd, ring.FsyncDatasync)
	case segment.OpReserve:
		// IORING_OP_FALLOCATE takes the offset in off, the length in addr and the
		// mode in len. The kernel always runs it in its workers.
		*sqe = ring.SQE{Opcode: ring.OpFallocate, Fd: int32(fd), Off: uint64(r.Offset), Addr: uint64(r.Length), Len: unix.FALLOC_FL_KEEP_SIZE}
	default:
		panic(fmt.Sprintf("shard: disk request of unknown op %v", r.Op))
	}
	sqe.UserData = userData
	if r.Link {
		sqe.Flags |= ring.SQEIOLink
	}
	d.chainOpen = r.Link
	d.chainOwner = nil
	if r.Link {
		d.chainOwner = e.storage
	}
	d.inRing++
	d.progress++
	e.storage.inRing++
	return true
}

func (d *Disk) enter(wait bool) {
	var err error
	if wait {
		d.enters++
		_, err = d.ring.SubmitAndWait(1)
	} else if d.ring.SQPending() > 0 {
		d.enters++
		_, err = d.ring.Submit()
	}
	// Whatever was queued is the kernel's now, an open chain ended with the batch.
	d.chainOpen, d.chainOwner = false, nil
	if err != nil && !errors.Is(err, ring.ErrCQOverflow) && !errors.Is(err, unix.EINTR) {
		// Dropped completions or a ring used from the wrong thread: the state of the
		// requests in flight is lost, no retry makes it whole.
		panic(fmt.Sprintf("shard: disk ring submit: %v", err))
	}
}

// DiskStorage is one log's segment.Storage on its shard's Disk. It belongs to the
// shard's thread.
type DiskStorage struct {
	disk  *Disk
	files *segment.OSStorage

	done    []*segment.Request // completed, Done not yet run
	running []*segment.Request
	inRing  int // in the ring
	queued  int // in disk.waiting

	cancelNext bool // a blocking request with Link failed: cancel the next one
	depth      int  // nesting of Poll calls
}

// Open implements segment.Storage.
func (s *DiskStorage) Open(name string, create bool, preallocateBytes int64) (segment.File, int64, error) {
	return s.files.Open(name, create, preallocateBytes)
}

// Close implements segment.Storage.
func (s *DiskStorage) Close(f segment.File) error { return s.files.Close(f) }

// List implements segment.Storage.
func (s *DiskStorage) List(dir string) ([]string, error) { return s.files.List(dir) }

// DupDescriptor implements segment.Descriptors: a poll planned on this storage
// gets descriptors of its own of the segment files (segment.PlanRead), to
// splice them to a socket after the log has moved on.
func (s *DiskStorage) DupDescriptor(f segment.File) (int, error) { return s.files.DupDescriptor(f) }

// InFlight returns how many of this storage's requests have not had Done run.
func (s *DiskStorage) InFlight() int { return s.inRing + s.queued + len(s.done) }

// Submit implements segment.Storage.
func (s *DiskStorage) Submit(r *segment.Request) {
	d := s.disk
	if s.cancelNext {
		s.cancelNext = r.Link
		s.complete(r, 0, segment.ErrCanceled)
		return
	}
	switch r.Op {
	case segment.OpTruncate, segment.OpRemove:
		if d.chainOpen && d.chainOwner == s {
			// A ring request linked into a blocking one would need a drain first; the
			// log never links into a truncation or removal. Unlinked requests may run
			// in any order (the Storage contract).
			panic(fmt.Sprintf("shard: disk %v linked behind a ring request", r.Op))
		}
		res, err := s.files.Execute(r)
		s.cancelNext = r.Link && err != nil
		s.complete(r, res, err)
		return
	}
	e := diskEntry{req: r, storage: s}
	if d.chainOpen && d.chainOwner == s {
		// The rest of this log's chain: room for it was reserved when it started.
		if !d.prepare(e) {
			panic("shard: no room for the rest of a reserved disk link chain")
		}
		return
	}
	if len(d.waiting) > 0 || !d.prepare(e) {
		d.waiting = append(d.waiting, e)
		s.queued++
	}
}

func (s *DiskStorage) complete(r *segment.Request, result int64, err error) {
	r.Result, r.Err = result, err
	s.done = append(s.done, r)
	s.disk.ready++
	s.disk.progress++
}

// finish records a ring completion.
func (s *DiskStorage) finish(r *segment.Request, cqe *ring.CQE) {
	if err := cqe.Err(); err != nil {
		if errors.Is(err, unix.ECANCELED) {
			s.complete(r, 0, segment.ErrCanceled)
		} else {
			s.complete(r, 0, fmt.Errorf("shard: disk %v: %w", r.Op, err))
		}
		return
	}
	res := int64(cqe.Res)
	if r.Op == segment.OpWrite && res != int64(len(r.Data)) {
		// Reported, not resubmitted: the rest would go behind a link that already fired.
		s.complete(r, res, fmt.Errorf("shard: disk write of %d bytes completed %d: %w", len(r.Data), res, io.ErrShortWrite))
		return
	}
	s.complete(r, res, nil)
}

// Poll implements segment.Storage: it submits what waits, reaps the disk ring (handing
// other storages their completions for their own Poll), and runs the Done hooks of
// this storage's completed requests. With wait it blocks on the disk ring until one of
// its own requests has completed. A storage with no request anywhere returns at once:
// a shard polls every partition's storage on each turn with disk work, thousands of
// them idle, and the others' requests are submitted and reaped by their own Poll (and
// Disk.Flush). BenchmarkDiskPollIdle: 16-21 ns an idle storage before, ~3 after.
func (s *DiskStorage) Poll(wait bool) int {
	d := s.disk
	if !wait && s.inRing == 0 && s.queued == 0 && len(s.done) == 0 {
		return 0
	}
	d.pump()
	for {
		mine := s.inRing > 0 || s.queued > 0
		block := wait && len(s.done) == 0 && mine
		if block && d.inRing == 0 {
			panic("shard: a disk storage waits for requests that are not in the ring")
		}
		d.enter(block)
		d.Reap()
		d.pump()
		if !wait || len(s.done) > 0 || !(s.inRing > 0 || s.queued > 0) {
			break
		}
	}
	if len(s.done) == 0 {
		return 0
	}
	// A Done hook may Poll again (a blocking wait inside a completion): the nested call
	// must not reuse the slice this one is walking.
	s.depth++
	defer func() { s.depth-- }()
	var batch []*segment.Request
	if s.depth == 1 {
		batch = s.running[:0]
	}
	batch = append(batch, s.done...)
	clear(s.done)
	s.done = s.done[:0]
	d.ready -= len(batch)
	d.progress += uint64(len(batch))
	for _, r := range batch {
		r.Done(r)
	}
	if s.depth == 1 {
		clear(batch)
		s.running = batch[:0]
	}
	return len(batch)
}
