package compat

import (
	"encoding/binary"
	"testing"
	"time"
)

// GetClients lists every connection of the node, logged in or not: the reference
// server's SessionManager.iter_clients walks all connections, and a connection that has
// not logged in reports user_id 0xFFFFFFFF (connected_client_to_response in apache/iggy
// core/server/src/responses.rs). Every header carries the peer's ip:port as its
// address.
func TestGetClientsListsEveryConnection(t *testing.T) {
	addr := startServer(t)
	c := dialRoot(t, addr)
	other := dial(t, addr)
	other.get(codePing, nil)
	body := c.ok("GetClients", opNonReplicated, 22, nil)
	t.Logf("GetClients body % x", body)
	d := decoder{t: t, what: "GetClients", b: body}
	byAddress := map[string]clientHeader{}
	var users []uint32
	for !d.done() {
		h := d.clientHeader()
		users = append(users, h.userID)
		byAddress[h.address] = h
		if h.address == "" {
			t.Errorf("client %d has an empty address, want the peer ip:port", h.clientID)
		}
	}
	if len(users) != 2 {
		t.Fatalf("GetClients users %v, want root (0) and the anonymous connection (0xFFFFFFFF)", users)
	}
	root, ok := byAddress[c.conn.LocalAddr().String()]
	if !ok || root.userID != 0 || root.transport != 1 {
		t.Errorf("root's connection %s: %+v (found %v), want user 0 over TCP", c.conn.LocalAddr(), root, ok)
	}
	anonymous, ok := byAddress[other.conn.LocalAddr().String()]
	if !ok || anonymous.userID != 0xFFFFFFFF || anonymous.groups != 0 {
		t.Fatalf("anonymous connection %s: %+v (found %v), want user 0xFFFFFFFF in no group", other.conn.LocalAddr(), anonymous, ok)
	}
	if root.clientID == anonymous.clientID {
		t.Errorf("both connections report client id %d", root.clientID)
	}

	// GetClient finds the anonymous connection by its client id.
	one := c.ok("GetClient", opNonReplicated, 21, binary.LittleEndian.AppendUint32(nil, anonymous.clientID))
	d = decoder{t: t, what: "GetClient", b: one}
	if got := d.clientHeader(); got != anonymous {
		t.Errorf("GetClient(%d) = %+v, want %+v", anonymous.clientID, got, anonymous)
	}
	d.end()

	// A closed connection leaves the list. The close reaches the server's shards
	// asynchronously, so ask again, for a bounded time.
	other.conn.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		body = c.ok("GetClients", opNonReplicated, 22, nil)
		d = decoder{t: t, what: "GetClients", b: body}
		count := 0
		for !d.done() {
			d.clientHeader()
			count++
		}
		if count == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GetClients still lists %d connections 5 s after one closed", count)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
