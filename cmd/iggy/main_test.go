package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/config"
	"github.com/iggy-shard/iggy-shard/server"
)

// The tests share one server, started on a loopback port by TestMain, and run the
// command in process: run() with its arguments, standard streams and environment,
// as main would. Each test keeps its own IGGY_HOME and HOME and its own stream
// names, so they run in parallel.

var (
	// serverAddr is the test server's address.
	serverAddr string
	// rootToken is a personal access token of the root user: a token login costs a
	// hash, a password login an argon2id run, so the tests log in with it.
	rootToken string
	// uniq numbers the objects tests create.
	uniq atomic.Int64
)

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "iggy-cli-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	cfg := config.Default()
	cfg.TCPAddress = "127.0.0.1:0"
	cfg.HTTP.Address = "127.0.0.1:0"
	cfg.SystemPath = filepath.Join(dir, "data")
	cfg.ShardCount = 2
	cfg.PinCPUs = false
	s, err := server.Start(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		fmt.Fprintln(os.Stderr, "server.Start:", err)
		return 1
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	}()
	serverAddr = s.Addr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, serverAddr, client.WithCredentials("iggy", "iggy"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "dial:", err)
		return 1
	}
	rootToken, err = c.CreatePersonalAccessToken(ctx, "cli-tests", 0)
	c.Close()
	if err != nil {
		fmt.Fprintln(os.Stderr, "token:", err)
		return 1
	}
	return m.Run()
}

// startServer starts a server of a test's own (TLS, a cluster) and stops it when
// the test ends.
func startServer(t *testing.T, cfg config.Config) *server.Server {
	t.Helper()
	cfg.TCPAddress = "127.0.0.1:0"
	cfg.HTTP.Address = "127.0.0.1:0"
	cfg.SystemPath = t.TempDir()
	cfg.ShardCount = 1
	cfg.PinCPUs = false
	s, err := server.Start(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatalf("server.Start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return s
}

// name returns a fresh object name for a test.
func name(prefix string) string {
	return fmt.Sprintf("%s-%d", prefix, uniq.Add(1))
}

// env is one user's shell: an IGGY_HOME and HOME of its own, environment
// variables, and what standard input holds.
type env struct {
	t    *testing.T
	home string
	vars map[string]string
	// stdin is what the next run reads; nil for empty.
	stdin io.Reader
	// inTerminal, errTerminal and password fake a terminal.
	inTerminal, errTerminal bool
	password                string
	// ctx is the context of the next run (Ctrl-C is its cancellation).
	ctx context.Context
}

func newEnv(t *testing.T) *env {
	t.Helper()
	home := filepath.Join(t.TempDir(), "iggy-home")
	return &env{t: t, home: home, vars: map[string]string{"IGGY_HOME": home, "HOME": t.TempDir()}}
}

// result is what a run printed and returned.
type result struct {
	code           int
	stdout, stderr string
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\n--- stdout:\n%s--- stderr:\n%s", r.code, r.stdout, r.stderr)
}

// syncBuffer is a bytes.Buffer safe to read while a run writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// exec runs the command with exactly args, writing stdout to out.
func (e *env) exec(out io.Writer, args ...string) (int, string) {
	var errOut syncBuffer
	in := e.stdin
	if in == nil {
		in = strings.NewReader("")
	}
	e.stdin = nil
	ctx := e.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	std := stdio{in: in, out: out, err: &errOut, inTerminal: e.inTerminal, errTerminal: e.errTerminal,
		readPassword: func() ([]byte, error) { return []byte(e.password), nil }}
	code := run(ctx, args, std, func(k string) string { return e.vars[k] })
	return code, errOut.String()
}

// raw runs the command with exactly args.
func (e *env) raw(args ...string) result {
	e.t.Helper()
	var out syncBuffer
	code, errOut := e.exec(&out, args...)
	return result{code: code, stdout: out.String(), stderr: errOut}
}

// iggy runs the command against the test server, without credentials.
func (e *env) iggy(args ...string) result {
	e.t.Helper()
	return e.raw(append([]string{"--tcp-server-address", serverAddr}, args...)...)
}

// root runs the command against the test server as the root user.
func (e *env) root(args ...string) result {
	e.t.Helper()
	return e.raw(append([]string{"--tcp-server-address", serverAddr, "-t", rootToken}, args...)...)
}

// ok runs as root and fails the test unless the command succeeds.
func (e *env) ok(args ...string) result {
	e.t.Helper()
	r := e.root(args...)
	if r.code != exitOK {
		e.t.Fatalf("iggy %s:\n%s", strings.Join(args, " "), r)
	}
	return r
}

// json runs as root with --output json, requires success, and decodes stdout into v.
func (e *env) json(v any, args ...string) {
	e.t.Helper()
	r := e.ok(append([]string{"--output", "json"}, args...)...)
	if err := json.Unmarshal([]byte(r.stdout), v); err != nil {
		e.t.Fatalf("iggy --output json %s: %v\n%s", strings.Join(args, " "), err, r)
	}
}

// fails requires a run to end with code and its stderr to hold every want.
func fails(t *testing.T, r result, code int, want ...string) {
	t.Helper()
	if r.code != code {
		t.Fatalf("want exit %d, got:\n%s", code, r)
	}
	for _, w := range want {
		if !strings.Contains(r.stderr, w) {
			t.Fatalf("stderr does not say %q:\n%s", w, r)
		}
	}
}

// has requires stdout to hold every want.
func has(t *testing.T, r result, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(r.stdout, w) {
			t.Fatalf("stdout does not say %q:\n%s", w, r)
		}
	}
}

// eventually retries check every 10 ms for up to 10 s.
func eventually(t *testing.T, what string, check func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !check() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10 s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }
