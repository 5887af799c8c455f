package server

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/config"
	"github.com/iggy-shard/iggy-shard/tlsterm/tlstest"
	"github.com/iggy-shard/iggy-shard/wire"
)

// BenchmarkTransport runs the issue's three loads against a server over plain TCP
// and over TLS (1.3, AES-128-GCM: crypto/tls's choice on a CPU with AES
// instructions; the run logs the suite), in one run:
//
//	producer  one connection sending batches of 1000 messages of 1000 bytes
//	consumer  one connection polling 1000 such messages per request
//	ping256   256 connections sending PINGs, each one at a time
//
// Each reports MB/s or req/s, the latency p50/p99 of a request and the server's CPU
// per request (server-cpu-µs/op: user + system time of the server process over the
// timed loop, divided by the requests). To measure the server's CPU apart from the
// client's, the server runs in a child process (this test binary re-executed), with
// busy polling off so that idle spinning does not count as work.
//
//	go test ./server -run '^$' -bench Transport -benchtime 2s
func BenchmarkTransport(b *testing.B) {
	for _, withTLS := range []bool{false, true} {
		b.Run("tls="+strconv.FormatBool(withTLS), func(b *testing.B) {
			srv := startServerProcess(b, withTLS)
			b.Run("producer", func(b *testing.B) { benchTransportProducer(b, srv) })
			b.Run("consumer", func(b *testing.B) { benchTransportConsumer(b, srv) })
			b.Run("ping256", func(b *testing.B) { benchTransportPings(b, srv, 256) })
		})
	}
}

// serverProcess is a server in a child process.
type serverProcess struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	addr  string
	tls   *tls.Config // the clients' configuration; nil for plain TCP
}

// Environment of the child: its data directory, and the PEM pair when TLS is on.
const (
	envBenchServerPath = "IGGY_BENCH_SERVER_PATH"
	envBenchServerCert = "IGGY_BENCH_SERVER_CERT"
	envBenchServerKey  = "IGGY_BENCH_SERVER_KEY"
	// IGGY_BENCH_SERVER_CPUPROFILE, set by whoever runs the benchmark, writes the
	// server's CPU profile there (go tool pprof).
	envBenchServerCPUProfile = "IGGY_BENCH_SERVER_CPUPROFILE"
	// IGGY_BENCH_SERVER_MEMPROFILE writes the server's allocations there, every
	// one recorded (runtime.MemProfileRate 1: slower, so not for the timings):
	// go tool pprof -sample_index=alloc_objects.
	envBenchServerMemProfile = "IGGY_BENCH_SERVER_MEMPROFILE"
)

// TestBenchServerProcess is the child of startServerProcess: it runs a server, prints
// its address and stops when its stdin closes. Without the environment it does nothing.
func TestBenchServerProcess(t *testing.T) {
	path := os.Getenv(envBenchServerPath)
	if path == "" {
		t.Skip("the child process of BenchmarkTransport")
	}
	if os.Getenv(envBenchServerMemProfile) != "" {
		runtime.MemProfileRate = 1
	}
	cfg := defaultSetup()
	cfg.TCPAddress, cfg.SystemPath, cfg.ShardCount, cfg.PinCPUs, cfg.BusyPoll = "127.0.0.1:0", path, 2, false, 0
	if cert := os.Getenv(envBenchServerCert); cert != "" {
		cfg.TLS = config.TLS{Enabled: true, CertFile: cert, KeyFile: os.Getenv(envBenchServerKey)}
	}
	s, err := start(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if path := os.Getenv(envBenchServerCPUProfile); path != "" {
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	if path := os.Getenv(envBenchServerMemProfile); path != "" {
		defer func() {
			f, err := os.Create(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			pprof.Lookup("allocs").WriteTo(f, 0)
		}()
	}
	fmt.Printf("ADDR %s\n", s.Addr())
	io.Copy(io.Discard, os.Stdin)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}

func startServerProcess(b *testing.B, withTLS bool) *serverProcess {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestBenchServerProcess$", "-test.v")
	cmd.Env = append(os.Environ(), envBenchServerPath+"="+b.TempDir())
	srv := &serverProcess{cmd: cmd}
	if withTLS {
		ca := tlstest.NewCA(b, "bench CA")
		certFile, keyFile := ca.IssueValid(b).WriteFiles(b, b.TempDir())
		cmd.Env = append(cmd.Env, envBenchServerCert+"="+certFile, envBenchServerKey+"="+keyFile)
		srv.tls = &tls.Config{RootCAs: ca.Pool, ServerName: "localhost"}
	}
	srv.run(b)
	if withTLS {
		conn, err := tls.Dial("tcp", srv.addr, srv.tls)
		if err != nil {
			b.Fatal(err)
		}
		st := conn.ConnectionState()
		b.Logf("TLS: %s, %s", tls.VersionName(st.Version), tls.CipherSuiteName(st.CipherSuite))
		conn.Close()
	}
	return srv
}

// run starts the server child and waits for the address it prints; the
// benchmark's cleanup closes its stdin, which stops it (killed if it has not
// stopped within 15 s).
func (srv *serverProcess) run(b *testing.B) {
	b.Helper()
	cmd := srv.cmd
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if srv.stdin, err = cmd.StdinPipe(); err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		srv.stdin.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	lines := bufio.NewScanner(stdout)
	for lines.Scan() { // bounded by the child's output: it prints ADDR or exits
		if addr, ok := strings.CutPrefix(lines.Text(), "ADDR "); ok {
			srv.addr = addr
			break
		}
	}
	if srv.addr == "" {
		b.Fatal("the server process printed no address")
	}
	go io.Copy(io.Discard, stdout)
}

// dial connects, logged in as root when login is set (PING needs no login).
func (srv *serverProcess) dial(b *testing.B, login bool) *client.Client {
	b.Helper()
	var opts []client.Option
	if login {
		opts = append(opts, client.WithCredentials("iggy", "iggy"))
	}
	if srv.tls != nil {
		opts = append(opts, client.WithTLS(srv.tls))
	}
	c, err := client.Dial(context.Background(), srv.addr, opts...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c
}

// cpuTime is the server process's user + system CPU time so far.
func (srv *serverProcess) cpuTime(b *testing.B) time.Duration {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", srv.cmd.Process.Pid))
	if err != nil {
		b.Fatal(err)
	}
	// Fields after the command name, which is in parentheses and may hold spaces:
	// state is field 3, utime 14 and stime 15 (proc(5)), in clock ticks.
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
	utime, _ := strconv.ParseInt(fields[14-3], 10, 64)
	stime, _ := strconv.ParseInt(fields[15-3], 10, 64)
	const ticksPerSecond = 100 // USER_HZ on Linux
	return time.Duration(utime+stime) * time.Second / ticksPerSecond
}

// measureServerCPU reports the server's CPU per request over the timed loop.
func measureServerCPU(b *testing.B, srv *serverProcess, requests int, run func()) {
	before := srv.cpuTime(b)
	b.ResetTimer()
	run()
	b.StopTimer()
	used := srv.cpuTime(b) - before
	b.ReportMetric(float64(used.Microseconds())/float64(requests), "server-cpu-µs/op")
}

func benchTransportTopic(b *testing.B, c *client.Client, name string) {
	ctx := context.Background()
	if _, err := c.CreateStream(ctx, name); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.DeleteStream(context.Background(), client.NameID(name)) })
	if _, err := c.CreateTopic(ctx, client.NameID(name), "t", 1, nil); err != nil {
		b.Fatal(err)
	}
}

var benchStreamCount atomic.Int64

func benchStreamName() string { return "bench-" + strconv.FormatInt(benchStreamCount.Add(1), 10) }

func benchTransportProducer(b *testing.B, srv *serverProcess) {
	c := srv.dial(b, true)
	stream := benchStreamName()
	benchTransportTopic(b, c, stream)
	batch := benchBatch(b)
	ctx := context.Background()
	partitioning := wire.Partitioning{Kind: wire.PartitioningPartitionID}
	latencies := make([]time.Duration, 0, b.N)
	b.SetBytes(benchBatchBytes)
	b.ReportAllocs()
	measureServerCPU(b, srv, b.N, func() {
		for range b.N {
			start := time.Now()
			if _, err := c.SendBatch(ctx, client.NameID(stream), client.NameID("t"), partitioning, batch); err != nil {
				b.Fatal(err)
			}
			latencies = append(latencies, time.Since(start))
		}
	})
	reportLatencies(b, latencies)
}

func benchTransportConsumer(b *testing.B, srv *serverProcess) {
	c := srv.dial(b, true)
	stream := benchStreamName()
	benchTransportTopic(b, c, stream)
	batch := benchBatch(b)
	ctx := context.Background()
	const stored = 64
	for range stored {
		if _, err := c.SendBatch(ctx, client.NameID(stream), client.NameID("t"), wire.Partitioning{Kind: wire.PartitioningPartitionID}, batch); err != nil {
			b.Fatal(err)
		}
	}
	req := wire.PollMessages{Consumer: client.SingleConsumer(client.ID(1)), StreamID: client.NameID(stream), TopicID: client.NameID("t"),
		Partition: wire.SomePartition(0), Count: benchMessagesPerBatch}
	latencies := make([]time.Duration, 0, b.N)
	b.SetBytes(benchBatchBytes)
	b.ReportAllocs()
	measureServerCPU(b, srv, b.N, func() {
		for i := range b.N {
			req.Strategy = wire.PollingStrategy{Kind: wire.PollingOffset, Value: uint64(i%stored) * benchMessagesPerBatch}
			start := time.Now()
			polled, err := c.PollMessages(ctx, &req)
			if err != nil {
				b.Fatal(err)
			}
			if polled.MessagesCount != benchMessagesPerBatch {
				b.Fatalf("polled %d messages", polled.MessagesCount)
			}
			latencies = append(latencies, time.Since(start))
		}
	})
	reportLatencies(b, latencies)
}

func benchTransportPings(b *testing.B, srv *serverProcess, connections int) {
	clients := make([]*client.Client, connections)
	for i := range clients {
		clients[i] = srv.dial(b, false)
	}
	perClient := make([][]time.Duration, connections)
	for i := range perClient {
		perClient[i] = make([]time.Duration, 0, b.N/connections+1)
	}
	var next atomic.Int64
	errs := make(chan error, connections)
	b.ReportAllocs()
	var elapsed time.Duration
	measureServerCPU(b, srv, b.N, func() {
		start := time.Now()
		var wg sync.WaitGroup
		for i, c := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx := context.Background()
				for next.Add(1) <= int64(b.N) {
					t0 := time.Now()
					if err := c.Ping(ctx); err != nil {
						errs <- err
						return
					}
					perClient[i] = append(perClient[i], time.Since(t0))
				}
			}()
		}
		wg.Wait()
		elapsed = time.Since(start)
	})
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	var latencies []time.Duration
	for _, l := range perClient {
		latencies = append(latencies, l...)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "req/s")
	reportLatencies(b, latencies)
}
