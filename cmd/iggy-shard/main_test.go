package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/iggy-shard/iggy-shard/config"
	"github.com/iggy-shard/iggy-shard/wire"
)

// binDir holds the binary the tests build; TestMain removes it.
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "iggy-shard-test-")
	if err != nil {
		panic(err)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// buildBinary builds the server with go build, once per test run.
var buildBinary = sync.OnceValues(func() (string, error) {
	path := filepath.Join(binDir, "iggy-shard")
	out, err := exec.Command("go", "build", "-o", path, ".").CombinedOutput()
	if err != nil {
		return "", &buildError{out: string(out), err: err}
	}
	return path, nil
})

type buildError struct {
	out string
	err error
}

func (e *buildError) Error() string { return e.err.Error() + "\n" + e.out }

// process is a running iggy-shard binary.
type process struct {
	cmd     *exec.Cmd
	addr    string
	mu      sync.Mutex
	log     strings.Builder
	exited  chan struct{}
	exitErr error
}

var listeningLine = regexp.MustCompile(`msg=listening address=(\S+)`)

// startServer runs the built binary with args on a random loopback port and waits (at
// most 10 s) for its "listening" log line.
func startServer(t *testing.T, args ...string) *process {
	t.Helper()
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	if !hasFlag(args, "--system-path") {
		args = append([]string{"--system-path", t.TempDir()}, args...)
	}
	cmd := exec.Command(bin, append([]string{"--tcp-address", "127.0.0.1:0", "--http-address", "127.0.0.1:0"}, args...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &process{cmd: cmd, exited: make(chan struct{})}
	addrs := make(chan string, 1)
	go func() {
		scanner := bufio.NewScanner(stderr)
		for scanner.Scan() {
			line := scanner.Text()
			s.mu.Lock()
			s.log.WriteString(line + "\n")
			s.mu.Unlock()
			if m := listeningLine.FindStringSubmatch(line); m != nil {
				addrs <- m[1]
			}
		}
		s.exitErr = cmd.Wait()
		close(s.exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-s.exited
	})
	select {
	case s.addr = <-addrs:
	case <-s.exited:
		t.Fatalf("server exited before listening: %v\n%s", s.exitErr, s.logText())
	case <-time.After(10 * time.Second):
		t.Fatalf("server not listening after 10 s\n%s", s.logText())
	}
	return s
}

func (s *process) logText() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log.String()
}

// stop sends sig and waits (at most 15 s) for the exit code.
func (s *process) stop(t *testing.T, sig syscall.Signal) int {
	t.Helper()
	if err := s.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.exited:
	case <-time.After(15 * time.Second):
		t.Fatalf("server still running 15 s after %v\n%s", sig, s.logText())
	}
	return s.cmd.ProcessState.ExitCode()
}

func hasFlag(args []string, name string) bool {
	for _, a := range args {
		if a == name || strings.HasPrefix(a, name+"=") {
			return true
		}
	}
	return false
}

func request(op wire.Operation, code wire.CommandCode, requestNumber uint64, body []byte) []byte {
	var h wire.RequestHeader
	h.Size = uint32(256 + len(body))
	h.Command = wire.CommandRequest
	h.Client = wire.Uint128{Lo: 0xDEC0DE, Hi: 1}
	h.Request = requestNumber
	h.Operation = op
	switch op {
	case wire.OperationNonReplicated:
		h.NonReplicatedCode = code
	case wire.OperationRegister:
		h.Request = 0
	default:
		h.Session = 1
	}
	frame := make([]byte, 256+len(body))
	h.Put(frame)
	copy(frame[256:], body)
	return frame
}

func exchange(t *testing.T, conn net.Conn, frame []byte) []byte {
	t.Helper()
	if _, err := conn.Write(frame); err != nil {
		t.Fatal(err)
	}
	reply := make([]byte, 256)
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(conn, reply); err != nil {
		t.Fatal(err)
	}
	return reply
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func checkStatusReply(t *testing.T, reply []byte, requestNumber uint64, status wire.ErrorCode) {
	t.Helper()
	h, err := wire.DecodeReplyHeader(alignedCopy(reply), 64<<20)
	if err != nil && status == 0 {
		t.Fatalf("reply does not decode: %v", err)
	}
	if reply[60] != byte(wire.CommandReply) {
		t.Fatalf("command %d, want Reply", reply[60])
	}
	if got := binary.LittleEndian.Uint64(reply[200:]); got != requestNumber {
		t.Fatalf("request echo %d, want %d", got, requestNumber)
	}
	if got := wire.ErrorCode(binary.LittleEndian.Uint32(reply[216:])); got != status {
		t.Fatalf("status %v, want %v", got, status)
	}
	if h != nil && h.Operation != wire.OperationNonReplicated {
		t.Fatalf("reply operation %v, want NonReplicated", h.Operation)
	}
}

// alignedCopy copies b to a 16-byte-aligned buffer, as wire's header views require.
func alignedCopy(b []byte) []byte {
	buf := make([]byte, len(b)+16)
	off := (16 - int(uintptr(unsafe.Pointer(unsafe.SliceData(buf))))%16) % 16
	copy(buf[off:], b)
	return buf[off : off+len(b)]
}

func checkEviction(t *testing.T, conn net.Conn, reply []byte, reason wire.EvictionReason) {
	t.Helper()
	h, err := wire.DecodeEvictionHeader(alignedCopy(reply))
	if err != nil {
		t.Fatalf("not an eviction: %v (command %d)", err, reply[60])
	}
	if h.Reason != reason {
		t.Fatalf("eviction reason %v, want %v", h.Reason, reason)
	}
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := conn.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Fatalf("connection open after the eviction (%d bytes, %v)", n, err)
	}
}

func TestHelpExplainsEveryFlag(t *testing.T) {
	var out bytes.Buffer
	if code := run([]string{"--help"}, &out); code != exitOK {
		t.Fatalf("--help exit code %d", code)
	}
	for _, flag := range []string{"tcp-address", "IGGY_TCP_ADDRESS", "http-address", "IGGY_HTTP_ADDRESS", "system-path", "IGGY_SYSTEM_PATH", "config", "shards",
		"pin-cpus", "busy-poll", "idle-timeout", "max-frame-size", "snapshot-interval-ops", "shutdown-timeout", "log-level", "IGGY_ROOT_USERNAME",
		"heartbeat-interval", "IGGY_HEARTBEAT_INTERVAL", "partition-queue-capacity", "partition-memory-max"} {
		if !strings.Contains(out.String(), flag) {
			t.Errorf("--help does not mention %s:\n%s", flag, out.String())
		}
	}
	if limit := fmt.Sprintf("at most %d, a larger value is used as %[1]d, with a warning", config.SnapshotIntervalOpsMax()); !strings.Contains(out.String(), limit) {
		t.Errorf("--help does not say of snapshot-interval-ops %q:\n%s", limit, out.String())
	}
	if code := run([]string{"--no-such-flag"}, io.Discard); code != exitUsage {
		t.Fatalf("unknown flag exit code %d, want %d", code, exitUsage)
	}
}

// TestServerRefusesUnauthenticatedRequests runs the built binary: before login PING
// works, and every other kind of request is refused the protocol's way; then SIGTERM
// stops it with exit code 0.
func TestServerRefusesUnauthenticatedRequests(t *testing.T) {
	s := startServer(t, "--shards", "2")
	conn := dial(t, s.addr)
	checkStatusReply(t, exchange(t, conn, request(wire.OperationNonReplicated, wire.CodePing, 1, nil)), 1, 0)
	checkStatusReply(t, exchange(t, conn, request(wire.OperationNonReplicated, wire.CodeGetStreams, 2, nil)), 2, wire.ErrUnauthenticated)
	checkStatusReply(t, exchange(t, conn, request(wire.OperationNonReplicated, wire.CodePing, 3, nil)), 3, 0)

	loginBody := append([]byte{0x00, 0x2C, 0x00, 0x00, 6}, "go-sdk"...)
	loginBody = append(loginBody, 12)
	loginBody = append(loginBody, "0.9.0-edge.4"...)
	loginBody = append(loginBody, 4, 'i', 'g', 'g', 'y', 5, 'w', 'r', 'o', 'n', 'g', 0, 0, 0, 0)
	tests := []struct {
		name   string
		frame  []byte
		reason wire.EvictionReason
	}{
		{"wrong password", request(wire.OperationRegister, 0, 0, loginBody), wire.EvictionInvalidCredentials},
		{"malformed login", request(wire.OperationRegister, 0, 0, []byte{1, 2}), wire.EvictionMalformedLogin},
		{"legacy login", request(wire.OperationNonReplicated, wire.CodeLoginUser, 1, nil), wire.EvictionMalformedLogin},
		{"create stream", request(wire.OperationCreateStream, 0, 1, []byte{3, 'a', 'b', 'c'}), wire.EvictionNoSession},
		{"send messages", request(wire.OperationSendMessages, 0, 1, nil), wire.EvictionNoSession},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := dial(t, s.addr)
			checkEviction(t, c, exchange(t, c, tt.frame), tt.reason)
		})
	}
	// A logout without a session is answered like the reference server does.
	if reply := exchange(t, conn, request(wire.OperationLogout, 0, 4, nil)); reply[60] != byte(wire.CommandReply) ||
		binary.LittleEndian.Uint32(reply[216:]) != 0 {
		t.Fatalf("logout without a session: command %d status %d", reply[60], binary.LittleEndian.Uint32(reply[216:]))
	}
	checkStatusReply(t, exchange(t, conn, request(wire.OperationNonReplicated, wire.CodePing, 5, nil)), 5, 0)

	if code := s.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("exit code %d after SIGTERM\n%s", code, s.logText())
	}
	if !strings.Contains(s.logText(), "msg=stopped") {
		t.Fatalf("no clean stop in the log:\n%s", s.logText())
	}
}

