package shard

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/iggy-shard/iggy-shard/ring"
)

// diskPort is the shard's file I/O: a ring of its own (see Disk), whose completions
// signal an eventfd whose read is kept armed on the connection ring, so that a
// shard asleep there wakes for them.
type diskPort struct {
	io    *Disk // nil unless Config.DiskIO
	ring  *ring.Ring
	event eventReader
}

// diskRingEntries sizes the disk ring: a shard's logs rarely have more than a few
// requests each in flight (an append, its sync, a read per poll), and requests beyond
// this wait in submission order rather than fail.
const diskRingEntries = 256

// setUpDisk creates the disk ring. It is SINGLE_ISSUER but not DEFER_TASKRUN: its
// completions must be posted (and signal the eventfd) while the thread sleeps in the
// connection ring, not only when it enters the disk ring.
func (s *Shard) setUpDisk() error {
	r, err := ring.New(ring.Options{SQEntries: diskRingEntries, CQEntries: 2 * diskRingEntries, Flags: ring.SetupSingleIssuer})
	if err != nil {
		return fmt.Errorf("disk ring setup: %w", err)
	}
	for _, op := range []ring.Opcode{ring.OpRead, ring.OpWrite, ring.OpFsync} {
		if !r.Supports(op) {
			r.Close()
			return fmt.Errorf("the kernel's io_uring lacks opcode %d for file I/O", op)
		}
	}
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		r.Close()
		return fmt.Errorf("disk eventfd: %w", err)
	}
	if err := r.RegisterEventFd(efd); err != nil {
		r.Close()
		unix.Close(efd)
		return err
	}
	s.disk.ring, s.disk.event = r, eventReader{fd: efd, buf: new([8]byte), kind: kindDiskEvent}
	s.disk.io = NewDisk(r, diskRingEntries)
	s.disk.io.AsyncWriteBytesMin = s.cfg.DiskAsyncWriteBytesMin
	return nil
}
