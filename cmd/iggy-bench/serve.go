package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/iggy-shard/iggy-shard/config"
	"github.com/iggy-shard/iggy-shard/server"
)

// With no --server-address, iggy-bench runs an iggy-shard of its own as a child
// process: the iggy-bench binary itself, re-executed with the hidden subcommand
// serveCommand, which runs package server in-process. A child rather than a server
// in the benchmark's own process, so that the clients and the server do not share
// one Go runtime: their goroutines, garbage collector and allocation counts stay
// apart, and `top` or `perf` tell the two apart, as they would against a real
// deployment. Re-executing ourselves rather than `iggy-shard` means that
// `go run ./cmd/iggy-bench pp` needs no other binary built or installed.
//
// The child talks to its parent through its standard streams: it writes
// "listening ADDRESS" on stdout once it serves (the parent waits for that line, not
// for a time), and stops when its stdin reaches EOF: when the parent closes it, or
// when the parent dies, so that no server outlives its benchmark. It runs in a
// process group of its own, so that a Ctrl-C in the terminal reaches only the
// parent, which then cleans up its streams before it stops the child. The child
// removes its data directory when it has stopped.
const serveCommand = "__serve"

const (
	childStartTimeout    = 30 * time.Second
	childShutdownTimeout = 10 * time.Second
	childReadyPrefix     = "listening "
	// childLogTailBytes is how much of the child's log the parent keeps, to show
	// when the child fails.
	childLogTailBytes = 16 << 10
	// The root credentials reach the child in its environment, not its arguments,
	// which any user can read with ps.
	envRootUsername = "IGGY_ROOT_USERNAME"
	envRootPassword = "IGGY_ROOT_PASSWORD"
)

// serveMain is the child: it serves on a free loopback port from a data directory
// until its stdin closes or it is sent SIGTERM, then removes the directory.
func serveMain(args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	fs := flag.NewFlagSet(serveCommand, flag.ContinueOnError)
	fs.SetOutput(stderr)
	systemPath := fs.String("system-path", "", "data directory, removed at exit")
	shards := fs.Int("shards", 0, "shards; 0 = one per CPU")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if *systemPath == "" {
		fmt.Fprintf(stderr, "iggy-bench %s: --system-path is required\n", serveCommand)
		return exitUsage
	}
	defer os.RemoveAll(*systemPath)
	// The parent handles Ctrl-C and tells us when to stop.
	signal.Ignore(os.Interrupt)
	terminate := make(chan os.Signal, 1)
	signal.Notify(terminate, syscall.SIGTERM)

	cfg := config.Default()
	cfg.TCPAddress = "127.0.0.1:0"
	cfg.HTTP.Address = "127.0.0.1:0"
	cfg.SystemPath = *systemPath
	cfg.ShardCount = *shards
	if v := getenv(envRootUsername); v != "" {
		cfg.RootUsername = v
	}
	if v := getenv(envRootPassword); v != "" {
		cfg.RootPassword = v
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	s, err := server.Start(cfg, log)
	if err != nil {
		fmt.Fprintf(stderr, "iggy-bench %s: %v\n", serveCommand, err)
		return exitFailed
	}
	fmt.Fprintf(stdout, "%s%s\n", childReadyPrefix, s.Addr())
	stdinClosed := make(chan struct{})
	go func() {
		io.Copy(io.Discard, stdin)
		close(stdinClosed)
	}()
	code := exitOK
	select {
	case <-stdinClosed:
	case <-terminate:
	case <-s.Done():
		fmt.Fprintf(stderr, "iggy-bench %s: the server stopped: %v\n", serveCommand, s.Err())
		code = exitFailed
	}
	ctx, cancel := context.WithTimeout(context.Background(), childShutdownTimeout)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		fmt.Fprintf(stderr, "iggy-bench %s: shutdown: %v\n", serveCommand, err)
		code = exitFailed
	}
	return code
}

// childServer is the parent's handle on the child.
type childServer struct {
	addr  string
	dir   string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	logs  *tailBuffer
	// exited is closed once the child has exited; waitErr is then its status.
	exited  chan struct{}
	waitErr error
}

// startChildServer starts the child with a new data directory under parentDir (the
// system's temporary directory when empty) and waits until it serves.
func startChildServer(ctx context.Context, parentDir string, shards int, username, password string) (*childServer, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding the iggy-bench binary to run the server: %w", err)
	}
	dir, err := os.MkdirTemp(parentDir, "iggy-bench-server-")
	if err != nil {
		return nil, fmt.Errorf("creating the server's data directory: %w", err)
	}
	c := &childServer{dir: dir, logs: &tailBuffer{max: childLogTailBytes}, exited: make(chan struct{})}
	cmd := exec.Command(self, serveCommand, "--system-path", dir, "--shards", fmt.Sprint(shards))
	cmd.Env = append(os.Environ(), envRootUsername+"="+username, envRootPassword+"="+password)
	cmd.Stderr = c.logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if c.stdin, err = cmd.StdinPipe(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("starting the server: %w", err)
	}
	c.cmd = cmd
	ready := make(chan string, 1)
	go func() {
		scanner := bufio.NewScanner(stdout)
		for scanner.Scan() {
			if addr, ok := strings.CutPrefix(scanner.Text(), childReadyPrefix); ok {
				ready <- addr
				break
			}
		}
		io.Copy(io.Discard, stdout) // the child writes nothing more; never block it
	}()
	go func() {
		c.waitErr = cmd.Wait()
		close(c.exited)
	}()
	timer := time.NewTimer(childStartTimeout)
	defer timer.Stop()
	select {
	case c.addr = <-ready:
		return c, nil
	case <-c.exited:
		os.RemoveAll(dir)
		return nil, fmt.Errorf("the server exited before it served (%v):\n%s", c.waitErr, c.logs)
	case <-timer.C:
		err = fmt.Errorf("the server did not serve within %v:\n%s", childStartTimeout, c.logs)
	case <-ctx.Done():
		err = ctx.Err()
	}
	c.stop()
	return nil, err
}

// stop closes the child's stdin, which asks it to shut down, waits for it (killing
// it after childShutdownTimeout and a little more) and removes its data directory.
// It returns the child's failure, with its log, if it did not exit cleanly.
func (c *childServer) stop() error {
	c.stdin.Close()
	timer := time.NewTimer(childShutdownTimeout + 5*time.Second)
	defer timer.Stop()
	var err error
	select {
	case <-c.exited:
		if c.waitErr != nil {
			err = fmt.Errorf("the server exited with %v:\n%s", c.waitErr, c.logs)
		}
	case <-timer.C:
		c.cmd.Process.Kill()
		<-c.exited
		err = fmt.Errorf("the server did not stop within %v and was killed", childShutdownTimeout+5*time.Second)
	}
	if rmErr := os.RemoveAll(c.dir); rmErr != nil && !errors.Is(rmErr, os.ErrNotExist) {
		err = errors.Join(err, rmErr)
	}
	return err
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.buf) == 0 {
		return "(the server logged nothing)"
	}
	return strings.TrimRight(string(t.buf), "\n")
}
