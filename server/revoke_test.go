package server

import (
	"errors"
	"testing"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/wire"
)

// wantEvicted checks that a connection's next request finds it evicted with reason.
func wantEvicted(t *testing.T, what string, c *client.Client, reason wire.EvictionReason) {
	t.Helper()
	err := c.Ping(testContext(t))
	var ev *client.EvictionError
	if !errors.As(err, &ev) || ev.Reason != reason {
		t.Fatalf("%s: Ping answered %v, want an eviction (%s)", what, err, reason)
	}
}

// TestRevokedAccountsEndTheirSessions: a user deactivated or deleted, and a personal
// access token deleted, end the sessions that stand on them at once, on every
// shard, with the reason the SDKs report as Unauthenticated; other sessions go on.
func TestRevokedAccountsEndTheirSessions(t *testing.T) {
	s := testServer(t, t.TempDir(), 2)
	root := dialRoot(t, s)
	ctx := testContext(t)
	for _, name := range []string{"deactivated", "deleted", "owner"} {
		mustOK(t, "create user", func() error {
			_, err := root.CreateUser(ctx, name, "secret-1", wire.UserActive, &wire.Permissions{})
			return err
		}())
	}
	dialTwice := func(user string) [2]*client.Client {
		first := dialAs(t, s, user, "secret-1")
		return [2]*client.Client{first, onOtherShard(t, s, first, user, "secret-1")}
	}
	deactivated, deleted, owner := dialTwice("deactivated"), dialTwice("deleted"), dialAs(t, s, "owner", "secret-1")
	token, err := owner.CreatePersonalAccessToken(ctx, "t", 0)
	mustOK(t, "create token", err)
	byToken, err := client.Dial(ctx, s.Addr().String(), client.WithPersonalAccessToken(token))
	mustOK(t, "login with the token", err)
	t.Cleanup(func() { byToken.Close() })

	mustOK(t, "deactivate", root.UpdateUser(ctx, wire.StringIdentifier([]byte("deactivated")), client.UserUpdate{Status: wire.UserInactive}))
	for _, c := range deactivated {
		wantEvicted(t, "a deactivated user's session", c, wire.EvictionUserInactive)
	}
	mustOK(t, "delete user", root.DeleteUser(ctx, wire.StringIdentifier([]byte("deleted"))))
	for _, c := range deleted {
		wantEvicted(t, "a deleted user's session", c, wire.EvictionNoSession)
	}
	mustOK(t, "owner's password session before the token goes", owner.Ping(ctx))
	mustOK(t, "token session before the token goes", byToken.Ping(ctx))
	mustOK(t, "delete token", owner.DeletePersonalAccessToken(ctx, "t"))
	wantEvicted(t, "a deleted token's session", byToken, wire.EvictionNoSession)
	mustOK(t, "the owner's password session goes on", owner.Ping(ctx))
	mustOK(t, "root goes on", root.Ping(ctx))
}
