package shard

import (
	"errors"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

func openFdCount(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

func fdOpen(fd int) bool {
	_, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
	return err == nil
}

// TestPipePoolLendsUpToItsMaximum: pipes are made on demand up to the bound,
// the next Take is ErrNoPipe, and a pipe given back is lent again rather
// than a new one made.
func TestPipePoolLendsUpToItsMaximum(t *testing.T) {
	const pipesMax = 4
	pool := newPipePool(pipesMax, PipeSizeBytesDefault)
	t.Cleanup(pool.close)
	var lent []Pipe
	for range pipesMax {
		pipe, err := pool.Take()
		if err != nil {
			t.Fatal(err)
		}
		lent = append(lent, pipe)
	}
	if _, err := pool.Take(); !errors.Is(err, ErrNoPipe) {
		t.Fatalf("take past the maximum: %v, want ErrNoPipe", err)
	}
	pool.Give(lent[2])
	again, err := pool.Take()
	if err != nil || again != lent[2] {
		t.Fatalf("take after a give: %+v (%v), want the pipe given back %+v", again, err, lent[2])
	}
	if pool.Created() != pipesMax || pool.Lent() != pipesMax {
		t.Fatalf("created %d, lent %d; want %d and %d", pool.Created(), pool.Lent(), pipesMax, pipesMax)
	}
	for _, pipe := range lent {
		pool.Give(pipe)
	}
	if pool.Lent() != 0 || len(pool.free) != pipesMax {
		t.Fatalf("all given back: lent %d, free %d", pool.Lent(), len(pool.free))
	}
}

// TestPipePoolSizeGranted: a pipe gets the size asked for when the kernel
// allows it, and what the kernel grants when it does not (above
// fs/pipe-max-size an unprivileged process gets EPERM; root may go past it):
// CapacityBytes is always the size the pipe really has.
func TestPipePoolSizeGranted(t *testing.T) {
	maxBytes, ok := pipeMaxSizeBytes()
	if !ok {
		t.Skip("no /proc/sys/fs/pipe-max-size")
	}
	for _, want := range []int{64 << 10, PipeSizeBytesDefault, 4 * maxBytes} {
		pool := newPipePool(1, want)
		pipe, err := pool.Take()
		if err != nil {
			t.Fatal(err)
		}
		real, err := unix.FcntlInt(uintptr(pipe.ReadFd), unix.F_GETPIPE_SZ, 0)
		if err != nil || real != pipe.CapacityBytes {
			t.Fatalf("want %d: CapacityBytes %d, the pipe has %d (%v)", want, pipe.CapacityBytes, real, err)
		}
		if want <= maxBytes && pipe.CapacityBytes < want {
			t.Fatalf("want %d (pipe-max-size %d): granted %d", want, maxBytes, pipe.CapacityBytes)
		}
		if want > maxBytes && pipe.CapacityBytes < maxBytes {
			t.Fatalf("want %d over pipe-max-size %d: granted %d, not even the maximum", want, maxBytes, pipe.CapacityBytes)
		}
		t.Logf("asked %d, granted %d (pipe-max-size %d)", want, pipe.CapacityBytes, maxBytes)
		pool.Give(pipe)
		pool.close()
	}
}

// TestPipePoolNeverLendsADirtyPipe: a pipe given back with bytes in it (a
// reply whose socket closed midway) is closed, and the next reply gets an
// empty pipe; over many rounds, half of them dirty, the pool holds no more
// descriptors than its bound.
func TestPipePoolNeverLendsADirtyPipe(t *testing.T) {
	const pipesMax = 3
	pool := newPipePool(pipesMax, 64<<10)
	t.Cleanup(pool.close)
	fdsBefore := openFdCount(t)
	for round := range 1000 {
		pipe, err := pool.Take()
		if err != nil {
			t.Fatal(err)
		}
		if queued, err := unix.IoctlGetInt(pipe.ReadFd, unix.TIOCINQ); err != nil || queued != 0 {
			t.Fatalf("round %d: lent a pipe holding %d bytes (%v)", round, queued, err)
		}
		if round%2 == 0 {
			if _, err := unix.Write(pipe.WriteFd, []byte("left by a reply cut short")); err != nil {
				t.Fatal(err)
			}
		}
		pool.Give(pipe)
		if round%2 == 0 && (fdOpen(pipe.ReadFd) || fdOpen(pipe.WriteFd)) {
			t.Fatalf("round %d: a dirty pipe was kept open", round)
		}
		if extra := openFdCount(t) - fdsBefore; extra > 2*pipesMax {
			t.Fatalf("round %d: %d descriptors over the start, bound %d", round, extra, 2*pipesMax)
		}
	}
	if pool.ClosedDirty() != 500 || pool.Created() != 501 {
		t.Fatalf("closed dirty %d, created %d; want 500 and 501", pool.ClosedDirty(), pool.Created())
	}
}
