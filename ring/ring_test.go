package ring

import (
	"errors"
	"runtime"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

func TestNewReportsFlagsAndFeatures(t *testing.T) {
	r := newTestRing(t, 8)
	t.Logf("kernel flags in effect %#x, refused %#x, features %#x, sq %d cq %d",
		r.Flags(), r.RefusedFlags(), r.Features(), r.SQEntries(), r.CQEntries())
	if r.Flags()|r.RefusedFlags() != DefaultSetupFlags|SetupCQSize {
		t.Fatalf("flags %#x + refused %#x != asked %#x", r.Flags(), r.RefusedFlags(), DefaultSetupFlags|SetupCQSize)
	}
	if r.SQEntries() != 8 || r.CQEntries() != 32 {
		t.Fatalf("sq %d cq %d, want 8 and 32", r.SQEntries(), r.CQEntries())
	}
	if r.Features()&FeatSingleMmap == 0 {
		t.Logf("kernel lacks IORING_FEAT_SINGLE_MMAP: two ring mappings in use")
	}
}

func TestDefaultOptionsLargestRing(t *testing.T) {
	r := newTestRing(t, 32768)
	if r.SQEntries() != 32768 || r.CQEntries() != cqEntriesMax {
		t.Fatalf("sq %d cq %d", r.SQEntries(), r.CQEntries())
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	for _, opts := range []Options{
		{SQEntries: 0},
		{SQEntries: 65536},
		{SQEntries: 8, CQEntries: 4},
	} {
		if r, err := New(opts); err == nil {
			r.Close()
			t.Errorf("New(%+v) succeeded", opts)
		}
	}
}

// TestSetupFallback simulates kernels that refuse flags with EINVAL.
func TestSetupFallback(t *testing.T) {
	tests := []struct {
		name        string
		understands uint32 // optional flags the simulated kernel accepts
		asked       uint32
		wantFlags   uint32
		wantRefused uint32
		wantErr     bool
	}{
		{"all accepted", DefaultSetupFlags, DefaultSetupFlags, DefaultSetupFlags, 0, false},
		{"no defer taskrun (6.0)", SetupSingleIssuer | SetupCoopTaskrun | SetupSubmitAll, DefaultSetupFlags, SetupSingleIssuer | SetupCoopTaskrun | SetupSubmitAll, SetupDeferTaskrun, false},
		{"coop and submit all (5.19)", SetupCoopTaskrun | SetupSubmitAll, DefaultSetupFlags, SetupCoopTaskrun | SetupSubmitAll, SetupDeferTaskrun | SetupSingleIssuer, false},
		{"none (5.17)", 0, DefaultSetupFlags, 0, DefaultSetupFlags, false},
		{"non-optional flag refused", 0, SetupClamp, 0, 0, true},
	}
	saved := setupSyscall
	t.Cleanup(func() { setupSyscall = saved })
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls int
			setupSyscall = func(entries uint32, p *params) (int, unix.Errno) {
				calls++
				if calls > 10 {
					t.Fatalf("setup retried more than 10 times")
				}
				if p.flags&^tt.understands != 0 {
					return -1, unix.EINVAL
				}
				return 42, 0
			}
			fd, p, refused, err := setupWithFallback(8, 0, tt.asked)
			if tt.wantErr {
				if !errors.Is(err, unix.EINVAL) {
					t.Fatalf("err = %v, want EINVAL", err)
				}
				return
			}
			if err != nil || fd != 42 {
				t.Fatalf("fd %d err %v", fd, err)
			}
			if p.flags != tt.wantFlags || refused != tt.wantRefused {
				t.Fatalf("flags %#x refused %#x, want %#x %#x", p.flags, refused, tt.wantFlags, tt.wantRefused)
			}
		})
	}
}

func TestProbe(t *testing.T) {
	r := newTestRing(t, 8)
	if !r.Supports(OpNop) {
		t.Fatal("probe says NOP is unsupported")
	}
	for _, op := range []Opcode{OpRecv, OpSend, OpAccept, OpMsgRing, OpSendZC, OpReadFixed, OpFsync, OpTimeout, OpClose, OpAsyncCancel} {
		t.Logf("%-12v supported=%v", op, r.Supports(op))
	}
	if r.Supports(Opcode(255)) {
		t.Fatal("probe says opcode 255 is supported")
	}
}

