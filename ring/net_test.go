package ring

import (
	"bytes"
	"errors"
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// listenTCP opens a listening socket on 127.0.0.1, random port.
func listenTCP(t *testing.T) (fd int, addr *net.TCPAddr) {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(fd, 16); err != nil {
		t.Fatal(err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return fd, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: sa.(*unix.SockaddrInet4).Port}
}

func dial(t *testing.T, addr *net.TCPAddr) *net.TCPConn {
	t.Helper()
	c, err := net.DialTCP("tcp", nil, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestAcceptMultishot(t *testing.T) {
	r := newTestRing(t, 8)
	requireOp(t, r, OpAccept)
	requireKernel(t, 5, 19, "multishot accept")
	lfd, addr := listenTCP(t)
	const acceptUserData = 7
	sqe := getSQE(t, r)
	sqe.PrepareAcceptMultishot(lfd, unix.SOCK_CLOEXEC)
	sqe.UserData = acceptUserData
	submit(t, r)

	const clientCount = 4
	clients := make([]*net.TCPConn, clientCount)
	for i := range clients {
		clients[i] = dial(t, addr)
	}
	seen := map[int]bool{}
	for i := range clientCount {
		cqe := nextCQE(t, r)
		if cqe.UserData != acceptUserData || cqe.Err() != nil {
			t.Fatalf("accept cqe %d = %+v (%v)", i, cqe, cqe.Err())
		}
		if !cqe.More() {
			t.Fatalf("accept cqe %d lacks CQEFMore: multishot disarmed", i)
		}
		fd := int(cqe.Res)
		t.Cleanup(func() { unix.Close(fd) })
		seen[fd] = true
		// The accepted socket works: echo a byte to whichever client it is.
		writeAll(t, fd, []byte{byte(i)})
	}
	if len(seen) != clientCount {
		t.Fatalf("accepted %d distinct fds, want %d", len(seen), clientCount)
	}
	got := map[byte]bool{}
	for _, c := range clients {
		c.SetReadDeadline(time.Now().Add(completionTimeout))
		var b [1]byte
		if _, err := c.Read(b[:]); err != nil {
			t.Fatal(err)
		}
		got[b[0]] = true
	}
	if len(got) != clientCount {
		t.Fatalf("clients got %v", got)
	}

	// Cancelling the multishot accept ends it with a CQE without MORE.
	sqe = getSQE(t, r)
	sqe.PrepareCancel(acceptUserData, 0)
	sqe.UserData = 8
	submit(t, r)
	var cancelDone, acceptDone bool
	for range 2 {
		cqe := nextCQE(t, r)
		switch cqe.UserData {
		case 8:
			cancelDone = cqe.Res == 0
		case acceptUserData:
			acceptDone = !cqe.More() && errors.Is(cqe.Err(), unix.ECANCELED)
		}
	}
	if !cancelDone || !acceptDone {
		t.Fatalf("cancel done %v, accept ended %v", cancelDone, acceptDone)
	}
}

func TestAcceptMultishotDirect(t *testing.T) {
	r := newTestRing(t, 8)
	requireOp(t, r, OpAccept)
	requireKernel(t, 5, 19, "multishot accept into sparse registered files")
	if err := r.RegisterFilesSparse(4); err != nil {
		t.Fatal(err)
	}
	lfd, addr := listenTCP(t)
	sqe := getSQE(t, r)
	sqe.PrepareAcceptMultishotDirect(lfd, 0)
	sqe.UserData = 1
	submit(t, r)
	client := dial(t, addr)
	cqe := nextCQE(t, r)
	if cqe.Err() != nil || cqe.Res < 0 || cqe.Res >= 4 || !cqe.More() {
		t.Fatalf("direct accept cqe = %+v (%v)", cqe, cqe.Err())
	}
	slot := uint32(cqe.Res)

	// The slot is a live socket: send through it as a fixed file.
	msg := heapBytes("via direct descriptor")
	sqe = getSQE(t, r)
	sqe.PrepareSend(int(slot), msg, 0)
	sqe.Flags |= SQEFixedFile
	sqe.UserData = 2
	submit(t, r)
	if cqe := nextCQE(t, r); cqe.UserData != 2 || int(cqe.Res) != len(msg) {
		t.Fatalf("send via slot = %+v (%v)", cqe, cqe.Err())
	}
	client.SetReadDeadline(time.Now().Add(completionTimeout))
	got := make([]byte, len(msg))
	if _, err := client.Read(got); err != nil || !bytes.Equal(got, msg) {
		t.Fatalf("client read %q, %v", got, err)
	}
}

// heapBytes copies s into a fresh heap slice: memory handed to the kernel
// must not live on a goroutine stack.
func heapBytes(s string) []byte {
	return append(make([]byte, 0, len(s)), s...)
}

func TestRecvOneShotAndSend(t *testing.T) {
	r := newTestRing(t, 8)
	requireOp(t, r, OpRecv)
	requireOp(t, r, OpSend)
	a, b := socketpair(t, unix.SOCK_STREAM)

	recvBuf := make([]byte, 64)
	sqe := getSQE(t, r)
	sqe.PrepareRecv(b, recvBuf, 0)
	sqe.UserData = 1
	msg := heapBytes("hello, ring")
	sqe = getSQE(t, r)
	sqe.PrepareSend(a, msg, 0)
	sqe.UserData = 2
	submit(t, r)

	results := map[uint64]int32{}
	for _, cqe := range collectCQEs(t, r, 2) {
		results[cqe.UserData] = cqe.Res
	}
	if results[2] != int32(len(msg)) || results[1] != int32(len(msg)) {
		t.Fatalf("results %v, want both %d", results, len(msg))
	}
	if !bytes.Equal(recvBuf[:len(msg)], msg) {
		t.Fatalf("received %q", recvBuf[:len(msg)])
	}

	// EOF: recv completes with 0.
	unix.Shutdown(a, unix.SHUT_WR)
	sqe = getSQE(t, r)
	sqe.PrepareRecv(b, recvBuf, 0)
	sqe.UserData = 3
	submit(t, r)
	if cqe := nextCQE(t, r); cqe.UserData != 3 || cqe.Res != 0 {
		t.Fatalf("recv at EOF = %+v", cqe)
	}
}

func TestRecvBufferSelectOneShot(t *testing.T) {
	r := newTestRing(t, 8)
	requireOp(t, r, OpRecv)
	requireKernel(t, 5, 19, "provided buffer rings")
	br, err := NewBufferRing(r, BufferRingOptions{GroupID: 3, Entries: 4, BufferSize: 128})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { br.Close() })
	a, b := socketpair(t, unix.SOCK_STREAM)
	writeAll(t, a, []byte("selected"))
	sqe := getSQE(t, r)
	sqe.PrepareRecvBufferSelect(b, br.GroupID(), 0)
	sqe.UserData = 1
	submit(t, r)
	cqe := nextCQE(t, r)
	bid, ok := cqe.BufferID()
	if cqe.Res != 8 || !ok {
		t.Fatalf("cqe %+v, buffer %v", cqe, ok)
	}
	if got := br.Buffer(bid, int(cqe.Res)); string(got) != "selected" {
		t.Fatalf("buffer %d holds %q", bid, got)
	}
	br.Recycle(bid)
}

// TestRecvBufferSelectMax: a one-shot recv into a selected buffer, bounded below the
// buffer's size, reads no more than its bound; the rest stays for the next recv.
func TestRecvBufferSelectMax(t *testing.T) {
	r := newTestRing(t, 8)
	requireOp(t, r, OpRecv)
	requireKernel(t, 5, 19, "provided buffer rings")
	br, err := NewBufferRing(r, BufferRingOptions{GroupID: 3, Entries: 4, BufferSize: 128})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { br.Close() })
	a, b := socketpair(t, unix.SOCK_STREAM)
	writeAll(t, a, []byte("header+body"))
	for i, want := range []string{"header", "+body"} {
		sqe := getSQE(t, r)
		sqe.PrepareRecvBufferSelectMax(b, br.GroupID(), 6, 0)
		sqe.UserData = uint64(i)
		submit(t, r)
		cqe := nextCQE(t, r)
		bid, ok := cqe.BufferID()
		if !ok || cqe.Res < 0 {
			t.Fatalf("recv %d: cqe %+v, buffer %v", i, cqe, ok)
		}
		if got := br.Buffer(bid, int(cqe.Res)); string(got) != want {
			t.Fatalf("recv %d read %q, want %q", i, got, want)
		}
		br.Recycle(bid)
	}
}

func TestRecvMultishotBufferRing(t *testing.T) {
	r := newTestRing(t, 8)
	requireOp(t, r, OpRecv)
	requireKernel(t, 6, 0, "multishot recv")
	const entries = 4
	br, err := NewBufferRing(r, BufferRingOptions{GroupID: 1, Entries: entries, BufferSize: 64})
	if err != nil {
		t.Fatalf("NewBufferRing: %v", err)
	}
	t.Cleanup(func() { br.Close() })
	a, b := socketpair(t, unix.SOCK_SEQPACKET) // message boundaries: one recv per write

	arm := func(userData uint64) {
		sqe := getSQE(t, r)
		sqe.PrepareRecvMultishot(b, br.GroupID(), 0)
		sqe.UserData = userData
		submit(t, r)
	}
	arm(1)

	// Several messages, each into its own provided buffer, recycled as we go.
	for i := range 10 {
		msg := []byte{'m', byte('0' + i)}
		writeAll(t, a, msg)
		cqe := nextCQE(t, r)
		bid, ok := cqe.BufferID()
		if cqe.UserData != 1 || !ok || !cqe.More() || cqe.Res != 2 {
			t.Fatalf("msg %d: cqe %+v buffer %v more %v (%v)", i, cqe, ok, cqe.More(), cqe.Err())
		}
		if got := br.Buffer(bid, int(cqe.Res)); !bytes.Equal(got, msg) {
			t.Fatalf("msg %d: buffer %d holds %q", i, bid, got)
		}
		br.Recycle(bid)
	}

	// Exhaustion: keep every buffer; the entries+1st message finds none, the
	// recv ends with ENOBUFS and without MORE.
	held := make([]uint16, 0, entries)
	for i := range entries {
		writeAll(t, a, []byte{'x', byte(i)})
		cqe := nextCQE(t, r)
		bid, ok := cqe.BufferID()
		if !ok || !cqe.More() || cqe.Res != 2 {
			t.Fatalf("fill %d: cqe %+v", i, cqe)
		}
		held = append(held, bid)
	}
	writeAll(t, a, []byte("overflow"))
	cqe := nextCQE(t, r)
	if !errors.Is(cqe.Err(), unix.ENOBUFS) || cqe.More() {
		t.Fatalf("exhausted recv: cqe %+v (%v), want ENOBUFS without MORE", cqe, cqe.Err())
	}

	// Re-arm after recycling: the waiting message arrives.
	for _, bid := range held {
		br.Add(bid)
	}
	br.Publish()
	arm(2)
	cqe = nextCQE(t, r)
	bid, ok := cqe.BufferID()
	if cqe.UserData != 2 || !ok || string(br.Buffer(bid, int(cqe.Res))) != "overflow" {
		t.Fatalf("after re-arm: cqe %+v (%v)", cqe, cqe.Err())
	}
	br.Recycle(bid)

	// EOF ends the multishot with Res 0 and no MORE.
	unix.Shutdown(a, unix.SHUT_WR)
	cqe = nextCQE(t, r)
	if cqe.UserData != 2 || cqe.Res != 0 || cqe.More() {
		t.Fatalf("at EOF: cqe %+v", cqe)
	}
}

func TestWritev(t *testing.T) {
	r := newTestRing(t, 8)
	requireOp(t, r, OpWritev)
	a, b := socketpair(t, unix.SOCK_STREAM)
	parts := [][]byte{heapBytes("header|"), heapBytes("body|"), heapBytes("trailer")}
	iovecs := make([]unix.Iovec, len(parts))
	for i, p := range parts {
		iovecs[i].Base = &p[0]
		iovecs[i].SetLen(len(p))
	}
	sqe := getSQE(t, r)
	sqe.PrepareWritev(a, iovecs, ^uint64(0))
	sqe.UserData = 1
	submit(t, r)
	cqe := nextCQE(t, r)
	want := "header|body|trailer"
	if cqe.Res != int32(len(want)) {
		t.Fatalf("writev cqe %+v (%v)", cqe, cqe.Err())
	}
	if got := readFull(t, b, len(want)); string(got) != want {
		t.Fatalf("peer read %q", got)
	}
}

func TestSendmsg(t *testing.T) {
	r := newTestRing(t, 8)
	requireOp(t, r, OpSendmsg)
	a, b := socketpair(t, unix.SOCK_STREAM)
	parts := [][]byte{heapBytes("vectored "), heapBytes("sendmsg")}
	iovecs := make([]unix.Iovec, len(parts))
	for i, p := range parts {
		iovecs[i].Base = &p[0]
		iovecs[i].SetLen(len(p))
	}
	msg := &unix.Msghdr{Iov: &iovecs[0]}
	msg.SetIovlen(len(iovecs))
	sqe := getSQE(t, r)
	sqe.PrepareSendmsg(a, msg, unix.MSG_NOSIGNAL)
	sqe.UserData = 1
	submit(t, r)
	want := "vectored sendmsg"
	if cqe := nextCQE(t, r); cqe.Res != int32(len(want)) {
		t.Fatalf("sendmsg cqe %+v (%v)", cqe, cqe.Err())
	}
	if got := readFull(t, b, len(want)); string(got) != want {
		t.Fatalf("peer read %q", got)
	}
}

func TestSendZC(t *testing.T) {
	r := newTestRing(t, 8)
	requireOp(t, r, OpSendZC)
	// Zero copy needs a socket that supports it: TCP over loopback.
	lfd, addr := listenTCP(t)
	client := dial(t, addr)
	conn, _, err := unix.Accept(lfd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(conn) })

	payload := bytes.Repeat([]byte("zero-copy "), 1000)
	sqe := getSQE(t, r)
	sqe.PrepareSendZC(conn, payload, 0, true)
	sqe.UserData = 9
	submit(t, r)

	first := nextCQE(t, r)
	if first.UserData != 9 || first.Res != int32(len(payload)) || !first.More() || first.Notif() {
		t.Fatalf("send_zc result cqe %+v (%v)", first, first.Err())
	}
	notif := nextCQE(t, r)
	if notif.UserData != 9 || !notif.Notif() || notif.More() {
		t.Fatalf("send_zc notification cqe %+v", notif)
	}
	t.Logf("send_zc notification res %#x (copied=%v)", uint32(notif.Res), uint32(notif.Res)&NotifUsageZCCopied != 0)

	client.SetReadDeadline(time.Now().Add(completionTimeout))
	got := make([]byte, len(payload))
	for n := 0; n < len(got); {
		m, err := client.Read(got[n:])
		if err != nil {
			t.Fatal(err)
		}
		n += m
	}
	if !bytes.Equal(got, payload) {
		t.Fatal("payload corrupted")
	}
}

func TestCancelPendingRecv(t *testing.T) {
	r := newTestRing(t, 8)
	requireOp(t, r, OpAsyncCancel)
	_, b := socketpair(t, unix.SOCK_STREAM)
	buf := make([]byte, 16)
	sqe := getSQE(t, r)
	sqe.PrepareRecv(b, buf, 0)
	sqe.UserData = 1
	submit(t, r)
	expectNoCQE(t, r, 10*time.Millisecond)

	sqe = getSQE(t, r)
	sqe.PrepareCancel(1, 0)
	sqe.UserData = 2
	submit(t, r)
	results := map[uint64]CQE{}
	for _, cqe := range collectCQEs(t, r, 2) {
		results[cqe.UserData] = cqe
	}
	if !errors.Is(results[1].Err(), unix.ECANCELED) || results[2].Res != 0 {
		t.Fatalf("recv %+v, cancel %+v", results[1], results[2])
	}

	// Cancel of nothing: ENOENT.
	sqe = getSQE(t, r)
	sqe.PrepareCancel(12345, 0)
	sqe.UserData = 3
	submit(t, r)
	if cqe := nextCQE(t, r); !errors.Is(cqe.Err(), unix.ENOENT) {
		t.Fatalf("cancel of unknown user_data = %+v", cqe)
	}
}

func TestCancelByFd(t *testing.T) {
	r := newTestRing(t, 8)
	requireOp(t, r, OpAsyncCancel)
	_, b := socketpair(t, unix.SOCK_STREAM)
	bufs := [2][]byte{make([]byte, 8), make([]byte, 8)}
	for i := range 2 {
		sqe := getSQE(t, r)
		sqe.PrepareRecv(b, bufs[i], 0)
		sqe.UserData = uint64(10 + i)
	}
	submit(t, r)
	expectNoCQE(t, r, 10*time.Millisecond)
	sqe := getSQE(t, r)
	sqe.PrepareCancelFd(b, CancelAll)
	sqe.UserData = 20
	submit(t, r)
	cancelled := 0
	for _, cqe := range collectCQEs(t, r, 3) {
		switch cqe.UserData {
		case 20:
			if cqe.Res != 2 {
				t.Fatalf("cancel by fd cancelled %d, want 2 (%v)", cqe.Res, cqe.Err())
			}
		case 10, 11:
			if errors.Is(cqe.Err(), unix.ECANCELED) {
				cancelled++
			}
		}
	}
	if cancelled != 2 {
		t.Fatalf("%d recvs cancelled, want 2", cancelled)
	}
}

func TestBufferRingCallerMemoryAndValidation(t *testing.T) {
	r := newTestRing(t, 8)
	requireOp(t, r, OpRecv)
	requireKernel(t, 5, 19, "provided buffer rings")
	for _, opts := range []BufferRingOptions{
		{GroupID: 1, Entries: 3, BufferSize: 64},
		{GroupID: 1, Entries: 0, BufferSize: 64},
		{GroupID: 1, Entries: 65536, BufferSize: 64},
		{GroupID: 1, Entries: 4, BufferSize: 0},
		{GroupID: 1, Entries: 4, BufferSize: 64, Memory: make([]byte, 100)},
	} {
		if br, err := NewBufferRing(r, opts); err == nil {
			br.Close()
			t.Errorf("NewBufferRing(%+v) succeeded", opts)
		}
	}
	memory, err := unix.Mmap(-1, 0, 2*256, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANONYMOUS|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(memory) })
	br, err := NewBufferRing(r, BufferRingOptions{GroupID: 9, Entries: 2, BufferSize: 256, Memory: memory})
	if err != nil {
		t.Fatal(err)
	}
	// The same group id twice is refused by the kernel.
	if dup, err := NewBufferRing(r, BufferRingOptions{GroupID: 9, Entries: 2, BufferSize: 8}); err == nil {
		dup.Close()
		t.Fatal("second buffer ring with group 9 registered")
	}
	a, b := socketpair(t, unix.SOCK_STREAM)
	writeAll(t, a, []byte("into caller memory"))
	sqe := getSQE(t, r)
	sqe.PrepareRecvBufferSelect(b, 9, 0)
	sqe.UserData = 1
	submit(t, r)
	cqe := nextCQE(t, r)
	bid, ok := cqe.BufferID()
	if !ok || cqe.Res != 18 {
		t.Fatalf("cqe %+v (%v)", cqe, cqe.Err())
	}
	if got := string(memory[int(bid)*256 : int(bid)*256+18]); got != "into caller memory" {
		t.Fatalf("caller memory holds %q", got)
	}
	if err := br.Close(); err != nil {
		t.Fatal(err)
	}
	if err := br.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close = %v", err)
	}
}

