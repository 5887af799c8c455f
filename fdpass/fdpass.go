package fdpass

import (
	"errors"
	"fmt"

	"github.com/iggy-shard/iggy-shard/ring"
	"golang.org/x/sys/unix"
)

// Mode is how descriptors travel between shards.
type Mode int

const (
	// ModeMsgRing installs the file in the target ring's registered-file table with
	// IORING_OP_MSG_RING + IORING_MSG_SEND_FD (Linux 6.0).
	ModeMsgRing Mode = iota + 1
	// ModeQueue sends a duplicated plain descriptor over the inter-shard queue.
	ModeQueue
)

func (m Mode) String() string {
	switch m {
	case ModeMsgRing:
		return "msg_ring send-fd"
	case ModeQueue:
		return "queue (duplicated fd)"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// Handoff is a connection on its way to, or arrived at, the shard that will serve it.
type Handoff struct {
	// Fd is a plain descriptor or, when Direct, a slot of the receiving ring's
	// registered-file table (address it with ring.SQEFixedFile).
	Fd     int
	Direct bool
	// Cookie is the sender's 32-bit tag for the connection (e.g. an index into a table
	// of connection facts the sender passes over the queue).
	Cookie uint32
}

// EnqueueFunc delivers h to shard over the inter-shard queue and wakes that shard. It
// reports false when h was not delivered (the queue is full, or the shard is shutting
// down and no longer reads it); the Sender then closes h.Fd. A shard that stops
// reading its queue must CloseHandoff every Handoff still in it.
type EnqueueFunc func(shard int, h Handoff) bool

var (
	// ErrBusy: InFlightMax handoffs are in flight, or the sender ring's submission queue
	// has no room for the two linked SQEs. The connection was closed.
	ErrBusy = errors.New("fdpass: too many handoffs in flight")
	// ErrTargetGone: the target ring is closed (EBADF), is not a ring (EBADFD), or the
	// thread that owns it has exited (EOWNERDEAD): the shard is shutting down.
	ErrTargetGone = errors.New("fdpass: target shard's ring is gone or its thread has exited")
	// ErrTargetTableFull: no free slot in the target's registered-file table (ENFILE;
	// also what a kernel-chosen slot meets when the target has no table at all).
	ErrTargetTableFull = errors.New("fdpass: target ring's registered-file table is full")
	// ErrTargetNoTable: the target ring has no registered-file table for an explicit
	// target slot (ENXIO).
	ErrTargetNoTable = errors.New("fdpass: target ring has no registered-file table")
	// ErrTargetSlotInvalid: the explicit target slot is outside the target's table
	// (EINVAL), or too large to name in user_data.
	ErrTargetSlotInvalid = errors.New("fdpass: target slot outside the target's registered-file table")
	// ErrTargetNotNotified: the kernel installed the file in the target's table but
	// could not post the target's CQE (EOVERFLOW: its completion queue overflowed and
	// the overflow list could not grow). The target does not know the slot; with an
	// explicit target slot it can still find it.
	ErrTargetNotNotified = errors.New("fdpass: file installed at the target but its completion was lost")
	// ErrQueueRefused: ModeQueue's EnqueueFunc reported false. The connection was closed.
	ErrQueueRefused = errors.New("fdpass: target shard's queue is full or closed")
)

// SendError is a failed handoff: the connection was closed, and why.
type SendError struct {
	Shard  int
	Cookie uint32
	Err    error      // one of the Err* values above, or a wrapped system call error
	Errno  unix.Errno // the kernel's answer, when there was one
}

func (e *SendError) Error() string {
	if e.Errno != 0 {
		return fmt.Sprintf("fdpass: handoff %d to shard %d: %v (%s)", e.Cookie, e.Shard, e.Err, unix.ErrnoName(e.Errno))
	}
	return fmt.Sprintf("fdpass: handoff %d to shard %d: %v", e.Cookie, e.Shard, e.Err)
}

// Unwrap lets errors.Is match both the reason and the errno.
func (e *SendError) Unwrap() []error {
	if e.Errno != 0 {
		return []error{e.Err, e.Errno}
	}
	return []error{e.Err}
}

// sendErr maps the errno of a failed msg_ring send-fd to its reason.
func sendErr(errno unix.Errno) error {
	switch errno {
	case unix.EBADF, unix.EBADFD, unix.EOWNERDEAD:
		return ErrTargetGone
	case unix.ENFILE:
		return ErrTargetTableFull
	case unix.ENXIO:
		return ErrTargetNoTable
	case unix.EINVAL:
		return ErrTargetSlotInvalid
	case unix.EOVERFLOW:
		return ErrTargetNotNotified
	}
	return errno
}

// Outcome is the end of one ModeMsgRing handoff, reported by Sender.Complete once
// nothing of the connection is left on the sender.
type Outcome struct {
	Shard  int
	Cookie uint32
	// Err is nil when the file is installed at the target (which gets its own CQE, see
	// Incoming); otherwise a *SendError, and the connection is closed.
	Err error
}

// Incoming recognises the CQE that announces, on the receiving shard's ring, a file
// installed by a ModeMsgRing handoff, and returns it as a Handoff (Direct: Fd is a slot
// of that ring's table). It returns false for any other CQE.
func Incoming(cqe *ring.CQE) (Handoff, bool) {
	k, mid, cookie, ok := unpackUserData(cqe.UserData)
	if !ok || k != kindIncoming {
		return Handoff{}, false
	}
	if cqe.Res < 0 {
		// The kernel posts this CQE only after installing the file.
		panic(fmt.Sprintf("fdpass: incoming-file CQE with error %v", cqe.Err()))
	}
	slot := int(cqe.Res) // IORING_FILE_INDEX_ALLOC: the slot the kernel chose
	if mid != 0 {
		slot = int(mid) - 1 // an explicit slot: the kernel reports 0
	}
	return Handoff{Fd: slot, Direct: true, Cookie: cookie}, true
}

// CloseHandoff closes a Handoff the receiver will not serve (it is shutting down, or
// the connection is unwanted): the plain fd, or the slot of r's registered-file table.
func CloseHandoff(r *ring.Ring, h Handoff) error {
	if !h.Direct {
		if err := unix.Close(h.Fd); err != nil {
			return fmt.Errorf("fdpass: close handed-off fd %d: %w", h.Fd, err)
		}
		return nil
	}
	if _, err := r.UpdateFiles(uint32(h.Fd), []int32{-1}); err != nil {
		return fmt.Errorf("fdpass: close handed-off slot %d: %w", h.Fd, err)
	}
	return nil
}
