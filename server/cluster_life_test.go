package server

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/wire"
)

// dialPAT logs in at s with a personal access token, following the leader as the
// SDKs do (clusterUser).
func dialPAT(t *testing.T, s *Server, token string) *client.Client {
	t.Helper()
	c, err := client.Dial(testContext(t), s.Addr().String(), client.WithPersonalAccessToken(token))
	if err != nil {
		t.Fatalf("Dial %s with a token: %v", s.Addr(), err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// bulkMetadataOps has workers clients (logged in at s with token) make pairs
// pairs of metadata ops each, alternately a login with the token (a logout and a
// register) and a stream created and deleted: the bulk of a long life, at the
// metadata plane's pace, without an argon2id check per op.
func bulkMetadataOps(t *testing.T, s *Server, token string, workers, pairs int) {
	t.Helper()
	clients := make([]*client.Client, workers)
	for w := range clients {
		clients[w] = dialPAT(t, s, token)
	}
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w, c := range clients {
		wg.Go(func() {
			// Each request is bounded by the client's request timeout; the
			// pairs together may take longer than testContext's 30 s on a
			// loaded machine.
			ctx := t.Context()
			for k := range pairs {
				if k%2 == 0 {
					if _, err := c.LoginWithPersonalAccessToken(ctx, token); err != nil {
						errs <- fmt.Errorf("worker %d: login %d: %w", w, k, err)
						return
					}
					continue
				}
				st, err := c.CreateStream(ctx, fmt.Sprintf("bulk-%d-%d", w, k))
				if err == nil {
					err = c.DeleteStream(ctx, wire.NumericIdentifier(st.ID))
				}
				if err != nil {
					errs <- fmt.Errorf("worker %d: stream %d: %w", w, k, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// appliedOp is the metadata op s has applied.
func appliedOpOf(t *testing.T, s *Server) (op uint64, snapshots int64) {
	t.Helper()
	onMetaShard(t, s, func(p *metaPlane) { op, snapshots = p.Applied().Op, p.SnapshotsTaken() })
	return op, snapshots
}

// clusterView is what a client reads at one node: the state a follower must serve
// as the primary does.
type clusterView struct {
	streams, users, tokens, groups []string
	offset                         uint64
	messages                       int
}

func readClusterView(t *testing.T, c *client.Client) (clusterView, error) {
	ctx := testContext(t)
	var v clusterView
	streams, err := c.GetStreams(ctx)
	if err != nil {
		return v, err
	}
	for _, s := range streams {
		v.streams = append(v.streams, string(s.Name))
	}
	users, err := c.GetUsers(ctx)
	if err != nil {
		return v, err
	}
	for _, u := range users {
		v.users = append(v.users, string(u.Username))
	}
	tokens, err := c.GetPersonalAccessTokens(ctx)
	if err != nil {
		return v, err
	}
	for _, p := range tokens {
		v.tokens = append(v.tokens, string(p.Name))
	}
	groups, err := c.GetConsumerGroups(ctx, client.NameID("orders"), client.NameID("events"))
	if err != nil {
		return v, err
	}
	for _, g := range groups {
		v.groups = append(v.groups, fmt.Sprintf("%s:%d", g.Name, g.MembersCount))
	}
	for _, list := range [][]string{v.streams, v.users, v.tokens, v.groups} {
		slices.Sort(list)
	}
	o, ok, err := c.GetConsumerOffset(ctx, &wire.GetConsumerOffset{Consumer: client.SingleConsumer(client.ID(7)),
		StreamID: client.NameID("orders"), TopicID: client.NameID("events"), Partition: wire.SomePartition(0)})
	if err != nil {
		return v, err
	}
	if ok {
		v.offset = o.StoredOffset
	}
	v.messages = polledCount(t, c)
	return v, nil
}

func (v clusterView) String() string {
	return fmt.Sprintf("%d streams, users %v, tokens %v, groups %v, offset %d, %d messages",
		len(v.streams), v.users, v.tokens, v.groups, v.offset, v.messages)
}

func (v clusterView) equal(o clusterView) bool {
	return slices.Equal(v.streams, o.streams) && slices.Equal(v.users, o.users) && slices.Equal(v.tokens, o.tokens) &&
		slices.Equal(v.groups, o.groups) && v.offset == o.offset && v.messages == o.messages
}

// TestClusterLongLife: a 3-node cluster at the production defaults (a snapshot
// every 960 metadata ops, a header window of 1,024) lives past five windows of
// metadata ops: streams, topics and consumer groups created and deleted, users
// and tokens made, a few password logins (each an argon2id check) and token
// logins in bulk, messages written and read, consumer offsets stored. A follower
// is stopped while the others take two snapshots past it and run beyond their
// window; restarted from its own disk it catches up by a state transfer and the
// ops after it, and then holds the same metadata and client table as the others
// (nothing applied twice, nothing missed) and serves the same streams, users,
// tokens, consumer groups, offsets and messages. All three then restart at once:
// every acknowledged write is there, and writes go on.
func TestClusterLongLife(t *testing.T) {
	started := time.Now()
	cfgs := clusterConfigs(t, 3, testClusterSecret)
	for i := range cfgs {
		cfgs[i].SnapshotIntervalOps = defaultSetup().SnapshotIntervalOps
	}
	servers := formCluster(t, cfgs)
	root := dialClusterUser(t, servers[0])
	root.must("CreateUser", func(ctx context.Context, c *client.Client) error {
		_, err := c.CreateUser(ctx, "alice", "alice-secret", wire.UserActive, nil)
		return err
	})
	var token string
	root.must("CreatePersonalAccessToken", func(ctx context.Context, c *client.Client) (err error) {
		token, err = c.CreatePersonalAccessToken(ctx, "bulk", 0)
		return err
	})
	root.createStream("orders")
	root.createTopic("orders", "events", 2, nil)
	createGroup := func(name string) {
		t.Helper()
		root.must("CreateConsumerGroup", func(ctx context.Context, c *client.Client) error {
			_, err := c.CreateConsumerGroup(ctx, client.NameID("orders"), client.NameID("events"), name)
			return err
		})
	}
	createGroup("early")
	root.join(client.NameID("orders"), client.NameID("events"), client.NameID("early"))
	send := func(n int, prefix string) { t.Helper(); root.sendTo("orders", "events", 0, messages(n, prefix)) }
	storeOffset := func(offset uint64) {
		t.Helper()
		root.storeOffsetOf(client.SingleConsumer(client.ID(7)), "orders", "events", 0, offset)
	}
	send(10, "first")
	storeOffset(4)
	// A few password logins, at every node (a backup forwards its logins), once
	// every node holds alice.
	sameMetadata(t, servers)
	for _, s := range servers {
		dialAs(t, s, "alice", "alice-secret")
	}
	bulkMetadataOps(t, servers[0], token, 4, 130)
	op, snapshots := appliedOpOf(t, servers[0])
	t.Logf("all up: op %d, %d snapshots, %v", op, snapshots, time.Since(started).Round(time.Millisecond))

	// A follower stops; the others take two snapshots past it and go beyond
	// their header window, so it can only catch up by a state transfer.
	down := root.aFollowerToStop(servers)
	stopServer(t, servers[down])
	up := servers[(down+1)%len(servers)]
	_, before := appliedOpOf(t, up)
	downAt := op
	root.must("CreateUser", func(ctx context.Context, c *client.Client) error {
		_, err := c.CreateUser(ctx, "bob", "bob-secret", wire.UserActive, nil)
		return err
	})
	root.must("CreatePersonalAccessToken", func(ctx context.Context, c *client.Client) error {
		_, err := c.CreatePersonalAccessToken(ctx, "while-down", 0)
		return err
	})
	createGroup("late")
	root.deleteGroup(client.NameID("orders"), client.NameID("events"), client.NameID("early"))
	send(5, "while-down")
	storeOffset(12)
	bulkMetadataOps(t, up, token, 4, 290)
	op, snapshots = appliedOpOf(t, up)
	if snapshots-before < 2 || op-downAt <= journalSlotsMin {
		t.Fatalf("while the follower was down: %d snapshots, %d ops; want 2 and more than a window", snapshots-before, op-downAt)
	}
	t.Logf("follower down: op %d, %d snapshots, %v", op, snapshots, time.Since(started).Round(time.Millisecond))

	servers[down] = startTestServer(t, cfgs[down])
	waitUntil(t, "the follower installs a state", func() bool { return servers[down].meta.TransfersInstalled() > 0 })
	root.createStream("after-catch-up")
	sameMetadata(t, servers)
	primaryView, err := readClusterView(t, root.c)
	if err != nil {
		t.Fatal(err)
	}
	follower := dialCluster(t, servers[down])
	var followerView clusterView
	waitUntil(t, "the follower serves what the primary does", func() bool {
		followerView, err = readClusterView(t, follower)
		return err == nil && followerView.equal(primaryView)
	})
	if !slices.Contains(primaryView.users, "bob") || !slices.Contains(primaryView.tokens, "while-down") ||
		!slices.Equal(primaryView.groups, []string{"late:0"}) || primaryView.offset != 12 || primaryView.messages != 15 {
		t.Fatalf("the primary serves %v", primaryView)
	}
	t.Logf("follower caught up: %v, %v", followerView, time.Since(started).Round(time.Millisecond))

	// All three restart at once.
	for _, s := range servers {
		stopServer(t, s)
	}
	for i := range cfgs {
		servers[i] = startTestServer(t, cfgs[i])
	}
	leader := awaitAgreedLeader(t, servers)
	root = dialClusterUser(t, servers[leader])
	waitUntil(t, "the restarted cluster serves what it did", func() bool {
		v, err := readClusterView(t, root.c)
		// The root's session of before the restart is gone with its
		// connection; its group membership too.
		return err == nil && v.equal(primaryView)
	})
	bulkMetadataOps(t, servers[leader], token, 4, 250)
	root.createStream("after-restart")
	at := sameMetadata(t, servers)
	if at < 5000 {
		t.Fatalf("the cluster lived %d metadata ops, want at least 5,000", at)
	}
	t.Logf("after the full restart: op %d, %v", at, time.Since(started).Round(time.Millisecond))
}
