package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/iggy-shard/iggy-shard/bench"
	"github.com/iggy-shard/iggy-shard/config"
	"github.com/iggy-shard/iggy-shard/server"
)

// TestMain lets the test binary be iggy-bench's own server: iggy-bench re-executes
// os.Executable() with serveCommand, which under go test is this binary.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == serveCommand {
		os.Exit(serveMain(os.Args[2:], os.Stdin, os.Stdout, os.Stderr, os.Getenv))
	}
	os.Exit(m.Run())
}

func runForTest(t *testing.T, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	code = run(ctx, args, &out, &errOut, func(k string) string { return env[k] })
	return code, out.String(), errOut.String()
}

func TestHelpListsKindsAndFlags(t *testing.T) {
	code, _, stderr := runForTest(t, nil, "--help")
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"pinned-producer", "pp", "bpcg", "e2e", "raw-loopback", "-server-address", "IGGY_TCP_ADDRESS",
		"-username", "-password", "-producers", "-consumers", "-streams", "-partitions", "-consumer-groups",
		"-messages-per-batch", "-message-size", "-batches", "-duration", "-warmup", "-rate-limit", "-output", "-keep-streams", "Exit codes",
		"-report-dir", "-baseline", "-baseline-dir", "-server-shards", "-server-dir", "starts an iggy-shard"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("--help does not mention %q", want)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "missing the benchmark KIND"},
		{[]string{"--bogus"}, "flag provided but not defined: -bogus"},
		{[]string{"xx"}, `unknown benchmark kind "xx"`},
		{[]string{"pp", "--batches", "5", "--duration", "1s"}, "either --batches or --duration"},
		{[]string{"pc", "--duration", "1s"}, "give --batches"},
		{[]string{"pp", "--consumers", "2"}, "--consumers does not apply"},
		{[]string{"pc", "--producers", "2"}, "--producers does not apply"},
		{[]string{"pp", "--rate-limit", "fast"}, "--rate-limit"},
		{[]string{"pp", "--output", "xml"}, "--output must be table or json"},
		{[]string{"bcg", "--streams", "2"}, "must equal --consumer-groups"},
		{[]string{"pp", "--partitions", "2"}, "--partitions must be 1"},
		{[]string{"bp", "--partitions", "1001"}, "1000 per topic"},
		{[]string{"pp", "extra"}, `unexpected argument "extra"`},
		{[]string{"pp", "--message-size", "0"}, "--message-size must be at least 1"},
		{[]string{"pp", "--messages-per-batch", "100000", "--message-size", "1000"}, "more than the"},
		{[]string{"e2e", "--producers", "2", "--streams", "1"}, "its own stream"},
		{[]string{"pp", "--batches", "x"}, "invalid value"},
		{[]string{"bcg", "--consumers", "2", "--consumer-groups", "3"}, "without a member"},
		{[]string{"bpcg", "--producers", "1", "--consumer-groups", "2"}, "without a producer"},
		{[]string{"raw-loopback", "--baseline"}, "--baseline does not apply to raw-loopback"},
		{[]string{"pp", "--server-shards", "-1"}, "--server-shards must be at least 0"},
	} {
		code, stdout, stderr := runForTest(t, nil, tc.args...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) || stdout != "" {
			t.Errorf("%q: exit %d, stderr %q, want exit 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
}

func closedPort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestServerNotRunning(t *testing.T) {
	addr := closedPort(t)
	for _, tc := range []struct {
		env  map[string]string
		args []string
	}{
		{nil, []string{"pp", "--server-address", addr}},
		{map[string]string{"IGGY_TCP_ADDRESS": addr}, []string{"bcg"}},
	} {
		start := time.Now()
		code, _, stderr := runForTest(t, tc.env, tc.args...)
		if code != exitUnreachable || !strings.Contains(stderr, "cannot connect to the server at "+addr) || !strings.Contains(stderr, "Is the server running") {
			t.Errorf("%v: exit %d, stderr %q", tc.args, code, stderr)
		}
		if d := time.Since(start); d > 20*time.Second {
			t.Errorf("%v: took %v to give up", tc.args, d)
		}
	}
}

func TestParseBytes(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want uint64
		ok   bool
	}{
		{"1000", 1000, true}, {"50KB", 50_000, true}, {"10 MB", 10_000_000, true}, {"1GB", 1_000_000_000, true},
		{"10KiB", 10 << 10, true}, {"10mib", 10 << 20, true}, {"1GiB", 1 << 30, true}, {"64B", 64, true},
		{"", 0, false}, {"0", 0, false}, {"-5MB", 0, false}, {"MB", 0, false}, {"1.5MB", 0, false}, {"99999999999999GB", 0, false},
	} {
		got, err := parseBytes(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func TestRawLoopbackMode(t *testing.T) {
	code, stdout, stderr := runForTest(t, nil, "raw-loopback", "--producers", "2", "--batches", "20", "--messages-per-batch", "10")
	if code != exitOK || !strings.Contains(stdout, "all 2 producers") || !strings.Contains(stdout, "baseline") {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
}

// Flags go before or after the kind; the JSON report carries the verified counts.
func TestRunAgainstServer(t *testing.T) {
	cfg := config.Default()
	cfg.TCPAddress = "127.0.0.1:0"
	cfg.HTTP.Address = "127.0.0.1:0"
	cfg.SystemPath = t.TempDir()
	cfg.ShardCount = 2
	cfg.PinCPUs = false
	s, err := server.Start(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	}()
	code, stdout, stderr := runForTest(t, map[string]string{"IGGY_TCP_ADDRESS": s.Addr().String()},
		"--producers", "2", "--consumers", "2", "ppc", "--messages-per-batch", "20", "--message-size", "30", "--batches", "10", "--output", "json")
	if code != exitOK {
		t.Fatalf("exit %d\nstderr %s", code, stderr)
	}
	if !strings.Contains(stderr, "creating 2 stream(s)") {
		t.Errorf("no progress on stderr: %q", stderr)
	}
	var report bench.Report
	if err := json.Unmarshal([]byte(stdout), &report); err != nil {
		t.Fatalf("json: %v\n%s", err, stdout)
	}
	v := report.Verification
	if report.Kind != bench.PinnedProducerAndConsumer || v.MessagesProduced != 400 || v.MessagesConsumed != 400 || !v.OK() {
		t.Fatalf("report %+v", report)
	}
	code, stdout, stderr = runForTest(t, nil, "e2e", "--server-address", s.Addr().String(), "--producers", "1", "--batches", "5", "--messages-per-batch", "3", "--quiet")
	if code != exitOK || stderr != "" || !strings.Contains(stdout, "verification OK: 15 messages") {
		t.Fatalf("e2e: exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	code, _, stderr = runForTest(t, nil, "pp", "--server-address", s.Addr().String(), "--password", "nope", "--quiet")
	if code != exitUnreachable || !strings.Contains(stderr, "InvalidCredentials") {
		t.Fatalf("wrong password: exit %d, stderr %q", code, stderr)
	}
}

// Any string either parses to a positive size or is refused with an error; plain
// digits parse to themselves.
func FuzzParseBytes(f *testing.F) {
	for _, s := range []string{"1000", "50MB", "10 MiB", "1gb", "", "B", "0KB", "18446744073709551615", "99999999999GiB"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := parseBytes(s)
		if err == nil && n == 0 {
			t.Fatalf("parseBytes(%q) = 0 without an error", s)
		}
		if v, perr := strconv.ParseUint(s, 10, 64); perr == nil && v > 0 && (err != nil || n != v) {
			t.Fatalf("parseBytes(%q) = %d, %v", s, n, err)
		}
	})
}

// With no address iggy-bench starts its own server (this test binary re-executed,
// see TestMain), runs against it with the baseline, writes the report directory,
// and at the end stops the server and removes its data directory.
func TestOwnServer(t *testing.T) {
	serverDir, reportDir := t.TempDir(), filepath.Join(t.TempDir(), "report")
	code, stdout, stderr := runForTest(t, nil, "ppc", "--producers", "1", "--consumers", "1", "--batches", "20",
		"--messages-per-batch", "50", "--message-size", "100", "--server-dir", serverDir, "--server-shards", "2",
		"--baseline", "--report-dir", reportDir)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	for _, want := range []string{"started iggy-shard (child process", "measuring the baseline", "progress: 100%", "report written to " + reportDir} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, stderr)
		}
	}
	for _, want := range []string{"verification OK: 1000 messages", "server: iggy-shard started by iggy-bench", "× loopback", "all 1 consumers"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout does not say %q:\n%s", want, stdout)
		}
	}
	if entries, err := os.ReadDir(serverDir); err != nil || len(entries) != 0 {
		t.Errorf("the server's data directory was not removed: %v %v", entries, err)
	}
	js, err := os.ReadFile(filepath.Join(reportDir, bench.ReportJSONFile))
	if err != nil {
		t.Fatal(err)
	}
	var report bench.Report
	if err := json.Unmarshal(js, &report); err != nil || report.Baseline == nil || len(report.Series) == 0 || !report.Verification.OK() {
		t.Fatalf("summary.json (%v): %s", err, js)
	}
	for _, name := range []string{bench.ReportCSVFile, bench.ReportHTMLFile} {
		if _, err := os.Stat(filepath.Join(reportDir, name)); err != nil {
			t.Error(err)
		}
	}
}

// A server of its own that cannot start fails the run at once, with its reason.
func TestOwnServerFailsToStart(t *testing.T) {
	serverDir := t.TempDir()
	start := time.Now()
	code, _, stderr := runForTest(t, nil, "pp", "--server-dir", serverDir, "--server-shards", "5000")
	if code != exitUnreachable || !strings.Contains(stderr, "could not start a server of its own") || !strings.Contains(stderr, "shard count must be 0 (all CPUs) to 1024") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("took %v to fail", d)
	}
	if entries, _ := os.ReadDir(serverDir); len(entries) != 0 {
		t.Errorf("left %v behind", entries)
	}
	code, _, stderr = runForTest(t, nil, "pp", "--server-dir", filepath.Join(serverDir, "missing"))
	if code != exitUnreachable || !strings.Contains(stderr, "creating the server's data directory") {
		t.Fatalf("missing --server-dir: exit %d, stderr %q", code, stderr)
	}
	code, _, stderr = runForTest(t, nil, "pp", "--server-address", "127.0.0.1:1", "--server-shards", "2")
	if code != exitUsage || !strings.Contains(stderr, "not with --server-address") {
		t.Fatalf("--server-shards with an address: exit %d, stderr %q", code, stderr)
	}
}

func TestDescribeProgress(t *testing.T) {
	for _, tc := range []struct {
		p    bench.Progress
		rate float64
		want string
	}{
		{bench.Progress{Role: bench.RoleProducer, Elapsed: -1500 * time.Millisecond}, 0, "warm-up, 1.5s left"},
		{bench.Progress{Role: bench.RoleProducer, Messages: 250, MessagesTotal: 1000, Elapsed: time.Second}, 12.34,
			" 25% 250/1000 messages (producers) 12.3 MB/s elapsed 1s ETA 3s"},
		{bench.Progress{Role: bench.RoleConsumer, Messages: 77, Duration: 40 * time.Second, Elapsed: 10 * time.Second}, 1,
			" 25% 77 messages (consumers) 1.0 MB/s elapsed 10s ETA 30s"},
		{bench.Progress{Role: bench.RoleProducer, Messages: 1000, MessagesTotal: 1000, Elapsed: 2 * time.Second}, 5,
			"100% 1000/1000 messages (producers) 5.0 MB/s elapsed 2s ETA 0s"},
		{bench.Progress{Role: bench.RoleProducer, MessagesTotal: 1000, Elapsed: time.Second}, 0,
			"  0% 0/1000 messages (producers) 0.0 MB/s elapsed 1s ETA ?"},
	} {
		if got := describeProgress(tc.p, tc.rate); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.p, got, tc.want)
		}
	}
}

