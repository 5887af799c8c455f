package tlsterm

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/tlsterm/tlstest"
)

// adopted is one session a fakeRuntime was given: the runtime's end as a net.Conn.
type adopted struct {
	conn       net.Conn
	remote     netip.AddrPort
	dialedPeer int
	exporter   [ReplicaExporterBytes]byte
}

// fakeRuntime stands in for shard.Runtime: it takes every session and reports each
// adoption and each ended dial on a channel.
type fakeRuntime struct {
	t         *testing.T
	adoptions chan adopted
	ended     chan uint8
}

func newFakeRuntime(t *testing.T) *fakeRuntime {
	return &fakeRuntime{t: t, adoptions: make(chan adopted, 8), ended: make(chan uint8, 8)}
}

func (f *fakeRuntime) AdoptReplica(fd int, remote netip.AddrPort, dialedPeer int, exporter *[ReplicaExporterBytes]byte) error {
	file := os.NewFile(uintptr(fd), "runtime end")
	c, err := net.FileConn(file)
	file.Close()
	if err != nil {
		return err
	}
	f.t.Cleanup(func() { c.Close() })
	f.adoptions <- adopted{conn: c, remote: remote, dialedPeer: dialedPeer, exporter: *exporter}
	return nil
}

func (f *fakeRuntime) EndReplicaDial(peer uint8) { f.ended <- peer }

func (f *fakeRuntime) nextAdoption(t *testing.T) adopted {
	t.Helper()
	select {
	case a := <-f.adoptions:
		return a
	case <-time.After(10 * time.Second):
		t.Fatal("no session adopted")
		return adopted{}
	}
}

func (f *fakeRuntime) nextEnded(t *testing.T) uint8 {
	t.Helper()
	select {
	case p := <-f.ended:
		return p
	case <-time.After(10 * time.Second):
		t.Fatal("no dial ended")
		return 0
	}
}

func testLogger() *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// listenReplica makes a Replica of CA mode on a random loopback port, presenting
// leaf and trusting pool; the test waits for it at cleanup.
func listenReplica(t *testing.T, leaf tls.Certificate, cfg ReplicaConfig) *Replica {
	t.Helper()
	cfg.Certificate = leaf
	if cfg.PeerNames == nil {
		cfg.PeerNames = []string{"127.0.0.1", "127.0.0.1", "127.0.0.1"}
	}
	cfg.ExporterLabel = "iggy replica psk binding"
	cfg.Logger = testLogger()
	r, err := ListenReplica("127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := r.Wait(ctx); err != nil {
			t.Errorf("Wait: %v", err)
		}
	})
	return r
}

func addrPort(a *net.TCPAddr) netip.AddrPort { return a.AddrPort() }

func TestReplicaDialAndAcceptBindTheSameExporter(t *testing.T) {
	ca := tlstest.NewCA(t, "cluster CA")
	dialer := listenReplica(t, ca.IssueValid(t).TLS, ReplicaConfig{RootCAs: ca.Pool})
	acceptor := listenReplica(t, ca.IssueValid(t).TLS, ReplicaConfig{RootCAs: ca.Pool})
	dialerRT, acceptorRT := newFakeRuntime(t), newFakeRuntime(t)
	// The runtime dials as soon as its shards run, before Start: the dial waits.
	dialer.Dial(1, addrPort(acceptor.Addr()))
	if err := acceptor.Start(acceptorRT); err != nil {
		t.Fatal(err)
	}
	if err := dialer.Start(dialerRT); err != nil {
		t.Fatal(err)
	}
	out, in := dialerRT.nextAdoption(t), acceptorRT.nextAdoption(t)
	if out.dialedPeer != 1 || out.remote != addrPort(acceptor.Addr()) {
		t.Fatalf("dialed session adopted as peer %d from %v, want 1 from %v", out.dialedPeer, out.remote, acceptor.Addr())
	}
	if in.dialedPeer != -1 || in.remote.Addr() != netip.MustParseAddr("127.0.0.1") {
		t.Fatalf("accepted session adopted as peer %d from %v, want -1 from 127.0.0.1", in.dialedPeer, in.remote)
	}
	if out.exporter != in.exporter || out.exporter == ([ReplicaExporterBytes]byte{}) {
		t.Fatalf("exporters differ or are zero: dialer %x, acceptor %x", out.exporter, in.exporter)
	}
	if _, err := out.conn.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if got := readFull(t, in.conn, 5); string(got) != "hello" {
		t.Fatalf("read %q", got)
	}
	// A second session gets an exporter of its own.
	dialer.Dial(1, addrPort(acceptor.Addr()))
	out2, in2 := dialerRT.nextAdoption(t), acceptorRT.nextAdoption(t)
	if out2.exporter != in2.exporter || out2.exporter == out.exporter {
		t.Fatalf("second session's exporters: dialer %x, acceptor %x, first %x", out2.exporter, in2.exporter, out.exporter)
	}
	if st := dialer.Stats(); st.DialsStarted != 2 || st.DialsFailed != 0 || st.DialedOpen != 2 {
		t.Fatalf("dialer stats %+v", st)
	}
}

