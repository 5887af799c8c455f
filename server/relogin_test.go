package server

import (
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

// A Register (codes 40 and 45) on a connection that is logged in already. The
// documents are silent on it: iggy.apache.org/docs/binary-protocol/connection-lifecycle
// describes
// the handshake on a fresh connection, and the Go SDK never sends it
// (the Go SDK, apache/iggy foreign/go/client: LoginUser logs a bound session out first, then
// registers a fresh client id). The reference server (core/server dispatch,
// complete_login_register) checks the protocol version and the credentials as
// for any login, evicting on a failure, and then, the connection having a
// session, commits nothing: it answers with the connection's session as it
// stands, under whatever client id and user the Register named, and the
// connection stays bound to its client id, user and epoch. These tests pin that.

// registerReply sends a Register with body for client on r and decodes the
// login reply.
func (r *rawConn) registerReply(client wire.Uint128, body []byte) (*wire.ReplyHeader, wire.LoginRegisterReply) {
	r.t.Helper()
	r.send(rawRequest{client: client, op: wire.OperationRegister, body: body})
	h, payload := r.reply()
	if h.Status != 0 || h.Operation != wire.OperationRegister || h.Client != client {
		r.t.Fatalf("login reply: status %d operation %d client %v (sent %v)", h.Status, h.Operation, h.Client, client)
	}
	payload, result, err := wire.SplitResult(payload)
	if err != nil || result != 0 {
		r.t.Fatalf("login result %d: %v", result, err)
	}
	var login wire.LoginRegisterReply
	if err := login.Decode(payload); err != nil {
		r.t.Fatal(err)
	}
	return h, login
}

// createStream creates a stream on a bound raw connection and returns the commit's
// op: consecutive metadata commits have consecutive ops.
func (r *rawConn) createStream(client wire.Uint128, session, request uint64, name string) uint64 {
	r.t.Helper()
	r.send(rawRequest{client: client, request: request, session: session, op: wire.OperationCreateStream, body: createStreamBody(r.t, name)})
	h, body := r.reply()
	if _, result, err := wire.SplitResult(body); h.Status != 0 || err != nil || result != 0 {
		r.t.Fatalf("create stream %q: status %d result %d %v", name, h.Status, result, err)
	}
	return h.Op
}

// TestReloginSameClientKeepsTheSession: the same user and client id again get the
// same session back, and nothing is committed.
func TestReloginSameClientKeepsTheSession(t *testing.T) {
	s := testServer(t, t.TempDir(), 2)
	client := wire.Uint128{Lo: 0x51, Hi: 1}
	r := dialRaw(t, s)
	epoch := r.login(client)
	before := r.createStream(client, epoch, 1, "before")

	h, login := r.registerReply(client, loginBody(t, wire.ServerProtocolVersion, "iggy", "iggy"))
	if login.Session != epoch || login.UserID != 0 || h.Op != epoch {
		t.Fatalf("second login: session %d user %d op %d, want session %d user 0", login.Session, login.UserID, h.Op, epoch)
	}
	if after := r.createStream(client, epoch, 2, "after"); after != before+1 {
		t.Fatalf("a write after the second login committed at op %d, want %d: the login committed something", after, before+1)
	}
}

// TestReloginNewClientIDKeepsTheBoundClient: a Register under a fresh client id
// gets the connection's session; the connection stays bound to its first client
// id, so requests under the new id are refused as sessionless (eviction 1), as
// any request under a client id other than the bound one is.
func TestReloginNewClientIDKeepsTheBoundClient(t *testing.T) {
	s := testServer(t, t.TempDir(), 2)
	first := wire.Uint128{Lo: 0x61, Hi: 1}
	second := wire.Uint128{Lo: 0x62, Hi: 1}
	r := dialRaw(t, s)
	epoch := r.login(first)

	_, login := r.registerReply(second, loginBody(t, wire.ServerProtocolVersion, "iggy", "iggy"))
	if login.Session != epoch || login.UserID != 0 {
		t.Fatalf("login under a new client id: session %d user %d, want session %d user 0", login.Session, login.UserID, epoch)
	}
	r.createStream(first, epoch, 1, "still-first")
	r.send(rawRequest{client: second, request: 2, session: epoch, op: wire.OperationNonReplicated, code: wire.CodeGetStreams})
	r.wantEviction(wire.EvictionNoSession)

	// The second client id was never registered: another connection may take it.
	other := dialRaw(t, s)
	if otherEpoch := other.login(second); otherEpoch <= epoch {
		t.Fatalf("a fresh login of the second client id got epoch %d, not above %d", otherEpoch, epoch)
	}
}

// TestReloginAsAnotherUserKeepsTheBinding: credentials of another user are
// checked, and the reply names that user (as the reference's does), but the
// connection keeps its session and acts as the user it first logged in as.
func TestReloginAsAnotherUserKeepsTheBinding(t *testing.T) {
	s := testServer(t, t.TempDir(), 2)
	root := dialRoot(t, s)
	carol, err := root.CreateUser(testContext(t), "carol", "carolpw", wire.UserActive, nil)
	mustOK(t, "CreateUser", err)
	if carol.ID == 0 {
		t.Fatal("carol got the root user's id")
	}

	for _, tc := range []struct {
		name          string
		bound, client wire.Uint128
	}{
		{"new client id", wire.Uint128{Lo: 0x71, Hi: 1}, wire.Uint128{Lo: 0x72, Hi: 1}},
		{"same client id", wire.Uint128{Lo: 0x73, Hi: 1}, wire.Uint128{Lo: 0x73, Hi: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bound := tc.bound
			r := dialRaw(t, s)
			epoch := r.login(bound)
			_, login := r.registerReply(tc.client, loginBody(t, wire.ServerProtocolVersion, "carol", "carolpw"))
			if login.Session != epoch || login.UserID != carol.ID {
				t.Fatalf("login as carol: session %d user %d, want session %d user %d", login.Session, login.UserID, epoch, carol.ID)
			}
			// carol has no permissions: a stream created now was created by root.
			r.createStream(bound, epoch, 1, "root-"+tc.name)
			r.send(rawRequest{client: bound, request: 1, session: epoch, op: wire.OperationNonReplicated, code: wire.CodeGetMe})
			h, body := r.reply()
			var me wire.ClientDetails
			if err := me.Decode(body); h.Status != 0 || err != nil || me.UserID != 0 {
				t.Fatalf("GetMe after the login as carol: status %d user %d %v, want the root user", h.Status, me.UserID, err)
			}
		})
	}
}

// TestReloginWithTokenKeepsTheSession: LOGIN_REGISTER_WITH_PAT (45) on a
// logged-in connection answers the same way.
func TestReloginWithTokenKeepsTheSession(t *testing.T) {
	s := testServer(t, t.TempDir(), 2)
	root := dialRoot(t, s)
	token, err := root.CreatePersonalAccessToken(testContext(t), "relogin", 0)
	mustOK(t, "CreatePersonalAccessToken", err)
	body, err := (&wire.LoginRegisterWithPAT{
		Version: wire.ClientVersionInfo{ProtocolVersion: wire.ServerProtocolVersion, SDKName: []byte("raw-test"), SDKVersion: []byte("1")},
		Token:   []byte(token),
	}).Append(nil)
	mustOK(t, "LoginRegisterWithPAT", err)

	client := wire.Uint128{Lo: 0x81, Hi: 1}
	r := dialRaw(t, s)
	epoch := r.login(client)
	if _, login := r.registerReply(client, body); login.Session != epoch || login.UserID != 0 {
		t.Fatalf("token login on a logged-in connection: session %d user %d, want session %d user 0", login.Session, login.UserID, epoch)
	}
	r.createStream(client, epoch, 1, "after-token")
}

// TestReloginFailuresEvict: a Register on a logged-in connection is checked
// before anything else, and a failure ends the connection as on a fresh one.
func TestReloginFailuresEvict(t *testing.T) {
	s := testServer(t, t.TempDir(), 2)
	old, _ := wire.PackProtocolVersion(0, 1, 0)
	cases := []struct {
		name   string
		body   []byte
		reason wire.EvictionReason
	}{
		{"wrong password", loginBody(t, wire.ServerProtocolVersion, "iggy", "wrong"), wire.EvictionInvalidCredentials},
		{"unknown user", loginBody(t, wire.ServerProtocolVersion, "nobody", "iggy"), wire.EvictionInvalidCredentials},
		{"incompatible version", loginBody(t, old, "iggy", "iggy"), wire.EvictionIncompatibleProtocol},
		{"malformed body", []byte{1, 2, 3}, wire.EvictionMalformedLogin},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			client := wire.Uint128{Lo: 0x91, Hi: 1}
			r := dialRaw(t, s)
			r.login(client)
			r.send(rawRequest{client: client, op: wire.OperationRegister, body: tc.body})
			r.wantEviction(tc.reason)
		})
	}
}

