// Package ringio carries out a partition log's I/O (segment.Storage) through an
// io_uring ring (package ring): reads, writes and fdatasyncs become SQEs, link
// chains become IOSQE_IO_LINK chains, and Poll reaps CQEs and runs the requests'
// Done hooks after reaping, never inside it.
//
// It is a leaf package beside segment so that segment itself never imports ring
// (DESIGN.md); the shard uses it with the ring it owns.
//
// What goes where:
//
//	OpRead, OpWrite, OpSync     the ring (IORING_OP_READ, _WRITE, _FSYNC with DATASYNC)
//	OpTruncate, OpRemove        a blocking ftruncate/unlink when submitted, completed
//	                            at the next Poll: they happen only when a failed
//	                            write is cut back or a segment is deleted, and
//	                            IORING_OP_FTRUNCATE needs Linux 6.9
//	Open, List, Close           segment.OSStorage, blocking (once per segment)
//
// A write the kernel completes short (a full disk part-way) is reported as an error:
// the log then cuts the batch, rather than this package resubmitting the rest behind
// a link that has already fired.
package ringio

import (
	"errors"
	"fmt"
	"io"

	"github.com/iggy-shard/iggy-shard/ring"
	"github.com/iggy-shard/iggy-shard/segment"
	"golang.org/x/sys/unix"
)

// chainMax is the longest link chain the log submits (a seal: fdatasync log, write
// index, fdatasync index). A chain is only started when the SQ has room for all of
// it, so the ring never has to cut one in two.
const chainMax = 3

// Storage is a segment.Storage over a ring. Like the ring, it belongs to the one
// thread that created the ring.
type Storage struct {
	files *segment.OSStorage
	ring  *ring.Ring
	table *ring.Table[*segment.Request]

	waiting []*segment.Request // submitted, not in the SQ yet (no SQE or table slot)
	done    []*segment.Request // completed, Done not yet run
	running []*segment.Request
	cqes    []ring.CQE

	inRing     int  // requests whose CQE is still to come
	chainOpen  bool // the last SQE prepared had IOSQE_IO_LINK
	cancelNext bool // a blocking request with Link failed: cancel the next one
	depth      int  // nesting of Poll calls
}

// New returns a storage for the partition directory dir whose data requests go
// through r; at most inFlightMax of them are in the ring at once (more wait in
// submission order).
func New(dir string, r *ring.Ring, inFlightMax uint32) (*Storage, error) {
	files, err := segment.NewOSStorage(dir)
	if err != nil {
		return nil, err
	}
	return &Storage{
		files: files,
		ring:  r,
		table: ring.NewTable[*segment.Request](inFlightMax),
		cqes:  make([]ring.CQE, 64),
	}, nil
}

// Open implements segment.Storage.
func (s *Storage) Open(name string, create bool, preallocateBytes int64) (segment.File, int64, error) {
	return s.files.Open(name, create, preallocateBytes)
}

// Close implements segment.Storage.
func (s *Storage) Close(f segment.File) error { return s.files.Close(f) }

// List implements segment.Storage.
func (s *Storage) List(dir string) ([]string, error) { return s.files.List(dir) }

// Submit implements segment.Storage.
func (s *Storage) Submit(r *segment.Request) {
	if s.cancelNext {
		r.Result, r.Err = 0, segment.ErrCanceled
		s.cancelNext = r.Link
		s.done = append(s.done, r)
		return
	}
	switch r.Op {
	case segment.OpTruncate, segment.OpRemove:
		if s.chainOpen {
			// A ring request linked into a blocking one would need a drain first;
			// the log never links into a truncation or removal. Unlinked requests
			// may run in any order (the Storage contract), so running this one
			// ahead of requests still waiting for the SQ is allowed.
			panic(fmt.Sprintf("ringio: %v linked behind a ring request", r.Op))
		}
		r.Result, r.Err = s.files.Execute(r)
		s.cancelNext = r.Link && r.Err != nil
		s.done = append(s.done, r)
		return
	}
	if len(s.waiting) > 0 || !s.prepare(r) {
		s.waiting = append(s.waiting, r)
	}
}

