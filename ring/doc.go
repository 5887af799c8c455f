// Package ring is iggy-shard's io_uring binding: ring setup, submission and
// completion queues, SQE preparation, provided buffer rings, registered files
// and buffers, and MSG_RING between rings. It is written on
// golang.org/x/sys/unix system calls, without cgo; the kernel UAPI header
// <linux/io_uring.h> is the reference for every layout and constant.
//
// # Memory layout
//
// New asks the kernel for a ring (io_uring_setup) and maps three regions
// shared with it (one region for both rings with IORING_FEAT_SINGLE_MMAP):
//
//	SQ ring:  head | tail | mask | entries | flags | dropped | array[entries]u32
//	CQ ring:  head | tail | mask | entries | overflow | cqes[cq entries]CQE (16 B)
//	SQEs:     sqes[entries]SQE (64 B)
//
// We fill SQEs and move the SQ tail; the kernel consumes them and moves the
// SQ head. The kernel posts CQEs and moves the CQ tail; we read them and move
// the CQ head. The SQ array is the identity mapping, written once, so SQE i
// is always ring position i (mod entries).
//
// # Ordering
//
// Each index has one writer. Our stores of the SQ tail and CQ head are
// releases (SQE bytes written, CQE bytes read, before the index moves), our
// loads of the SQ head and CQ tail are acquires (CQE bytes read after the
// tail that covers them). sync/atomic gives Go code those orderings (it is
// sequentially consistent, which is stronger): see the comment in ring.go.
//
// # Operations and user_data
//
//	sqe, err := r.GetSQE()          // ErrSQFull only if an open link chain blocks a flush
//	sqe.PrepareRecv(fd, buf, 0)     // buf must outlive the operation
//	sqe.UserData = userData         // from a Table, below
//	r.SubmitAndWait(1)              // or Submit, or SubmitAndWaitTimeout
//	for cqe, ok := r.PeekCQE(); ok; cqe, ok = r.PeekCQE() {
//	        ... cqe.UserData, cqe.Res, cqe.Err(), cqe.More(), cqe.BufferID()
//	        r.CQESeen()
//	}
//
// The loop allocates nothing and runs no callbacks inside the reaping; the
// caller decides what to do with each CQE. ReapCQEs(dst) instead copies a
// batch of CQEs into a caller-owned slice and consumes them at once, so that
// handlers run after reaping and may submit (or wait) freely. Table[T] maps user_data to an
// owner without maps: user_data packs a slot index (low 32 bits) and the
// slot's generation (bits 32..62), so a stale CQE never reaches a slot's new
// owner; bit 63 is left for untracked operations. A multishot operation
// (accept, recv, and send_zc's two CQEs) keeps its slot while CQE.More()
// is true; its last CQE has no CQEFMore and frees the slot. A recv with a
// provided buffer names the buffer in the CQE's flags (CQE.BufferID); give it
// back with BufferRing.Recycle.
//
// # Threading
//
// A Ring is not safe for concurrent use. DefaultOptions sets
// IORING_SETUP_SINGLE_ISSUER: the kernel then accepts submissions and most
// registrations only from the thread that created the ring, and answers
// others with EEXIST (ErrWrongThread). Go moves goroutines between threads,
// so the owner must call runtime.LockOSThread before New and stay locked for
// the ring's life; the shard's event loop does. With
// IORING_SETUP_DEFER_TASKRUN, completions are only posted when that thread
// enters the kernel asking for events: every Submit* call does
// (IORING_ENTER_GETEVENTS), and PeekCQE alone never sees new ones. Another
// thread may wake a blocked ring only through MSG_RING from its own ring.
// In tests, mind that t.Run and b.Run run their function on a new goroutine:
// create the ring inside it, after runtime.LockOSThread. RegisterRingFd
// binds the ring to the owner thread a second way (the registration lives
// in that thread's table), so Close the ring on that thread too.
//
// # Errors
//
// An operation's failure is a negative CQE.Res, returned by CQE.Err as a
// unix.Errno. io_uring_enter failures come back from Submit*: EINTR is
// retried, EBUSY/EAGAIN become ErrCQOverflow (reap, then retry), EBADR
// ErrCQEsDropped, EEXIST ErrWrongThread. EFAULT, EINVAL and EBADF from the
// kernel on our own requests are bugs (of the caller's memory handling or of
// this package), never expected from a correct program.
package ring
