package shard

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// socketpairConn returns the runtime's end (blocking, for Adopt) and a net.Conn on
// the other end for the test to play the client.
func socketpairConn(t *testing.T) (int, net.Conn) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fds[1]), "test end")
	conn, err := net.FileConn(f)
	f.Close()
	if err != nil {
		unix.Close(fds[0])
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return fds[0], conn
}

// TestAdoptServesSocketsFromOutside: with the listener off, sockets given to Adopt
// are placed on the shards (one each, the least loaded first), served like accepted
// ones, and report the peer address Adopt was given; once the runtime stops, Adopt
// refuses and the caller keeps the descriptor.
func TestAdoptServesSocketsFromOutside(t *testing.T) {
	events := make(chan string, 16)
	rt := startTestRuntime(t, Config{ShardCount: 2, ListenerOff: true, NewHandler: func(s *Shard) Handler {
		return &openerHandler{testHandler: testHandler{shard: s}, events: events}
	}})
	if rt.Addr() != nil {
		t.Fatalf("Addr %v with the listener off, want nil", rt.Addr())
	}
	for i, peer := range []string{"192.0.2.7:4242", "[2001:db8::1]:443"} {
		fd, conn := socketpairConn(t)
		if err := rt.Adopt(fd, netip.MustParseAddrPort(peer)); err != nil {
			t.Fatal(err)
		}
		select {
		case e := <-events:
			if want := "opened " + peer; e != want {
				t.Fatalf("event %q, want %q", e, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("adopted socket not opened within 5 s")
		}
		c := &testClient{t: t, conn: conn}
		c.ping(uint64(i + 1))
		c.ping(uint64(i + 2))
	}
	waitFor(t, 5*time.Second, "a connection on each shard", func() bool {
		return rt.connCounts[0].Load() == 1 && rt.connCounts[1].Load() == 1
	})

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := rt.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	fd, _ := socketpairConn(t)
	if err := rt.Adopt(fd, netip.AddrPort{}); !errors.Is(err, ErrRuntimeStopped) {
		t.Fatalf("Adopt after shutdown: %v, want ErrRuntimeStopped", err)
	}
	unix.Close(fd)
}
