package shard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/iggy-shard/iggy-shard/wire"
)

// BenchmarkPingRoundTrip measures PING round trips over loopback against (a) the
// io_uring runtime and (b) the baseline: a goroutine-per-connection net.Conn server
// that frames the same 256-byte headers and validates them with the same wire code.
// Each connection has its own client goroutine with one request in flight (as an SDK
// does). Reported: req/s, p50 and p99 latency, allocs per request (whole process:
// clients included, and they are the same code for both servers).
//
//	go test -run '^$' -bench PingRoundTrip -benchtime 200000x ./shard/
//
// Reading the numbers: clients and servers share the machine's CPUs, and the clients
// (net.Conn writes and reads) take about half of the CPU time. With one connection the
// baseline has an edge the runtime cannot have: the Go scheduler hands the CPU from the
// client goroutine to the server goroutine without an OS context switch, while a shard
// is an OS thread of its own. With many connections the shard's batching (one
// io_uring_enter submits every reply of an iteration and waits for the next requests)
// wins. Profile with -cpuprofile: the shards' own code is a few per cent of the CPU,
// the rest is the kernel's TCP work inside io_uring_enter and the clients.
func BenchmarkPingRoundTrip(b *testing.B) {
	for _, server := range []string{"runtime", "netconn"} {
		for _, connCount := range []int{1, 16, 256} {
			b.Run(fmt.Sprintf("%s/%d", server, connCount), func(b *testing.B) {
				var addr string
				afterWarmup := func() {}
				switch server {
				case "runtime":
					rt := startBenchRuntime(b)
					addr = rt.Addr().String()
					afterWarmup = func() {
						counts := make([]int64, len(rt.connCounts))
						for i := range counts {
							counts[i] = rt.connCounts[i].Load()
						}
						b.Logf("connections per shard: %v", counts)
					}
				case "netconn":
					addr = startNetConnServer(b)
				}
				benchmarkPing(b, addr, connCount, afterWarmup)
			})
		}
	}
}

func startBenchRuntime(b *testing.B) *Runtime {
	b.Helper()
	rt, err := Start(Config{
		TCPAddress: "127.0.0.1:0",
		NewHandler: func(s *Shard) Handler { return &testHandler{shard: s} },
		Logger:     testLogger(b),
		Arena:      testArenaConfig(),
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := rt.Shutdown(ctx); err != nil {
			b.Errorf("shutdown: %v", err)
		}
	})
	return rt
}

func benchmarkPing(b *testing.B, addr string, connCount int, afterWarmup func()) {
	conns := make([]net.Conn, connCount)
	for i := range conns {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			b.Fatal(err)
		}
		conns[i] = c
		defer c.Close()
	}
	perConn := max(b.N/connCount, 1)
	latencies := make([][]time.Duration, connCount)
	for i := range latencies {
		latencies[i] = make([]time.Duration, 0, perConn)
	}
	frames := make([][]byte, connCount)
	replies := make([][]byte, connCount)
	for i := range frames {
		frames[i] = pingFrame(uint64(i))
		replies[i] = make([]byte, 256)
		// Warm each connection: it is accepted, delegated and served once.
		if _, err := conns[i].Write(frames[i]); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(conns[i], replies[i]); err != nil {
			b.Fatal(err)
		}
	}
	afterWarmup()
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, connCount)
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, frame, reply := conns[i], frames[i], replies[i]
			for range perConn {
				t0 := time.Now()
				if _, err := conn.Write(frame); err != nil {
					errs <- err
					return
				}
				if _, err := io.ReadFull(conn, reply); err != nil {
					errs <- err
					return
				}
				latencies[i] = append(latencies[i], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	all := slices.Concat(latencies...)
	slices.Sort(all)
	b.ReportMetric(float64(len(all))/elapsed.Seconds(), "req/s")
	b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
}

// startNetConnServer is the baseline: one goroutine per connection reading whole frames
// with io.ReadFull into a per-connection buffer, validating the header with wire and
// writing a 256-byte reply; what a Go server without io_uring would do.
func startNetConnServer(b *testing.B) string {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	b.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer conn.Close()
				serveNetConn(conn)
			}()
		}
	}()
	return ln.Addr().String()
}

func serveNetConn(conn net.Conn) {
	// 16-byte aligned: wire's header view requires it, as the arena guarantees.
	buf := alignedBuffer(FrameSizeMaxDefault / 1024)
	reply := make([]byte, 256)
	for {
		if _, err := io.ReadFull(conn, buf[:headerSizeBytes]); err != nil {
			return
		}
		size, _ := wire.PeekSize(buf)
		if size < headerSizeBytes || int(size) > len(buf) {
			return
		}
		if _, err := io.ReadFull(conn, buf[headerSizeBytes:size]); err != nil {
			return
		}
		h, err := wire.DecodeRequestHeader(buf[:size], uint32(len(buf)))
		if err != nil {
			var fault wire.HeaderFault
			if errors.As(err, &fault) && fault.Status() == 0 {
				return
			}
			continue
		}
		var r wire.ReplyHeader
		r.Size = headerSizeBytes
		r.Command = wire.CommandReply
		r.Client = h.Client
		r.Request = h.Request
		r.Operation = h.Operation
		r.Put(reply)
		if _, err := conn.Write(reply); err != nil {
			return
		}
	}
}

func alignedBuffer(n int) []byte {
	buf := make([]byte, n+16)
	for i := range 16 {
		if addressOf(buf[i:])%16 == 0 {
			return buf[i : i+n]
		}
	}
	panic("unreachable")
}

func addressOf(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }
