package compat

import (
	"testing"
)

// Session rules checked against the reference server (they once disagreed here).

// An unknown op-2 code before login: the reference server's funnel classifies every
// op-2 code other than PING on an unbound transport as an unauthenticated read before
// it looks the code up (core/server/src/dispatch/mod.rs classify), so the answer is
// status 40 Unauthenticated.
func TestUnknownCodeBeforeLoginIsUnauthenticated(t *testing.T) {
	addr := startServer(t)
	c := dial(t, addr)
	f := c.stamp(opNonReplicated, 60000, nil)
	t.Logf("sent % x", f.bytes)
	c.write(f)
	r := c.read(f)
	t.Logf("received header % x", r.header)
	if r.command != commandReply || r.status != 40 {
		t.Fatalf("code 60000 before login: %v, want status 40; status bytes at 216: % x", r, r.header[216:220])
	}
}

// Logout on a connection with no bound session is answered ok: status 0, empty body, op
// 3 (apache/iggy core/server/src/dispatch/session_ops.rs handle_logout_request: "Logout
// on an unbound transport: the desired state already holds, so answer ok"). The
// reference classifies Logout before the unbound-replicated check, so it never evicts
// it with NoSession.
func TestLogoutWithoutSessionIsOK(t *testing.T) {
	addr := startServer(t)
	c := dial(t, addr)
	f := c.stamp(opLogout, 39, nil)
	t.Logf("sent % x", f.bytes)
	c.write(f)
	r := c.read(f)
	t.Logf("received header % x", r.header)
	if r.command != commandReply || r.status != 0 || len(r.body) != 0 || r.operation != opLogout {
		t.Fatalf("logout without a session: %v, want a reply with status 0, op 3, empty body", r)
	}
}