func TestReplicaDialRefusesCertificatesItCannotVerify(t *testing.T) {
	ca, other := tlstest.NewCA(t, "cluster CA"), tlstest.NewCA(t, "another CA")
	cases := []struct {
		name   string
		leaf   tls.Certificate
		names  []string
		wanted string
	}{
		{"another CA", other.IssueValid(t).TLS, nil, "unknown authority"},
		{"not the roster ip", ca.IssueValid(t).TLS, []string{"127.0.0.1", "127.0.0.2"}, "not 127.0.0.2"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dialer := listenReplica(t, ca.IssueValid(t).TLS, ReplicaConfig{RootCAs: ca.Pool, PeerNames: c.names})
			acceptor := listenReplica(t, c.leaf, ReplicaConfig{RootCAs: ca.Pool})
			dialerRT, acceptorRT := newFakeRuntime(t), newFakeRuntime(t)
			if err := acceptor.Start(acceptorRT); err != nil {
				t.Fatal(err)
			}
			if err := dialer.Start(dialerRT); err != nil {
				t.Fatal(err)
			}
			var failure error
			func() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_, _, failure = dialer.dialTLS(ctx, 1, addrPort(acceptor.Addr()))
			}()
			if failure == nil || !strings.Contains(failure.Error(), c.wanted) {
				t.Fatalf("dial error %v, want one saying %q", failure, c.wanted)
			}
			dialer.Dial(1, addrPort(acceptor.Addr()))
			if p := dialerRT.nextEnded(t); p != 1 {
				t.Fatalf("EndReplicaDial(%d), want 1", p)
			}
			if st := dialer.Stats(); st.DialsFailed != 1 {
				t.Fatalf("dialer stats %+v", st)
			}
			select {
			case a := <-acceptorRT.adoptions:
				t.Fatalf("the acceptor adopted a session from %v", a.remote)
			default:
			}
		})
	}
}

func TestReplicaAcceptorRefusesClientsOfTheClientPlane(t *testing.T) {
	ca := tlstest.NewCA(t, "cluster CA")
	acceptor := listenReplica(t, ca.IssueValid(t).TLS, ReplicaConfig{RootCAs: ca.Pool})
	rt := newFakeRuntime(t)
	if err := acceptor.Start(rt); err != nil {
		t.Fatal(err)
	}
	clients := []struct {
		name string
		cfg  *tls.Config
	}{
		{"no ALPN", &tls.Config{RootCAs: ca.Pool, ServerName: "127.0.0.1"}},
		{"TLS 1.2", &tls.Config{RootCAs: ca.Pool, ServerName: "127.0.0.1", MaxVersion: tls.VersionTLS12, NextProtos: []string{ReplicaALPN}}},
		{"another protocol", &tls.Config{RootCAs: ca.Pool, ServerName: "127.0.0.1", NextProtos: []string{"iggy"}}},
	}
	for i, c := range clients {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", acceptor.Addr().String(), c.cfg)
		if err == nil {
			// The handshake completed on the client's side (no ALPN offered): the
			// terminator refuses the session and closes it.
			conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := conn.Read(make([]byte, 1)); err == nil {
				t.Fatalf("%s: the session stayed open", c.name)
			}
			conn.Close()
		}
		waitForStats(t, c.name, acceptor.term, func(st Stats) bool { return st.HandshakesFailed == uint64(i+1) })
	}
	select {
	case a := <-rt.adoptions:
		t.Fatalf("a session from %v was adopted", a.remote)
	default:
	}
}

func TestReplicaDialFailureEndsTheDial(t *testing.T) {
	ca := tlstest.NewCA(t, "cluster CA")
	dialer := listenReplica(t, ca.IssueValid(t).TLS, ReplicaConfig{RootCAs: ca.Pool})
	rt := newFakeRuntime(t)
	if err := dialer.Start(rt); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := addrPort(ln.Addr().(*net.TCPAddr))
	ln.Close() // nothing listens there now: the connect is refused
	dialer.Dial(2, closed)
	if p := rt.nextEnded(t); p != 2 {
		t.Fatalf("EndReplicaDial(%d), want 2", p)
	}
}

// TestReplicaDialBeforeStartEndsTheDial: a dial the runtime began before Start, whose
// time ran out before Start, is still reported ended once the runtime is known.
func TestReplicaDialBeforeStartEndsTheDial(t *testing.T) {
	ca := tlstest.NewCA(t, "cluster CA")
	dialer := listenReplica(t, ca.IssueValid(t).TLS, ReplicaConfig{RootCAs: ca.Pool, DialTimeout: time.Nanosecond})
	dialer.Dial(1, addrPort(dialer.Addr())) // out of time at once
	rt := newFakeRuntime(t)
	if err := dialer.Start(rt); err != nil {
		t.Fatal(err)
	}
	if p := rt.nextEnded(t); p != 1 {
		t.Fatalf("EndReplicaDial(%d), want 1", p)
	}
}

func TestReplicaCloseCutsDialsInFlight(t *testing.T) {
	ca := tlstest.NewCA(t, "cluster CA")
	dialer := listenReplica(t, ca.IssueValid(t).TLS, ReplicaConfig{RootCAs: ca.Pool, DialTimeout: time.Hour})
	rt := newFakeRuntime(t)
	if err := dialer.Start(rt); err != nil {
		t.Fatal(err)
	}
	// A peer that accepts and never answers the ClientHello: the dial waits.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		if c, err := silent.Accept(); err == nil {
			accepted <- c
		}
	}()
	dialer.Dial(1, addrPort(silent.Addr().(*net.TCPAddr)))
	var peer net.Conn
	select {
	case peer = <-accepted:
		defer peer.Close()
	case <-time.After(10 * time.Second):
		t.Fatal("the dial did not connect")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := dialer.Wait(ctx); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if st := dialer.Stats(); st.DialsStarted != 1 || st.DialsFailed != 1 {
		t.Fatalf("stats %+v after Wait", st)
	}
	dialer.Dial(1, addrPort(silent.Addr().(*net.TCPAddr))) // after Close: ignored
	if st := dialer.Stats(); st.DialsStarted != 1 {
		t.Fatalf("a dial started after Close: %+v", st)
	}
}
