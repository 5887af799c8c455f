package server

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/wire"
)

// TestClusterFollowerServesNewAccountsAtOnce: a user or a personal access token
// created at the primary logs in at a follower right after the primary
// acknowledged it (the official Go SDK's suite creates a token, then logs in
// through another node): the primary sends its commit point to the backups as soon
// as it commits (vsr.CoreConfig.CommitEagerly). The follower used to refuse such a
// login until the next commit broadcast, and to answer a forwarded login only then;
// it now holds the login until the commit reaches it, so at the production
// broadcast (500 ms) a follower without the eager commit still lets it in, late.
// Here the broadcast is 30 s apart (the heartbeat timeout 4 times that, as the
// configuration requires), the production timings otherwise: a login that waited
// for a broadcast outlasts its 5 s deadline. Root writes as an SDK user does,
// following the leader; each login goes to a follower of the leader of the moment,
// without redirection, as the point is where it logs in.
func TestClusterFollowerServesNewAccountsAtOnce(t *testing.T) {
	cfgs := clusterConfigs(t, 3, testClusterSecret)
	for i := range cfgs {
		cfgs[i].clusterTiming = nil
		cfgs[i].Cluster.CommitBroadcastInterval = 30 * time.Second
		cfgs[i].Cluster.HeartbeatTimeout = 4 * cfgs[i].Cluster.CommitBroadcastInterval
	}
	servers := formCluster(t, cfgs)
	root := dialClusterUser(t, servers[0])
	ctx := testContext(t)
	// follower is a follower of the leader of the moment, the first or the second
	// by k.
	follower := func(k int) *Server {
		t.Helper()
		leader := int(awaitAgreedLeader(t, servers))
		return servers[(leader+1+k%2)%len(servers)]
	}
	login := func(at *Server, option client.Option, what string) {
		t.Helper()
		started := time.Now()
		c, err := client.Dial(ctx, at.Addr().String(), option, client.WithLeaderRedirection(false), client.WithRequestTimeout(5*time.Second),
			client.WithTransientRetry(client.TransientRetry{Interval: 20 * time.Millisecond, NotCommittedWindow: time.Second, NotAcceptedWindow: 100 * time.Millisecond}))
		if err != nil {
			t.Fatalf("%s at follower %d right after its creation: %v", what, at.cluster.self, err)
		}
		c.Close()
		t.Logf("%s at follower %d: %v", what, at.cluster.self, time.Since(started).Round(time.Millisecond))
	}
	for k := range 3 {
		name, password := fmt.Sprintf("user-%d", k), fmt.Sprintf("secret-%d", k)
		root.must("CreateUser", func(ctx context.Context, c *client.Client) error {
			_, err := c.CreateUser(ctx, name, password, wire.UserActive, nil)
			return err
		})
		login(follower(k), client.WithCredentials(name, password), "password login of "+name)
	}
	// A wrong password at a follower is still refused, once the follower has
	// heard from its primary.
	_, err := client.Dial(ctx, follower(0).Addr().String(), client.WithCredentials("user-0", "wrong"), client.WithLeaderRedirection(false))
	if !errors.Is(err, wire.ErrInvalidCredentials) {
		t.Fatalf("a wrong password at a follower: %v, want InvalidCredentials", err)
	}
	for k := range 10 {
		var token string
		root.must("CreatePersonalAccessToken", func(ctx context.Context, c *client.Client) (err error) {
			token, err = c.CreatePersonalAccessToken(ctx, fmt.Sprintf("token-%d", k), 0)
			return err
		})
		login(follower(k), client.WithPersonalAccessToken(token), fmt.Sprintf("token-%d login", k))
	}
}
