package ring

import (
	"fmt"
	"unsafe"
)

// io_uring_register opcodes of the completion eventfd.
const (
	registerEventFd   = 4
	unregisterEventFd = 5
)

// RegisterEventFd makes the kernel signal the eventfd fd each time it posts a
// completion to this ring (IORING_REGISTER_EVENTFD, Linux 5.2). A thread that
// waits on another ring can thus be woken by this one: keep a read of fd armed
// on the waiting ring, and reap this ring when the read completes. The eventfd
// counts postings, not CQEs: one read may stand for many completions, so reap
// until the queue is empty. A ring has at most one eventfd.
func (r *Ring) RegisterEventFd(fd int) error {
	v := int32(fd)
	if _, err := r.register(registerEventFd, unsafe.Pointer(&v), 1); err != nil {
		return fmt.Errorf("ring: register eventfd %d: %w", fd, err)
	}
	return nil
}

// UnregisterEventFd stops the signalling RegisterEventFd set up.
func (r *Ring) UnregisterEventFd() error {
	if _, err := r.register(unregisterEventFd, nil, 0); err != nil {
		return fmt.Errorf("ring: unregister eventfd: %w", err)
	}
	return nil
}
