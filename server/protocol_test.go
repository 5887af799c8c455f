package server

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/wire"
)

// rawConn speaks the protocol byte by byte, for what client/ refuses to send.
type rawConn struct {
	t    *testing.T
	conn net.Conn
}

func dialRaw(t *testing.T, s *Server) *rawConn {
	t.Helper()
	conn, err := net.DialTimeout("tcp", s.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &rawConn{t: t, conn: conn}
}

type rawRequest struct {
	client    wire.Uint128
	request   uint64
	session   uint64
	op        wire.Operation
	code      wire.CommandCode
	timestamp uint64
	body      []byte
	checksum  *wire.Uint128 // nil: XxHash3 of the body
}

func (r *rawConn) send(q rawRequest) {
	r.t.Helper()
	r.conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := r.conn.Write(q.frame()); err != nil {
		r.t.Fatalf("write: %v", err)
	}
}

// frame encodes the request.
func (q rawRequest) frame() []byte {
	var h wire.RequestHeader
	h.Size = uint32(wire.HeaderSize + len(q.body))
	h.Command = wire.CommandRequest
	h.Client, h.Request, h.Session, h.Operation, h.NonReplicatedCode = q.client, q.request, q.session, q.op, q.code
	h.Timestamp = q.timestamp
	if q.checksum != nil {
		h.RequestChecksum = *q.checksum
	} else {
		h.RequestChecksum = wire.RequestChecksum(q.body)
	}
	frame := make([]byte, h.Size)
	h.Put(frame)
	copy(frame[wire.HeaderSize:], q.body)
	return frame
}

// frame reads one frame: a reply (header, body) or an eviction (header only).
func (r *rawConn) frame() (header []byte, body []byte) {
	r.t.Helper()
	header = make([]byte, wire.HeaderSize)
	r.conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(r.conn, header); err != nil {
		r.t.Fatalf("read header: %v", err)
	}
	size := binary.LittleEndian.Uint32(header[48:])
	body = make([]byte, size-wire.HeaderSize)
	if _, err := io.ReadFull(r.conn, body); err != nil {
		r.t.Fatalf("read body: %v", err)
	}
	return header, body
}

// frameOrNil reads one whole frame (header and body), from any goroutine: nil
// when the connection fails, instead of failing the test.
func (r *rawConn) frameOrNil() []byte {
	frame := make([]byte, wire.HeaderSize)
	r.conn.SetReadDeadline(time.Now().Add(60 * time.Second))
	if _, err := io.ReadFull(r.conn, frame); err != nil {
		return nil
	}
	frame = append(frame, make([]byte, binary.LittleEndian.Uint32(frame[48:])-wire.HeaderSize)...)
	if _, err := io.ReadFull(r.conn, frame[wire.HeaderSize:]); err != nil {
		return nil
	}
	return frame
}

func (r *rawConn) reply() (*wire.ReplyHeader, []byte) {
	r.t.Helper()
	header, body := r.frame()
	full := append(header, body...)
	h, err := wire.DecodeReplyHeader(full, 64<<20)
	if err != nil {
		r.t.Fatalf("not a reply: %v (command %d, reason %d)", err, header[60], header[255])
	}
	return h, body
}

func (r *rawConn) wantEviction(reason wire.EvictionReason) *wire.EvictionHeader {
	r.t.Helper()
	header, _ := r.frame()
	e, err := wire.DecodeEvictionHeader(header)
	if err != nil {
		r.t.Fatalf("want eviction %s, got command %d status %d: %v", reason, header[60], binary.LittleEndian.Uint32(header[216:]), err)
	}
	if e.Reason != reason {
		r.t.Fatalf("eviction reason %s, want %s", e.Reason, reason)
	}
	// The server closes the connection after an eviction.
	r.conn.SetDeadline(time.Now().Add(10 * time.Second))
	if n, err := r.conn.Read(make([]byte, 1)); err == nil {
		r.t.Fatalf("connection still open after eviction (%d bytes)", n)
	}
	return e
}

func loginBody(t *testing.T, version wire.ProtocolVersion, user, password string) []byte {
	t.Helper()
	b, err := (&wire.LoginRegister{
		Version:  wire.ClientVersionInfo{ProtocolVersion: version, SDKName: []byte("raw-test"), SDKVersion: []byte("1")},
		Username: []byte(user), Password: []byte(password),
	}).Append(nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// login registers client on r and returns the session epoch.
func (r *rawConn) login(client wire.Uint128) uint64 {
	r.t.Helper()
	r.send(rawRequest{client: client, op: wire.OperationRegister, body: loginBody(r.t, wire.ServerProtocolVersion, "iggy", "iggy")})
	h, body := r.reply()
	if h.Status != 0 || h.Operation != wire.OperationRegister {
		r.t.Fatalf("login: status %d operation %d", h.Status, h.Operation)
	}
	payload, result, err := wire.SplitResult(body)
	if err != nil || result != 0 {
		r.t.Fatalf("login result %d: %v", result, err)
	}
	var login wire.LoginRegisterReply
	if err := login.Decode(payload); err != nil {
		r.t.Fatal(err)
	}
	if login.Session == 0 || login.UserID != 0 || string(login.ServerVersion) != serverVersion {
		r.t.Fatalf("login reply %+v", login)
	}
	return login.Session
}

func createStreamBody(t *testing.T, name string) []byte {
	b, err := wire.AppendName(nil, []byte(name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestOnlyPingBeforeLogin(t *testing.T) {
	s := testServer(t, t.TempDir(), 2)
	r := dialRaw(t, s)
	client := wire.Uint128{Lo: 42}
	r.send(rawRequest{client: client, request: 1, op: wire.OperationNonReplicated, code: wire.CodePing})
	if h, body := r.reply(); h.Status != 0 || len(body) != 0 || h.Request != 1 {
		t.Fatalf("ping: status %d, %d bytes, request %d", h.Status, len(body), h.Request)
	}
	for _, code := range []wire.CommandCode{wire.CodeGetStreams, wire.CodeGetClusterMetadata, wire.CodeGetMe} {
		r.send(rawRequest{client: client, request: 1, op: wire.OperationNonReplicated, code: code})
		if h, _ := r.reply(); h.Status != wire.ErrUnauthenticated {
			t.Fatalf("code %d before login: status %d, want 40", code, h.Status)
		}
	}
	// A logout with a made-up session on an unbound connection is answered like the
	// reference server does: status 0, empty body.
	r.send(rawRequest{client: client, request: 1, session: 5, op: wire.OperationLogout})
	if h, body := r.reply(); h.Status != 0 || len(body) != 0 {
		t.Fatalf("logout without a session: status %d", h.Status)
	}
	r.send(rawRequest{client: client, request: 1, session: 5, op: wire.OperationCreateStream, body: createStreamBody(t, "x")})
	r.wantEviction(wire.EvictionNoSession)
	// So is a logout carrying session 0 (handle_logout_request in apache/iggy core/server/src/dispatch/session_ops.rs).
	r = dialRaw(t, s)
	r.send(rawRequest{client: client, request: 2, op: wire.OperationLogout})
	if h, body := r.reply(); h.Status != 0 || len(body) != 0 || h.Operation != wire.OperationLogout {
		t.Fatalf("logout with session 0: status %d, operation %v", h.Status, h.Operation)
	}
	// An unknown read code before login is 40 too: the session is checked first.
	r.send(rawRequest{client: client, request: 3, op: wire.OperationNonReplicated, code: 60000})
	if h, _ := r.reply(); h.Status != wire.ErrUnauthenticated {
		t.Fatalf("unknown code before login: status %d, want 40", h.Status)
	}
	// Session 0 on a replicated operation is a header fault: evicted the same way.
	r = dialRaw(t, s)
	r.send(rawRequest{client: client, request: 1, op: wire.OperationCreateStream, body: createStreamBody(t, "x")})
	r.wantEviction(wire.EvictionNoSession)
}

func TestLoginEvictions(t *testing.T) {
	s := testServer(t, t.TempDir(), 2)
	client := wire.Uint128{Lo: 7}
	old, _ := wire.PackProtocolVersion(0, 1, 0)
	cases := []struct {
		name   string
		op     wire.Operation
		code   wire.CommandCode
		body   []byte
		reason wire.EvictionReason
	}{
		{"wrong password", wire.OperationRegister, 0, loginBody(t, wire.ServerProtocolVersion, "iggy", "wrong"), wire.EvictionInvalidCredentials},
		{"unknown user", wire.OperationRegister, 0, loginBody(t, wire.ServerProtocolVersion, "nobody", "iggy"), wire.EvictionInvalidCredentials},
		{"incompatible version", wire.OperationRegister, 0, loginBody(t, old, "iggy", "iggy"), wire.EvictionIncompatibleProtocol},
		{"malformed body", wire.OperationRegister, 0, []byte{1, 2, 3}, wire.EvictionMalformedLogin},
		{"legacy login code 38", wire.OperationNonReplicated, 38, nil, wire.EvictionMalformedLogin},
		{"legacy token login code 44", wire.OperationNonReplicated, 44, nil, wire.EvictionMalformedLogin},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := dialRaw(t, s)
			r.send(rawRequest{client: client, op: tc.op, code: tc.code, body: tc.body})
			e := r.wantEviction(tc.reason)
			if tc.reason == wire.EvictionIncompatibleProtocol && (e.ServerProtocolVersion == 0 || e.ServerProtocolVersionMin > e.ServerProtocolVersion) {
				t.Fatalf("incompatible-protocol eviction without the accepted window: %+v", e)
			}
		})
	}
	// The server and other clients are unaffected.
	c := dialRoot(t, s)
	mustOK(t, "Ping after evictions", c.Ping(testContext(t)))
}

// TestExactlyOnceAndFencing: a retried metadata request gets the cached reply, a
// reused request number with other arguments is refused, and a connection whose
// client id registered again elsewhere is fenced.
func TestExactlyOnceAndFencing(t *testing.T) {
	s := testServer(t, t.TempDir(), 2)
	client := wire.Uint128{Lo: 0x1234, Hi: 9}
	a := dialRaw(t, s)
	epochA := a.login(client)

	create := rawRequest{client: client, request: 1, session: epochA, op: wire.OperationCreateStream, body: createStreamBody(t, "once")}
	a.send(create)
	h1, body1 := a.reply()
	if h1.Status != 0 || h1.Op == 0 || h1.Commit != h1.Op || h1.Request != 1 {
		t.Fatalf("create: status %d op %d commit %d request %d", h1.Status, h1.Op, h1.Commit, h1.Request)
	}
	a.send(create) // a retry
	h2, body2 := a.reply()
	if h2.Status != 0 || h2.Op != h1.Op || !bytes.Equal(body1, body2) {
		t.Fatalf("retry: status %d op %d (first %d), same body %v", h2.Status, h2.Op, h1.Op, bytes.Equal(body1, body2))
	}
	conflict := create
	conflict.body = createStreamBody(t, "other")
	a.send(conflict)
	if h, _ := a.reply(); h.Status == 0 {
		t.Fatal("a reused request number with another body was applied")
	}
	a.send(rawRequest{client: client, request: 1, session: epochA, op: wire.OperationNonReplicated, code: wire.CodeGetStreams})
	_, streams := a.reply()
	n := 0
	for it := wire.IterStreams(streams); it.Next(); n++ {
	}
	if n != 1 {
		t.Fatalf("%d streams after a retry, want 1", n)
	}

	// A bad request checksum is refused with status 4 and the connection survives.
	bad := wire.Uint128{Lo: 1}
	a.send(rawRequest{client: client, request: 2, session: epochA, op: wire.OperationCreateStream, body: createStreamBody(t, "x"), checksum: &bad})
	if h, _ := a.reply(); h.Status != wire.ErrInvalidFormat {
		t.Fatalf("bad checksum: status %d, want 4", h.Status)
	}

	// The same client id logs in again on another connection: the first is a zombie.
	b := dialRaw(t, s)
	epochB := b.login(client)
	if epochB <= epochA {
		t.Fatalf("second login epoch %d not above %d", epochB, epochA)
	}
	a.send(rawRequest{client: client, request: 2, session: epochA, op: wire.OperationNonReplicated, code: wire.CodeGetStreams})
	a.wantEviction(wire.EvictionSessionTooLow)
	b.send(rawRequest{client: client, request: 2, session: epochB, op: wire.OperationCreateStream, body: createStreamBody(t, "second")})
	if h, _ := b.reply(); h.Status != 0 {
		t.Fatalf("the new session's write: status %d", h.Status)
	}
	// A wrong session on a bound connection is fenced too.
	b.send(rawRequest{client: client, request: 3, session: epochB - 1, op: wire.OperationNonReplicated, code: wire.CodeGetStreams})
	b.wantEviction(wire.EvictionSessionTooLow)
}

// TestClientIDOfAnotherUserIsNotTakenOver: a register with a client id that another
// user's session holds is evicted; the holder keeps its session.
func TestClientIDOfAnotherUserIsNotTakenOver(t *testing.T) {
	s := testServer(t, t.TempDir(), 1)
	root := dialRoot(t, s)
	_, err := root.CreateUser(testContext(t), "carol", "carolpw", wire.UserActive, nil)
	mustOK(t, "CreateUser", err)
	client := wire.Uint128{Lo: 77, Hi: 77}
	a := dialRaw(t, s)
	epoch := a.login(client)
	b := dialRaw(t, s)
	b.send(rawRequest{client: client, op: wire.OperationRegister, body: loginBody(t, wire.ServerProtocolVersion, "carol", "carolpw")})
	b.wantEviction(wire.EvictionSessionError)
	a.send(rawRequest{client: client, request: 1, session: epoch, op: wire.OperationNonReplicated, code: wire.CodeGetStreams})
	if h, _ := a.reply(); h.Status != 0 {
		t.Fatalf("the holder's read: status %d", h.Status)
	}
}
