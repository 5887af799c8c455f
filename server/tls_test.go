package server

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
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/config"
	"github.com/iggy-shard/iggy-shard/tlsterm/tlstest"
	"github.com/iggy-shard/iggy-shard/wire"
)

// tlsTestConfig is testServer's configuration with TLS on and the PEM pair of leaf.
func tlsTestConfig(t *testing.T, certFile, keyFile string, selfSigned bool) setup {
	cfg := defaultSetup()
	cfg.TCPAddress = "127.0.0.1:0"
	cfg.SystemPath = t.TempDir()
	cfg.ShardCount = 2
	cfg.PinCPUs = false
	cfg.TLS = config.TLS{Enabled: true, SelfSigned: selfSigned, CertFile: certFile, KeyFile: keyFile}
	return cfg
}

// tlsServerWithCA starts a TLS server with a certificate of a fresh CA, and returns
// the CA's file.
func tlsServerWithCA(t *testing.T) (*Server, string) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "iggy test CA")
	certFile, keyFile := ca.IssueValid(t).WriteFiles(t, dir)
	return startTestServer(t, tlsTestConfig(t, certFile, keyFile, false)), ca.WriteCAFile(t, dir)
}

func dialTLSAs(t *testing.T, s *Server, opts client.TLSOptions, credentials ...string) (*client.Client, error) {
	t.Helper()
	cfg, err := client.NewTLSConfig(opts)
	if err != nil {
		t.Fatal(err)
	}
	dialOpts := []client.Option{client.WithTLS(cfg), client.WithRequestTimeout(20 * time.Second)}
	if len(credentials) == 2 {
		dialOpts = append(dialOpts, client.WithCredentials(credentials[0], credentials[1]))
	}
	c, err := client.Dial(testContext(t), s.Addr().String(), dialOpts...)
	if err == nil {
		t.Cleanup(func() { c.Close() })
	}
	return c, err
}

