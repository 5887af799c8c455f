package server

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/iggy-shard/iggy-shard/config"
	"github.com/iggy-shard/iggy-shard/httpapi"
	"github.com/iggy-shard/iggy-shard/metaplane"
	"github.com/iggy-shard/iggy-shard/wire"
)

// A busy [http] address stops the start with an error naming http.address.
func TestHTTPAddressBusyStopsTheStart(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	cfg := testConfig(t.TempDir(), 1)
	cfg.HTTP.Address = busy.Addr().String()
	s, err := start(cfg, nil)
	var se *config.SettingError
	if err == nil {
		s.Shutdown(context.Background())
		t.Fatal("the server started on a busy HTTP address")
	}
	if !errors.As(err, &se) || se.Setting != "http.address" || se.Value != busy.Addr().String() {
		t.Fatalf("start on a busy HTTP address: %v", err)
	}
}

// [http.tls] loads its certificate as [tcp.tls] does, and names its own keys.
func TestHTTPTLSMissingCertificateStopsTheStart(t *testing.T) {
	cfg := testConfig(t.TempDir(), 1)
	cfg.HTTP.TLS = config.TLS{Enabled: true, CertFile: filepath.Join(t.TempDir(), "absent.pem"), KeyFile: "absent-key.pem"}
	_, err := start(cfg, nil)
	var se *config.SettingError
	if !errors.As(err, &se) || se.Setting != "http.tls.cert_file" || !strings.Contains(se.Value, "absent.pem") {
		t.Fatalf("a missing certificate without self_signed: %v", err)
	}
}

// The HTTP API is served with the server, advertised in GET_CLUSTER_METADATA
// at its bound port, and stopped with it; turned off, nothing listens and the
// port advertised is 0.
func TestHTTPServedWithTheServer(t *testing.T) {
	s := testServer(t, t.TempDir(), 2)
	addr := s.HTTPAddr()
	resp, err := http.Get("http://" + addr.String() + "/ping")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET /ping: %d", resp.StatusCode)
	}
	m, err := dialRoot(t, s).GetClusterMetadata(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	if n := m.Nodes[0]; int(n.HTTPPort) != addr.Port || n.QUICPort|n.WebSocketPort != 0 {
		t.Fatalf("cluster metadata: %+v, want http %d", n, addr.Port)
	}
	if err := s.Shutdown(testContext(t)); err != nil {
		t.Fatal(err)
	}
	if c, err := net.DialTimeout("tcp", addr.String(), time.Second); err == nil {
		c.Close()
		t.Fatal("the HTTP API still listens after Shutdown")
	}

	cfg := testConfig(t.TempDir(), 1)
	cfg.HTTP.Enabled = false
	off := startTestServer(t, cfg)
	if off.HTTPAddr() != nil {
		t.Fatal("HTTP served while disabled")
	}
	m, err = dialRoot(t, off).GetClusterMetadata(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	if m.Nodes[0].HTTPPort != 0 {
		t.Fatalf("http port %d advertised while disabled", m.Nodes[0].HTTPPort)
	}
}

// A logout revokes its bearer: through the replicated metadata when bearers
// verify beyond this process (a configured key), in the node's own table when
// the key is this process's alone. Either way the token is refused at once.
func TestHTTPLogoutRevokes(t *testing.T) {
	for _, tc := range []struct {
		name       string
		secret     string
		replicated bool
	}{
		{"random key", "", false},
		{"configured key", "a-secret-of-the-operators-choosing", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t.TempDir(), 2)
			cfg.HTTP.JWT.EncodingSecret, cfg.HTTP.JWT.DecodingSecret = tc.secret, tc.secret
			s := startTestServer(t, cfg)
			h := newHTTPSide(t, s)
			if code := h.login("iggy", "iggy"); code != 0 {
				t.Fatal(code)
			}
			if code := h.call("GET", "/streams", nil, nil); code != 0 {
				t.Fatalf("GET /streams before the logout: %d", code)
			}
			if code := h.call("DELETE", "/users/logout", nil, nil); code != 0 {
				t.Fatalf("logout: %d", code)
			}
			if code := h.call("GET", "/streams", nil, nil); code != uint32(wire.ErrUnauthenticated) {
				t.Fatalf("GET /streams after the logout: %d, want 40", code)
			}
			if n := s.meta.RevokedTokens().Len(); (n == 1) != tc.replicated {
				t.Fatalf("%d revocations replicated, want replicated %v", n, tc.replicated)
			}
			if code := h.login("iggy", "iggy"); code != 0 || h.call("GET", "/streams", nil, nil) != 0 {
				t.Fatal("a new login after the logout is refused")
			}
		})
	}
}

