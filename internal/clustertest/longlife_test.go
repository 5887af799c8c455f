package clustertest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/wire"
)

// A cluster at the production defaults of the metadata plane (header window,
// checkpoint trigger, pipeline depth: nothing in the nodes' files but the roster and
// short consensus timings) lives through many checkpoint windows: more than 6,000
// metadata operations with logins in between, a follower killed for a third of them
// (the others compact past it twice) that catches up once restarted, and then a
// restart of every node at once, by SIGKILL and by SIGTERM, that keeps every
// acknowledged write. A cluster that cannot take its next checkpoint stops
// committing for good after one window (1,024 ops): every login is an op, so that
// is every cluster's first day.
func TestClusterLivesPastManyCheckpoints(t *testing.T) {
	if testing.Short() {
		t.Skip("thousands of metadata operations on a three-node cluster")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := newCluster(t, 3)
	c.startAll()
	leader := c.awaitLeader(ctx, c.nodes)
	w := newMetadataWorkload(ctx, t, c, leader)
	defer w.close()

	const opsPerThird = 2100
	w.run(opsPerThird, "before")
	follower := w.nodeToKill()
	follower.kill()
	w.run(opsPerThird, "while node down")
	follower.start()
	follower.awaitListening(ctx) // the workload logs in at every node, this one too
	w.run(opsPerThird, "after restart")
	if w.ops < 6000 {
		t.Fatalf("the workload made %d metadata operations, want at least 6,000", w.ops)
	}
	t.Logf("%d metadata operations (%d logins) in %v", w.ops, w.logins, w.elapsed.Round(time.Millisecond))
	want := awaitSameState(ctx, t, c.nodes)

	for _, how := range []struct {
		name string
		stop func(*node)
	}{
		{"SIGKILL", func(n *node) { n.kill() }},
		{"SIGTERM", func(n *node) { n.terminate() }},
	} {
		w.close()
		stopAllAtOnce(c, how.stop)
		c.startAll()
		leader = c.awaitLeader(ctx, c.nodes)
		if got := awaitSameState(ctx, t, c.nodes); got != want {
			t.Fatalf("after a restart of every node by %s the cluster holds\n%s\nit held before\n%s", how.name, got, want)
		}
		phases := w.phases
		w = newMetadataWorkload(ctx, t, c, leader)
		w.phases = phases
		w.run(200, "after a full restart by "+how.name)
		want = awaitSameState(ctx, t, c.nodes)
	}
}

// awaitListening waits (at most 30 s) until the node accepts connections on its
// client port: a node just started may take seconds to, on a loaded machine.
func (n *node) awaitListening(ctx context.Context) {
	t := n.c.t
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var d net.Dialer
	for {
		conn, err := d.DialContext(ctx, "tcp", n.addr())
		if err == nil {
			conn.Close()
			return
		}
		if err := n.checkAlive(); err != nil {
			t.Fatal(err)
		}
		if !waitCtx(ctx, 50*time.Millisecond) {
			t.Fatalf("node %d not listening on %s 30 s after its start: %v", n.id, n.addr(), err)
		}
	}
}

// stopAllAtOnce stops every node at the same moment: the signals go out together,
// then each exit is awaited.
func stopAllAtOnce(c *cluster, stop func(*node)) {
	done := make(chan struct{})
	for _, n := range c.nodes {
		go func() {
			stop(n)
			done <- struct{}{}
		}()
	}
	for range c.nodes {
		<-done
	}
}

// terminate sends SIGTERM and waits (at most 30 s) for the node to exit by itself.
func (n *node) terminate() {
	if n.admin != nil {
		n.admin.Close()
		n.admin = nil
	}
	if n.proc == nil || !n.running() {
		return
	}
	_ = n.proc.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.proc.exited:
	case <-time.After(30 * time.Second):
		n.c.t.Errorf("node %d still running 30 s after SIGTERM; killing it", n.id)
		n.kill()
		return
	}
	if n.proc.exitErr != nil {
		n.c.t.Errorf("node %d exited after SIGTERM with %v\n%s", n.id, n.proc.exitErr, n.logTail(2048))
	}
	n.awaitPortsReleased()
}

