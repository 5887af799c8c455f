package fdpass

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/ring"
	"golang.org/x/sys/unix"
)

// completionTimeout bounds each wait for a CQE or a peer's EOF; a guard against
// hangs, never a synchronisation.
const completionTimeout = 5 * time.Second

// openFdCount counts this process's descriptors. Registered files are not
// descriptors; a leaked one shows up as a peer that never sees EOF instead.
func openFdCount(t testing.TB) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

// newRing locks the calling goroutine to its thread (the ring is SINGLE_ISSUER) and
// returns a ring with a sparse registered-file table of slotCount slots (none if 0).
func newRing(t testing.TB, slotCount uint32) *ring.Ring {
	t.Helper()
	runtime.LockOSThread()
	r, err := ring.New(ring.DefaultOptions(16))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	if slotCount > 0 {
		if err := r.RegisterFilesSparse(slotCount); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// connection returns a connected pair: the end to hand off, and the peer that watches.
func connection(t testing.TB) (handed, peer int) {
	t.Helper()
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	tv := unix.NsecToTimeval(completionTimeout.Nanoseconds())
	if err := unix.SetsockoptTimeval(pair[1], unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		t.Fatal(err)
	}
	return pair[0], pair[1]
}

// expectClosed waits (bounded) until the peer sees EOF: every copy of the handed end is
// closed.
func expectClosed(t testing.TB, peer int) {
	t.Helper()
	var b [16]byte
	n, err := unix.Read(peer, b[:])
	// The Go runtime's preemption signal interrupts a blocking read; retry, bounded.
	for retries := 0; errors.Is(err, unix.EINTR) && retries < 1000; retries++ {
		n, err = unix.Read(peer, b[:])
	}
	if err != nil || n != 0 {
		t.Fatalf("peer read = %d, %v; want EOF (the handed-off end is still open somewhere)", n, err)
	}
	unix.Close(peer)
}

// expectEcho writes through the handed end (via send, which r performs on slot or fd)
// and reads it at the peer.
func expectEcho(t testing.TB, r *ring.Ring, h Handoff, peer int) {
	t.Helper()
	msg := []byte("served by the target shard")
	sqe, err := r.GetSQE()
	if err != nil {
		t.Fatal(err)
	}
	sqe.PrepareSend(h.Fd, msg, 0)
	if h.Direct {
		sqe.Flags |= ring.SQEFixedFile
	}
	sqe.UserData = 99
	cqe := nextCQE(t, r)
	if cqe.UserData != 99 || cqe.Res != int32(len(msg)) {
		t.Fatalf("send through the handoff: %+v (%v)", cqe, cqe.Err())
	}
	got := make([]byte, len(msg))
	if n, err := unix.Read(peer, got); err != nil || n != len(msg) || string(got) != string(msg) {
		t.Fatalf("peer read %q, %v", got[:max(n, 0)], err)
	}
}

// nextCQE submits and waits (bounded) for r's next completion.
func nextCQE(t testing.TB, r *ring.Ring) ring.CQE {
	t.Helper()
	if _, err := r.Submit(); err != nil {
		t.Fatal(err)
	}
	cqe, err := r.WaitCQETimeout(completionTimeout)
	if err != nil {
		t.Fatalf("no completion within %v: %v", completionTimeout, err)
	}
	c := *cqe
	r.CQESeen()
	return c
}

// outcome drives the sender's ring until Complete reports the handoff's end.
func outcome(t testing.TB, r *ring.Ring, s *Sender) Outcome {
	t.Helper()
	for range 4 { // a handoff causes exactly two sender CQEs
		cqe := nextCQE(t, r)
		if !Owns(cqe.UserData) {
			t.Fatalf("unexpected CQE on the sender ring: %+v", cqe)
		}
		if _, ok := Incoming(&cqe); ok {
			t.Fatalf("incoming-file CQE on the sender ring: %+v", cqe)
		}
		if out, done := s.Complete(&cqe); done {
			return out
		}
	}
	t.Fatal("no outcome after four completions")
	return Outcome{}
}

func newMsgRingSender(t testing.TB, r *ring.Ring, inFlightMax int, targets ...int) *Sender {
	t.Helper()
	s, err := NewSender(Config{Mode: ModeMsgRing, Ring: r, TargetRingFds: targets, InFlightMax: inFlightMax, StagingSlotFirst: 8})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestProbeOnThisHost(t *testing.T) {
	p, err := Probe()
	if err != nil {
		t.Fatal(err)
	}
	if p.Mode != ModeMsgRing {
		t.Fatalf("Probe = %v (%s); this host (Linux 6.1+) supports msg_ring send-fd", p.Mode, p.Why)
	}
	t.Logf("%v: %s", p.Mode, p.Why)
}

func TestMsgRingHandoff(t *testing.T) {
	sender := newRing(t, 16)
	target := newRing(t, 8)
	s := newMsgRingSender(t, sender, 4, target.Fd())
	before := openFdCount(t)
	for _, tc := range []struct {
		name       string
		targetSlot uint32
		wantSlot   int
	}{{"kernel-chosen slot", ring.FileIndexAlloc, -1}, {"reserved slot", 5, 5}} {
		handed, peer := connection(t)
		if err := s.SendFd(handed, 0, tc.targetSlot, 1234); err != nil {
			t.Fatalf("%s: SendFd: %v", tc.name, err)
		}
		if s.InFlightCount() != 1 {
			t.Fatalf("%s: InFlightCount = %d", tc.name, s.InFlightCount())
		}
		out := outcome(t, sender, s)
		if out.Err != nil || out.Cookie != 1234 || out.Shard != 0 {
			t.Fatalf("%s: outcome %+v", tc.name, out)
		}
		cqe := nextCQE(t, target)
		h, ok := Incoming(&cqe)
		if !ok || !h.Direct || h.Cookie != 1234 || (tc.wantSlot >= 0 && h.Fd != tc.wantSlot) {
			t.Fatalf("%s: target CQE %+v -> %+v, %v", tc.name, cqe, h, ok)
		}
		expectEcho(t, target, h, peer)
		if err := CloseHandoff(target, h); err != nil {
			t.Fatal(err)
		}
		expectClosed(t, peer)
	}
	if s.InFlightCount() != 0 {
		t.Fatalf("InFlightCount = %d after every outcome", s.InFlightCount())
	}
	if after := openFdCount(t); after != before {
		t.Fatalf("open fds %d before, %d after", before, after)
	}
}

func TestMsgRingSendSlot(t *testing.T) {
	sender := newRing(t, 16)
	target := newRing(t, 8)
	s := newMsgRingSender(t, sender, 4, target.Fd())
	before := openFdCount(t)
	handed, peer := connection(t)
	// What a multishot accept with direct descriptors leaves: the file in a slot only.
	if _, err := sender.UpdateFiles(2, []int32{int32(handed)}); err != nil {
		t.Fatal(err)
	}
	unix.Close(handed)
	if err := s.SendSlot(2, 0, ring.FileIndexAlloc, 7); err != nil {
		t.Fatal(err)
	}
	if out := outcome(t, sender, s); out.Err != nil {
		t.Fatalf("outcome %+v", out)
	}
	cqe := nextCQE(t, target)
	h, ok := Incoming(&cqe)
	if !ok || h.Cookie != 7 {
		t.Fatalf("target CQE %+v", cqe)
	}
	// The sender's slot is empty now: a send on it fails.
	sqe, _ := sender.GetSQE()
	sqe.PrepareSend(2, []byte("x"), 0)
	sqe.Flags |= ring.SQEFixedFile
	sqe.UserData = 5
	if cqe := nextCQE(t, sender); !errors.Is(cqe.Err(), unix.EBADF) {
		t.Fatalf("send on the sender's slot after the handoff: %+v (%v)", cqe, cqe.Err())
	}
	expectEcho(t, target, h, peer)
	if err := CloseHandoff(target, h); err != nil {
		t.Fatal(err)
	}
	expectClosed(t, peer)
	if after := openFdCount(t); after != before {
		t.Fatalf("open fds %d before, %d after", before, after)
	}
}

// Every failure closes the connection exactly once and says why.
func TestMsgRingFailuresCloseTheConnection(t *testing.T) {
	sender := newRing(t, 16)
	full := newRing(t, 1)
	noTable := newRing(t, 0)
	devNull, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(devNull)
	// Fill full's only slot.
	filler, fillerPeer := connection(t)
	if _, err := full.UpdateFiles(0, []int32{int32(filler)}); err != nil {
		t.Fatal(err)
	}
	unix.Close(filler)
	// A closed ring's descriptor number is soon reused (the case "not a ring" covers
	// what a send to it then meets); a number far above RLIMIT_NOFILE is never open.
	const closedFd = 1<<30 - 1

	s := newMsgRingSender(t, sender, 4, full.Fd(), noTable.Fd(), devNull, closedFd)
	before := openFdCount(t)
	for _, tc := range []struct {
		name       string
		shard      int
		targetSlot uint32
		want       error
		wantErrno  unix.Errno
	}{
		{"table full", 0, ring.FileIndexAlloc, ErrTargetTableFull, unix.ENFILE},
		{"slot beyond the table", 0, 3, ErrTargetSlotInvalid, unix.EINVAL},
		{"no table", 1, 0, ErrTargetNoTable, unix.ENXIO},
		{"no table, any slot", 1, ring.FileIndexAlloc, ErrTargetTableFull, unix.ENFILE},
		{"not a ring", 2, ring.FileIndexAlloc, ErrTargetGone, unix.EBADFD},
		{"ring closed, descriptor not open", 3, ring.FileIndexAlloc, ErrTargetGone, unix.EBADF},
	} {
		handed, peer := connection(t)
		if err := s.SendFd(handed, tc.shard, tc.targetSlot, 42); err != nil {
			t.Fatalf("%s: SendFd: %v", tc.name, err)
		}
		out := outcome(t, sender, s)
		if !errors.Is(out.Err, tc.want) || !errors.Is(out.Err, tc.wantErrno) {
			t.Fatalf("%s: outcome %v, want %v (%v)", tc.name, out.Err, tc.want, tc.wantErrno)
		}
		expectClosed(t, peer)
	}
	if after := openFdCount(t); after != before {
		t.Fatalf("open fds %d before, %d after", before, after)
	}
	// A slot too large for user_data fails before anything is queued.
	handed, peer := connection(t)
	if err := s.SendFd(handed, 0, slotMax+1, 1); !errors.Is(err, ErrTargetSlotInvalid) {
		t.Fatalf("SendFd to slot %d = %v", slotMax+1, err)
	}
	expectClosed(t, peer)
	// The filler was never disturbed.
	if n, err := unix.Write(fillerPeer, []byte("x")); err != nil || n != 1 {
		t.Fatalf("filler connection broken: %d, %v", n, err)
	}
	unix.Close(fillerPeer)
}

// pidfdThread is PIDFD_THREAD (Linux 6.9): a pidfd for one thread, readable when it exits.
const pidfdThread = unix.O_EXCL

// A target shard whose thread has exited (shut down) refuses the file with EOWNERDEAD;
// the connection is closed, not stranded in a ring nobody serves.
func TestMsgRingTargetThreadExited(t *testing.T) {
	sender := newRing(t, 16)
	type started struct {
		r   *ring.Ring
		tid int
		err error
	}
	ch := make(chan started)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		r, err := ring.New(ring.DefaultOptions(8))
		if err == nil {
			err = r.RegisterFilesSparse(4)
		}
		ch <- started{r, unix.Gettid(), err}
	}()
	st := <-ch
	if st.err != nil {
		t.Fatal(st.err)
	}
	defer st.r.Close()
	pidfd, err := unix.PidfdOpen(st.tid, pidfdThread)
	if errors.Is(err, unix.ESRCH) {
		pidfd = -1 // already gone
	} else if err != nil {
		t.Skipf("cannot wait for a thread's exit here (pidfd_open PIDFD_THREAD: %v)", err)
	}
	if pidfd >= 0 {
		fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, int(completionTimeout.Milliseconds()))
		unix.Close(pidfd)
		if err != nil || n != 1 {
			t.Fatalf("target thread did not exit: %d, %v", n, err)
		}
	}
	s := newMsgRingSender(t, sender, 2, st.r.Fd())
	before := openFdCount(t)
	handed, peer := connection(t)
	if err := s.SendFd(handed, 0, ring.FileIndexAlloc, 9); err != nil {
		t.Fatal(err)
	}
	out := outcome(t, sender, s)
	if !errors.Is(out.Err, ErrTargetGone) || !errors.Is(out.Err, unix.EOWNERDEAD) {
		t.Fatalf("outcome %v, want ErrTargetGone (EOWNERDEAD)", out.Err)
	}
	expectClosed(t, peer)
	if after := openFdCount(t); after != before {
		t.Fatalf("open fds %d before, %d after", before, after)
	}
}

func TestHandoffToOwnRingIsABug(t *testing.T) {
	sender := newRing(t, 16)
	s := newMsgRingSender(t, sender, 1, sender.Fd())
	defer func() {
		if msg := recover(); msg == nil || !strings.Contains(fmt.Sprint(msg), "sender's own") {
			t.Fatalf("panic %v, want one naming the sender's own ring", msg)
		}
	}()
	s.SendFd(0, 0, ring.FileIndexAlloc, 0)
}

func TestMsgRingBusyClosesTheConnection(t *testing.T) {
	sender := newRing(t, 16)
	target := newRing(t, 8)
	s := newMsgRingSender(t, sender, 1, target.Fd())
	first, firstPeer := connection(t)
	if err := s.SendFd(first, 0, ring.FileIndexAlloc, 1); err != nil {
		t.Fatal(err)
	}
	second, secondPeer := connection(t)
	if err := s.SendFd(second, 0, ring.FileIndexAlloc, 2); !errors.Is(err, ErrBusy) {
		t.Fatalf("second SendFd with InFlightMax 1 = %v, want ErrBusy", err)
	}
	expectClosed(t, secondPeer)
	if out := outcome(t, sender, s); out.Err != nil || out.Cookie != 1 {
		t.Fatalf("first outcome %+v", out)
	}
	cqe := nextCQE(t, target)
	h, ok := Incoming(&cqe)
	if !ok {
		t.Fatalf("target CQE %+v", cqe)
	}
	expectEcho(t, target, h, firstPeer)
	CloseHandoff(target, h)
	expectClosed(t, firstPeer)
	// A busy SendSlot empties the slot it was given.
	third, thirdPeer := connection(t)
	if _, err := sender.UpdateFiles(3, []int32{int32(third)}); err != nil {
		t.Fatal(err)
	}
	unix.Close(third)
	fourth, fourthPeer := connection(t)
	if err := s.SendFd(fourth, 0, ring.FileIndexAlloc, 4); err != nil {
		t.Fatal(err)
	}
	if err := s.SendSlot(3, 0, ring.FileIndexAlloc, 3); !errors.Is(err, ErrBusy) {
		t.Fatalf("SendSlot while busy = %v", err)
	}
	expectClosed(t, thirdPeer)
	if out := outcome(t, sender, s); out.Err != nil {
		t.Fatal(out.Err)
	}
	cqe = nextCQE(t, target)
	h, _ = Incoming(&cqe)
	CloseHandoff(target, h)
	expectClosed(t, fourthPeer)
}

// Closing the sender with handoffs in flight (its ring already closed) closes their
// plain descriptors.
func TestSenderCloseWithHandoffsInFlight(t *testing.T) {
	target := newRing(t, 4) // also locks the goroutine to its thread
	before := openFdCount(t)
	sender, err := ring.New(ring.DefaultOptions(8))
	if err != nil {
		t.Fatal(err)
	}
	if err := sender.RegisterFilesSparse(16); err != nil {
		t.Fatal(err)
	}
	s := newMsgRingSender(t, sender, 2, target.Fd())
	handed, peer := connection(t)
	if err := s.SendFd(handed, 0, ring.FileIndexAlloc, 1); err != nil {
		t.Fatal(err)
	}
	sender.Close() // never submitted: the kernel drops the chain and the staging slot
	if n := s.Close(); n != 1 {
		t.Fatalf("Close reported %d handoffs in flight, want 1", n)
	}
	expectClosed(t, peer)
	if after := openFdCount(t); after != before {
		t.Fatalf("open fds %d before, %d after", before, after)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("SendFd after Close did not panic")
		}
	}()
	s.SendFd(0, 0, 0, 0)
}

