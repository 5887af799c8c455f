package segment

import (
	"errors"
	"fmt"
)

// Storage carries out the log's file I/O. The log never touches a file itself: it
// asks for reads, writes, fdatasyncs, reservations, truncations and removals as
// Requests and is told of each completion through the request's Done hook. Two implementations live here:
// OSStorage (blocking pread/pwrite/fdatasync, for benchmarks and for a server not yet
// wired to its ring) and SimDisk (in memory, with fault injection and crashes). The
// shard's io_uring ring is the third: Submit becomes an SQE, Poll reaps CQEs.
//
// The contract, which every implementation keeps:
//
//   - Submit only queues. Done is never called from inside Submit, so the log may
//     submit from within a completion without recursing (TigerBeetle's io/linux.zig
//     does the same for the same reason).
//   - Done runs from Poll, on the goroutine that called Poll. A request's Result and
//     Err are set before Done runs, and the storage does not touch the request after.
//   - Requests not joined by Link run in any order and complete in any order, as on an
//     io_uring. A request with Link set lets the next submitted request start only
//     after it succeeded; if it fails, every request still linked after it completes
//     with ErrCanceled (IOSQE_IO_LINK semantics). A write linked to a sync is how
//     enforce_fsync makes one batch durable.
//   - A write either writes all of Data or reports an error (OSStorage retries a
//     short write; shard.DiskStorage reports one as an error, and the log cuts the batch). A
//     read reports how many bytes it read in Result; fewer than len(Data) means the
//     file ended.
//   - Open, List and Close are synchronous: they happen once per segment (every
//     segment_size bytes) or at startup, where a blocking call costs nothing that
//     matters, and an asynchronous open would force every append behind it to queue.
type Storage interface {
	// Open opens the file name (a path relative to the partition directory), creating
	// it and its parent directories when create is set, and returns its handle and
	// current size. With create and preallocateBytes > 0 the storage may reserve that
	// many bytes without changing the file size (fallocate KEEP_SIZE).
	Open(name string, create bool, preallocateBytes int64) (File, int64, error)
	// Close releases a handle. Requests still in flight on it are a bug of the caller.
	Close(f File) error
	// List returns the names of the regular files directly under dir (relative to the
	// partition directory; "" is the partition directory itself), sorted. A missing dir
	// is an empty list.
	List(dir string) ([]string, error)
	// Submit queues r; see the contract above.
	Submit(r *Request)
	// Poll runs the Done hooks of completed requests and returns how many ran. With
	// wait set and requests in flight it blocks until at least one has completed.
	Poll(wait bool) int
}

// File is a storage's handle for an open file.
type File uint32

// Op is the kind of a Request.
type Op uint8

const (
	// OpWrite writes Data at Offset.
	OpWrite Op = iota + 1
	// OpRead reads up to len(Data) bytes at Offset into Data.
	OpRead
	// OpSync makes every write to File that completed before it started durable
	// (fdatasync: data and the size, not the timestamps).
	OpSync
	// OpTruncate sets File's size to Offset.
	OpTruncate
	// OpRemove deletes the file named Name. Its handle must be closed first.
	OpRemove
	// OpReserve allocates Length bytes of File from Offset on the disk without
	// changing its size or its contents (fallocate FALLOC_FL_KEEP_SIZE): the writes
	// that later land there find their blocks allocated (reserve.go says why). A
	// storage that cannot reserve completes it with an error that wraps
	// errors.ErrUnsupported (EOPNOTSUPP does), and the log issues it no more.
	OpReserve
)

func (op Op) String() string {
	switch op {
	case OpWrite:
		return "write"
	case OpRead:
		return "read"
	case OpSync:
		return "sync"
	case OpTruncate:
		return "truncate"
	case OpRemove:
		return "remove"
	case OpReserve:
		return "reserve"
	}
	return fmt.Sprintf("Op(%d)", uint8(op))
}

// Request is one I/O operation. The submitter owns it (the log keeps a free list, so
// an append submits without allocating) and must keep Data untouched until Done runs.
type Request struct {
	Op     Op
	File   File
	Name   string // OpRemove only
	Offset int64  // file position (OpWrite, OpRead, OpReserve) or new size (OpTruncate)
	Length int64  // OpReserve only: how many bytes from Offset
	Data   []byte // OpWrite: the bytes to write; OpRead: where to read to
	Link   bool   // the next submitted request starts only after this one succeeds

	// Set by the storage before Done runs.
	Result int64 // bytes read or written
	Err    error

	// Done is called once, from Storage.Poll, when the request has completed.
	Done func(*Request)

	// The submitter's own context; a storage never reads these.
	purpose purpose
	seg     *segment
	stored  *storedOffset
	polled  *Polled
	target  uint64 // what completing this request proves: an offset end or a slot

	// A CachedStorage's, while the request is in flight: the file it pins, and
	// the submitter's Done and handle, given back before Done runs.
	cached     *cachedFile
	callerDone func(*Request)
	callerFile File
}

// ErrCanceled completes a request linked after one that failed.
var ErrCanceled = errors.New("segment: linked request canceled because an earlier one failed")

// ErrNoSpace is the simulated disk's full-disk error; OSStorage reports the
// underlying ENOSPC wrapped in an *os.PathError-like error instead. Test with
// IsNoSpace.
var ErrNoSpace = errors.New("segment: no space left on device")

// ErrInjectedIO is an I/O error injected by the simulated disk (for example a failed
// fdatasync).
var ErrInjectedIO = errors.New("segment: injected I/O error")