// TestBufferRingTailWraps recycles buffers more than 2^16 times, so the
// ring's uint16 tail (and the kernel's head) wrap around.
func TestBufferRingTailWraps(t *testing.T) {
	r := newTestRing(t, 8)
	requireOp(t, r, OpRecv)
	requireKernel(t, 6, 0, "multishot recv")
	const entries = 4
	br, err := NewBufferRing(r, BufferRingOptions{GroupID: 2, Entries: entries, BufferSize: 16})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { br.Close() })
	a, b := socketpair(t, unix.SOCK_SEQPACKET)
	sqe := getSQE(t, r)
	sqe.PrepareRecvMultishot(b, br.GroupID(), 0)
	sqe.UserData = 1
	submit(t, r)
	// Each round uses one buffer fewer than the ring holds: a multishot recv
	// whose group runs dry ends with ENOBUFS even before more data arrives
	// (the kernel picks the buffer before it knows the socket is empty).
	const perRound = entries - 1
	const rounds = (1<<16)/perRound + 100
	var batch [perRound]CQE
	for round := range rounds {
		for i := range perRound {
			msg := [2]byte{byte(round), byte(i)}
			if _, err := unix.Write(a, msg[:]); err != nil {
				t.Fatal(err)
			}
		}
		for got := 0; got < perRound; {
			if r.CQReady() == 0 {
				if _, err := r.SubmitAndWaitTimeout(uint32(perRound-got), completionTimeout); err != nil {
					t.Fatal(err)
				}
				if r.CQReady() == 0 {
					t.Fatalf("round %d: no completion within %v", round, completionTimeout)
				}
			}
			n := r.ReapCQEs(batch[:perRound-got])
			for k, cqe := range batch[:n] {
				bid, ok := cqe.BufferID()
				if !ok || !cqe.More() || cqe.Res != 2 {
					t.Fatalf("round %d: cqe %+v (%v)", round, cqe, cqe.Err())
				}
				if data := br.Buffer(bid, 2); data[0] != byte(round) || data[1] != byte(got+k) {
					t.Fatalf("round %d: buffer %d holds %v", round, bid, data)
				}
				br.Add(bid)
			}
			br.Publish()
			got += n
		}
	}
}

func TestAcceptOneShot(t *testing.T) {
	r := newTestRing(t, 8)
	requireOp(t, r, OpAccept)
	lfd, addr := listenTCP(t)
	sqe := getSQE(t, r)
	sqe.PrepareAccept(lfd, unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK)
	sqe.UserData = 1
	submit(t, r)
	dial(t, addr)
	cqe := nextCQE(t, r)
	if cqe.Err() != nil || cqe.More() {
		t.Fatalf("accept cqe %+v (%v)", cqe, cqe.Err())
	}
	fd := int(cqe.Res)
	defer unix.Close(fd)
	flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err != nil || flags&unix.O_NONBLOCK == 0 {
		t.Fatalf("accepted fd flags %#x, %v: want O_NONBLOCK from acceptFlags", flags, err)
	}
}