// fakeQueue stands in for the shard's inter-shard queue.
type fakeQueue struct {
	items  []Handoff
	closed bool
}

func (q *fakeQueue) enqueue(shard int, h Handoff) bool {
	if q.closed || len(q.items) == 2 {
		return false
	}
	q.items = append(q.items, h)
	return true
}

func TestQueueHandoff(t *testing.T) {
	q := &fakeQueue{}
	s, err := NewSender(Config{Mode: ModeQueue, ShardCount: 2, Enqueue: q.enqueue})
	if err != nil {
		t.Fatal(err)
	}
	before := openFdCount(t)
	handed, peer := connection(t)
	if err := s.SendFd(handed, 1, ring.FileIndexAlloc, 5); err != nil {
		t.Fatal(err)
	}
	if len(q.items) != 1 || q.items[0].Direct || q.items[0].Cookie != 5 || q.items[0].Fd == handed {
		t.Fatalf("queued %+v, want a duplicate of fd %d", q.items, handed)
	}
	if _, err := unix.FcntlInt(uintptr(handed), unix.F_GETFD, 0); !errors.Is(err, unix.EBADF) {
		t.Fatalf("the sender's copy (fd %d) is still open: %v", handed, err)
	}
	h := q.items[0]
	q.items = q.items[:0]
	if flags, err := unix.FcntlInt(uintptr(h.Fd), unix.F_GETFD, 0); err != nil || flags&unix.FD_CLOEXEC == 0 {
		t.Fatalf("duplicate fd flags %#x, %v; want FD_CLOEXEC", flags, err)
	}
	msg := []byte("served from the queue")
	if _, err := unix.Write(h.Fd, msg); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(msg))
	if n, err := unix.Read(peer, got); err != nil || n != len(msg) {
		t.Fatalf("peer read %d, %v", n, err)
	}
	if err := CloseHandoff(nil, h); err != nil {
		t.Fatal(err)
	}
	expectClosed(t, peer)

	// A shard that is shutting down refuses: the connection is closed, once.
	q.closed = true
	handed, peer = connection(t)
	if err := s.SendFd(handed, 0, ring.FileIndexAlloc, 6); !errors.Is(err, ErrQueueRefused) {
		t.Fatalf("SendFd to a closed queue = %v", err)
	}
	expectClosed(t, peer)
	// A shard that shuts down with handoffs queued closes them.
	q.closed = false
	handed, peer = connection(t)
	if err := s.SendFd(handed, 0, ring.FileIndexAlloc, 7); err != nil {
		t.Fatal(err)
	}
	for _, h := range q.items {
		if err := CloseHandoff(nil, h); err != nil {
			t.Fatal(err)
		}
	}
	q.items = nil
	expectClosed(t, peer)
	if after := openFdCount(t); after != before {
		t.Fatalf("open fds %d before, %d after", before, after)
	}
}