// metadataWorkload drives metadata operations through a client that follows the
// leader: stream creates and deletes for bulk, logins by personal access token at
// every node, a few password logins (each costs an argon2id check), and state that
// stays: a stream per phase with a topic, a consumer group, stored consumer offsets,
// a user and a token. Its clients wait for a reply as long as the SDKs do (30 s):
// a write prepared at a leader that a stall then demoted is answered 57 only after
// two heartbeat timeouts, then replayed and followed to the new leader, which
// outlasted the harness's 10 s with another stall on the way.
type metadataWorkload struct {
	ctx     context.Context
	t       *testing.T
	c       *cluster
	admin   *client.Client
	token   string
	ops     int
	logins  int
	phases  int
	elapsed time.Duration
}

func newMetadataWorkload(ctx context.Context, t *testing.T, c *cluster, leader *node) *metadataWorkload {
	t.Helper()
	admin, err := leader.dial(ctx, client.WithRequestTimeout(client.DefaultRequestTimeout))
	if err != nil {
		t.Fatalf("login at the leader, node %d: %v", leader.id, err)
	}
	w := &metadataWorkload{ctx: ctx, t: t, c: c, admin: admin}
	name := fmt.Sprintf("bulk-%d", time.Now().UnixNano())
	if w.token, err = admin.CreatePersonalAccessToken(ctx, name, 0); err != nil {
		t.Fatalf("create a personal access token: %v", err)
	}
	w.ops += 2 // the login and the token
	return w
}

// nodeToKill is a follower of the leader of the moment that does not hold the
// workload's connection: a stall of a node may have moved the leader since the
// workload began, and a killed node breaks the connections it holds.
func (w *metadataWorkload) nodeToKill() *node {
	w.t.Helper()
	leader := w.c.awaitLeader(w.ctx, w.c.nodes)
	for _, n := range w.c.others(leader) {
		if n.addr() != w.admin.Addr() {
			return n
		}
	}
	w.t.Fatalf("no follower to kill: the leader is node %d, the workload's client is at %s", leader.id, w.admin.Addr())
	return nil
}

func (w *metadataWorkload) close() {
	if w.admin != nil {
		w.admin.Close()
		w.admin = nil
	}
}

// run makes at least ops metadata operations.
func (w *metadataWorkload) run(ops int, phase string) {
	w.t.Helper()
	start := time.Now()
	defer func() { w.elapsed += time.Since(start) }()
	w.phases++
	target := w.ops + ops
	w.keepState(phase)
	for i := 0; w.ops < target; i++ {
		name := fmt.Sprintf("churn-%d-%d", w.phases, i)
		if _, err := w.admin.CreateStream(w.ctx, name); err != nil {
			w.t.Fatalf("%s, after %d metadata operations: create stream %q: %v", phase, w.ops, name, err)
		}
		if err := w.admin.DeleteStream(w.ctx, client.NameID(name)); err != nil {
			w.t.Fatalf("%s, after %d metadata operations: delete stream %q: %v", phase, w.ops, name, err)
		}
		w.ops += 2
		if i%40 == 39 {
			w.loginAt(w.c.nodes[(i/40)%len(w.c.nodes)], i%400 == 399)
		}
	}
}

// loginAt logs in at n (by password or by the token), asks who it is, and leaves.
func (w *metadataWorkload) loginAt(n *node, password bool) {
	w.t.Helper()
	if !n.running() {
		return
	}
	opts := []client.Option{client.WithRequestTimeout(client.DefaultRequestTimeout)}
	if password {
		opts = append(opts, client.WithCredentials(rootUsername, rootPassword))
	} else {
		opts = append(opts, client.WithPersonalAccessToken(w.token))
	}
	cl, err := client.Dial(w.ctx, n.addr(), opts...)
	if err != nil {
		w.t.Fatalf("after %d metadata operations: login at node %d (password %v): %v", w.ops, n.id, password, err)
	}
	defer cl.Close()
	if _, err := cl.GetMe(w.ctx); err != nil {
		w.t.Fatalf("after %d metadata operations: GetMe after a login at node %d: %v", w.ops, n.id, err)
	}
	w.ops++
	w.logins++
}

