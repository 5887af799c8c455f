package server

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/wire"
)

// clientsByAddress lists the server's connections (GetClients) by peer address.
func clientsByAddress(t *testing.T, ctx context.Context, c *client.Client) map[string]wire.ClientHeader {
	t.Helper()
	list, err := c.GetClients(ctx)
	mustOK(t, "GetClients", err)
	byAddress := make(map[string]wire.ClientHeader, len(list))
	for _, h := range list {
		byAddress[string(h.Address)] = h
	}
	return byAddress
}

// awaitClients asks GetClients until done accepts the list or 10 s have passed. The
// server registers a connection with shard 0 asynchronously, so a list asked for
// right after a dial or a close may not show it yet.
func awaitClients(t *testing.T, c *client.Client, what string, done func(map[string]wire.ClientHeader) bool) map[string]wire.ClientHeader {
	t.Helper()
	ctx := testContext(t)
	deadline := time.Now().Add(10 * time.Second)
	for {
		listed := clientsByAddress(t, ctx, c)
		if done(listed) {
			return listed
		}
		if time.Now().After(deadline) {
			t.Fatalf("GetClients never showed %s; last list: %v", what, listed)
		}
	}
}

// TestGetClientsListsSilentConnections: a connection is listed from the moment it
// is accepted, before it sends a byte, on whichever shard it landed, and leaves
// the list when it closes.
func TestGetClientsListsSilentConnections(t *testing.T) {
	const shards = 3
	s := testServer(t, t.TempDir(), shards)
	admin := dialRoot(t, s)
	ctx := testContext(t)

	// The listener hands accepted sockets to the shards round-robin, so twice as
	// many connections as shards put at least one on every shard.
	silent := make([]net.Conn, 2*shards)
	for i := range silent {
		conn, err := net.DialTimeout("tcp", s.Addr().String(), 5*time.Second)
		mustOK(t, "dial", err)
		t.Cleanup(func() { conn.Close() })
		silent[i] = conn
	}
	allListed := func(listed map[string]wire.ClientHeader) bool {
		for _, conn := range silent {
			if _, ok := listed[conn.LocalAddr().String()]; !ok {
				return false
			}
		}
		return true
	}
	listed := awaitClients(t, admin, "every silent connection", allListed)

	me, err := admin.GetMe(ctx)
	mustOK(t, "GetMe", err)
	ids := map[uint32]bool{me.ClientID: true}
	for _, conn := range silent {
		h := listed[conn.LocalAddr().String()]
		if h.UserID != wire.ClientUserIDNone || h.Transport != wire.ClientTransportTCP || h.ConsumerGroupsCount != 0 || h.ClientID == 0 {
			t.Fatalf("silent connection %s listed as %+v", conn.LocalAddr(), h)
		}
		if ids[h.ClientID] {
			t.Fatalf("client id %d listed twice", h.ClientID)
		}
		ids[h.ClientID] = true

		d, err := admin.GetClient(ctx, h.ClientID)
		mustOK(t, "GetClient", err)
		if d.ClientID != h.ClientID || d.UserID != wire.ClientUserIDNone || string(d.Address) != conn.LocalAddr().String() ||
			d.Transport != wire.ClientTransportTCP || d.ConsumerGroupsCount != 0 || len(d.Groups) != 0 {
			t.Fatalf("GetClient(%d) = %+v, want the silent connection %s", h.ClientID, d, conn.LocalAddr())
		}
	}
	if admin := listed[string(me.Address)]; admin.UserID != 0 || admin.ClientID != me.ClientID {
		t.Fatalf("the logged-in connection listed as %+v, GetMe says %+v", admin, me.ClientHeader)
	}

	// Half of them close: they leave the list, the others stay.
	closed := silent[:shards]
	for _, conn := range closed {
		conn.Close()
	}
	listed = awaitClients(t, admin, "the closed connections gone", func(listed map[string]wire.ClientHeader) bool {
		for _, conn := range closed {
			if _, ok := listed[conn.LocalAddr().String()]; ok {
				return false
			}
		}
		return true
	})
	if !allListed(listed) {
		for _, conn := range silent[shards:] {
			if _, ok := listed[conn.LocalAddr().String()]; !ok {
				t.Fatalf("open connection %s left the list", conn.LocalAddr())
			}
		}
	}
	stats, err := admin.GetStats(ctx)
	mustOK(t, "GetStats", err)
	if want := uint32(len(silent) - len(closed) + 1); stats.ClientsCount != want {
		t.Fatalf("stats count %d clients, want %d", stats.ClientsCount, want)
	}
}