func TestNewSenderValidates(t *testing.T) {
	for _, cfg := range []Config{
		{},
		{Mode: ModeMsgRing},
		{Mode: ModeMsgRing, Ring: &ring.Ring{}, TargetRingFds: []int{1}},
		{Mode: ModeMsgRing, Ring: &ring.Ring{}, TargetRingFds: []int{1}, InFlightMax: 1 << 21},
		{Mode: ModeMsgRing, Ring: &ring.Ring{}, TargetRingFds: []int{1}, InFlightMax: 4, StagingSlotFirst: 1<<31 - 2},
		{Mode: ModeQueue},
		{Mode: ModeQueue, ShardCount: 1},
	} {
		if _, err := NewSender(cfg); err == nil {
			t.Errorf("NewSender(%+v) accepted", cfg)
		}
	}
}

func TestUserData(t *testing.T) {
	for _, tc := range []struct {
		k        kind
		mid, low uint32
	}{{kindIncoming, 0, 0}, {kindIncoming, slotMax + 1, 1<<32 - 1}, {kindSend, 1, 7}, {kindClose, 1<<midBits - 1, 123456}} {
		ud := packUserData(tc.k, tc.mid, tc.low)
		k, mid, low, ok := unpackUserData(ud)
		if !ok || k != tc.k || mid != tc.mid || low != tc.low || !Owns(ud) {
			t.Errorf("pack(%v, %d, %d) = %#x -> %v, %d, %d, %v", tc.k, tc.mid, tc.low, ud, k, mid, low, ok)
		}
	}
	for _, ud := range []uint64{0, 1, 1<<32 | 5, ring.UserDataUntracked, ring.UserDataUntracked | 42, ^uint64(0)} {
		if Owns(ud) {
			t.Errorf("Owns(%#x) = true", ud)
		}
	}
	cqe := ring.CQE{UserData: packUserData(kindSend, 1, 0)}
	if _, ok := Incoming(&cqe); ok {
		t.Error("a send CQE was taken for an incoming file")
	}
}

