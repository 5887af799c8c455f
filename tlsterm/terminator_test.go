package tlsterm

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/tlsterm/tlstest"
)

// delivered is what a test's Deliver saw: the runtime's end, as a net.Conn, and the
// peer it was given.
type delivered struct {
	conn net.Conn
	peer netip.AddrPort
}

// startTerminator serves TLS with a certificate of a fresh CA on a random loopback
// port; each delivered session arrives on the returned channel. It returns the
// client's tls.Config (trusting the CA) too.
func startTerminator(t *testing.T, cfg Config) (*Terminator, *tls.Config, chan delivered) {
	t.Helper()
	ca := tlstest.NewCA(t, "test CA")
	leaf := ca.IssueValid(t)
	if cfg.TLS == nil {
		cfg.TLS = &tls.Config{Certificates: []tls.Certificate{leaf.TLS}}
	}
	sessions := make(chan delivered, 16)
	if cfg.Deliver == nil {
		cfg.Deliver = func(fd int, peer netip.AddrPort) error {
			f := os.NewFile(uintptr(fd), "runtime end")
			c, err := net.FileConn(f)
			f.Close()
			if err != nil {
				return err
			}
			t.Cleanup(func() { c.Close() })
			sessions <- delivered{conn: c, peer: peer}
			return nil
		}
	}
	if testing.Verbose() {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	} else {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	term, err := Serve(ln, cfg)
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
	return term, &tls.Config{RootCAs: ca.Pool, ServerName: "localhost"}, sessions
}

func dialTLS(t *testing.T, addr string, cfg *tls.Config) *tls.Conn {
	t.Helper()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func nextSession(t *testing.T, sessions chan delivered) delivered {
	t.Helper()
	select {
	case d := <-sessions:
		return d
	case <-time.After(5 * time.Second):
		t.Fatal("no session delivered within 5 s")
		return delivered{}
	}
}

func readFull(t *testing.T, c net.Conn, n int) []byte {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	b := make([]byte, n)
	if _, err := io.ReadFull(c, b); err != nil {
		t.Fatalf("read %d bytes: %v", n, err)
	}
	return b
}

// expectEOF reads until the end of c, failing on a byte or on a timeout.
func expectEOF(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	var one [1]byte
	n, err := c.Read(one[:])
	if n != 0 || err == nil {
		t.Fatalf("read %d bytes, err %v; want the end", n, err)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("still open after 5 s")
	}
}

// TestSessionCarriesBytesAndEnds: a session's bytes reach the runtime's end and back
// in order, the runtime's end learns the client's address, the client's close
// reaches the runtime as EOF while replies can still flow, and the runtime's close
// ends the client's session.
func TestSessionCarriesBytesAndEnds(t *testing.T) {
	term, clientCfg, sessions := startTerminator(t, Config{})
	c := dialTLS(t, term.Addr().String(), clientCfg)
	d := nextSession(t, sessions)
	if want := c.LocalAddr().(*net.TCPAddr).AddrPort(); d.peer != want {
		t.Fatalf("peer %v, want %v", d.peer, want)
	}
	if v := c.ConnectionState().Version; v != tls.VersionTLS13 {
		t.Fatalf("negotiated version %x, want TLS 1.3 (crypto/tls's default)", v)
	}

	request := bytes.Repeat([]byte("0123456789abcdef"), 20000) // 320 KB: several records
	go c.Write(request)
	if got := readFull(t, d.conn, len(request)); !bytes.Equal(got, request) {
		t.Fatal("request bytes differ at the runtime's end")
	}
	reply := bytes.Repeat([]byte("fedcba9876543210"), 30000)
	go d.conn.Write(reply)
	if got := readFull(t, c, len(reply)); !bytes.Equal(got, reply) {
		t.Fatal("reply bytes differ at the client")
	}

	// The client closes its writing side: the runtime reads EOF and may still answer.
	if err := c.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	expectEOF(t, d.conn)
	if _, err := d.conn.Write([]byte("last")); err != nil {
		t.Fatal(err)
	}
	if got := readFull(t, c, 4); string(got) != "last" {
		t.Fatalf("last reply %q", got)
	}
	d.conn.Close()
	expectEOF(t, c)
	if s := term.Stats(); s.Accepted != 1 || s.Handshakes != 1 || s.HandshakesFailed != 0 {
		t.Fatalf("stats %+v", s)
	}
}

// TestPlaintextClientRefused: a client that sends an Iggy frame header in the clear
// is closed after the failed handshake, counted, and never reaches the runtime.
func TestPlaintextClientRefused(t *testing.T) {
	term, _, sessions := startTerminator(t, Config{})
	c, err := net.Dial("tcp", term.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	header := make([]byte, 256)
	header[48], header[49] = 0, 1 // size 256
	header[60] = 5                // command Request
	c.Write(header)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	io.Copy(io.Discard, c) // an alert, perhaps, then the close
	var ne net.Error
	if _, err := c.Read(make([]byte, 1)); err == nil || (errors.As(err, &ne) && ne.Timeout()) {
		t.Fatalf("plaintext connection not closed: %v", err)
	}
	if s := term.Stats(); s.HandshakesFailed != 1 || s.Handshakes != 0 {
		t.Fatalf("stats %+v, want one failed handshake", s)
	}
	select {
	case <-sessions:
		t.Fatal("a plaintext connection reached the runtime")
	default:
	}
}

// TestHandshakeDeadline: connections that never finish a handshake are cut at the
// deadline, and while they hold every handshake slot but one, another client still
// gets through.
func TestHandshakeDeadline(t *testing.T) {
	term, clientCfg, sessions := startTerminator(t, Config{HandshakeTimeout: 300 * time.Millisecond, HandshakesInFlightMax: 3})
	var silent []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", term.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		silent = append(silent, c)
	}
	c := dialTLS(t, term.Addr().String(), clientCfg)
	d := nextSession(t, sessions)
	c.Write([]byte("ok"))
	if got := readFull(t, d.conn, 2); string(got) != "ok" {
		t.Fatalf("got %q", got)
	}
	for _, s := range silent {
		expectEOF(t, s)
	}
	// crypto/tls closes a connection at its handshake's deadline, a moment before
	// the terminator counts it.
	waitForStats(t, "two timed-out handshakes", term, func(s Stats) bool { return s.HandshakesTimedOut == 2 })
}

// TestRequiredALPN: with RequiredALPN, a client offering no protocol is refused and
// one offering it is served (the replica plane's setting).
func TestRequiredALPN(t *testing.T) {
	ca := tlstest.NewCA(t, "replica CA")
	leaf := ca.IssueValid(t)
	term, _, sessions := startTerminator(t, Config{
		TLS:          &tls.Config{Certificates: []tls.Certificate{leaf.TLS}, MinVersion: tls.VersionTLS13, NextProtos: []string{"iggy-replica"}},
		RequiredALPN: "iggy-replica",
	})
	plain := &tls.Config{RootCAs: ca.Pool, ServerName: "localhost"}
	c, err := tls.Dial("tcp", term.Addr().String(), plain)
	if err == nil {
		// TLS 1.3: the client may finish before the server refuses; the refusal is a
		// close without a session.
		expectEOF(t, c)
		c.Close()
	}
	withALPN := plain.Clone()
	withALPN.NextProtos = []string{"iggy-replica"}
	dialTLS(t, term.Addr().String(), withALPN)
	nextSession(t, sessions)
	if s := term.Stats(); s.HandshakesFailed != 1 || s.Handshakes != 1 {
		t.Fatalf("stats %+v, want one refused and one served", s)
	}
}

// TestBackPressure: while the runtime does not read, the client's writes stall
// (bounded buffers, then TCP flow control); once it reads, every byte arrives in
// order.
func TestBackPressure(t *testing.T) {
	term, clientCfg, sessions := startTerminator(t, Config{})
	c := dialTLS(t, term.Addr().String(), clientCfg)
	d := nextSession(t, sessions)
	chunk := make([]byte, 64<<10)
	written := 0
	const writtenBytesMax = 64 << 20 // far above socket buffers and the bridge's
	for written < writtenBytesMax {
		for i := range chunk {
			chunk[i] = byte((written + i) % 251)
		}
		c.SetWriteDeadline(time.Now().Add(200 * time.Millisecond))
		n, err := c.Write(chunk)
		written += n
		if err != nil {
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() {
				t.Fatalf("write: %v", err)
			}
			break
		}
	}
	if written >= writtenBytesMax {
		t.Fatalf("wrote %d bytes to a runtime that reads nothing: no back-pressure", written)
	}
	t.Logf("stalled after %d bytes", written)
	// A timed-out tls.Conn write is permanent; what was accepted must arrive intact.
	got := readFull(t, d.conn, written)
	for i, b := range got {
		if b != byte(i%251) {
			t.Fatalf("byte %d is %d, want %d", i, b, byte(i%251))
		}
	}
}

// TestWaitCutsSessionsAtDeadline: Wait returns once its context ends, with every
// session cut, even if the runtime never closes its ends.
func TestWaitCutsSessionsAtDeadline(t *testing.T) {
	term, clientCfg, sessions := startTerminator(t, Config{})
	c := dialTLS(t, term.Addr().String(), clientCfg)
	nextSession(t, sessions)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := term.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait: %v, want the deadline", err)
	}
	expectEOF(t, c)
	if _, err := net.DialTimeout("tcp", term.Addr().String(), time.Second); err == nil {
		t.Fatal("still accepting after Wait")
	}
}

// TestSlowReaderThrottlesTheRuntime: a client that stops reading stalls the runtime's
// writes once bounded buffers fill (the shard's sends would wait, as on a slow TCP
// peer), every byte arrives once it reads again, and a client that never reads is cut
// after WriteTimeout, which the runtime's end sees as the end of the connection.
func TestSlowReaderThrottlesTheRuntime(t *testing.T) {
	term, clientCfg, sessions := startTerminator(t, Config{WriteTimeout: 2 * time.Second})
	c := dialTLS(t, term.Addr().String(), clientCfg)
	d := nextSession(t, sessions)
	chunk := make([]byte, 64<<10)
	written := 0
	const writtenBytesMax = 64 << 20
	for written < writtenBytesMax {
		for i := range chunk {
			chunk[i] = byte((written + i) % 251)
		}
		d.conn.SetWriteDeadline(time.Now().Add(200 * time.Millisecond))
		n, err := d.conn.Write(chunk)
		written += n
		if err != nil {
			break
		}
	}
	if written >= writtenBytesMax {
		t.Fatalf("the runtime wrote %d bytes to a client that reads nothing: no back-pressure", written)
	}
	t.Logf("stalled after %d bytes", written)
	got := readFull(t, c, written)
	for i, b := range got {
		if b != byte(i%251) {
			t.Fatalf("byte %d is %d, want %d", i, b, byte(i%251))
		}
	}

	// Now a client that never reads again: the session ends after WriteTimeout.
	d.conn.SetWriteDeadline(time.Time{})
	ended := make(chan error, 1)
	go func() {
		for {
			if _, err := d.conn.Write(chunk); err != nil {
				ended <- err
				return
			}
		}
	}()
	select {
	case err := <-ended:
		t.Logf("the runtime's end: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("a client that never reads still holds its session after 10 s")
	}
}

// TestHandshakeFloodCutsTheOldest: more connections that never finish a handshake
// than HandshakesInFlightMax cannot lock a client out: each newer connection cuts the
// oldest handshake, long before its deadline.
func TestHandshakeFloodCutsTheOldest(t *testing.T) {
	const slots, silentCount = 4, 10
	term, clientCfg, sessions := startTerminator(t, Config{HandshakeTimeout: time.Minute, HandshakesInFlightMax: slots})
	silent := make([]net.Conn, silentCount)
	for i := range silent {
		c, err := net.Dial("tcp", term.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		silent[i] = c
	}
	c := dialTLS(t, term.Addr().String(), clientCfg)
	d := nextSession(t, sessions)
	c.Write([]byte("in"))
	if got := readFull(t, d.conn, 2); string(got) != "in" {
		t.Fatalf("got %q", got)
	}
	// Accepted in order, the first silentCount+1-slots were cut, oldest first.
	for _, s := range silent[:silentCount+1-slots] {
		expectEOF(t, s)
	}
	if st := term.Stats(); st.HandshakesCut != silentCount+1-slots || st.HandshakesTimedOut != 0 {
		t.Fatalf("stats %+v, want %d cut and none timed out", st, silentCount+1-slots)
	}
}

// waitForStats polls the terminator's counters for up to 5 s: for a count no event
// announces to the test.
func waitForStats(t *testing.T, what string, term *Terminator, done func(Stats) bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !done(term.Stats()) {
		if time.Now().After(deadline) {
			t.Fatalf("no %s after 5 s: %+v", what, term.Stats())
		}
		time.Sleep(time.Millisecond)
	}
}

// TestTLS12: a client limited to TLS 1.2 is served too (crypto/tls's defaults).
func TestTLS12(t *testing.T) {
	term, clientCfg, sessions := startTerminator(t, Config{})
	cfg := clientCfg.Clone()
	cfg.MaxVersion = tls.VersionTLS12
	c := dialTLS(t, term.Addr().String(), cfg)
	if v := c.ConnectionState().Version; v != tls.VersionTLS12 {
		t.Fatalf("version %x, want TLS 1.2", v)
	}
	d := nextSession(t, sessions)
	c.Write([]byte("1.2"))
	if got := readFull(t, d.conn, 3); string(got) != "1.2" {
		t.Fatalf("got %q", got)
	}
}
