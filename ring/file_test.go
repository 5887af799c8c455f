package ring

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func tempFile(t *testing.T, flags int) int {
	t.Helper()
	path := filepath.Join(t.TempDir(), "data")
	fd, err := unix.Open(path, flags|unix.O_CREAT|unix.O_CLOEXEC, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

func TestReadWrite(t *testing.T) {
	r := newTestRing(t, 8)
	requireOp(t, r, OpWrite)
	requireOp(t, r, OpRead)
	fd := tempFile(t, unix.O_RDWR)
	data := heapBytes("the quick brown fox")
	sqe := getSQE(t, r)
	sqe.PrepareWrite(fd, data, 4096)
	sqe.UserData = 1
	submit(t, r)
	if cqe := nextCQE(t, r); cqe.Res != int32(len(data)) {
		t.Fatalf("write cqe %+v (%v)", cqe, cqe.Err())
	}
	got := make([]byte, len(data))
	sqe = getSQE(t, r)
	sqe.PrepareRead(fd, got, 4096)
	sqe.UserData = 2
	submit(t, r)
	if cqe := nextCQE(t, r); cqe.Res != int32(len(data)) || !bytes.Equal(got, data) {
		t.Fatalf("read cqe %+v, got %q", cqe, got)
	}
	// Reading past the end: 0 bytes.
	sqe = getSQE(t, r)
	sqe.PrepareRead(fd, got, 1<<20)
	sqe.UserData = 3
	submit(t, r)
	if cqe := nextCQE(t, r); cqe.Res != 0 {
		t.Fatalf("read past EOF cqe %+v", cqe)
	}
}

func TestReadWriteFixed(t *testing.T) {
	r := newTestRing(t, 8)
	requireOp(t, r, OpWriteFixed)
	requireOp(t, r, OpReadFixed)
	const pageSize = 4096
	arena, err := unix.Mmap(-1, 0, 2*pageSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANONYMOUS|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(arena) })
	out, in := arena[:pageSize], arena[pageSize:]
	if err := r.RegisterBuffers([][]byte{out, in}); err != nil {
		t.Fatal(err)
	}
	for i := range out {
		out[i] = byte(i * 7)
	}
	fd := tempFile(t, unix.O_RDWR)
	sqe := getSQE(t, r)
	sqe.PrepareWriteFixed(fd, out, 0, 0)
	sqe.UserData = 1
	submit(t, r)
	if cqe := nextCQE(t, r); cqe.Res != pageSize {
		t.Fatalf("write_fixed cqe %+v (%v)", cqe, cqe.Err())
	}
	// A sub-slice of a registered buffer is fine too.
	sqe = getSQE(t, r)
	sqe.PrepareReadFixed(fd, in[100:300], 100, 1)
	sqe.UserData = 2
	submit(t, r)
	if cqe := nextCQE(t, r); cqe.Res != 200 {
		t.Fatalf("read_fixed cqe %+v (%v)", cqe, cqe.Err())
	}
	if !bytes.Equal(in[100:300], out[100:300]) {
		t.Fatal("read_fixed returned different bytes")
	}
	// Memory outside the named registered buffer is refused: EFAULT.
	sqe = getSQE(t, r)
	sqe.PrepareReadFixed(fd, in[:10], 0, 0)
	sqe.UserData = 3
	submit(t, r)
	if cqe := nextCQE(t, r); !errors.Is(cqe.Err(), unix.EFAULT) {
		t.Fatalf("read_fixed outside its buffer: cqe %+v (%v), want EFAULT", cqe, cqe.Err())
	}
	if err := r.UnregisterBuffers(); err != nil {
		t.Fatal(err)
	}
}

func TestFsyncAndFdatasync(t *testing.T) {
	r := newTestRing(t, 8)
	requireOp(t, r, OpFsync)
	fd := tempFile(t, unix.O_RDWR)
	writeAll(t, fd, []byte("durable"))
	for i, flags := range []uint32{0, FsyncDatasync} {
		sqe := getSQE(t, r)
		sqe.PrepareFsync(fd, flags)
		sqe.UserData = uint64(i)
		submit(t, r)
		if cqe := nextCQE(t, r); cqe.Res != 0 {
			t.Fatalf("fsync(flags=%d) cqe %+v (%v)", flags, cqe, cqe.Err())
		}
	}
	// A bad descriptor is reported, not hidden.
	sqe := getSQE(t, r)
	sqe.PrepareFsync(-1, 0)
	sqe.UserData = 9
	submit(t, r)
	if cqe := nextCQE(t, r); !errors.Is(cqe.Err(), unix.EBADF) {
		t.Fatalf("fsync(-1) cqe %+v", cqe)
	}
}

func TestLinkWriteThenFdatasync(t *testing.T) {
	r := newTestRing(t, 8)
	requireOp(t, r, OpWrite)
	requireOp(t, r, OpFsync)
	fd := tempFile(t, unix.O_RDWR)
	data := heapBytes("linked then synced")
	sqe := getSQE(t, r)
	sqe.PrepareWrite(fd, data, 0)
	sqe.Flags |= SQEIOLink
	sqe.UserData = 1
	sqe = getSQE(t, r)
	sqe.PrepareFsync(fd, FsyncDatasync)
	sqe.UserData = 2
	submit(t, r)
	cqes := collectCQEs(t, r, 2)
	// A link runs in order, so its CQEs arrive in order.
	if cqes[0].UserData != 1 || cqes[0].Res != int32(len(data)) || cqes[1].UserData != 2 || cqes[1].Res != 0 {
		t.Fatalf("chain cqes %+v", cqes)
	}
	got := make([]byte, len(data))
	if _, err := unix.Pread(fd, got, 0); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("file holds %q (%v)", got, err)
	}
}

