package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/config"
	"github.com/iggy-shard/iggy-shard/wire"
)

// testServer starts a server on a random loopback port with its data in dir.
func testServer(t *testing.T, dir string, shards int) *Server {
	t.Helper()
	return startTestServer(t, testConfig(dir, shards))
}

func testConfig(dir string, shards int) setup {
	cfg := defaultSetup()
	cfg.TCPAddress = "127.0.0.1:0"
	cfg.SystemPath = dir
	cfg.ShardCount = shards
	cfg.PinCPUs = false
	cfg.SnapshotIntervalOps = 16
	return cfg
}

// defaultSetup is the default configuration, without test hooks.
func defaultSetup() setup {
	cfg := setup{Config: config.Default()}
	cfg.HTTP.Address = "127.0.0.1:0" // the HTTP API on a free port, as tcp
	return cfg
}

func startTestServer(t *testing.T, cfg setup) *Server {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	s, err := start(cfg, log)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { stopServer(t, s) })
	if cfg.Cluster.Enabled {
		checkReplicatedStateAtEnd(t, s)
	}
	return s
}

func stopServer(t *testing.T, s *Server) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// dialRoot connects and logs in as the root user.
func dialRoot(t *testing.T, s *Server) *client.Client {
	t.Helper()
	return dialAs(t, s, "iggy", "iggy")
}

func dialAs(t *testing.T, s *Server, user, password string) *client.Client {
	t.Helper()
	c, err := client.Dial(testContext(t), s.Addr().String(), client.WithCredentials(user, password), client.WithRequestTimeout(20*time.Second))
	if err != nil {
		t.Fatalf("Dial as %s: %v", user, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func dialAnonymous(t *testing.T, s *Server) *client.Client {
	t.Helper()
	c, err := client.Dial(testContext(t), s.Addr().String(), client.WithRequestTimeout(20*time.Second))
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func wantCode(t *testing.T, what string, err error, code wire.ErrorCode) {
	t.Helper()
	if !errors.Is(err, code) {
		t.Fatalf("%s: error %v, want code %d (%s)", what, err, uint32(code), code.Error())
	}
}

func mustOK(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func messages(n int, prefix string) []client.Message {
	ms := make([]client.Message, n)
	for i := range ms {
		ms[i] = client.Message{Payload: []byte(fmt.Sprintf("%s %d", prefix, i))}
	}
	return ms
}

func readFileForTest(path string) ([]byte, error) { return os.ReadFile(path) }

// gate is a place a test holds a server goroutine (a hook: a password check, a
// journal fdatasync): the first goroutine to get there closes reached, and every
// goroutine waits there until the test opens it. The test's cleanup opens it too, so
// a test that fails while holding does not leave the server's goroutines stuck.
type gate struct {
	reached     chan struct{}
	reachedOnce sync.Once
	opened      chan struct{}
	open        func()
}

func newGate(t *testing.T) *gate {
	g := &gate{reached: make(chan struct{}), opened: make(chan struct{})}
	g.open = sync.OnceFunc(func() { close(g.opened) })
	t.Cleanup(g.open)
	return g
}

// hold is what the hook calls.
func (g *gate) hold() {
	g.reachedOnce.Do(func() { close(g.reached) })
	<-g.opened
}

// awaitReached fails the test unless a goroutine reaches the gate within 10 s.
func (g *gate) awaitReached(t *testing.T, what string) {
	t.Helper()
	awaitClosed(t, what, g.reached)
}

// testClock is a clock a test moves (testHooks.clock): the server's wall clock and
// its shards' clock both follow it.
type testClock struct{ unixNs atomic.Int64 }

func newTestClock() *testClock {
	c := &testClock{}
	c.unixNs.Store(time.Now().UnixNano())
	return c
}

func (c *testClock) now() time.Time { return time.Unix(0, c.unixNs.Load()) }

// advance moves the clock and wakes the shards, so that each serves what is due.
func (c *testClock) advance(s *Server, d time.Duration) {
	c.unixNs.Add(int64(d))
	s.rt.WakeAll()
}

// lockedBuffer is a log destination the server's goroutines write to while the
// test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
