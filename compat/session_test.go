package compat

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

func TestXXH32GoldenVectors(t *testing.T) {
	// Published XXH32 (seed 0) values; the 39-byte input takes the 16-byte stripe path.
	for _, tc := range []struct {
		in   string
		want uint32
	}{
		{"", 0x02cc5d05},
		{"a", 0x550d7456},
		{"abc", 0x32d153ff},
		{"Nobody inspects the spammish repetition", 0xe2293b2f},
	} {
		if got := xxh32([]byte(tc.in)); got != tc.want {
			t.Errorf("xxh32(%q) = %#08x, want %#08x", tc.in, got, tc.want)
		}
	}
}

// The login body the Go SDK writes for root/iggy, byte for byte (apache/iggy
// foreign/go/internal/vsr).
func TestLoginBodyMatchesTheReference(t *testing.T) {
	want := []byte{
		0x00, 0x2c, 0x00, 0x00,
		0x06, 0x67, 0x6f, 0x2d, 0x73, 0x64, 0x6b,
		0x0c, 0x30, 0x2e, 0x39, 0x2e, 0x30, 0x2d, 0x65, 0x64, 0x67, 0x65, 0x2e, 0x34,
		0x04, 0x69, 0x67, 0x67, 0x79,
		0x04, 0x69, 0x67, 0x67, 0x79,
		0x00, 0x00, 0x00, 0x00,
	}
	if got := loginBody("iggy", "iggy"); !bytes.Equal(got, want) {
		t.Fatalf("login body\n got % x\nwant % x", got, want)
	}
}

// LoginAsRootReturnsUserZero: Register (op 1, request 0, session 0) succeeds with the
// framed LoginRegisterReply
// (iggy.apache.org/docs/binary-protocol/connection-lifecycle); root is user 0.
func TestLoginAsRootReturnsUserZero(t *testing.T) {
	addr := startServer(t)
	c := dial(t, addr)
	f := c.stamp(opRegister, codeLogin, loginBody("iggy", "iggy"))
	if f.request != 0 || binary.LittleEndian.Uint64(f.bytes[184:]) != 0 {
		t.Fatalf("register stamped request %d session %d, want 0 and 0", f.request, binary.LittleEndian.Uint64(f.bytes[184:]))
	}
	if code := binary.LittleEndian.Uint32(f.bytes[196:]); code != 0 {
		t.Fatalf("register header carries code %d; the SDK leaves bytes 196..200 zero", code)
	}
	c.write(f)
	r := c.read(f)
	if r.command != commandReply || r.status != 0 || r.operation != opRegister {
		t.Fatalf("login: %v, want a status-0 reply with op 1", r)
	}
	if len(r.body) < 4 || binary.LittleEndian.Uint32(r.body) != 0 {
		t.Fatalf("login body % x does not start with the result count 0", r.body)
	}
	payload, _ := c.outcome(r)
	d := decoder{t: t, what: "LoginRegisterReply", b: payload}
	userID, session, version, serverVersion := d.u32(), d.u64(), d.u32(), d.name()
	d.end()
	if userID != 0 {
		t.Errorf("root user id %d, want 0", userID)
	}
	if session == 0 {
		t.Errorf("session 0 (the SDK refuses it)")
	}
	if version != protocolVersion0110 {
		t.Errorf("server_protocol_version %d, want %d", version, protocolVersion0110)
	}
	if serverVersion == "" {
		t.Errorf("empty server version")
	}
	c.session = session
	if payload := c.ok("GetStreams after login", opNonReplicated, codeGetStreams, nil); len(payload) != 0 {
		t.Errorf("GetStreams on a fresh server: % x, want empty", payload)
	}
}