// prepare puts r in the SQ, or reports false when there is no room yet.
func (s *Storage) prepare(r *segment.Request) bool {
	if !s.chainOpen && r.Link && s.ring.SQSpaceLeft() < chainMax {
		if _, err := s.ring.Submit(); err != nil && !errors.Is(err, ring.ErrCQOverflow) {
			panic(fmt.Sprintf("ringio: submit: %v", err))
		}
		if s.ring.SQSpaceLeft() < chainMax {
			return false
		}
	}
	userData, ok := s.table.Add(r)
	if !ok {
		return false
	}
	sqe, err := s.ring.GetSQE()
	if err != nil {
		s.table.Release(userData)
		return false
	}
	fd := s.files.FD(r.File)
	switch r.Op {
	case segment.OpWrite:
		sqe.PrepareWrite(fd, r.Data, uint64(r.Offset))
	case segment.OpRead:
		sqe.PrepareRead(fd, r.Data, uint64(r.Offset))
	case segment.OpSync:
		sqe.PrepareFsync(fd, ring.FsyncDatasync)
	default:
		panic(fmt.Sprintf("ringio: unknown op %v", r.Op))
	}
	sqe.UserData = userData
	if r.Link {
		sqe.Flags |= ring.SQEIOLink
	}
	s.chainOpen = r.Link
	s.inRing++
	return true
}

// Poll implements segment.Storage: it moves waiting requests into the SQ, submits
// (waiting for a completion when asked and nothing has completed yet), reaps the
// CQEs, then runs the Done hooks of everything that completed.
func (s *Storage) Poll(wait bool) int {
	for len(s.waiting) > 0 && s.prepare(s.waiting[0]) {
		s.waiting = s.waiting[1:]
	}
	var err error
	if wait && len(s.done) == 0 && s.inRing > 0 {
		_, err = s.ring.SubmitAndWait(1)
	} else if s.ring.SQPending() > 0 {
		_, err = s.ring.Submit()
	}
	if err != nil && !errors.Is(err, ring.ErrCQOverflow) && !errors.Is(err, unix.EINTR) {
		// Dropped completions or a ring used from the wrong thread: the state of
		// the requests in flight is lost, no retry makes it whole.
		panic(fmt.Sprintf("ringio: submit: %v", err))
	}
	for {
		n := s.ring.ReapCQEs(s.cqes)
		for i := range s.cqes[:n] {
			cqe := &s.cqes[i]
			value, last, ok := s.table.Complete(cqe)
			if !ok || !last {
				continue
			}
			r := *value
			s.inRing--
			s.finish(r, cqe)
			s.done = append(s.done, r)
		}
		if n < len(s.cqes) {
			break
		}
	}
	if len(s.done) == 0 {
		return 0
	}
	// A Done hook may Poll again (a blocking wait inside a completion): the nested
	// call must not reuse the slice this one is walking.
	s.depth++
	defer func() { s.depth-- }()
	var batch []*segment.Request
	if s.depth == 1 {
		batch = s.running[:0]
	}
	batch = append(batch, s.done...)
	clear(s.done)
	s.done = s.done[:0]
	for _, r := range batch {
		r.Done(r)
	}
	if s.depth == 1 {
		clear(batch)
		s.running = batch[:0]
	}
	return len(batch)
}

func (s *Storage) finish(r *segment.Request, cqe *ring.CQE) {
	if err := cqe.Err(); err != nil {
		r.Result = 0
		if errors.Is(err, unix.ECANCELED) {
			r.Err = segment.ErrCanceled
		} else {
			r.Err = fmt.Errorf("ringio: %v: %w", r.Op, err)
		}
		return
	}
	r.Result, r.Err = int64(cqe.Res), nil
	if r.Op == segment.OpWrite && r.Result != int64(len(r.Data)) {
		r.Err = fmt.Errorf("ringio: write of %d bytes completed %d: %w", len(r.Data), r.Result, io.ErrShortWrite)
	}
}

// InFlight returns how many requests have not completed yet.
func (s *Storage) InFlight() int { return s.inRing + len(s.waiting) + len(s.done) }
