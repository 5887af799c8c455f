package ring

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// BenchmarkReplyFromFile measures the crossover between copying a reply and
// splicing it: a reply of N bytes of a segment file (in the page cache) to a
// loopback TCP socket whose peer, a goroutine of this process, reads and
// drops everything, by
//
//	loopback   a send of N bytes already in memory (the baseline: the socket's own cost)
//	copy       a read of the file into a buffer, then a send of it (the poll path today)
//	splice     file -> pipe -> socket (SPLICE_F_MOVE, SPLICE_F_MORE between pieces)
//	sendzc     send_zc of N bytes already in registered memory, waiting for the notification
//
// for N from 4 KiB to 1 MiB, one reply in flight (replyRig.run says what it
// reports).
func BenchmarkReplyFromFile(b *testing.B) {
	const fileBytes = 16 << 20
	data := make([]byte, fileBytes)
	for i := range data {
		data[i] = byte(i * 31)
	}
	path := filepath.Join(b.TempDir(), "segment.log")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		b.Fatal(err)
	}
	for _, size := range []int{4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20} {
		for _, way := range []string{"loopback", "copy", "splice", "sendzc"} {
			b.Run(fmt.Sprintf("bytes=%d/%s", size, way), func(b *testing.B) {
				benchReply(b, path, data, size, way)
			})
		}
	}
}

type replyBench struct {
	*replyRig
	buf             []byte // the copy's buffer, the sends' memory, registered for sendzc
	size, fileBytes int
}

func benchReply(b *testing.B, path string, data []byte, size int, way string) {
	rig := newReplyRig(b, path)
	if way == "sendzc" {
		requireOp(b, rig.r, OpSendZC)
	}
	rb := &replyBench{replyRig: rig, buf: make([]byte, size), size: size, fileBytes: len(data)}
	copy(rb.buf, data)
	if way == "sendzc" {
		if err := rig.r.RegisterBuffers([][]byte{rb.buf}); err != nil {
			b.Fatal(err)
		}
	}
	reply := map[string]func(int64) error{"loopback": rb.loopback, "copy": rb.copyReply, "splice": rb.splice, "sendzc": rb.sendZC}[way]
	rig.run(b, int64(size), int64(size), int64(len(data)), reply)
}

// replyRig is what the reply benchmarks send with: a ring, a segment file
// open for reading, a pipe of 1 MiB, and a loopback TCP socket whose peer, a
// goroutine of this process, reads and drops everything.
type replyRig struct {
	r                   *Ring
	file, sock          int
	pipeRead, pipeWrite int
	pipeBytes           int
	drained             chan int64
}

func newReplyRig(b *testing.B, path string) *replyRig {
	r := newTestRing(b, 16)
	file, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { unix.Close(file) })
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { unix.Close(p[0]); unix.Close(p[1]) })
	pipeBytes, err := unix.FcntlInt(uintptr(p[1]), unix.F_SETPIPE_SZ, 1<<20)
	if err != nil {
		b.Fatal(err)
	}
	sock, peer := benchTCPPair(b)
	b.Cleanup(func() { unix.Close(sock) })
	drained := make(chan int64, 1)
	go func() {
		n, _ := io.Copy(io.Discard, peer)
		drained <- n
	}()
	return &replyRig{r: r, file: file, sock: sock, pipeRead: p[0], pipeWrite: p[1], pipeBytes: pipeBytes, drained: drained}
}

// run times b.N replies of replyBytes each, the i-th reading the file at
// i*step (round again before fileBytes), checks that the peer received them
// all, and reports cpu-ms/GB beside MB/s: the process's CPU (getrusage: the
// ring's thread, io-wq workers and the reading peer, whose share is the same
// in every way) per GB sent.
func (g *replyRig) run(b *testing.B, replyBytes, step, fileBytes int64, reply func(offset int64) error) {
	b.SetBytes(replyBytes)
	b.ReportAllocs()
	var before, after unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &before)
	b.ResetTimer()
	offset := int64(0)
	for i := 0; i < b.N; i++ {
		if err := reply(offset); err != nil {
			b.Fatal(err)
		}
		offset += step
		if offset+step > fileBytes {
			offset = 0
		}
	}
	unix.Shutdown(g.sock, unix.SHUT_WR)
	if got := <-g.drained; got != int64(b.N)*replyBytes {
		b.Fatalf("peer read %d bytes, want %d", got, int64(b.N)*replyBytes)
	}
	b.StopTimer()
	unix.Getrusage(unix.RUSAGE_SELF, &after)
	cpuNs := unix.TimevalToNsec(after.Utime) - unix.TimevalToNsec(before.Utime) +
		unix.TimevalToNsec(after.Stime) - unix.TimevalToNsec(before.Stime)
	b.ReportMetric(float64(cpuNs)/1e6/(float64(b.N)*float64(replyBytes)/1e9), "cpu-ms/GB")
}

// wait reaps one completion.
func (g *replyRig) wait() (CQE, error) {
	cqe, err := g.r.WaitCQE()
	if err != nil {
		return CQE{}, err
	}
	c := *cqe
	g.r.CQESeen()
	return c, nil
}

// sendAll sends buf, one send after another.
func (g *replyRig) sendAll(buf []byte) error {
	for len(buf) > 0 {
		sqe, err := g.r.GetSQE()
		if err != nil {
			return err
		}
		sqe.PrepareSend(g.sock, buf, unix.MSG_NOSIGNAL)
		if _, err := g.r.Submit(); err != nil {
			return err
		}
		c, err := g.wait()
		if err != nil {
			return err
		}
		if c.Res <= 0 {
			return fmt.Errorf("send: %v", c.Err())
		}
		buf = buf[c.Res:]
	}
	return nil
}

func benchTCPPair(b *testing.B) (int, *net.TCPConn) {
	l, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan *net.TCPConn, 1)
	go func() {
		c, _ := l.AcceptTCP()
		accepted <- c
	}()
	client, err := net.DialTCP("tcp", nil, l.Addr().(*net.TCPAddr))
	if err != nil {
		b.Fatal(err)
	}
	server := <-accepted
	b.Cleanup(func() { server.Close() })
	// The ring's side is the dialled end, as a raw fd of its own.
	f, err := client.File()
	client.Close()
	if err != nil {
		b.Fatal(err)
	}
	fd, err := unix.Dup(int(f.Fd()))
	f.Close()
	if err != nil {
		b.Fatal(err)
	}
	return fd, server
}

func (rb *replyBench) loopback(int64) error { return rb.sendAll(rb.buf) }

func (rb *replyBench) copyReply(offset int64) error {
	sqe, err := rb.r.GetSQE()
	if err != nil {
		return err
	}
	sqe.PrepareRead(rb.file, rb.buf, uint64(offset))
	if _, err := rb.r.Submit(); err != nil {
		return err
	}
	c, err := rb.wait()
	if err != nil {
		return err
	}
	if int(c.Res) != rb.size {
		return fmt.Errorf("read %d of %d: %v", c.Res, rb.size, c.Err())
	}
	return rb.sendAll(rb.buf)
}

func (rb *replyBench) splice(offset int64) error {
	for left := rb.size; left > 0; {
		sqe, err := rb.r.GetSQE()
		if err != nil {
			return err
		}
		sqe.PrepareSplice(rb.file, uint64(offset), rb.pipeWrite, SpliceNoOffset, uint32(left), unix.SPLICE_F_MOVE)
		if _, err := rb.r.Submit(); err != nil {
			return err
		}
		in, err := rb.wait()
		if err != nil {
			return err
		}
		if in.Res <= 0 {
			return fmt.Errorf("file -> pipe: %v", in.Err())
		}
		offset += int64(in.Res)
		left -= int(in.Res)
		for inPipe := in.Res; inPipe > 0; {
			flags := uint32(unix.SPLICE_F_MOVE)
			if left > 0 {
				flags |= unix.SPLICE_F_MORE
			}
			sqe, err := rb.r.GetSQE()
			if err != nil {
				return err
			}
			sqe.PrepareSplice(rb.pipeRead, SpliceNoOffset, rb.sock, SpliceNoOffset, uint32(inPipe), flags)
			if _, err := rb.r.Submit(); err != nil {
				return err
			}
			out, err := rb.wait()
			if err != nil {
				return err
			}
			if out.Res <= 0 {
				return fmt.Errorf("pipe -> socket: %v", out.Err())
			}
			inPipe -= out.Res
		}
	}
	return nil
}

func (rb *replyBench) sendZC(int64) error {
	for buf := rb.buf; len(buf) > 0; {
		sqe, err := rb.r.GetSQE()
		if err != nil {
			return err
		}
		sqe.PrepareSendZCFixed(rb.sock, buf, unix.MSG_NOSIGNAL, 0)
		if _, err := rb.r.Submit(); err != nil {
			return err
		}
		var sent int32
		for {
			c, err := rb.wait()
			if err != nil {
				return err
			}
			if !c.Notif() {
				sent = c.Res
			}
			if c.ZeroCopyBufferFree() {
				break
			}
		}
		if sent <= 0 {
			return fmt.Errorf("send_zc: %d", sent)
		}
		buf = buf[sent:]
	}
	return nil
}