func FuzzUserData(f *testing.F) {
	f.Add(uint64(0), uint8(1), uint32(0), uint32(0))
	f.Add(^uint64(0), uint8(3), uint32(1<<21-1), uint32(1<<32-1))
	f.Fuzz(func(t *testing.T, other uint64, k uint8, mid, low uint32) {
		k = k%3 + 1
		mid &= 1<<midBits - 1
		ud := packUserData(kind(k), mid, low)
		gk, gmid, glow, ok := unpackUserData(ud)
		if !ok || gk != kind(k) || gmid != mid || glow != low {
			t.Fatalf("round trip of %d/%d/%d via %#x gave %d/%d/%d/%v", k, mid, low, ud, gk, gmid, glow, ok)
		}
		// A value owned by fdpass is always one ring.Table never hands out.
		if Owns(other) && other&ring.UserDataUntracked == 0 {
			t.Fatalf("Owns(%#x) without the untracked bit", other)
		}
	})
}

func TestHandoffDoesNotAllocate(t *testing.T) {
	sender := newRing(t, 16)
	target := newRing(t, 8)
	s := newMsgRingSender(t, sender, 4, target.Fd())
	handed, peer := connection(t)
	defer unix.Close(handed)
	defer unix.Close(peer)
	allocs := testing.AllocsPerRun(20, func() {
		fd, err := unix.FcntlInt(uintptr(handed), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			panic(err)
		}
		if err := s.SendFd(fd, 0, ring.FileIndexAlloc, 1); err != nil {
			panic(err)
		}
		for done := false; !done; {
			if _, err := sender.Submit(); err != nil {
				panic(err)
			}
			cqe, err := sender.WaitCQE()
			if err != nil {
				panic(err)
			}
			c := *cqe
			sender.CQESeen()
			var out Outcome
			if out, done = s.Complete(&c); done && out.Err != nil {
				panic(out.Err)
			}
		}
		cqe, err := target.WaitCQE()
		if err != nil {
			panic(err)
		}
		h, ok := Incoming(cqe)
		target.CQESeen()
		if !ok {
			panic("not an incoming file")
		}
		if err := CloseHandoff(target, h); err != nil {
			panic(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("a msg_ring handoff allocates %v times", allocs)
	}
}

// Complete is a small state machine over the two sender CQEs; drive it with synthetic
// CQEs in the order the kernel does not normally use, and with the CQEs of our bugs.
func TestCompleteStateMachine(t *testing.T) {
	sender := newRing(t, 16)
	target := newRing(t, 4)
	s := newMsgRingSender(t, sender, 2, target.Fd())
	handed, peer := connection(t)
	defer unix.Close(peer)
	if err := s.SendFd(handed, 0, ring.FileIndexAlloc, 77); err != nil {
		t.Fatal(err)
	}
	// The chain stays unsubmitted (the ring discards it at Close); the handoff is
	// in-flight entry 0, generation 1.
	send := ring.CQE{UserData: packUserData(kindSend, 1, 0), Res: -int32(unix.ENFILE)}
	closed := ring.CQE{UserData: packUserData(kindClose, 1, 0)}
	if _, done := s.Complete(&closed); done {
		t.Fatal("outcome after the close CQE alone")
	}
	mustPanic := func(want string, f func()) {
		t.Helper()
		defer func() {
			t.Helper()
			if msg := recover(); msg == nil || !strings.Contains(fmt.Sprint(msg), want) {
				t.Fatalf("panic %v, want one containing %q", msg, want)
			}
		}()
		f()
	}
	mustPanic("second close CQE", func() { s.Complete(&closed) })
	mustPanic("not in flight", func() { s.Complete(&ring.CQE{UserData: packUserData(kindSend, 2, 0)}) })
	mustPanic("not in flight", func() { s.Complete(&ring.CQE{UserData: packUserData(kindSend, 1, 1)}) })
	mustPanic("not a sender's", func() { s.Complete(&ring.CQE{UserData: packUserData(kindIncoming, 0, 0)}) })
	mustPanic("not a sender's", func() { s.Complete(&ring.CQE{UserData: 5}) })
	out, done := s.Complete(&send)
	if !done || out.Cookie != 77 || !errors.Is(out.Err, ErrTargetTableFull) || !errors.Is(out.Err, unix.ENFILE) {
		t.Fatalf("outcome %+v, %v", out, done)
	}
	if _, err := unix.FcntlInt(uintptr(handed), unix.F_GETFD, 0); !errors.Is(err, unix.EBADF) {
		t.Fatalf("the sender's plain fd %d is still open after the outcome: %v", handed, err)
	}
	if s.InFlightCount() != 0 {
		t.Fatalf("InFlightCount = %d", s.InFlightCount())
	}
	mustPanic("not in flight", func() { s.Complete(&send) })
	// A failed close of the sender's own slot is our bug.
	second, secondPeer := connection(t)
	defer unix.Close(secondPeer)
	if err := s.SendFd(second, 0, ring.FileIndexAlloc, 78); err != nil {
		t.Fatal(err)
	}
	mustPanic("closing sender slot", func() {
		s.Complete(&ring.CQE{UserData: packUserData(kindClose, 2, 0), Res: -int32(unix.EBADF)})
	})
	mustPanic("incoming-file CQE with error", func() {
		Incoming(&ring.CQE{UserData: packUserData(kindIncoming, 0, 0), Res: -1})
	})
	if got := s.Close(); got != 1 {
		t.Fatalf("Close found %d handoffs in flight, want 1", got)
	}
}
