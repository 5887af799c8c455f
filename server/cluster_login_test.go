package server

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/wire"
)

// TestClusterFollowerServesNewAccountsAtOnce: at the production timings (a commit
// broadcast every 500 ms), a user or a personal access token created at the
// primary logs in at a follower right after the primary acknowledged it (the
// official Go SDK's suite creates a token, then logs in through another node):
// the primary sends its commit point to the backups as soon as it commits
// (vsr.CoreConfig.CommitEagerly). The follower used to refuse such a login until
// the next broadcast, and to answer a forwarded login only then.
func TestClusterFollowerServesNewAccountsAtOnce(t *testing.T) {
	cfgs := clusterConfigs(t, 3, testClusterSecret)
	for i := range cfgs {
		cfgs[i].clusterTiming = nil
	}
	servers := startCluster(t, cfgs)
	root := dialCluster(t, servers[0])
	ctx := testContext(t)
	login := func(at *Server, option client.Option, what string) {
		t.Helper()
		started := time.Now()
		c, err := client.Dial(ctx, at.Addr().String(), option, client.WithLeaderRedirection(false),
			client.WithTransientRetry(client.TransientRetry{Interval: 20 * time.Millisecond, NotCommittedWindow: time.Second, NotAcceptedWindow: 100 * time.Millisecond}))
		if err != nil {
			t.Fatalf("%s at follower %d right after its creation: %v", what, at.cluster.self, err)
		}
		c.Close()
		t.Logf("%s at follower %d: %v", what, at.cluster.self, time.Since(started).Round(time.Millisecond))
	}
	for k := range 3 {
		name, password := fmt.Sprintf("user-%d", k), fmt.Sprintf("secret-%d", k)
		if _, err := root.CreateUser(ctx, name, password, wire.UserActive, nil); err != nil {
			t.Fatal(err)
		}
		login(servers[1+k%2], client.WithCredentials(name, password), "password login of "+name)
	}
	// A wrong password at a follower is still refused, once the follower has
	// heard from its primary.
	_, err := client.Dial(ctx, servers[1].Addr().String(), client.WithCredentials("user-0", "wrong"), client.WithLeaderRedirection(false))
	if !errors.Is(err, wire.ErrInvalidCredentials) {
		t.Fatalf("a wrong password at a follower: %v, want InvalidCredentials", err)
	}
	for k := range 10 {
		token, err := root.CreatePersonalAccessToken(ctx, fmt.Sprintf("token-%d", k), 0)
		if err != nil {
			t.Fatal(err)
		}
		login(servers[1+k%2], client.WithPersonalAccessToken(token), fmt.Sprintf("token-%d login", k))
	}
}