func TestNop(t *testing.T) {
	r := newTestRing(t, 8)
	for i := range uint64(5) {
		sqe := getSQE(t, r)
		sqe.PrepareNop()
		sqe.UserData = 100 + i
	}
	if n, err := r.SubmitAndWait(5); err != nil || n != 5 {
		t.Fatalf("SubmitAndWait = %d, %v", n, err)
	}
	if r.CQReady() != 5 {
		t.Fatalf("CQReady = %d, want 5", r.CQReady())
	}
	for i := range uint64(5) {
		cqe, ok := r.PeekCQE()
		if !ok || cqe.UserData != 100+i || cqe.Res != 0 || cqe.Err() != nil {
			t.Fatalf("cqe %d = %+v ok=%v", i, cqe, ok)
		}
		r.CQESeen()
	}
	if _, ok := r.PeekCQE(); ok {
		t.Fatal("CQ not empty")
	}
}

func TestSQFullSubmitsToMakeRoom(t *testing.T) {
	r := newTestRing(t, 4)
	for i := range uint64(10) {
		sqe := getSQE(t, r)
		sqe.PrepareNop()
		sqe.UserData = i
	}
	submit(t, r)
	for i, cqe := range collectCQEs(t, r, 10) {
		if cqe.UserData != uint64(i) || cqe.Res != 0 {
			t.Fatalf("cqe %d = %+v", i, cqe)
		}
	}
}

func TestSQFullWithOpenLinkChain(t *testing.T) {
	r := newTestRing(t, 4)
	for range 4 {
		sqe := getSQE(t, r)
		sqe.PrepareNop()
		sqe.Flags |= SQEIOLink
	}
	if _, err := r.GetSQE(); !errors.Is(err, ErrSQFull) {
		t.Fatalf("GetSQE on a full queue with an open chain: err = %v, want ErrSQFull", err)
	}
	if got := r.SQPending(); got != 4 {
		t.Fatalf("SQPending = %d, want 4 (nothing dropped, nothing submitted)", got)
	}
	// Submitted as it is, the chain ends at its last queued SQE and runs.
	if n, err := r.Submit(); n != 4 || err != nil {
		t.Fatalf("Submit = %d, %v", n, err)
	}
	for _, cqe := range collectCQEs(t, r, 4) {
		if cqe.Res != 0 {
			t.Fatalf("cut chain cqe %+v (%v)", cqe, cqe.Err())
		}
	}
}

func TestCloseTwice(t *testing.T) {
	r, err := New(Options{SQEntries: 4})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close = %v", err)
	}
	if _, err := r.Submit(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Submit after Close = %v", err)
	}
	if _, err := r.GetSQE(); !errors.Is(err, ErrClosed) {
		t.Fatalf("GetSQE after Close = %v", err)
	}
	if err := r.RegisterFilesSparse(1); !errors.Is(err, ErrClosed) {
		t.Fatalf("RegisterFilesSparse after Close = %v", err)
	}
}

func TestWaitTimeoutReturnsWithoutCompletions(t *testing.T) {
	r := newTestRing(t, 4)
	n, err := r.SubmitAndWaitTimeout(1, 0)
	if err != nil || n != 0 || r.CQReady() != 0 {
		t.Fatalf("SubmitAndWaitTimeout = %d, %v, ready %d", n, err, r.CQReady())
	}
	if _, err := r.WaitCQETimeout(1); !errors.Is(err, unix.ETIME) {
		t.Fatalf("WaitCQETimeout = %v, want ETIME", err)
	}
}

// TestWrongThreadIsReported: a SINGLE_ISSUER ring used from another thread
// gets ErrWrongThread, not a silent failure. The test goroutine is locked to
// the creating thread, so the other goroutine necessarily runs elsewhere.
func TestWrongThreadIsReported(t *testing.T) {
	r := newTestRing(t, 4)
	if r.Flags()&SetupSingleIssuer == 0 {
		t.Skip("kernel refused IORING_SETUP_SINGLE_ISSUER")
	}
	sqe := getSQE(t, r)
	sqe.PrepareNop()
	done := make(chan error)
	go func() {
		_, err := r.Submit()
		done <- err
	}()
	if err := <-done; !errors.Is(err, ErrWrongThread) {
		t.Fatalf("Submit from another thread: %v, want ErrWrongThread", err)
	}
	// The owner thread can still submit the queued SQE.
	if cqe := nextCQE(t, r); cqe.Res != 0 {
		t.Fatalf("nop after refused submit: %+v", cqe)
	}
}