func TestSIGINTStopsGracefully(t *testing.T) {
	s := startServer(t, "--shards", "1", "--pin-cpus=false")
	conn := dial(t, s.addr)
	checkStatusReply(t, exchange(t, conn, request(wire.OperationNonReplicated, wire.CodePing, 1, nil)), 1, 0)
	if code := s.stop(t, syscall.SIGINT); code != 0 {
		t.Fatalf("exit code %d after SIGINT\n%s", code, s.logText())
	}
	// The open connection was closed by the server, not left hanging.
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := conn.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Fatalf("connection still open after the server stopped (%d bytes, %v)", n, err)
	}
}

// --partition-queue-capacity sets message_bus.partition_queue_capacity over the
// file and the environment.
func TestPartitionQueueCapacityFlag(t *testing.T) {
	o, err := parseFlags([]string{"--partition-queue-capacity", "2048"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"IGGY_MESSAGE_BUS_PARTITION_QUEUE_CAPACITY": "512"}
	cfg, err := o.config(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if n := cfg.Cluster.MessageBus.PartitionQueueCapacity; n != 2048 {
		t.Fatalf("partition queue capacity %d, want the flag's 2048", n)
	}
}

func TestInvalidSettingsStopTheStart(t *testing.T) {
	for _, args := range [][]string{
		{"--tcp-address", "256.0.0.1:1"},
		{"--tcp-address", "nonsense"},
		{"--max-frame-size", "12 parsecs"},
		{"--snapshot-interval-ops", "0"},
		{"--heartbeat-interval", "0s"},
		{"--partition-memory-max", "a lot"},
	} {
		var out bytes.Buffer
		if code := run(append(args, "--system-path", t.TempDir()), &out); code != exitUsage {
			t.Fatalf("%v: exit code %d, want %d\n%s", args, code, exitUsage, out.String())
		}
		if !strings.Contains(out.String(), "invalid setting") {
			t.Fatalf("%v: the message does not name the setting: %s", args, out.String())
		}
	}
}
