package shard

import (
	"bytes"
	"errors"
	"io"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/wire"
)

// fuzzRuntime is one runtime shared by every input of FuzzConnection: starting one per
// input would measure start-up, not the connection path.
var fuzzRuntime = sync.OnceValues(func() (*Runtime, error) {
	return Start(Config{
		TCPAddress:   "127.0.0.1:0",
		ShardCount:   2,
		NewHandler:   func(s *Shard) Handler { return &testHandler{shard: s} },
		Logger:       testLogger(nil),
		Arena:        testArenaConfig(),
		FrameSizeMax: 1 << 20,
	})
})

// FuzzConnection sends arbitrary bytes on a real connection, then half-closes it. The
// server must answer what it can frame, evict or close on what it cannot, and end the
// connection without a panic or a hang; a second connection must still get PING
// replies afterwards.
func FuzzConnection(f *testing.F) {
	f.Add(pingFrame(1))
	f.Add(bytes.Repeat(pingFrame(2), 3))
	f.Add(pingFrame(3)[:100])
	f.Add(headerWithSize(pingFrame(4), 10))
	f.Add(headerWithSize(pingFrame(5), 1<<30))
	f.Add(withByte(pingFrame(6), 60, byte(wire.CommandPrepare)))
	f.Add(withByte(pingFrame(7), 220, 1))
	f.Add(requestHeader(0, wire.OperationNonReplicated, uint32(wire.CodeLoginUser), 8))
	f.Add(append(requestHeader(5, wire.OperationNonReplicated, uint32(wire.CodeGetSnapshot), 9), "hello"...))
	f.Add(requestHeader(0, wire.OperationNonReplicated, uint32(wire.CodeGetStats), 10))
	f.Add(requestHeader(0, wire.OperationNonReplicated, uint32(wire.CodeGetClusterMetadata), 11))
	f.Fuzz(fuzzOne)
}

func fuzzOne(t *testing.T, stream []byte) {
	rt, err := fuzzRuntime()
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.DialTimeout("tcp", rt.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	readDone := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, conn)
		readDone <- err
	}()
	if _, err := conn.Write(stream); err != nil && !isConnReset(err) {
		t.Fatalf("write: %v", err)
	}
	conn.(*net.TCPConn).CloseWrite()
	if err := <-readDone; err != nil && !isConnReset(err) {
		t.Fatalf("the server did not end the connection: %v", err)
	}
	bystander := &testClient{t: t, conn: dialFuzz(t, rt)}
	bystander.ping(42)
}

func dialFuzz(t *testing.T, rt *Runtime) net.Conn {
	conn, err := net.DialTimeout("tcp", rt.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// isConnReset reports a reset or broken pipe: how a server that closed a connection
// with unread input ends it.
func isConnReset(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}