// TestCQOverflowLosesNothing posts more completions than the CQ holds
// without reaping: the kernel holds the excess back (FEAT_NODROP) and the
// reaping loop, entering with GETEVENTS, gets every one.
func TestCQOverflowLosesNothing(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	r, err := New(Options{SQEntries: 8, CQEntries: 8, Flags: DefaultSetupFlags})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Features()&FeatNoDrop == 0 {
		t.Skip("kernel lacks IORING_FEAT_NODROP")
	}
	const total = 40
	queued := 0
	for queued < total {
		for range 8 {
			sqe, err := r.GetSQE()
			if err != nil {
				t.Fatalf("GetSQE after %d: %v", queued, err)
			}
			sqe.PrepareNop()
			sqe.UserData = uint64(queued)
			queued++
		}
		if _, err := r.Submit(); err != nil && !errors.Is(err, ErrCQOverflow) {
			t.Fatalf("Submit: %v", err)
		}
	}
	if !r.CQOverflowPending() {
		t.Fatalf("%d completions in a CQ of %d, yet no overflow pending", total, r.CQEntries())
	}
	seen := make([]bool, total)
	got := 0
	for attempt := 0; got < total; attempt++ {
		if attempt > 100 {
			t.Fatalf("only %d of %d completions after %d attempts (overflow count %d)", got, total, attempt, r.CQOverflowCount())
		}
		for cqe, ok := r.PeekCQE(); ok; cqe, ok = r.PeekCQE() {
			if cqe.UserData >= total || seen[cqe.UserData] {
				t.Fatalf("unexpected or duplicate cqe %+v", *cqe)
			}
			seen[cqe.UserData] = true
			got++
			r.CQESeen()
		}
		if _, err := r.Submit(); err != nil && !errors.Is(err, ErrCQOverflow) {
			t.Fatalf("Submit while reaping: %v", err)
		}
	}
	if r.CQOverflowCount() != 0 || r.CQOverflowPending() {
		t.Fatalf("overflow count %d, pending %v after reaping all", r.CQOverflowCount(), r.CQOverflowPending())
	}
}

