package tlsterm

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/iggy-shard/iggy-shard/tlsterm/tlstest"
)

// handedOver is what a test's DeliverSession saw.
type handedOver struct {
	fd        int
	peer      netip.AddrPort
	session   *tls.Conn
	transport *Transport
}

// memRecords is a runtime's record buffers in a test: ciphertext read from the
// socket by the test, sealed records the test writes to it.
type memRecords struct{ in, out bytes.Buffer }

type notYet struct{}

func (notYet) Error() string   { return "no records yet" }
func (notYet) Timeout() bool   { return false }
func (notYet) Temporary() bool { return true }

func (m *memRecords) Read(p []byte) (int, error) {
	if m.in.Len() == 0 {
		return 0, notYet{}
	}
	return m.in.Read(p)
}

func (m *memRecords) Write(p []byte) (int, error) { return m.out.Write(p) }

// readSession reads n bytes of plaintext from a handed-over session, feeding it what
// the socket brings whenever it has read all it was given.
func readSession(t *testing.T, h handedOver, records *memRecords, n int) []byte {
	t.Helper()
	var got []byte
	buf := make([]byte, 4096)
	deadline := time.Now().Add(5 * time.Second)
	for len(got) < n {
		k, err := h.session.Read(buf)
		got = append(got, buf[:k]...)
		if err == nil {
			continue
		}
		if ne, ok := err.(net.Error); !ok || !ne.Temporary() {
			t.Fatalf("session read: %v", err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d bytes after 5 s", len(got), n)
		}
		fds := []unix.PollFd{{Fd: int32(h.fd), Events: unix.POLLIN}}
		if _, err := unix.Poll(fds, 100); err != nil && err != unix.EINTR {
			t.Fatal(err)
		}
		if fds[0].Revents&unix.POLLIN != 0 {
			k, err := unix.Read(h.fd, buf)
			if err != nil || k == 0 {
				t.Fatalf("socket read: %d, %v", k, err)
			}
			records.in.Write(buf[:k])
		}
	}
	return got
}

// TestDeliverSessionHandsOverWhole: with DeliverSession, an established session goes
// to the runtime with its socket (blocking, out of the netpoller) and no bridge:
// the bytes the client sent right after its handshake are read through the
// runtime's records, replies sealed there reach the client, a close_notify ends it,
// and closing the transport ends the session in the counts. A connection whose
// handshake never finishes is cut at HandshakeTimeout and never handed over.
func TestDeliverSessionHandsOverWhole(t *testing.T) {
	sessions := make(chan handedOver, 4)
	ca := tlstest.NewCA(t, "test CA")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	term, err := Serve(ln, Config{TLS: &tls.Config{Certificates: []tls.Certificate{ca.IssueValid(t).TLS}},
		HandshakeTimeout: 300 * time.Millisecond, Logger: slog.New(slog.DiscardHandler),
		DeliverSession: func(fd int, peer netip.AddrPort, session *tls.Conn, transport *Transport) error {
			sessions <- handedOver{fd: fd, peer: peer, session: session, transport: transport}
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := term.Wait(ctx); err != nil {
			t.Errorf("Wait: %v", err)
		}
	})
	clientCfg := &tls.Config{RootCAs: ca.Pool, ServerName: "localhost"}
	silent, err := net.Dial("tcp", term.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()

	c := dialTLS(t, term.Addr().String(), clientCfg)
	if _, err := c.Write([]byte("pipelined")); err != nil { // before the session is handed over
		t.Fatal(err)
	}
	var h handedOver
	select {
	case h = <-sessions:
	case <-time.After(5 * time.Second):
		t.Fatal("no session handed over within 5 s")
	}
	defer unix.Close(h.fd)
	if flags, err := unix.FcntlInt(uintptr(h.fd), unix.F_GETFL, 0); err != nil || flags&unix.O_NONBLOCK != 0 {
		t.Fatalf("handed-over socket flags %#x, err %v: want blocking", flags, err)
	}
	if h.peer != netip.MustParseAddrPort(c.LocalAddr().String()) {
		t.Fatalf("peer %v, want %v", h.peer, c.LocalAddr())
	}
	records := &memRecords{}
	h.transport.Attach(records)
	if got := readSession(t, h, records, len("pipelined")); string(got) != "pipelined" {
		t.Fatalf("read %q", got)
	}
	if _, err := h.session.Write([]byte("reply")); err != nil {
		t.Fatal(err)
	}
	if err := h.session.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if _, err := unix.Write(h.fd, records.out.Bytes()); err != nil {
		t.Fatal(err)
	}
	if got := readFull(t, c, 5); string(got) != "reply" {
		t.Fatalf("client read %q", got)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("after the close_notify: %v, want EOF", err)
	}
	if st := term.Stats(); st.SessionsOpen != 1 || st.Handshakes != 1 {
		t.Fatalf("stats %+v, want one session open", st)
	}
	h.transport.Close()
	h.transport.Close() // once only
	expectEOF(t, silent)
	waitForStats(t, "the silent handshake timed out", term, func(s Stats) bool { return s.HandshakesTimedOut == 1 })
	if st := term.Stats(); st.SessionsOpen != 0 || len(sessions) != 0 {
		t.Fatalf("stats %+v, %d more sessions handed over; want none open, none more", st, len(sessions))
	}
}