// TestTLSEveryCommandFamily: over TLS, with the server's certificate from a CA the
// client trusts (by file, verified for localhost): login, metadata, send, poll,
// offsets, consumer groups; GET_ME reports the client's TCP address, not the bridge's.
func TestTLSEveryCommandFamily(t *testing.T) {
	s, caFile := tlsServerWithCA(t)
	c, err := dialTLSAs(t, s, client.TLSOptions{CAFile: caFile, ServerName: "localhost"}, "iggy", "iggy")
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	ctx := testContext(t)
	mustOK(t, "Ping", c.Ping(ctx))
	st, err := c.CreateStream(ctx, "tls-stream")
	mustOK(t, "CreateStream", err)
	topic, err := c.CreateTopic(ctx, client.ID(st.ID), "tls-topic", 2, nil)
	mustOK(t, "CreateTopic", err)
	streams, err := c.GetStreams(ctx)
	mustOK(t, "GetStreams", err)
	if len(streams) != 1 || string(streams[0].Name) != "tls-stream" {
		t.Fatalf("streams %+v", streams)
	}
	big := bytes.Repeat([]byte("x"), 100_000) // many TLS records per frame
	for i := range 3 {
		msgs := messages(10, "tls")
		msgs[0].Payload = big
		conf, err := c.SendMessages(ctx, client.ID(st.ID), client.ID(topic.ID), wire.Partitioning{Kind: wire.PartitioningPartitionID, PartitionID: 0}, msgs)
		mustOK(t, "SendMessages", err)
		if conf.At(0).BaseOffset != uint64(10*i) {
			t.Fatalf("confirmation %+v", conf.At(0))
		}
	}
	polled, err := c.PollMessages(ctx, &wire.PollMessages{Consumer: client.SingleConsumer(client.ID(1)), StreamID: client.ID(st.ID),
		TopicID: client.ID(topic.ID), Partition: wire.SomePartition(0), Strategy: wire.PollingStrategy{Kind: wire.PollingOffset}, Count: 30})
	mustOK(t, "PollMessages", err)
	n := 0
	for it := polled.Messages(); it.Next(); n++ {
		m := it.Message()
		if m.Offset != uint64(n) || (n%10 == 0) != bytes.Equal(m.Payload(), big) {
			t.Fatalf("message %d: offset %d, %d payload bytes", n, m.Offset, len(m.Payload()))
		}
	}
	if n != 30 {
		t.Fatalf("polled %d messages, want 30", n)
	}
	mustOK(t, "StoreConsumerOffset", c.StoreConsumerOffset(ctx, &wire.StoreConsumerOffset{Consumer: client.SingleConsumer(client.ID(1)),
		StreamID: client.ID(st.ID), TopicID: client.ID(topic.ID), Partition: wire.SomePartition(0), Offset: 29, Ack: wire.AckQuorum}))
	off, ok, err := c.GetConsumerOffset(ctx, &wire.GetConsumerOffset{Consumer: client.SingleConsumer(client.ID(1)),
		StreamID: client.ID(st.ID), TopicID: client.ID(topic.ID), Partition: wire.SomePartition(0)})
	mustOK(t, "GetConsumerOffset", err)
	if !ok || off.StoredOffset != 29 {
		t.Fatalf("offset %+v %v", off, ok)
	}
	g, err := c.CreateConsumerGroup(ctx, client.ID(st.ID), client.ID(topic.ID), "tls-group")
	mustOK(t, "CreateConsumerGroup", err)
	mustOK(t, "JoinConsumerGroup", c.JoinConsumerGroup(ctx, client.ID(st.ID), client.ID(topic.ID), client.ID(g.ID)))
	details, err := c.GetConsumerGroup(ctx, client.ID(st.ID), client.ID(topic.ID), client.ID(g.ID))
	mustOK(t, "GetConsumerGroup", err)
	if details.MembersCount != 1 {
		t.Fatalf("group %+v, want one member", details)
	}
	me, err := c.GetMe(ctx)
	mustOK(t, "GetMe", err)
	peer, err := netip.ParseAddrPort(string(me.Address))
	if err != nil || peer.Addr() != netip.MustParseAddr("127.0.0.1") || peer.Port() == 0 || peer.Port() == uint16(s.Addr().Port) {
		t.Fatalf("GET_ME address %q, want the client's 127.0.0.1 port", me.Address)
	}
	if me.ConsumerGroupsCount != 1 {
		t.Fatalf("GET_ME %+v, want one group", me)
	}
	mustOK(t, "LeaveConsumerGroup", c.LeaveConsumerGroup(ctx, client.ID(st.ID), client.ID(topic.ID), client.ID(g.ID)))
	mustOK(t, "DeleteStream", c.DeleteStream(ctx, client.ID(st.ID)))
}

// TestTLSRefusesWrongTrustAndPlaintext: a client that trusts another CA fails with a
// certificate error; a plaintext client is closed after the failed handshake (and
// counted); neither disturbs a good client.
func TestTLSRefusesWrongTrustAndPlaintext(t *testing.T) {
	s, caFile := tlsServerWithCA(t)
	good, err := dialTLSAs(t, s, client.TLSOptions{CAFile: caFile}, "iggy", "iggy")
	if err != nil {
		t.Fatal(err)
	}
	other := tlstest.NewCA(t, "another CA")
	_, err = dialTLSAs(t, s, client.TLSOptions{RootCAs: other.Pool})
	var verr *tls.CertificateVerificationError
	if !errors.Is(err, wire.ErrInvalidTlsCertificate) || !errors.As(err, &verr) || !strings.Contains(err.Error(), "unknown authority") {
		t.Fatalf("dial trusting another CA: %v", err)
	}
	_, err = client.Dial(testContext(t), s.Addr().String(), client.WithCredentials("iggy", "iggy"), client.WithRequestTimeout(5*time.Second))
	if err == nil {
		t.Fatal("a plaintext client logged in on the TLS port")
	}
	// The refused clients may return before the server has counted their failures.
	waitForCondition(t, "two failed handshakes counted", func() bool { return s.TLSStats().HandshakesFailed == 2 })
	if st := s.TLSStats(); st.Handshakes != 1 {
		t.Fatalf("TLS stats %+v, want the good session and two failures", st)
	}
	mustOK(t, "Ping", good.Ping(testContext(t)))
}