func TestLinkFailureCancelsNext(t *testing.T) {
	r := newTestRing(t, 8)
	requireOp(t, r, OpWrite)
	readOnly := tempFile(t, unix.O_RDONLY)
	data := heapBytes("refused")
	sqe := getSQE(t, r)
	sqe.PrepareWrite(readOnly, data, 0)
	sqe.Flags |= SQEIOLink
	sqe.UserData = 1
	sqe = getSQE(t, r)
	sqe.PrepareFsync(readOnly, FsyncDatasync)
	sqe.Flags |= SQEIOLink
	sqe.UserData = 2
	sqe = getSQE(t, r)
	sqe.PrepareNop()
	sqe.UserData = 3
	submit(t, r)
	cqes := collectCQEs(t, r, 3)
	if cqes[0].UserData != 1 || !errors.Is(cqes[0].Err(), unix.EBADF) {
		t.Fatalf("write to read-only fd: %+v (%v)", cqes[0], cqes[0].Err())
	}
	for _, cqe := range cqes[1:] {
		if !errors.Is(cqe.Err(), unix.ECANCELED) {
			t.Fatalf("linked op after failure: %+v (%v), want ECANCELED", cqe, cqe.Err())
		}
	}
}

func TestTimeoutFires(t *testing.T) {
	r := newTestRing(t, 8)
	requireOp(t, r, OpTimeout)
	ts := &Timespec{Nsec: int64(5 * time.Millisecond)}
	sqe := getSQE(t, r)
	sqe.PrepareTimeout(ts, 0, 0)
	sqe.UserData = 1
	submit(t, r)
	if cqe := nextCQE(t, r); cqe.UserData != 1 || !errors.Is(cqe.Err(), unix.ETIME) {
		t.Fatalf("timeout cqe %+v (%v), want ETIME", cqe, cqe.Err())
	}
}

func TestTimeoutCountCompletes(t *testing.T) {
	r := newTestRing(t, 8)
	requireOp(t, r, OpTimeout)
	ts := &Timespec{Sec: 60}
	sqe := getSQE(t, r)
	sqe.PrepareTimeout(ts, 1, 0)
	sqe.UserData = 1
	sqe = getSQE(t, r)
	sqe.PrepareNop()
	sqe.UserData = 2
	submit(t, r)
	results := map[uint64]int32{}
	for _, cqe := range collectCQEs(t, r, 2) {
		results[cqe.UserData] = cqe.Res
	}
	if results[1] != 0 || results[2] != 0 {
		t.Fatalf("count timeout results %v, want both 0", results)
	}
}

func TestTimeoutRemove(t *testing.T) {
	r := newTestRing(t, 8)
	requireOp(t, r, OpTimeoutRemove)
	ts := &Timespec{Sec: 60}
	sqe := getSQE(t, r)
	sqe.PrepareTimeout(ts, 0, 0)
	sqe.UserData = 1
	submit(t, r)
	sqe = getSQE(t, r)
	sqe.PrepareTimeoutRemove(1, 0)
	sqe.UserData = 2
	submit(t, r)
	results := map[uint64]CQE{}
	for _, cqe := range collectCQEs(t, r, 2) {
		results[cqe.UserData] = cqe
	}
	if !errors.Is(results[1].Err(), unix.ECANCELED) || results[2].Res != 0 {
		t.Fatalf("timeout %+v, remove %+v", results[1], results[2])
	}
	sqe = getSQE(t, r)
	sqe.PrepareTimeoutRemove(1, 0)
	sqe.UserData = 3
	submit(t, r)
	if cqe := nextCQE(t, r); !errors.Is(cqe.Err(), unix.ENOENT) {
		t.Fatalf("second remove %+v, want ENOENT", cqe)
	}
}

