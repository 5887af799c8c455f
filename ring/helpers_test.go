package ring

import (
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// completionTimeout bounds every wait for a CQE in tests; it is a guard
// against hangs, not a synchronisation.
const completionTimeout = 5 * time.Second

// newTestRing locks the test goroutine to its thread (the ring is
// SINGLE_ISSUER) and creates a ring closed at cleanup.
func newTestRing(t testing.TB, sqEntries uint32) *Ring {
	t.Helper()
	runtime.LockOSThread()
	r, err := New(DefaultOptions(sqEntries))
	if err != nil {
		runtime.UnlockOSThread()
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		r.Close()
		runtime.UnlockOSThread()
	})
	return r
}

func requireOp(t testing.TB, r *Ring, op Opcode) {
	t.Helper()
	if !r.Supports(op) {
		t.Skipf("kernel does not support %v (IORING_REGISTER_PROBE)", op)
	}
}

func getSQE(t testing.TB, r *Ring) *SQE {
	t.Helper()
	sqe, err := r.GetSQE()
	if err != nil {
		t.Fatalf("GetSQE: %v", err)
	}
	return sqe
}

func submit(t testing.TB, r *Ring) {
	t.Helper()
	if _, err := r.Submit(); err != nil {
		t.Fatalf("Submit: %v", err)
	}
}

// nextCQE waits (bounded) for the next completion and consumes it.
func nextCQE(t testing.TB, r *Ring) CQE {
	t.Helper()
	deadline := time.Now().Add(completionTimeout)
	for {
		cqe, err := r.WaitCQETimeout(time.Until(deadline))
		if err == nil {
			c := *cqe
			r.CQESeen()
			return c
		}
		if err != unix.ETIME || time.Now().After(deadline) {
			t.Fatalf("no completion within %v: %v", completionTimeout, err)
		}
	}
}

// collectCQEs waits for n completions and returns them keyed by user_data
// order of arrival.
func collectCQEs(t testing.TB, r *Ring, n int) []CQE {
	t.Helper()
	out := make([]CQE, 0, n)
	for range n {
		out = append(out, nextCQE(t, r))
	}
	return out
}

// expectNoCQE checks that nothing completes within a short window. The
// window is a bound on an expected non-event, not a synchronisation.
func expectNoCQE(t testing.TB, r *Ring, window time.Duration) {
	t.Helper()
	if _, err := r.SubmitAndWaitTimeout(1, window); err != nil {
		t.Fatalf("SubmitAndWaitTimeout: %v", err)
	}
	if cqe, ok := r.PeekCQE(); ok {
		t.Fatalf("unexpected completion %+v", *cqe)
	}
}

func socketpair(t testing.TB, typ int) (int, int) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, typ|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("socketpair: %v", err)
	}
	t.Cleanup(func() {
		unix.Close(fds[0])
		unix.Close(fds[1])
	})
	return fds[0], fds[1]
}

func writeAll(t testing.TB, fd int, b []byte) {
	t.Helper()
	for len(b) > 0 {
		n, err := unix.Write(fd, b)
		if err != nil {
			t.Fatalf("write: %v", err)
		}
		b = b[n:]
	}
}

func readFull(t testing.TB, fd int, n int) []byte {
	t.Helper()
	buf := make([]byte, n)
	got := 0
	for got < n {
		m, err := unix.Read(fd, buf[got:])
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		if m == 0 {
			t.Fatalf("read: EOF after %d of %d bytes", got, n)
		}
		got += m
	}
	return buf
}

// requireKernel skips a test of a feature that no opcode probe reveals (a
// flag of an existing opcode, a registration) on kernels older than
// major.minor.
func requireKernel(t testing.TB, major, minor int, feature string) {
	t.Helper()
	var uts unix.Utsname
	if err := unix.Uname(&uts); err != nil {
		t.Fatalf("uname: %v", err)
	}
	release := unix.ByteSliceToString(uts.Release[:])
	var gotMajor, gotMinor int
	for i, part := 0, 0; i < len(release) && part < 2; i++ {
		c := release[i]
		switch {
		case c >= '0' && c <= '9':
			if part == 0 {
				gotMajor = gotMajor*10 + int(c-'0')
			} else {
				gotMinor = gotMinor*10 + int(c-'0')
			}
		case c == '.':
			part++
		default:
			part = 2
		}
	}
	if gotMajor < major || (gotMajor == major && gotMinor < minor) {
		t.Skipf("%s needs Linux %d.%d, running %s", feature, major, minor, release)
	}
}
