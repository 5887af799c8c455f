package shard

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/iggy-shard/iggy-shard/wire"
)

// BenchmarkPingRoundTrip measures PING round trips over loopback against (a) the
// io_uring runtime (with its default busy polling, and without: runtime-nopoll) and
// (b) the baseline: a goroutine-per-connection net.Conn server that frames the same
// 256-byte headers and validates them with the same wire code. They run back to back
// for each connection count, so that they see the same machine. The clients live in
// a child process (this test binary, re-executed): one goroutine per connection with
// one request in flight, as an SDK does.
//
//	go test -run '^$' -bench PingRoundTrip -benchtime 200000x ./shard/
//
// Reported per sub-benchmark: req/s, p50 and p99 latency (measured by the clients),
// server-cpu-µs/req (this process's user+system CPU time over the run: the server
// alone, kernel TCP work done on its behalf included), client-cpu-µs/req (the child's),
// and allocs/op (this process: the server's allocations per request).
//
// Why a child process: in one process the clients' goroutines and the servers share
// one Go scheduler, which favoured one server or the other from run to run by more
// than the difference being measured, and the server's CPU could not be told from the
// clients'. Profile the server side with -cpuprofile (the child is not in it) or perf
// (`perf report --sort comm`: the shards' threads are named shard-N).
//
// Reading the numbers: requests/s is what clients and server reach together on the
// machine's CPUs, so it moves by less than the servers differ. Per request, both
// servers pay the same kernel TCP work (perf: the send, which on loopback also runs
// the receiver's side, and the receive copy make up ~85% of a shard's CPU; the
// shard's own Go code ~10%); the runtime saves the rest: the Go scheduler's parking and
// the epoll round of the baseline, which shows in server-cpu-µs/req. Where the
// clients share the CPUs, their own ~8 µs per request dilutes that saving in req/s.
func BenchmarkPingRoundTrip(b *testing.B) {
	for _, connCount := range []int{1, 16, 256} {
		for _, server := range []string{"runtime", "runtime-nopoll", "netconn"} {
			b.Run(fmt.Sprintf("conns=%d/%s", connCount, server), func(b *testing.B) {
				var addr string
				afterWarmup := func() {}
				switch server {
				case "runtime", "runtime-nopoll":
					busyPoll := time.Duration(0) // the default
					if server == "runtime-nopoll" {
						busyPoll = -1
					}
					rt := startBenchRuntime(b, busyPoll)
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

func startBenchRuntime(b *testing.B, busyPoll time.Duration) *Runtime {
	b.Helper()
	rt, err := Start(Config{
		TCPAddress: "127.0.0.1:0",
		BusyPoll:   busyPoll,
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

// pingLoadEnv, when set in the environment of this test binary, makes it a PING load
// generator instead of a test run (see TestMain): "address,connections,requestsPerConn".
const pingLoadEnv = "IGGY_SHARD_PING_LOAD"

// pingLoadResult is the load generator's one line of output after the run.
type pingLoadResult struct {
	Requests    int   `json:"requests"`
	ElapsedNs   int64 `json:"elapsed_ns"`
	P50Ns       int64 `json:"p50_ns"`
	P99Ns       int64 `json:"p99_ns"`
	ClientCPUNs int64 `json:"client_cpu_ns"`
}

func benchmarkPing(b *testing.B, addr string, connCount int, afterWarmup func()) {
	perConn := max(b.N/connCount, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s,%d,%d", pingLoadEnv, addr, connCount, perConn))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer cmd.Wait()
	defer stdin.Close()
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() || lines.Text() != "ready" {
		b.Fatalf("load generator: %q, %v; want ready", lines.Text(), lines.Err())
	}
	afterWarmup()
	b.ReportAllocs()
	b.ResetTimer()
	cpuBefore := processCPUNs(b)
	if _, err := io.WriteString(stdin, "go\n"); err != nil {
		b.Fatal(err)
	}
	if !lines.Scan() {
		b.Fatalf("load generator ended without a result: %v", lines.Err())
	}
	b.StopTimer()
	serverCPUNs := processCPUNs(b) - cpuBefore
	var r pingLoadResult
	if err := json.Unmarshal(lines.Bytes(), &r); err != nil {
		b.Fatalf("load generator result %q: %v", lines.Text(), err)
	}
	b.ReportMetric(float64(r.Requests)/(float64(r.ElapsedNs)/1e9), "req/s")
	b.ReportMetric(float64(r.P50Ns)/1e3, "p50-µs")
	b.ReportMetric(float64(r.P99Ns)/1e3, "p99-µs")
	b.ReportMetric(float64(serverCPUNs)/1e3/float64(r.Requests), "server-cpu-µs/req")
	b.ReportMetric(float64(r.ClientCPUNs)/1e3/float64(r.Requests), "client-cpu-µs/req")
}

func processCPUNs(tb testing.TB) int64 {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

func TestMain(m *testing.M) {
	if spec := os.Getenv(pingLoadEnv); spec != "" {
		if err := runPingLoad(spec, os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "ping load generator:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runPingLoad is the child side of benchmarkPing: dial and warm every connection
// (accepted, handed to its shard, served once), say "ready", wait for "go", then run
// requestsPerConn round trips on each connection at once and print a pingLoadResult.
func runPingLoad(spec string, control io.Reader, out io.Writer) error {
	var addr string
	var connCount, perConn int
	fields := strings.Split(spec, ",")
	if len(fields) != 3 {
		return fmt.Errorf("spec %q is not address,connections,requestsPerConn", spec)
	}
	addr = fields[0]
	if _, err := fmt.Sscan(fields[1], &connCount); err != nil || connCount < 1 {
		return fmt.Errorf("connections %q", fields[1])
	}
	if _, err := fmt.Sscan(fields[2], &perConn); err != nil || perConn < 1 {
		return fmt.Errorf("requests per connection %q", fields[2])
	}
	conns := make([]net.Conn, connCount)
	frames := make([][]byte, connCount)
	replies := make([][]byte, connCount)
	latencies := make([][]time.Duration, connCount)
	for i := range conns {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		conns[i] = c
		frames[i] = pingFrame(uint64(i))
		replies[i] = make([]byte, 256)
		latencies[i] = make([]time.Duration, 0, perConn)
		if _, err := c.Write(frames[i]); err != nil {
			return err
		}
		if _, err := io.ReadFull(c, replies[i]); err != nil {
			return err
		}
	}
	fmt.Fprintln(out, "ready")
	if _, err := bufio.NewReader(control).ReadString('\n'); err != nil {
		return fmt.Errorf("waiting for go: %w", err)
	}
	var ruBefore, ruAfter unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ruBefore); err != nil {
		return err
	}
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, connCount)
	for i := range conns {
		wg.Go(func() {
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
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ruAfter); err != nil {
		return err
	}
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	all := slices.Concat(latencies...)
	slices.Sort(all)
	result, err := json.Marshal(pingLoadResult{
		Requests:    len(all),
		ElapsedNs:   elapsed.Nanoseconds(),
		P50Ns:       all[len(all)/2].Nanoseconds(),
		P99Ns:       all[len(all)*99/100].Nanoseconds(),
		ClientCPUNs: ruAfter.Utime.Nano() + ruAfter.Stime.Nano() - ruBefore.Utime.Nano() - ruBefore.Stime.Nano(),
	})
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(out, string(result))
	return err
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