// keepState makes what the phase leaves behind: a stream with a two-partition topic
// and a few messages, a consumer group, consumer offsets, a user and a token.
func (w *metadataWorkload) keepState(phase string) {
	w.t.Helper()
	ctx, cl := w.ctx, w.admin
	stream := fmt.Sprintf("keep-%d", w.phases)
	must := func(what string, err error) {
		if err != nil {
			w.t.Fatalf("%s: %s: %v", phase, what, err)
		}
	}
	_, err := cl.CreateStream(ctx, stream)
	must("create stream", err)
	_, err = cl.CreateTopic(ctx, client.NameID(stream), "events", 2, nil)
	must("create topic", err)
	_, err = cl.CreateConsumerGroup(ctx, client.NameID(stream), client.NameID("events"), "readers")
	must("create consumer group", err)
	_, err = cl.CreateUser(ctx, fmt.Sprintf("user-%d", w.phases), "password-of-a-user", wire.UserActive, nil)
	must("create user", err)
	_, err = cl.CreatePersonalAccessToken(ctx, fmt.Sprintf("token-%d", w.phases), 0)
	must("create token", err)
	w.ops += 5
	for p := uint32(0); p < 2; p++ {
		msgs := []client.Message{{Payload: []byte(fmt.Sprintf("%s partition %d", phase, p))}}
		_, err := cl.SendMessages(ctx, client.NameID(stream), client.NameID("events"),
			wire.Partitioning{Kind: wire.PartitioningPartitionID, PartitionID: p}, msgs)
		must("send", err)
		must("store offset", cl.StoreConsumerOffset(ctx, &wire.StoreConsumerOffset{
			Consumer: client.SingleConsumer(client.ID(7)), StreamID: client.NameID(stream),
			TopicID: client.NameID("events"), Partition: wire.SomePartition(p), Offset: 0, Ack: wire.AckQuorum}))
	}
}

// awaitSameState waits (at most 60 s) until every node describes the same state,
// asked at each node alone, and returns it.
func awaitSameState(ctx context.Context, t *testing.T, nodes []*node) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var last []string
	var lastErr error
	for {
		last, lastErr = last[:0], nil
		for _, n := range nodes {
			s, err := describeState(ctx, n)
			if err != nil {
				lastErr = fmt.Errorf("node %d: %w", n.id, err)
				break
			}
			last = append(last, s)
		}
		if lastErr == nil && len(slices.Compact(slices.Clone(last))) == 1 {
			return last[0]
		}
		for _, n := range nodes {
			if err := n.checkAlive(); err != nil {
				t.Fatal(err)
			}
		}
		if !waitCtx(ctx, 200*time.Millisecond) {
			if lastErr != nil {
				t.Fatalf("the nodes never described their state: %v", lastErr)
			}
			for i, s := range last {
				t.Logf("node %d:\n%s", nodes[i].id, s)
			}
			t.Fatal("the nodes never came to hold the same state")
		}
	}
}

// describeState is what node n serves, asked at n alone: streams with their
// topics, partitions, message counts and consumer groups; users; root's tokens;
// the auditor's consumer offsets.
func describeState(ctx context.Context, n *node) (string, error) {
	cl, err := n.adminClient(ctx)
	if err != nil {
		return "", err
	}
	s, err := describeStateOf(ctx, cl)
	if err != nil && isConnectionLoss(err) {
		n.dropAdmin()
	}
	return s, err
}

