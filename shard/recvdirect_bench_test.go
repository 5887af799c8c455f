package shard

import (
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/wire"
)

// BenchmarkConnFrameRecv is BenchmarkFramerBatch through a real connection: a client
// sends one frame of N bytes and waits for its 256-byte reply (a PING's status
// reply: the handler does nothing with the body), one in flight, over loopback, into
// a one-shard runtime with the default arena, by
//
//	ring    every byte through the receive ring's 8 KiB buffers, copied into the
//	        frame buffer by Feed (the path before the recv into the frame)
//	direct  a frame's body of recvDirectBytesMinDefault or more goes straight
//	        into the frame buffer, and after such a frame the next header is read
//	        alone (conn_recv.go, receivesLargeFrames)
//	direct-4KiB  the same from a 4 KiB body: where the threshold comes from
//
// for N from 64 KiB to 4 MiB (a 1000 x 1000 B batch's frame among them), in one
// run. direct-share is the share of the bytes received straight into frame
// buffers. cpu-ns/B is this process's user+system CPU time (server and client
// goroutine) per frame byte; allocs/op counts the whole process too.
//
//	go test -run '^$' -bench ConnFrameRecv -benchtime 2000x ./shard/
func BenchmarkConnFrameRecv(b *testing.B) {
	for _, size := range []int{64 << 10, 256 << 10, 384 << 10, 512 << 10, 768 << 10, sendMessagesFrameBytes, 4 << 20} {
		for _, way := range []struct {
			name     string
			bytesMin int
		}{{"ring", -1}, {"direct", 0}, {"direct-4KiB", 4 << 10}} {
			b.Run(fmt.Sprintf("bytes=%d/%s", size, way.name), func(b *testing.B) {
				benchConnFrameRecv(b, size, way.bytesMin)
			})
		}
	}
}

func benchConnFrameRecv(b *testing.B, size, recvDirectBytesMin int) {
	rt := startTestRuntime(b, Config{ShardCount: 1, Arena: ArenaConfigDefault(), recvDirectBytesMin: recvDirectBytesMin})
	conn, err := net.DialTimeout("tcp", rt.Addr().String(), 5*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	frame := requestHeader(size-headerSizeBytes, wire.OperationNonReplicated, uint32(wire.CodePing), 1)
	fillRandom(frame[headerSizeBytes:], 1)
	reply := make([]byte, headerSizeBytes)
	send := func() {
		if _, err := conn.Write(frame); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(conn, reply); err != nil {
			b.Fatal(err)
		}
	}
	for range 10 {
		send()
	}
	before := shardStats(b, rt)
	b.SetBytes(int64(size))
	b.ReportAllocs()
	cpuBefore := processCPU()
	b.ResetTimer()
	for range b.N {
		send()
	}
	b.StopTimer()
	cpu := processCPU() - cpuBefore
	after := shardStats(b, rt)
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N)/float64(size), "cpu-ns/B")
	b.ReportMetric(float64(after.BytesReceivedIntoFrames-before.BytesReceivedIntoFrames)/float64(after.BytesReceived-before.BytesReceived), "direct-share")
	b.ReportMetric(float64(after.CQEsReaped-before.CQEsReaped)/float64(b.N), "cqes/op")
}