func TestRegisteredFilesUpdateAndClose(t *testing.T) {
	r := newTestRing(t, 8)
	requireOp(t, r, OpClose)
	a, b := socketpair(t, unix.SOCK_STREAM)
	// Register a duplicate of a, then close our own copy: the table's
	// reference is the last one.
	dup, err := unix.Dup(a)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.RegisterFiles([]int32{-1, int32(dup), -1}); err != nil {
		t.Fatal(err)
	}
	unix.Close(dup)
	unix.Close(a)

	msg := heapBytes("through slot 1")
	sqe := getSQE(t, r)
	sqe.PrepareSend(1, msg, 0)
	sqe.Flags |= SQEFixedFile
	sqe.UserData = 1
	submit(t, r)
	if cqe := nextCQE(t, r); cqe.Res != int32(len(msg)) {
		t.Fatalf("send via slot 1: %+v (%v)", cqe, cqe.Err())
	}
	if got := readFull(t, b, len(msg)); !bytes.Equal(got, msg) {
		t.Fatalf("peer read %q", got)
	}

	// Move the socket to slot 2 with UpdateFiles (FilesSkip keeps slot 0).
	other, err := unix.Dup(b)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(other)
	if n, err := r.UpdateFiles(0, []int32{FilesSkip, FilesSkip, int32(other)}); err != nil || n != 3 {
		t.Fatalf("UpdateFiles = %d, %v", n, err)
	}

	// Closing the direct descriptor in slot 1 drops the last reference:
	// the peer sees EOF, and the slot is empty afterwards.
	sqe = getSQE(t, r)
	sqe.PrepareCloseDirect(1)
	sqe.UserData = 2
	submit(t, r)
	if cqe := nextCQE(t, r); cqe.Res != 0 {
		t.Fatalf("close direct: %+v (%v)", cqe, cqe.Err())
	}
	if n, err := unix.Read(b, make([]byte, 1)); n != 0 || err != nil {
		t.Fatalf("peer after close direct: n=%d err=%v, want EOF", n, err)
	}
	sqe = getSQE(t, r)
	sqe.PrepareSend(1, msg, 0)
	sqe.Flags |= SQEFixedFile
	sqe.UserData = 3
	submit(t, r)
	if cqe := nextCQE(t, r); !errors.Is(cqe.Err(), unix.EBADF) {
		t.Fatalf("send via closed slot: %+v (%v), want EBADF", cqe, cqe.Err())
	}
	if err := r.UnregisterFiles(); err != nil {
		t.Fatal(err)
	}
}

func TestClosePlainFd(t *testing.T) {
	r := newTestRing(t, 8)
	requireOp(t, r, OpClose)
	f, err := os.CreateTemp(t.TempDir(), "close")
	if err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Dup(int(f.Fd()))
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	sqe := getSQE(t, r)
	sqe.PrepareClose(fd)
	sqe.UserData = 1
	submit(t, r)
	if cqe := nextCQE(t, r); cqe.Res != 0 {
		t.Fatalf("close cqe %+v (%v)", cqe, cqe.Err())
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); !errors.Is(err, unix.EBADF) {
		t.Fatalf("fd still open after close: %v", err)
	}
}

func TestLinkTimeoutCancelsRecv(t *testing.T) {
	r := newTestRing(t, 8)
	requireOp(t, r, OpLinkTimeout)
	_, b := socketpair(t, unix.SOCK_STREAM)
	buf := make([]byte, 8)
	ts := &Timespec{Nsec: int64(5 * time.Millisecond)}
	sqe := getSQE(t, r)
	sqe.PrepareRecv(b, buf, 0)
	sqe.Flags |= SQEIOLink
	sqe.UserData = 1
	sqe = getSQE(t, r)
	sqe.PrepareLinkTimeout(ts, 0)
	sqe.UserData = 2
	submit(t, r)
	results := map[uint64]CQE{}
	for _, cqe := range collectCQEs(t, r, 2) {
		results[cqe.UserData] = cqe
	}
	if !errors.Is(results[1].Err(), unix.ECANCELED) || !errors.Is(results[2].Err(), unix.ETIME) {
		t.Fatalf("recv %+v (%v), link timeout %+v (%v)", results[1], results[1].Err(), results[2], results[2].Err())
	}
}

func TestReadv(t *testing.T) {
	r := newTestRing(t, 8)
	requireOp(t, r, OpReadv)
	fd := tempFile(t, unix.O_RDWR)
	if _, err := unix.Pwrite(fd, []byte("0123456789"), 0); err != nil {
		t.Fatal(err)
	}
	first, second := make([]byte, 4), make([]byte, 6)
	iovecs := make([]unix.Iovec, 2)
	iovecs[0].Base, iovecs[1].Base = &first[0], &second[0]
	iovecs[0].SetLen(len(first))
	iovecs[1].SetLen(len(second))
	sqe := getSQE(t, r)
	sqe.PrepareReadv(fd, iovecs, 0)
	sqe.UserData = 1
	submit(t, r)
	if cqe := nextCQE(t, r); cqe.Res != 10 || string(first) != "0123" || string(second) != "456789" {
		t.Fatalf("readv cqe %+v, got %q %q", cqe, first, second)
	}
}