// revocationError maps the plane's answers as httpapi.Backend.RevokeToken says.
func TestRevocationError(t *testing.T) {
	for _, tc := range []struct {
		in   error
		want error
	}{
		{nil, nil},
		{metaplane.ErrRevokedTokensFull, httpapi.ErrRevokedTokensFull},
		{metaplane.ErrNotPrimary, wire.ErrTransientNotAccepted},
		{metaplane.ErrWritesBusy, wire.ErrTransientNotAccepted},
		{wire.ErrInvalidCommand, wire.ErrInvalidCommand},
		{errors.New("the journal failed"), wire.ErrTransientNotCommitted},
		{wire.ErrResourceNotFound, wire.ErrTransientNotCommitted},
	} {
		if got := revocationError(tc.in); !errors.Is(got, tc.want) && got != tc.want {
			t.Errorf("revocationError(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// Bad input over HTTP gets the reference's refusal and leaves the server as it
// was: malformed JSON, wrong JSON types, bodies over max_request_size, unknown
// routes and methods, and bearers that are garbage, signed with another key,
// expired or not yet valid.
func TestHTTPBadInputLeavesTheServerUnaffected(t *testing.T) {
	const secret = "the-cluster-operators-jwt-secret"
	cfg := testConfig(t.TempDir(), 2)
	cfg.HTTP.JWT.EncodingSecret, cfg.HTTP.JWT.DecodingSecret = secret, secret
	s := startTestServer(t, cfg)
	h := newHTTPSide(t, s)
	if code := h.login("iggy", "iggy"); code != 0 {
		t.Fatal(code)
	}
	if code := h.call("POST", "/streams", map[string]string{"name": "kept"}, nil); code != 0 {
		t.Fatal(code)
	}
	token := func(key string, exp, nbf time.Time) string {
		claims := jwt.MapClaims{"jti": "forged", "iss": "iggy.apache.org", "aud": "iggy.apache.org", "sub": "0",
			"iat": time.Now().Unix(), "exp": exp.Unix(), "nbf": nbf.Unix()}
		signed, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte(key))
		if err != nil {
			t.Fatal(err)
		}
		return signed
	}
	now := time.Now()
	huge := `{"name":"` + strings.Repeat("x", 3<<20) + `"}`
	for _, tc := range []struct {
		name, method, path string
		body               any
		bearer             string // "" keeps the root's
		want               uint32
	}{
		{"malformed JSON", "POST", "/streams", `{"name": "a"`, "", httpStatusBase + 400},
		{"not JSON at all", "POST", "/streams", "\x00\xff\xfe", "", httpStatusBase + 400},
		{"a number for a string", "POST", "/streams", `{"name": 7}`, "", httpStatusBase + 422},
		{"a string for a number", "POST", "/streams/kept/topics",
			`{"name":"t","partitions_count":"3","compression_algorithm":"none","message_expiry":0,"max_topic_size":0}`, "", httpStatusBase + 422},
		{"a negative count", "POST", "/streams/kept/topics/t/partitions", `{"partitions_count":-1}`, "", httpStatusBase + 422},
		{"a body over max_request_size", "POST", "/streams", huge, "", httpStatusBase + 413},
		{"an unknown route", "GET", "/no/such/route", nil, "", httpStatusBase + 404},
		{"a wrong method", "PATCH", "/streams", nil, "", httpStatusBase + 405},
		{"garbage bearer", "GET", "/streams", nil, "not-a-token", 40},
		{"another key's bearer", "GET", "/streams", nil, token("another-key-altogether-0123456789", now.Add(time.Hour), now), 40},
		{"an expired bearer", "GET", "/streams", nil, token(secret, now.Add(-time.Hour), now.Add(-2*time.Hour)), 40},
		{"a bearer not yet valid", "GET", "/streams", nil, token(secret, now.Add(2*time.Hour), now.Add(time.Hour)), 40},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := *h
			c.t = t
			if tc.bearer != "" {
				c.token = tc.bearer
			}
			if got := c.call(tc.method, tc.path, tc.body, nil); got != tc.want {
				t.Fatalf("%s %s: %d, want %d", tc.method, tc.path, got, tc.want)
			}
		})
	}
	// The server serves on, over both transports, with the state as it was.
	var streams []map[string]any
	if code := h.call("GET", "/streams", nil, &streams); code != 0 || len(streams) != 1 || streams[0]["name"] != "kept" {
		t.Fatalf("GET /streams after the bad input: %d %v", code, streams)
	}
	if code := h.call("POST", "/streams", map[string]string{"name": "after"}, nil); code != 0 {
		t.Fatalf("create after the bad input: %d", code)
	}
	root := dialRoot(t, s)
	got, err := root.GetStreams(testContext(t))
	if err != nil || len(got) != 2 {
		t.Fatalf("GET_STREAMS over TCP after the bad input: %v %v", got, err)
	}
	if err := root.Ping(testContext(t)); err != nil {
		t.Fatal(err)
	}
}

// lockedLog is a log's text, written from any goroutine.
type lockedLog struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// A transport the configuration enables but the server does not serve gets a
// WARN line at start naming it (config.Config.Warnings).
func TestStartWarnsOfUnservedTransports(t *testing.T) {
	cfg := testConfig(t.TempDir(), 1)
	cfg.QUICEnabled, cfg.WebSocketEnabled = true, true
	var log lockedLog
	s, err := start(cfg, slog.New(slog.NewTextHandler(&log, nil)))
	if err != nil {
		t.Fatal(err)
	}
	s.Shutdown(testContext(t))
	for _, want := range []string{"quic.enabled = true", "websocket.enabled = true"} {
		if !strings.Contains(log.String(), "level=WARN msg=\""+want) {
			t.Errorf("no WARN line naming %s in:\n%s", want, log.String())
		}
	}
}

// [http.tls] serves the API over HTTPS, with the certificate rules of [tcp.tls]
// (self_signed and no certificate file: an ephemeral loopback certificate).
func TestHTTPSServed(t *testing.T) {
	cfg := testConfig(t.TempDir(), 1)
	cfg.HTTP.TLS = config.TLS{Enabled: true, SelfSigned: true, CertFile: filepath.Join(t.TempDir(), "absent.pem"), KeyFile: "absent-key.pem"}
	s := startTestServer(t, cfg)
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := c.Post("https://"+s.HTTPAddr().String()+"/users/login", "application/json", strings.NewReader(`{"username":"iggy","password":"iggy"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.TLS == nil {
		t.Fatalf("login over HTTPS: %d (TLS %v)", resp.StatusCode, resp.TLS != nil)
	}
	if resp, err := http.Get("http://" + s.HTTPAddr().String() + "/ping"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == 200 {
			t.Fatal("plain HTTP answered on the HTTPS port")
		}
	}
}

// [[http.jwt.trusted_issuers]] reach the HTTP API: an entry it cannot use stops
// the start naming it (httpapi checks the entries the server passes on).
func TestHTTPTrustedIssuersReachTheAPI(t *testing.T) {
	cfg := testConfig(t.TempDir(), 1)
	cfg.HTTP.JWT.TrustedIssuers = []config.TrustedIssuer{{Issuer: "https://idp.example", JWKSURL: "https://idp.example/jwks"}}
	_, err := start(cfg, nil)
	var se *config.SettingError
	if !errors.As(err, &se) || !strings.HasPrefix(se.Setting, "http.jwt.trusted_issuers[0]") {
		t.Fatalf("a trusted issuer with user_id 0: %v", err)
	}
}

// A linearizable read's redirect names the primary's host chosen for the
// client, as GET_CLUSTER_METADATA does: a selector matching the client's
// address, else advertised_address, else the roster ip.
func TestPrimaryHTTPAddressForTheClient(t *testing.T) {
	s := &Server{}
	s.cfg.Cluster.Nodes = []config.ClusterNode{{
		IP: "10.0.0.1", AdvertisedAddress: "iggy.example",
		AdvertisedAddresses: []config.AdvertisedSelector{{ClientCIDR: netip.MustParsePrefix("192.168.0.0/16"), Address: "lan.example"}},
		Ports:               config.NodePorts{HTTP: 3000},
	}, {IP: "10.0.0.2"}}
	for _, c := range []struct {
		index  int
		client string
		want   string
		ok     bool
	}{
		{0, "192.168.1.7", "lan.example:3000", true},
		{0, "203.0.113.9", "iggy.example:3000", true},
		{1, "192.168.1.7", "", false}, // no ports.http
		{2, "192.168.1.7", "", false},
	} {
		got, ok := s.primaryHTTPAddressFor(c.index, netip.MustParseAddr(c.client))
		if got != c.want || ok != c.ok {
			t.Errorf("node %d for %s: %q %v, want %q %v", c.index, c.client, got, ok, c.want, c.ok)
		}
	}
}