// TestPlainRing exercises a ring without the optional flags: Submit only
// enters the kernel when there is something to submit.
func TestPlainRing(t *testing.T) {
	r, err := New(Options{SQEntries: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if n, err := r.Submit(); n != 0 || err != nil {
		t.Fatalf("empty Submit = %d, %v", n, err)
	}
	sqe := getSQE(t, r)
	sqe.PrepareNop()
	sqe.UserData = 5
	if n, err := r.SubmitAndWait(1); n != 1 || err != nil {
		t.Fatalf("SubmitAndWait = %d, %v", n, err)
	}
	if cqe := nextCQE(t, r); cqe.UserData != 5 {
		t.Fatalf("cqe %+v", cqe)
	}
}

func TestNewRejectsUnsupportedFlags(t *testing.T) {
	for _, flag := range []uint32{SetupSQPoll, SetupIOPoll, SetupSQE128, SetupCQE32, SetupRDisabled, SetupAttachWQ} {
		if r, err := New(Options{SQEntries: 4, Flags: flag}); err == nil {
			r.Close()
			t.Errorf("New with flag %#x succeeded", flag)
		}
	}
}

// TestReapCQEsAcrossWrap reaps in batches across the CQ ring's wrap point.
func TestReapCQEsAcrossWrap(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	r, err := New(Options{SQEntries: 4, CQEntries: 8, Flags: DefaultSetupFlags})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var batch [3]CQE
	next := uint64(0)
	for round := range 10 {
		for i := range 4 {
			sqe := getSQE(t, r)
			sqe.PrepareNop()
			sqe.UserData = uint64(round*4 + i)
		}
		if _, err := r.SubmitAndWait(4); err != nil {
			t.Fatal(err)
		}
		for r.CQReady() > 0 {
			n := r.ReapCQEs(batch[:])
			for _, cqe := range batch[:n] {
				if cqe.UserData != next {
					t.Fatalf("round %d: cqe user_data %d, want %d", round, cqe.UserData, next)
				}
				next++
			}
		}
	}
	if next != 40 {
		t.Fatalf("reaped %d, want 40", next)
	}
	if n := testing.AllocsPerRun(100, func() { r.ReapCQEs(batch[:]) }); n != 0 {
		t.Fatalf("ReapCQEs allocates %v times", n)
	}
}

// TestHotPathDoesNotAllocate: preparing, submitting, waiting (also with a
// timeout) and reaping allocate nothing.
func TestHotPathDoesNotAllocate(t *testing.T) {
	r := newTestRing(t, 8)
	a, b := socketpair(t, unix.SOCK_STREAM)
	out, in := make([]byte, 32), make([]byte, 32)
	var batch [4]CQE
	allocs := testing.AllocsPerRun(200, func() {
		sqe, _ := r.GetSQE()
		sqe.PrepareSend(a, out, 0)
		sqe.UserData = 1
		sqe, _ = r.GetSQE()
		sqe.PrepareRecv(b, in, unix.MSG_WAITALL)
		sqe.UserData = 2
		sqe, _ = r.GetSQE()
		sqe.PrepareNop()
		if _, err := r.SubmitAndWaitTimeout(3, completionTimeout); err != nil {
			panic(err)
		}
		got := 0
		if cqe, ok := r.PeekCQE(); ok {
			_ = cqe.Err()
			r.CQESeen()
			got++
		}
		for attempt := 0; got < 3; attempt++ {
			if attempt == 100 {
				panic("completions missing")
			}
			n := r.ReapCQEs(batch[:])
			got += n
			if got < 3 && n == 0 {
				if _, err := r.SubmitAndWaitTimeout(1, completionTimeout); err != nil {
					panic(err)
				}
			}
		}
	})
	if allocs != 0 {
		t.Fatalf("submit and reap allocate %v times per round", allocs)
	}
}

func TestRegisterRingFd(t *testing.T) {
	r := newTestRing(t, 8)
	requireKernel(t, 5, 18, "registered ring fds")
	if err := r.RegisterRingFd(); err != nil {
		t.Fatal(err)
	}
	if err := r.RegisterRingFd(); err != nil {
		t.Fatalf("second RegisterRingFd: %v", err)
	}
	for i := range uint64(3) {
		sqe := getSQE(t, r)
		sqe.PrepareNop()
		sqe.UserData = i
	}
	if n, err := r.SubmitAndWaitTimeout(3, completionTimeout); n != 3 || err != nil {
		t.Fatalf("SubmitAndWaitTimeout through the registered fd = %d, %v", n, err)
	}
	if r.CQReady() != 3 {
		t.Fatalf("CQReady = %d", r.CQReady())
	}
	if err := r.Close(); err != nil {
		t.Fatalf("Close with a registered ring fd: %v", err)
	}
}

func TestEnterErrorMapping(t *testing.T) {
	for _, tc := range []struct {
		errno unix.Errno
		want  error
	}{
		{unix.EBUSY, ErrCQOverflow},
		{unix.EAGAIN, ErrCQOverflow},
		{unix.EBADR, ErrCQEsDropped},
		{unix.EEXIST, ErrWrongThread},
		{unix.EFAULT, unix.EFAULT},
		{unix.EINVAL, unix.EINVAL},
	} {
		err := enterError(tc.errno)
		if !errors.Is(err, tc.want) || !errors.Is(err, tc.errno) {
			t.Errorf("enterError(%v) = %v, want it to wrap %v and the errno", tc.errno, err, tc.want)
		}
	}
}

// TestSubmitAllPastAFailedSQE: an SQE the kernel rejects at submission
// (unknown opcode) completes with EINVAL and, with SetupSubmitAll, the SQE
// after it still runs.
func TestSubmitAllPastAFailedSQE(t *testing.T) {
	r := newTestRing(t, 8)
	if r.Flags()&SetupSubmitAll == 0 {
		t.Skip("kernel refused IORING_SETUP_SUBMIT_ALL")
	}
	sqe := getSQE(t, r)
	sqe.PrepareNop()
	sqe.Opcode = Opcode(250)
	sqe.UserData = 1
	sqe = getSQE(t, r)
	sqe.PrepareNop()
	sqe.UserData = 2
	if n, err := r.Submit(); n != 2 || err != nil {
		t.Fatalf("Submit = %d, %v; want both consumed", n, err)
	}
	results := map[uint64]CQE{}
	for _, cqe := range collectCQEs(t, r, 2) {
		results[cqe.UserData] = cqe
	}
	if !errors.Is(results[1].Err(), unix.EINVAL) || results[2].Res != 0 {
		t.Fatalf("bad opcode %+v (%v), nop %+v", results[1], results[1].Err(), results[2])
	}
}

// TestSeparateRingMappings runs a ring mapped the pre-5.4 way, SQ and CQ
// rings in two mappings, as New does on kernels without FeatSingleMmap
// (newer kernels still accept the separate CQ offset).
func TestSeparateRingMappings(t *testing.T) {
	fd, p, _, err := setupWithFallback(4, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	r := &Ring{fd: fd, enterFd: fd, flags: p.flags, features: p.features &^ FeatSingleMmap}
	if err := r.mapRings(&p); err != nil {
		unix.Close(fd)
		t.Fatal(err)
	}
	defer r.Close()
	if unsafe.SliceData(r.cqRingMem) == unsafe.SliceData(r.sqRingMem) {
		t.Fatal("CQ ring not mapped separately")
	}
	for i := range uint64(6) { // more than the SQ holds: wraps both rings
		sqe := getSQE(t, r)
		sqe.PrepareNop()
		sqe.UserData = i
		if _, err := r.SubmitAndWait(1); err != nil {
			t.Fatal(err)
		}
		if cqe := nextCQE(t, r); cqe.UserData != i {
			t.Fatalf("cqe %+v, want user_data %d", cqe, i)
		}
	}
}
