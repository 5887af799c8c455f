package server

import (
	"net/netip"
	"testing"
)

// GET_ME and GET_CLIENTS report each session's peer address (ClientResponse, apache/iggy
// core/binary_protocol/src/responses/clients/client_response.rs):
// the loopback address and the client's own port, whichever shard its connection
// was handed to.
func TestClientAddresses(t *testing.T) {
	s := testServer(t, t.TempDir(), 2)
	ctx := testContext(t)
	seen := map[string]uint32{}
	for range 3 {
		c := dialRoot(t, s)
		me, err := c.GetMe(ctx)
		mustOK(t, "GetMe", err)
		addr, err := netip.ParseAddrPort(string(me.Address))
		if err != nil || addr.Addr() != netip.MustParseAddr("127.0.0.1") || addr.Port() == 0 ||
			int(addr.Port()) == s.Addr().Port {
			t.Fatalf("GetMe address %q (%v)", me.Address, err)
		}
		if _, dup := seen[string(me.Address)]; dup {
			t.Fatalf("two sessions report the address %q", me.Address)
		}
		seen[string(me.Address)] = me.ClientID
	}
	clients, err := dialRoot(t, s).GetClients(ctx)
	mustOK(t, "GetClients", err)
	found := 0
	for _, c := range clients {
		if id, ok := seen[string(c.Address)]; ok {
			if id != c.ClientID {
				t.Fatalf("GetClients: %q is client %d, GetMe said %d", c.Address, c.ClientID, id)
			}
			found++
		}
	}
	if found != len(seen) {
		t.Fatalf("GetClients %+v lists %d of the %d addresses", clients, found, len(seen))
	}
}
