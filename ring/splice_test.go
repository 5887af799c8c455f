package ring

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// tcpPair returns a loopback TCP connection's two ends: the accepted socket
// as a raw fd (the ring's side) and the dialled one as a net.TCPConn (the
// peer that reads).
func tcpPair(t *testing.T) (int, *net.TCPConn) {
	t.Helper()
	lfd, addr := listenTCP(t)
	peer := dial(t, addr)
	conn, _, err := unix.Accept4(lfd, unix.SOCK_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(conn) })
	return conn, peer
}

func testPipe(t *testing.T) (readEnd, writeEnd int) {
	t.Helper()
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(p[0]); unix.Close(p[1]) })
	return p[0], p[1]
}

// patternFile writes size bytes that differ at every offset (so a byte
// moved to the wrong place shows) and opens the file for reading.
func patternFile(t *testing.T, size int) (int, []byte) {
	t.Helper()
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i*7 + i>>8)
	}
	path := filepath.Join(t.TempDir(), "segment.log")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd, data
}

// readAllAsync reads n bytes from peer on a goroutine, so the sender's
// socket buffer drains while the ring splices into it.
func readAllAsync(peer *net.TCPConn, n int) <-chan []byte {
	got := make(chan []byte, 1)
	go func() {
		peer.SetReadDeadline(time.Now().Add(completionTimeout))
		buf := make([]byte, n)
		m, _ := io.ReadFull(peer, buf)
		got <- buf[:m]
	}()
	return got
}

// spliceReply moves [off, off+n) of file to sock through the pipe, the way
// a poll reply would: file -> pipe as much as the pipe takes, then pipe ->
// socket until the pipe is empty, repeated. fixed addresses the file and
// the socket through registered file slots 0 and 1.
func spliceReply(t *testing.T, r *Ring, file, pipeRead, pipeWrite, sock int, off uint64, n int, fixed bool) {
	t.Helper()
	inFlags, outSQEFlags := uint32(0), uint8(0)
	if fixed {
		file, sock = 0, 1
		inFlags, outSQEFlags = SpliceFdInFixed, SQEFixedFile
	}
	for n > 0 {
		sqe := getSQE(t, r)
		sqe.PrepareSplice(file, off, pipeWrite, SpliceNoOffset, uint32(n), inFlags|unix.SPLICE_F_MOVE)
		sqe.UserData = 1
		submit(t, r)
		in := nextCQE(t, r)
		if in.Res <= 0 {
			t.Fatalf("file -> pipe at %d: %+v (%v)", off, in, in.Err())
		}
		off += uint64(in.Res)
		n -= int(in.Res)
		for inPipe := in.Res; inPipe > 0; {
			more := uint32(0)
			if n > 0 {
				more = unix.SPLICE_F_MORE
			}
			sqe := getSQE(t, r)
			sqe.PrepareSplice(pipeRead, SpliceNoOffset, sock, SpliceNoOffset, uint32(inPipe), more|unix.SPLICE_F_MOVE)
			sqe.Flags |= outSQEFlags
			sqe.UserData = 2
			submit(t, r)
			out := nextCQE(t, r)
			if out.Res <= 0 {
				t.Fatalf("pipe -> socket: %+v (%v)", out, out.Err())
			}
			inPipe -= out.Res
		}
	}
}

// TestSpliceFileThroughPipeToSocket: a stretch of a file, spliced through a
// pipe into a loopback TCP socket, arrives byte for byte, by plain fds and
// by registered file slots.
func TestSpliceFileThroughPipeToSocket(t *testing.T) {
	for _, fixed := range []bool{false, true} {
		t.Run(map[bool]string{false: "fds", true: "fixed"}[fixed], func(t *testing.T) {
			r := newTestRing(t, 8)
			requireOp(t, r, OpSplice)
			file, data := patternFile(t, 3<<20+123)
			pipeRead, pipeWrite := testPipe(t)
			sock, peer := tcpPair(t)
			if fixed {
				if err := r.RegisterFiles([]int32{int32(file), int32(sock)}); err != nil {
					t.Fatal(err)
				}
			}
			// Start inside the file, not on a page boundary, and end
			// before it does.
			const off = 4096 + 17
			n := len(data) - off - 5
			got := readAllAsync(peer, n)
			spliceReply(t, r, file, pipeRead, pipeWrite, sock, off, n, fixed)
			if b := <-got; !bytes.Equal(b, data[off:off+n]) {
				t.Fatalf("peer got %d bytes, not the file's %d from %d", len(b), n, off)
			}
		})
	}
}

// TestSpliceShortAtEndOfFile: a splice asked for more than the file holds
// moves what there is, and at the end it moves 0: a result, not an error.
func TestSpliceShortAtEndOfFile(t *testing.T) {
	r := newTestRing(t, 8)
	requireOp(t, r, OpSplice)
	file, data := patternFile(t, 1000)
	pipeRead, pipeWrite := testPipe(t)
	for _, tc := range []struct {
		off  uint64
		want int32
	}{{900, 100}, {1000, 0}, {5000, 0}} {
		sqe := getSQE(t, r)
		sqe.PrepareSplice(file, tc.off, pipeWrite, SpliceNoOffset, 4096, 0)
		submit(t, r)
		if cqe := nextCQE(t, r); cqe.Res != tc.want {
			t.Fatalf("splice of 4096 at %d of a 1000-byte file: %+v, want %d", tc.off, cqe, tc.want)
		}
	}
	got := make([]byte, 200)
	if n, err := unix.Read(pipeRead, got); err != nil || !bytes.Equal(got[:n], data[900:]) {
		t.Fatalf("pipe holds %d bytes (%v), not the file's last 100", n, err)
	}
}

