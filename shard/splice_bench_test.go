package shard

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/iggy-shard/iggy-shard/segment"
	"github.com/iggy-shard/iggy-shard/wire"
)

// BenchmarkSpliceReply measures one consumer's poll-like replies (a 256-byte
// header, a 16-byte prefix, then N bytes of a file in the page cache), one
// request in flight, over loopback TCP, by
//
//	loopback  a goroutine's net.Conn writing a reply already in memory: the
//	          socket's own cost, the baseline
//	copy      the runtime, the handler pread(2)ing the file into arena buffers
//	          it queues (Reserve)
//	splice    the runtime, the handler queuing the file run (SendFileRuns) with
//	          a descriptor of its own per reply (F_DUPFD_CLOEXEC, as a plan
//	          takes one), closed when the runtime releases it
//
// for N of 1 and 4 MiB, in one run. cpu-ns/B is this process's user+system CPU
// time (server, client goroutine and io_uring's workers, which are threads of
// the process) per reply byte; allocs/op counts the whole process too.
//
//	go test -run '^$' -bench SpliceReply -benchtime 2000x ./shard/
func BenchmarkSpliceReply(b *testing.B) {
	const fileBytes = 64 << 20
	data := make([]byte, fileBytes)
	for i := range data {
		data[i] = byte(i * 7)
	}
	path := filepath.Join(b.TempDir(), "segment.log")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		b.Fatal(err)
	}
	file, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer file.Close()
	for _, size := range []int{1 << 20, 4 << 20} {
		for _, way := range []string{"loopback", "copy", "splice"} {
			b.Run(fmt.Sprintf("bytes=%d/%s", size, way), func(b *testing.B) {
				benchSpliceReply(b, file, fileBytes, size, way)
			})
		}
	}
}

func benchSpliceReply(b *testing.B, file *os.File, fileBytes, size int, way string) {
	var addr string
	if way == "loopback" {
		addr = startLoopbackReplier(b, 256+16+size)
	} else {
		rt := startTestRuntime(b, Config{ShardCount: 1, NewHandler: func(s *Shard) Handler {
			h := &benchSpliceHandler{file: file, fileBytes: int64(fileBytes), splice: way == "splice"}
			for i := range h.releasers {
				h.releasers[i].h = h
				h.free = append(h.free, &h.releasers[i])
			}
			return h
		}})
		addr = rt.Addr().String()
	}
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	frame := requestHeader(4, wire.OperationNonReplicated, uint32(wire.CodePollMessages), 1)
	binary.LittleEndian.PutUint32(frame[256:], uint32(size))
	reply := make([]byte, 256+16+size)
	poll := func() {
		if _, err := conn.Write(frame); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(conn, reply); err != nil {
			b.Fatal(err)
		}
	}
	for range 10 {
		poll()
	}
	b.SetBytes(int64(len(reply)))
	b.ReportAllocs()
	cpuBefore := processCPU()
	b.ResetTimer()
	for range b.N {
		poll()
	}
	b.StopTimer()
	cpu := processCPU() - cpuBefore
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N)/float64(len(reply)), "cpu-ns/B")
}

func processCPU() time.Duration {
	var ru unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// startLoopbackReplier answers each 260-byte request on a connection with
// replyBytes from memory.
func startLoopbackReplier(b *testing.B, replyBytes int) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ln.Close() })
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		req := make([]byte, 256+4)
		reply := make([]byte, replyBytes)
		for {
			if _, err := io.ReadFull(conn, req); err != nil {
				return
			}
			if _, err := conn.Write(reply); err != nil {
				return
			}
		}
	}()
	return ln.Addr().String()
}

// benchSpliceHandler answers PollMessages requests (body: the reply's run
// length, u32) with a run of its file, moving along it reply by reply,
// without allocating.
type benchSpliceHandler struct {
	file      *os.File
	fileBytes int64
	offset    int64
	splice    bool
	releasers [PipesPerShardMaxDefault]benchRunReleaser
	free      []*benchRunReleaser
}

type benchRunReleaser struct {
	h   *benchSpliceHandler
	run [1]segment.Run
}

func (r *benchRunReleaser) Release() {
	unix.Close(r.run[0].FD)
	r.h.free = append(r.h.free, r)
}

func (h *benchSpliceHandler) ServeRequest(c *Conn, req *Request) {
	size := int64(binary.LittleEndian.Uint32(req.Body))
	if h.offset+size > h.fileBytes {
		h.offset = 0
	}
	offset := h.offset
	h.offset += size
	var head [256 + 16]byte
	fileRunsHead(head[:], req.Header.Request, int(size))
	if h.splice && c.CanSplice() && len(h.free) > 0 {
		r := h.free[len(h.free)-1]
		fd, err := unix.FcntlInt(h.file.Fd(), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			panic(err)
		}
		r.run[0] = segment.Run{FD: fd, Offset: offset, Length: size}
		if c.SendFileRuns(head[:], r.run[:], c.Shard().NowNs()+int64(time.Minute), r) == nil {
			h.free = h.free[:len(h.free)-1]
			return
		}
		unix.Close(fd)
		panic("splice refused")
	}
	b, err := c.Reserve(len(head))
	if err != nil {
		return
	}
	copy(b, head[:])
	for left := size; left > 0; {
		n := min(left, 1<<20)
		b, err := c.Reserve(int(n))
		if err != nil {
			return
		}
		if k, err := unix.Pread(int(h.file.Fd()), b, offset); err != nil || int64(k) != n {
			panic(fmt.Sprintf("pread %d: %d, %v", n, k, err))
		}
		offset += n
		left -= n
	}
}

func (h *benchSpliceHandler) ServeMessage(*Shard, Message) {}
func (h *benchSpliceHandler) ConnClosed(*Conn)             {}