func describeStateOf(ctx context.Context, cl *client.Client) (string, error) {
	var b strings.Builder
	streams, err := cl.GetStreams(ctx)
	if err != nil {
		return "", fmt.Errorf("get streams: %w", err)
	}
	slices.SortFunc(streams, func(a, b wire.StreamHeader) int { return int(a.ID) - int(b.ID) })
	for _, s := range streams {
		fmt.Fprintf(&b, "stream %d %q topics=%d messages=%d bytes=%d\n", s.ID, s.Name, s.TopicsCount, s.MessagesCount, s.SizeBytes)
		details, err := cl.GetStream(ctx, wire.NumericIdentifier(s.ID))
		if err != nil {
			return "", fmt.Errorf("get stream %d: %w", s.ID, err)
		}
		for _, tp := range details.Topics {
			fmt.Fprintf(&b, "  topic %d %q partitions=%d messages=%d\n", tp.ID, tp.Name, tp.PartitionsCount, tp.MessagesCount)
			groups, err := cl.GetConsumerGroups(ctx, wire.NumericIdentifier(s.ID), wire.NumericIdentifier(tp.ID))
			if err != nil {
				return "", fmt.Errorf("get consumer groups: %w", err)
			}
			for _, g := range groups {
				fmt.Fprintf(&b, "    group %d %q\n", g.ID, g.Name)
			}
			for p := uint32(0); p < tp.PartitionsCount; p++ {
				off, ok, err := cl.GetConsumerOffset(ctx, &wire.GetConsumerOffset{
					Consumer: client.SingleConsumer(client.ID(7)), StreamID: wire.NumericIdentifier(s.ID),
					TopicID: wire.NumericIdentifier(tp.ID), Partition: wire.SomePartition(p)})
				if err != nil && !errors.Is(err, wire.ErrResourceNotFound) {
					return "", fmt.Errorf("get consumer offset: %w", err)
				}
				if ok {
					fmt.Fprintf(&b, "    partition %d auditor stored=%d current=%d\n", p, off.StoredOffset, off.CurrentOffset)
				}
			}
		}
	}
	users, err := cl.GetUsers(ctx)
	if err != nil {
		return "", fmt.Errorf("get users: %w", err)
	}
	slices.SortFunc(users, func(a, b wire.UserHeader) int { return int(a.ID) - int(b.ID) })
	for _, u := range users {
		fmt.Fprintf(&b, "user %d %q status=%d\n", u.ID, u.Username, u.Status)
	}
	tokens, err := cl.GetPersonalAccessTokens(ctx)
	if err != nil {
		return "", fmt.Errorf("get personal access tokens: %w", err)
	}
	slices.SortFunc(tokens, func(a, b wire.PatEntry) int { return strings.Compare(string(a.Name), string(b.Name)) })
	for _, tok := range tokens {
		fmt.Fprintf(&b, "token %q expiry=%d\n", tok.Name, tok.ExpiryAtMicros)
	}
	return b.String(), nil
}

// Every node of a cluster stopped at once, by SIGKILL or by SIGTERM, comes back
// with every acknowledged message and consumer offset of a topic created just
// before.
func TestClusterFullRestartKeepsMessages(t *testing.T) {
	for _, how := range []struct {
		name string
		stop func(*node)
	}{
		{"SIGKILL", func(n *node) { n.kill() }},
		{"SIGTERM", func(n *node) { n.terminate() }},
	} {
		t.Run(how.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			c := newCluster(t, 3)
			c.startAll()
			leader := c.awaitLeader(ctx, c.nodes)
			w := newMetadataWorkload(ctx, t, c, leader)
			w.keepState("first life")
			w.close()
			want := awaitSameState(ctx, t, c.nodes)
			stopAllAtOnce(c, how.stop)
			c.startAll()
			c.awaitLeader(ctx, c.nodes)
			if got := awaitSameState(ctx, t, c.nodes); got != want {
				t.Fatalf("after a restart of every node by %s the cluster holds\n%s\nit held before\n%s", how.name, got, want)
			}
		})
	}
}