// Off a terminal the display writes a plain line every plainLineInterval of the
// run, and the complete state once; the rate is the one since the last line shown.
func TestProgressDisplayPlainLines(t *testing.T) {
	var out bytes.Buffer
	d := newProgressDisplay(&out)
	if d.terminal {
		t.Fatal("a bytes.Buffer is a terminal")
	}
	d.Step("running pinned-producer")
	p := bench.Progress{Role: bench.RoleProducer, MessagesTotal: 4000}
	for i := 1; i <= 8; i++ { // a sample every half second, 500 messages each
		p.Messages, p.PayloadBytes, p.Elapsed = uint64(i*500), uint64(i*500_000), time.Duration(i)*500*time.Millisecond
		d.Progress(p)
	}
	d.Progress(p) // the run's last word repeats the complete state
	d.finish()
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	// Shown: 0.5 s (the first), 2.5 s (2 s later) and 4 s (complete).
	if len(lines) != 4 || lines[0] != "running pinned-producer" || !strings.HasPrefix(lines[1], "progress:  12% 500/4000") ||
		!strings.HasPrefix(lines[2], "progress:  62% 2500/4000 messages (producers) 1.0 MB/s elapsed 2.5s ETA 1.5s") ||
		!strings.HasPrefix(lines[3], "progress: 100% 4000/4000 messages (producers) 1.0 MB/s elapsed 4s ETA 0s") {
		t.Fatalf("lines:\n%s", out.String())
	}
}