// WrongCredentials: a refused login is an Eviction with reason 9, which the SDK
// surfaces as 42 (apache/iggy core/common/src/error/eviction.rs).
func TestWrongCredentialsAreEvicted(t *testing.T) {
	addr := startServer(t)
	c := dial(t, addr)
	r := c.do(opRegister, codeLogin, loginBody("iggy", "wrong-password"))
	if r.command != commandEviction || r.reason != 9 {
		t.Fatalf("login with a wrong password: %v, want eviction reason 9", r)
	}
	// The reference names the request's client id (session_ops.rs send_eviction
	// with request_header.client).
	if !bytes.Equal(r.header[128:144], c.client[:]) {
		t.Errorf("eviction names client % x, the request carried % x", r.header[128:144], c.client[:])
	}
}

// OnlyPingWorksBeforeSigningIn: PING before login is status 0 and empty; every
// other read (GetClusterMetadata here) is status 40 Unauthenticated in a normal
// reply frame, not an eviction, and the connection stays usable.
func TestOnlyPingWorksBeforeSigningIn(t *testing.T) {
	addr := startServer(t)
	c := dial(t, addr)
	r := c.get(codePing, nil)
	if r.command != commandReply || r.status != 0 || len(r.body) != 0 || r.operation != opNonReplicated {
		t.Fatalf("ping before login: %v, want status 0, op 2, empty body", r)
	}
	for _, code := range []uint32{codeGetClusterMetadata, codeGetStreams, codeGetStats} {
		r := c.get(code, nil)
		if r.command != commandReply || r.status != 40 {
			t.Fatalf("code %d before login: %v, want status 40", code, r)
		}
	}
	c.login("iggy", "iggy")
	c.ok("ping after login", opNonReplicated, codePing, nil)
}