// TestTLSStartRefusesBadFiles: with self_signed off, an expired certificate, a
// missing file or a key of another certificate stops the start with a message naming
// the setting, the file and what is wrong.
func TestTLSStartRefusesBadFiles(t *testing.T) {
	ca := tlstest.NewCA(t, "CA")
	expiredCert, expiredKey := ca.Issue(t, time.Now().Add(-48*time.Hour), time.Now().Add(-time.Hour)).WriteFiles(t, t.TempDir())
	goodCert, _ := ca.IssueValid(t).WriteFiles(t, t.TempDir())
	_, otherKey := ca.IssueValid(t).WriteFiles(t, t.TempDir())
	missing := filepath.Join(t.TempDir(), "iggy_cert.pem")
	cases := []struct {
		name, cert, key, setting, reason string
	}{
		{"expired", expiredCert, expiredKey, "tcp.tls.cert_file", "expired on"},
		{"missing", missing, expiredKey, "tcp.tls.cert_file", "does not exist"},
		{"mismatched key", goodCert, otherKey, "tcp.tls.key_file", "does not match"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := start(tlsTestConfig(t, c.cert, c.key, false), slog.New(slog.DiscardHandler))
			var se *config.SettingError
			if !errors.As(err, &se) || se.Setting != c.setting || !strings.Contains(se.Reason, c.reason) || !strings.Contains(err.Error(), filepath.Base(se.Value)) {
				t.Fatalf("Start: %v, want %s naming the file with %q", err, c.setting, c.reason)
			}
		})
	}
}