// TestSpliceToClosedSocketIsAResult: a reply cut short by a peer that is
// gone surfaces as a CQE's error (EPIPE or ECONNRESET), with the bytes
// still in the pipe; a splice from a bad descriptor is EBADF. No signal
// kills the process and nothing panics.
func TestSpliceToClosedSocketIsAResult(t *testing.T) {
	r := newTestRing(t, 8)
	requireOp(t, r, OpSplice)
	file, _ := patternFile(t, 64<<10)
	pipeRead, pipeWrite := testPipe(t)
	sock, peer := tcpPair(t)
	peer.SetLinger(0) // close with a reset
	peer.Close()

	sqe := getSQE(t, r)
	sqe.PrepareSplice(file, 0, pipeWrite, SpliceNoOffset, 16<<10, 0)
	submit(t, r)
	if cqe := nextCQE(t, r); cqe.Res != 16<<10 {
		t.Fatalf("file -> pipe: %+v (%v)", cqe, cqe.Err())
	}
	// The first send after a reset may still be taken; a bounded number
	// of tries must meet the error.
	var failed CQE
	for range 8 {
		sqe := getSQE(t, r)
		sqe.PrepareSplice(pipeRead, SpliceNoOffset, sock, SpliceNoOffset, 1, 0)
		submit(t, r)
		if cqe := nextCQE(t, r); cqe.Res < 0 {
			failed = cqe
			break
		}
	}
	if err := failed.Err(); !errors.Is(err, unix.EPIPE) && !errors.Is(err, unix.ECONNRESET) {
		t.Fatalf("splice into a reset socket: %+v (%v), want EPIPE or ECONNRESET", failed, err)
	}
	var queued int
	if q, err := unix.IoctlGetInt(pipeRead, unix.TIOCINQ); err != nil || q == 0 {
		t.Fatalf("pipe after the failed splice holds %d bytes (%v): the unsent rest must stay", q, err)
	} else {
		queued = q
	}
	t.Logf("%d bytes left in the pipe", queued)

	sqe = getSQE(t, r)
	sqe.PrepareSplice(file, 0, 1<<20, SpliceNoOffset, 10, 0)
	submit(t, r)
	if cqe := nextCQE(t, r); !errors.Is(cqe.Err(), unix.EBADF) {
		t.Fatalf("splice to a bad fd: %+v (%v), want EBADF", cqe, cqe.Err())
	}
}

// TestSendZCFixedBufferHeldUntilNotification: a send_zc from a registered
// buffer posts its result with CQEFMore (the buffer is still the kernel's)
// and then the notification, which alone frees it; the peer gets the bytes
// as they were when sent. A send_zc on a closed socket is an error result,
// and its buffer is free only once no notification is still to come.
func TestSendZCFixedBufferHeldUntilNotification(t *testing.T) {
	r := newTestRing(t, 8)
	requireOp(t, r, OpSendZC)
	requireKernel(t, 6, 0, "send_zc with a registered buffer")
	registered := make([]byte, 256<<10)
	for i := range registered {
		registered[i] = byte(i * 13)
	}
	if err := r.RegisterBuffers([][]byte{registered}); err != nil {
		t.Fatal(err)
	}
	sock, peer := tcpPair(t)
	want := bytes.Clone(registered[1000:])
	got := readAllAsync(peer, len(want))

	sqe := getSQE(t, r)
	sqe.PrepareSendZCFixed(sock, registered[1000:], unix.MSG_NOSIGNAL, 0)
	sqe.UserData = 5
	submit(t, r)
	var sent int32
	for {
		cqe := nextCQE(t, r)
		if cqe.UserData != 5 {
			t.Fatalf("unexpected cqe %+v", cqe)
		}
		if !cqe.Notif() {
			if cqe.Res < 0 || !cqe.More() || cqe.ZeroCopyBufferFree() {
				t.Fatalf("send_zc result %+v (%v): want bytes, CQEFMore, buffer still held", cqe, cqe.Err())
			}
			sent = cqe.Res
			continue
		}
		if sent == 0 || cqe.More() || !cqe.ZeroCopyBufferFree() {
			t.Fatalf("notification %+v after %d bytes: want it last, freeing the buffer", cqe, sent)
		}
		break
	}
	// Free: scribbling on it now must not change what the peer receives.
	clear(registered)
	if b := <-got; int32(len(b)) != sent || !bytes.Equal(b, want[:sent]) {
		t.Fatalf("peer got %d bytes, want the %d sent unchanged", len(b), sent)
	}

	peer.SetLinger(0)
	peer.Close()
	var failed CQE
	for range 8 {
		sqe := getSQE(t, r)
		sqe.PrepareSendZCFixed(sock, registered[:100], unix.MSG_NOSIGNAL, 0)
		sqe.UserData = 6
		submit(t, r)
		result := nextCQE(t, r)
		if result.More() {
			if notif := nextCQE(t, r); !notif.Notif() || !notif.ZeroCopyBufferFree() {
				t.Fatalf("after result %+v: %+v, want its notification", result, notif)
			}
		} else if !result.ZeroCopyBufferFree() {
			t.Fatalf("final result %+v does not free its buffer", result)
		}
		if result.Res < 0 {
			failed = result
			break
		}
	}
	if err := failed.Err(); !errors.Is(err, unix.EPIPE) && !errors.Is(err, unix.ECONNRESET) {
		t.Fatalf("send_zc on a reset socket: %+v (%v), want EPIPE or ECONNRESET", failed, err)
	}
}