// GetClusterMetadata after login: one node, leader, healthy, at the address the client
// dialled (apache/iggy core/server/src/cluster_meta.rs; the Go SDK dials it).
func TestClusterMetadataAfterLogin(t *testing.T) {
	addr := startServer(t)
	c := dialRoot(t, addr)
	name, nodes := clusterMetadata(t, c.ok("GetClusterMetadata", opNonReplicated, codeGetClusterMetadata, nil))
	// The names the reference gives a node that is not clustered (apache/iggy
	// core/server/src/cluster_meta.rs), which the Node.js SDK's suite expects.
	if name != "single-node" {
		t.Errorf("cluster name %q, want single-node", name)
	}
	if len(nodes) != 1 {
		t.Fatalf("%d nodes, want exactly 1 (more makes the SDK look for a leader)", len(nodes))
	}
	n := nodes[0]
	if n.role != 0 || n.status != 0 {
		t.Errorf("node role %d status %d, want 0 (leader) and 0 (healthy)", n.role, n.status)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	if n.ip != host || strconv.Itoa(int(n.tcpPort)) != port {
		t.Errorf("node at %s:%d, want %s", n.ip, n.tcpPort, addr)
	}
	if n.name != "iggy-node" {
		t.Errorf("node name %q, want iggy-node", n.name)
	}
	// Transports the server does not serve report port 0; HTTP's is the port
	// the HTTP API answers on.
	if n.quicPort != 0 || n.wsPort != 0 {
		t.Errorf("ports quic %d websocket %d, want 0 for transports not served", n.quicPort, n.wsPort)
	}
	resp, err := http.Get("http://" + net.JoinHostPort(n.ip, strconv.Itoa(int(n.httpPort))) + "/ping")
	if err != nil {
		t.Fatalf("the advertised http port %d: %v", n.httpPort, err)
	}
	pong, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(pong) != "pong" {
		t.Errorf("GET /ping at the advertised http port %d: %d %q", n.httpPort, resp.StatusCode, pong)
	}
}

// LogoutEndsTheSession: GetStreams, Logout (op 3, not framed, empty), then a read
// on the old session is refused, and a new login works again.
func TestLogoutThenLoginAgain(t *testing.T) {
	addr := startServer(t)
	c := dialRoot(t, addr)
	c.ok("GetStreams", opNonReplicated, codeGetStreams, nil)
	r := c.do(opLogout, 39, nil)
	if r.command != commandReply || r.status != 0 || r.operation != opLogout || len(r.body) != 0 {
		t.Fatalf("logout: %v, want status 0, op 3, empty body", r)
	}
	// The SDK resets its identity after a logout (session 0, a fresh client id): a
	// read is then refused with status 40 in a normal reply, and a login on the same
	// connection works.
	c.session = 0
	c.client = [16]byte{}
	c.mintClientID()
	if r := c.get(codeGetStreams, nil); r.command != commandReply || r.status != 40 {
		t.Fatalf("GetStreams after logout: %v, want status 40", r)
	}
	c.login("iggy", "iggy")
	c.ok("GetStreams after the second login", opNonReplicated, codeGetStreams, nil)
}

// RawRequestsDoNotGapMetadataRequestIDs: five op-2 requests with the unknown code
// 60000 each get a reply (status 3 in the reference server), carry the current
// counter without advancing it, and the session stays usable for metadata writes
// numbered 1, 2.
func TestUnknownCodeKeepsTheSession(t *testing.T) {
	addr := startServer(t)
	c := dialRoot(t, addr)
	for i := range 5 {
		f := c.stamp(opNonReplicated, 60000, nil)
		if f.request != 1 {
			t.Fatalf("raw request %d stamped %d, want 1 (op 2 does not advance the counter)", i, f.request)
		}
		c.write(f)
		r := c.read(f)
		if r.command != commandReply || r.status == 0 {
			t.Fatalf("unknown code, attempt %d: %v, want a reply with an error status", i, r)
		}
		if r.status != 3 {
			t.Errorf("unknown code: status %d, want 3 InvalidCommand", r.status)
		}
	}
	c.ok("ping", opNonReplicated, codePing, nil)
	c.ok("CreateStream request 1", opCreateStream, 202, appendName(nil, "after-raw-1"))
	c.ok("CreateStream request 2", opCreateStream, 202, appendName(nil, "after-raw-2"))
	if c.requestCounter != 3 {
		t.Fatalf("counter %d after two metadata writes, want 3", c.requestCounter)
	}
}

// FetchesASnapshot: raw code 11 with [1,1,1] returns a non-empty body; it is a ZIP
// archive, so it starts with a local file header or the end-of-central-directory
// record (an archive with no entries).
func TestSnapshotReturnsABody(t *testing.T) {
	addr := startServer(t)
	c := dialRoot(t, addr)
	body := c.ok("GetSnapshot", opNonReplicated, codeGetSnapshot, []byte{1, 1, 1})
	if len(body) == 0 {
		t.Fatalf("snapshot body is empty")
	}
	if !bytes.HasPrefix(body, []byte("PK\x03\x04")) && !bytes.HasPrefix(body, []byte("PK\x05\x06")) {
		t.Errorf("snapshot body does not start like a ZIP archive: % x", body[:min(len(body), 8)])
	}
}

// Login edge cases (apache/iggy core/server/src/auth.rs): an empty password also parses
// as a token body, so the answer is reason 10; a username outside 3..=50 bytes is
// reason 9.
func TestLoginEdgeCases(t *testing.T) {
	addr := startServer(t)
	for _, tc := range []struct {
		what               string
		username, password string
		reason             uint8
	}{
		{"an empty password", "iggy", "", 10},
		{"a 2-byte username", "ig", "iggy", 9},
		{"a 51-byte username", strings.Repeat("u", 51), "iggy", 9},
	} {
		c := dial(t, addr)
		if r := c.do(opRegister, codeLogin, loginBody(tc.username, tc.password)); r.command != commandEviction || r.reason != tc.reason {
			t.Errorf("login with %s: %v, want eviction reason %d", tc.what, r, tc.reason)
		}
	}
	// Logging in twice on one connection, as the SDK does (Logout, then Register
	// under a fresh client id), yields a new session each time.
	c := dial(t, addr)
	firstSession := c.login("iggy", "iggy").session
	if second := c.login("iggy", "iggy").session; second == firstSession {
		t.Errorf("second login reused session %d", second)
	}
	c.ok("CreateStream on the second session", opCreateStream, 202, appendName(nil, "second"))
}
