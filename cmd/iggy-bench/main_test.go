package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/bench"
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
		"-messages-per-batch", "-message-size", "-batches", "-duration", "-warmup", "-rate-limit", "-output", "-keep-streams", "Exit codes"} {
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
	cfg := server.DefaultConfig()
	cfg.TCPAddress = "127.0.0.1:0"
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