// On a terminal the display redraws one line in place: a bar, then the text.
func TestProgressDisplayTerminalBar(t *testing.T) {
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	defer master.Close()
	if err := unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Skipf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Skipf("ptsname: %v", err)
	}
	tty, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("opening the terminal: %v", err)
	}
	defer tty.Close()
	if err := unix.IoctlSetWinsize(int(tty.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 24, Col: 100}); err != nil {
		t.Fatal(err)
	}
	d := newProgressDisplay(tty)
	if !d.terminal || d.width != 100 {
		t.Fatalf("terminal %v, width %d", d.terminal, d.width)
	}
	d.Progress(bench.Progress{Role: bench.RoleProducer, Messages: 500, MessagesTotal: 1000, PayloadBytes: 500_000, Elapsed: time.Second})
	d.finish()
	buf := make([]byte, 4096)
	got, err := master.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	line := string(buf[:got])
	text := " 50% 500/1000 messages (producers) 0.5 MB/s elapsed 1s ETA 1s"
	barWidth := 100 - len(text) - 4
	want := "\r\033[K[" + strings.Repeat("=", barWidth/2) + strings.Repeat(" ", barWidth-barWidth/2) + "] " + text
	if !strings.HasPrefix(line, want) {
		t.Fatalf("drew %q\nwant %q", line, want)
	}
}

// cancelOnWrite cancels a context once its output contains a marker.
type cancelOnWrite struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	marker string
	cancel context.CancelFunc
}

func (w *cancelOnWrite) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if strings.Contains(w.buf.String(), w.marker) {
		w.cancel()
	}
	return len(p), nil
}

// Ctrl-C during a run against its own server stops the run, and still stops the
// server and removes its data directory.
func TestOwnServerInterrupted(t *testing.T) {
	serverDir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	stderr := &cancelOnWrite{marker: "progress:", cancel: cancel}
	var stdout bytes.Buffer
	code := run(ctx, []string{"pp", "--producers", "1", "--duration", "1h", "--messages-per-batch", "10", "--server-dir", serverDir},
		&stdout, stderr, func(string) string { return "" })
	if code != exitInterrupted || !strings.Contains(stderr.buf.String(), "interrupted") {
		t.Fatalf("exit %d\nstderr %s", code, stderr.buf.String())
	}
	if entries, err := os.ReadDir(serverDir); err != nil || len(entries) != 0 {
		t.Errorf("the server's data directory was not removed: %v %v", entries, err)
	}
}
