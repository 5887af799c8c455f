package ring

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

// A write completing on a second ring wakes a thread blocked on the first one: the
// second ring's registered eventfd is signalled and the first ring's armed read of it
// completes. The second ring is set up the way the shard sets up its disk ring
// (SINGLE_ISSUER without DEFER_TASKRUN, so completions post without the owner
// entering it), and the write is punted to io-wq (SQEAsync) so that it completes
// while the thread waits elsewhere.
func TestEventFdWakesAnotherRing(t *testing.T) {
	main := newTestRing(t, 8)
	requireOp(t, main, OpRead)
	disk, err := New(Options{SQEntries: 8, Flags: SetupSingleIssuer})
	if err != nil {
		t.Fatalf("New disk ring: %v", err)
	}
	defer disk.Close()
	requireOp(t, disk, OpWrite)
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(efd)
	if err := disk.RegisterEventFd(efd); err != nil {
		t.Fatal(err)
	}
	if err := disk.RegisterEventFd(efd); !errors.Is(err, unix.EBUSY) {
		t.Fatalf("second RegisterEventFd: %v, want EBUSY", err)
	}

	counter := make([]byte, 8)
	sqe := getSQE(t, main)
	sqe.PrepareRead(efd, counter, 0)
	sqe.UserData = 7
	submit(t, main)

	fd := tempFile(t, unix.O_RDWR)
	data := heapBytes("written through the disk ring")
	sqe = getSQE(t, disk)
	sqe.PrepareWrite(fd, data, 0)
	sqe.Flags |= SQEAsync
	sqe.UserData = 1
	submit(t, disk)

	if cqe := nextCQE(t, main); cqe.UserData != 7 || cqe.Res != 8 || binary.LittleEndian.Uint64(counter) == 0 {
		t.Fatalf("eventfd read cqe %+v, counter %x", cqe, counter)
	}
	cqes := make([]CQE, 4)
	if n := disk.ReapCQEs(cqes); n != 1 || cqes[0].UserData != 1 || cqes[0].Res != int32(len(data)) {
		t.Fatalf("disk ring reaped %d: %+v", n, cqes[:n])
	}
	got := make([]byte, len(data))
	if _, err := unix.Pread(fd, got, 0); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("file holds %q (%v)", got, err)
	}

	if err := disk.UnregisterEventFd(); err != nil {
		t.Fatal(err)
	}
	sqe = getSQE(t, disk)
	sqe.PrepareNop()
	sqe.UserData = 2
	if _, err := disk.SubmitAndWait(1); err != nil {
		t.Fatal(err)
	}
	var buf [8]byte
	if _, err := unix.Read(efd, buf[:]); !errors.Is(err, unix.EAGAIN) {
		t.Fatalf("eventfd signalled after UnregisterEventFd: %x (%v)", buf, err)
	}
}
