package shard

import (
	"bufio"
	"context"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

const helperEnv = "SHARD_TEST_HELPER"

// TestHelperFdExhaustedServer is not a test: it is the server of TestAcceptBacksOffAndRecovers,
// run in a child process whose descriptor limit it lowers so that accept fails with
// EMFILE after a few connections.
func TestHelperFdExhaustedServer(t *testing.T) {
	if os.Getenv(helperEnv) != "fd-exhausted-server" {
		t.Skip("helper process for TestAcceptBacksOffAndRecovers")
	}
	// Initialise the Go runtime's poller (its epoll descriptor) while descriptors
	// are plentiful: the shutdown's timer needs it. Opening a pipe does.
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	pr.Close()
	pw.Close()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	open := make(map[int]bool)
	for _, e := range entries {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			t.Fatal(err)
		}
		open[fd] = true
	}
	// The kernel hands out the lowest free descriptor below the limit: pick the limit
	// that leaves exactly headroom free ones (the directory ReadDir read is closed):
	// three for the runtime (listener, ring, eventfd) and four for connections. The
	// limit is set before the runtime starts because io_uring reads it when an accept
	// is prepared, not when it completes.
	const headroom = 3 + 4
	limit, free := 0, 0
	for ; free < headroom; limit++ {
		if !open[limit] || limit == dirFdOf(entries) {
			free++
		}
	}
	rlimit := unix.Rlimit{Cur: uint64(limit), Max: uint64(limit)}
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &rlimit); err != nil {
		t.Fatal(err)
	}
	rt, err := Start(Config{
		TCPAddress: "127.0.0.1:0",
		ShardCount: 1,
		NewHandler: func(s *Shard) Handler { return &testHandler{shard: s} },
		Arena:      testArenaConfig(),
	})
	if err != nil {
		t.Fatal(err)
	}
	os.Stdout.WriteString(rt.Addr().String() + "\n")
	// Serve until the parent closes stdin.
	bufio.NewReader(os.Stdin).ReadString('\n')
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := rt.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestAcceptBacksOffAndRecovers runs a server that can hold only four more descriptors.
// Connections beyond that wait in the kernel's accept queue while accept backs off;
// once served connections close, the waiting ones are accepted and answered.
func TestAcceptBacksOffAndRecovers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperFdExhaustedServer$")
	cmd.Env = append(os.Environ(), helperEnv+"=fd-exhausted-server")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("helper printed no address: %v\n%s", err, stderr.String())
	}
	addr = strings.TrimSpace(addr)
	rt := &Runtime{addr: mustResolve(t, addr)}

	const connCount = 10
	clients := make([]*testClient, connCount)
	for i := range clients {
		clients[i] = dial(t, rt)
		if _, err := clients[i].conn.Write(pingFrame(uint64(i))); err != nil {
			t.Fatal(err)
		}
	}
	// The first four are served; the rest are stuck behind EMFILE.
	for i := range 4 {
		checkReply(t, clients[i].readFrame(), uint64(i), 0)
	}
	clients[4].conn.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	var one [1]byte
	if n, err := clients[4].conn.Read(one[:]); n != 0 || !isTimeout(err) {
		stdin.Close()
		cmd.Wait()
		t.Fatalf("connection 4 answered (%d bytes, %v) while descriptors are exhausted\n%s", n, err, stderr.String())
	}
	// Free descriptors in two rounds: each round lets the next four in.
	for round := 0; round < 2; round++ {
		for i := round * 4; i < round*4+4; i++ {
			clients[i].conn.Close()
		}
		for i := round*4 + 4; i < min(round*4+8, connCount); i++ {
			checkReply(t, clients[i].readFrame(), uint64(i), 0)
		}
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("helper failed: %v\n%s", err, stderr.String())
	}
	for _, line := range []string{"accept failed, backing off", "accept recovered"} {
		if !strings.Contains(stderr.String(), line) {
			t.Errorf("helper log lacks %q:\n%s", line, stderr.String())
		}
	}
}

func mustResolve(t *testing.T, addr string) *net.TCPAddr {
	a, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// dirFdOf returns the descriptor ReadDir had open on /proc/self/fd: the one whose link
// no longer resolves once it is closed.
func dirFdOf(entries []os.DirEntry) int {
	for _, e := range entries {
		if _, err := os.Readlink("/proc/self/fd/" + e.Name()); err != nil {
			fd, _ := strconv.Atoi(e.Name())
			return fd
		}
	}
	return -1
}