// TestReloginAfterLogoutIsAFreshSession: after a Logout the connection is
// anonymous again, and a Register starts a new session with a higher epoch; the
// old session is gone.
func TestReloginAfterLogoutIsAFreshSession(t *testing.T) {
	s := testServer(t, t.TempDir(), 2)
	first := wire.Uint128{Lo: 0xa1, Hi: 1}
	second := wire.Uint128{Lo: 0xa2, Hi: 1}
	r := dialRaw(t, s)
	epoch := r.login(first)
	r.send(rawRequest{client: first, request: 1, session: epoch, op: wire.OperationLogout})
	if h, _ := r.reply(); h.Status != 0 {
		t.Fatalf("logout: status %d", h.Status)
	}
	_, login := r.registerReply(second, loginBody(t, wire.ServerProtocolVersion, "iggy", "iggy"))
	if login.Session <= epoch {
		t.Fatalf("login after logout: session %d, want above %d", login.Session, epoch)
	}
	r.createStream(second, login.Session, 1, "fresh")
	r.send(rawRequest{client: first, request: 2, session: epoch, op: wire.OperationNonReplicated, code: wire.CodeGetStreams})
	r.wantEviction(wire.EvictionNoSession)
}

// TestClientLoginOnALoggedInClient: the client's Login on a logged-in client runs
// the Go SDK's sequence (logout, then Register under a fresh client id): a new
// session for the new user, on the same connection and so the same GetClients id.
func TestClientLoginOnALoggedInClient(t *testing.T) {
	s := testServer(t, t.TempDir(), 2)
	c := dialRoot(t, s)
	ctx := testContext(t)
	carol, err := c.CreateUser(ctx, "carol", "carolpw", wire.UserActive, nil)
	mustOK(t, "CreateUser", err)
	before, _ := c.Identity()
	meBefore, err := c.GetMe(ctx)
	mustOK(t, "GetMe", err)

	id, err := c.Login(ctx, "carol", "carolpw")
	mustOK(t, "Login as carol", err)
	if id.UserID != carol.ID || id.Session <= before.Session {
		t.Fatalf("login as carol: %+v, before %+v", id, before)
	}
	me, err := c.GetMe(ctx)
	mustOK(t, "GetMe", err)
	if me.UserID != carol.ID || me.ClientID != meBefore.ClientID || string(me.Address) != string(meBefore.Address) {
		t.Fatalf("GetMe as carol %+v, before %+v", me.ClientHeader, meBefore.ClientHeader)
	}
	_, err = c.CreateStream(ctx, "carol-cannot")
	wantCode(t, "CreateStream as carol", err, wire.ErrUnauthorized)
}