// TestGetClientOfAClosedConnection: a closed connection's id finds nothing, and a
// new connection gets a new id rather than the closed one's.
func TestGetClientOfAClosedConnection(t *testing.T) {
	s := testServer(t, t.TempDir(), 2)
	admin := dialRoot(t, s)
	ctx := testContext(t)
	conn, err := net.DialTimeout("tcp", s.Addr().String(), 5*time.Second)
	mustOK(t, "dial", err)
	address := conn.LocalAddr().String()
	listed := awaitClients(t, admin, address, func(listed map[string]wire.ClientHeader) bool {
		_, ok := listed[address]
		return ok
	})
	id := listed[address].ClientID
	conn.Close()
	awaitClients(t, admin, address+" gone", func(listed map[string]wire.ClientHeader) bool {
		_, ok := listed[address]
		return !ok
	})
	_, err = admin.GetClient(ctx, id)
	wantCode(t, "GetClient of a closed connection", err, wire.ErrClientNotFound)

	next, err := net.DialTimeout("tcp", s.Addr().String(), 5*time.Second)
	mustOK(t, "dial", err)
	t.Cleanup(func() { next.Close() })
	nextAddress := next.LocalAddr().String()
	listed = awaitClients(t, admin, nextAddress, func(listed map[string]wire.ClientHeader) bool {
		_, ok := listed[nextAddress]
		return ok
	})
	if listed[nextAddress].ClientID == id {
		t.Fatalf("a new connection reuses the closed one's client id %d", id)
	}
}

// TestGetClientsShowsLoginAndLogout: a listed connection's user id follows its
// session: none, then the user it logged in as, then none again after a logout,
// under the same client id throughout.
func TestGetClientsShowsLoginAndLogout(t *testing.T) {
	s := testServer(t, t.TempDir(), 2)
	admin := dialRoot(t, s)
	ctx := testContext(t)
	_, err := admin.CreateUser(ctx, "dave", "davepw", wire.UserActive, nil)
	mustOK(t, "CreateUser", err)

	c := dialAnonymous(t, s)
	mustOK(t, "Ping", c.Ping(ctx))
	_, err = c.Login(ctx, "dave", "davepw")
	mustOK(t, "Login", err)
	me, err := c.GetMe(ctx)
	mustOK(t, "GetMe", err)
	if me.UserID == 0 || me.UserID == wire.ClientUserIDNone {
		t.Fatalf("GetMe after login: user %d", me.UserID)
	}
	address := string(me.Address)
	listed := clientsByAddress(t, ctx, admin)
	if h := listed[address]; h.ClientID != me.ClientID || h.UserID != me.UserID {
		t.Fatalf("logged-in connection listed as %+v, GetMe says %+v", h, me.ClientHeader)
	}
	mustOK(t, "Logout", c.Logout(ctx))
	// The logout's reply left shard 0 after it recorded the logout: no wait needed.
	listed = clientsByAddress(t, ctx, admin)
	if h := listed[address]; h.ClientID != me.ClientID || h.UserID != wire.ClientUserIDNone {
		t.Fatalf("logged-out connection listed as %+v (client id was %d)", h, me.ClientID)
	}
}

// TestClientIDSurvivesLogin: the id a connection is listed under before it speaks
// is the one it keeps once logged in (GetClients, GetMe).
func TestClientIDSurvivesLogin(t *testing.T) {
	s := testServer(t, t.TempDir(), 2)
	admin := dialRoot(t, s)
	r := dialRaw(t, s)
	address := r.conn.LocalAddr().String()
	listed := awaitClients(t, admin, address, func(listed map[string]wire.ClientHeader) bool {
		_, ok := listed[address]
		return ok
	})
	id := listed[address].ClientID

	client := wire.Uint128{Lo: 0xc1, Hi: 1}
	epoch := r.login(client)
	// The login's reply left shard 0 after it recorded the session: no wait needed.
	if h := clientsByAddress(t, testContext(t), admin)[address]; h.ClientID != id || h.UserID != 0 {
		t.Fatalf("logged-in connection listed as %+v, want client id %d and the root user", h, id)
	}
	r.send(rawRequest{client: client, request: 1, session: epoch, op: wire.OperationNonReplicated, code: wire.CodeGetMe})
	h, body := r.reply()
	var me wire.ClientDetails
	if err := me.Decode(body); h.Status != 0 || err != nil || me.ClientID != id || string(me.Address) != address {
		t.Fatalf("GetMe: status %d %+v %v, want client id %d at %s", h.Status, me.ClientHeader, err, id, address)
	}
}