// TestTLSSelfSigned: with self_signed and no files the server makes its own loopback
// certificate (a client that skips verification works, one that verifies does not
// trust it); with a PEM pair on disk it loads the pair instead.
func TestTLSSelfSigned(t *testing.T) {
	dir := t.TempDir()
	s := startTestServer(t, tlsTestConfig(t, filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"), true))
	if _, err := os.Stat(filepath.Join(dir, "cert.pem")); err == nil {
		t.Fatal("the ephemeral certificate was written to disk")
	}
	c, err := dialTLSAs(t, s, client.TLSOptions{InsecureSkipVerify: true}, "iggy", "iggy")
	if err != nil {
		t.Fatal(err)
	}
	mustOK(t, "Ping", c.Ping(testContext(t)))
	ca := tlstest.NewCA(t, "CA")
	if _, err := dialTLSAs(t, s, client.TLSOptions{RootCAs: ca.Pool}); !errors.Is(err, wire.ErrInvalidTlsCertificate) {
		t.Fatalf("verifying client against the ephemeral certificate: %v", err)
	}

	certFile, keyFile := ca.IssueValid(t).WriteFiles(t, t.TempDir())
	s2 := startTestServer(t, tlsTestConfig(t, certFile, keyFile, true))
	c2, err := dialTLSAs(t, s2, client.TLSOptions{RootCAs: ca.Pool, ServerName: "localhost"}, "iggy", "iggy")
	if err != nil {
		t.Fatalf("the PEM pair on disk was not loaded: %v", err)
	}
	mustOK(t, "Ping", c2.Ping(testContext(t)))
}

// clientHello records the first flight a TLS client sends to addr's server.
func clientHello(t *testing.T) []byte {
	t.Helper()
	a, b := net.Pipe()
	go func() {
		tls.Client(a, &tls.Config{ServerName: "localhost"}).Handshake()
		a.Close()
	}()
	b.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 16<<10)
	n, err := b.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
	return buf[:n]
}

// TestTLSSlowAndBrokenHandshakes: connections that send a ClientHello one byte a
// second, or garbage after a ClientHello, do not disturb other clients, which log
// in, send and poll meanwhile; the broken one is closed.
func TestTLSSlowAndBrokenHandshakes(t *testing.T) {
	s, caFile := tlsServerWithCA(t)
	hello := clientHello(t)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	defer func() { close(stop); wg.Wait() }()
	for range 8 {
		conn, err := net.Dial("tcp", s.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		wg.Add(1)
		go func() { // one byte a second, until the test ends
			defer wg.Done()
			tick := time.NewTicker(time.Second)
			defer tick.Stop()
			for _, b := range hello {
				if _, err := conn.Write([]byte{b}); err != nil {
					return
				}
				select {
				case <-tick.C:
				case <-stop:
					return
				}
			}
		}()
	}
	broken, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer broken.Close()
	broken.Write(append(append([]byte{}, hello...), bytes.Repeat([]byte{0xAB}, 4096)...))

	var clients sync.WaitGroup
	errs := make(chan error, 4)
	for i := range 4 {
		clients.Add(1)
		go func() {
			defer clients.Done()
			cfg, _ := client.NewTLSConfig(client.TLSOptions{CAFile: caFile})
			c, err := client.Dial(testContext(t), s.Addr().String(), client.WithTLS(cfg), client.WithCredentials("iggy", "iggy"))
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			for range 50 {
				if err := c.Ping(testContext(t)); err != nil {
					errs <- err
					return
				}
			}
			if _, err := c.CreateStream(testContext(t), "s"+string(rune('a'+i))); err != nil {
				errs <- err
			}
		}()
	}
	clients.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("a client beside the slow handshakes: %v", err)
	}
	broken.SetReadDeadline(time.Now().Add(5 * time.Second))
	io.Copy(io.Discard, broken) // an alert, then the close; a timeout leaves an error
	var ne net.Error
	if _, err := broken.Read(make([]byte, 1)); err == nil || (errors.As(err, &ne) && ne.Timeout()) {
		t.Fatalf("the connection with garbage after its ClientHello is still open: %v", err)
	}
	if st := s.TLSStats(); st.HandshakesFailed != 1 || st.Handshakes != 4 {
		t.Fatalf("TLS stats %+v", st)
	}
}

// TestTLSClientOnPlaintextPort: a TLS client against a plaintext server gets the
// malformed-frame eviction at once (its ClientHello is no frame), which its TLS layer
// reports as a failed handshake; an SDK retrying in a loop writes no info line.
func TestTLSClientOnPlaintextPort(t *testing.T) {
	var logs lockedBuffer
	cfg := defaultSetup()
	cfg.TCPAddress, cfg.SystemPath, cfg.ShardCount, cfg.PinCPUs = "127.0.0.1:0", t.TempDir(), 2, false
	s, err := start(cfg, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopServer(t, s) })
	for range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		tlsCfg, _ := client.NewTLSConfig(client.TLSOptions{InsecureSkipVerify: true})
		_, err := client.Dial(ctx, s.Addr().String(), client.WithTLS(tlsCfg))
		cancel()
		if err == nil || errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("TLS dial to a plaintext port: %v, want a prompt handshake failure", err)
		}
	}
	if logged := logs.String(); strings.Contains(logged, "connection evicted") || strings.Contains(logged, "connection closed") {
		t.Fatalf("TLS attempts on the plaintext port logged at info:\n%s", logged)
	}
	mustOK(t, "Ping", dialRoot(t, s).Ping(testContext(t)))
}

// TestTLSFiguresInMetrics: the TLS port's handshakes and sessions are in /metrics.
func TestTLSFiguresInMetrics(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "iggy test CA")
	certFile, keyFile := ca.IssueValid(t).WriteFiles(t, dir)
	cfg := tlsTestConfig(t, certFile, keyFile, false)
	cfg.MetricsAddress = "127.0.0.1:0"
	s := startTestServer(t, cfg)
	if _, err := dialTLSAs(t, s, client.TLSOptions{CAFile: ca.WriteCAFile(t, dir), ServerName: "localhost"}, "iggy", "iggy"); err != nil {
		t.Fatal(err)
	}
	_, text := httpGet(t, "http://"+s.MetricsAddr().String()+"/metrics")
	if got := metricSum(t, text, "iggy_tls_handshakes_total", `outcome="ok"`); got != 1 {
		t.Fatalf("%v handshakes, want 1", got)
	}
	if got := metricSum(t, text, "iggy_tls_sessions_open"); got != 1 {
		t.Fatalf("%v sessions open, want 1", got)
	}
}
