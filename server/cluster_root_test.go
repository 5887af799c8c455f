package server

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/metadata"
	"github.com/iggy-shard/iggy-shard/metafiles"
	"github.com/iggy-shard/iggy-shard/segment"
	"github.com/iggy-shard/iggy-shard/shard"
	"github.com/iggy-shard/iggy-shard/wire"
)

// onMetaShard runs fn on s's shard 0, where its metadata plane lives, between
// the shard's turns (so it reads the plane without a race).
func onMetaShard(t *testing.T, s *Server, fn func(p *metaPlane)) {
	t.Helper()
	err := s.rt.Inspect(testContext(t), func(sh *shard.Shard) {
		if sh.Index() == 0 {
			fn(s.meta)
		}
	})
	if err != nil {
		t.Fatalf("Inspect: %v", err)
	}
}

// metadataSnapshots waits until every server applied the same op, and returns
// their metadata states' snapshots then.
func metadataSnapshots(t *testing.T, servers []*Server) [][]byte {
	t.Helper()
	var snapshots [][]byte
	waitUntil(t, "every node applies the same op", func() bool {
		snapshots = snapshots[:0]
		ops := make([]uint64, len(servers))
		for i, s := range servers {
			onMetaShard(t, s, func(p *metaPlane) {
				ops[i] = p.Applied().Op
				snapshots = append(snapshots, p.State().AppendSnapshot(nil, 0))
			})
		}
		for _, op := range ops {
			if op != ops[0] {
				return false
			}
		}
		return true
	})
	return snapshots
}

func rootProposals(servers []*Server) int64 {
	n := int64(0)
	for _, s := range servers {
		n += s.meta.RootProposals()
	}
	return n
}

// TestClusterRootUserReplicated: a cluster's root user comes from one replicated
// op, so every node's metadata is the same bytes (the root's salted hash and
// creation time included), root logs in on every node, and a restart of every
// node creates no other.
func TestClusterRootUserReplicated(t *testing.T) {
	cfgs := clusterConfigs(t, 3, testClusterSecret)
	servers := make([]*Server, len(cfgs))
	for i := range cfgs {
		servers[i] = startTestServer(t, cfgs[i])
	}
	var leader uint8
	waitUntil(t, "the cluster forms", func() (ok bool) { leader, ok = agreedLeader(servers); return ok })
	for _, s := range servers {
		dialCluster(t, s) // root logs in on every node
	}
	pc := dialCluster(t, servers[leader])
	if _, err := pc.CreateStream(testContext(t), "after-root"); err != nil {
		t.Fatal(err)
	}
	before := metadataSnapshots(t, servers)
	for i := range before {
		if !bytes.Equal(before[i], before[0]) {
			t.Fatalf("node %d's metadata differs from node 0's", i)
		}
	}
	state, _, err := metadata.DecodeSnapshot(before[0])
	if err != nil {
		t.Fatal(err)
	}
	if n := len(usersOf(state)); n != 1 || !state.HasRoot() || state.User(metadata.RootUserID).Username != "iggy" {
		t.Fatalf("%d users, root %+v", n, state.User(metadata.RootUserID))
	}
	if n := rootProposals(servers); n != 1 {
		t.Fatalf("%d root user proposals, want 1", n)
	}

	// Every node restarts: the root comes back from the snapshots and journals,
	// and no node proposes it again.
	for _, s := range servers {
		stopServer(t, s)
	}
	for i := range cfgs {
		servers[i] = startTestServer(t, cfgs[i])
	}
	waitUntil(t, "the restarted cluster elects", func() (ok bool) { leader, ok = agreedLeader(servers); return ok })
	for _, s := range servers {
		dialCluster(t, s)
	}
	lc := dialCluster(t, servers[leader])
	if _, err := lc.CreateStream(testContext(t), "after-restart"); err != nil {
		t.Fatal(err)
	}
	after := metadataSnapshots(t, servers)
	for i := range after {
		if !bytes.Equal(after[i], after[0]) {
			t.Fatalf("after the restart node %d's metadata differs from node 0's", i)
		}
	}
	state, _, err = metadata.DecodeSnapshot(after[0])
	if err != nil {
		t.Fatal(err)
	}
	was, _, _ := metadata.DecodeSnapshot(before[0])
	root, wasRoot := state.User(metadata.RootUserID), was.User(metadata.RootUserID)
	if n := len(usersOf(state)); n != 1 || root.PasswordHash != wasRoot.PasswordHash || root.CreatedAtMicros != wasRoot.CreatedAtMicros {
		t.Fatalf("after the restart: %d users, root %+v, was %+v", n, root, wasRoot)
	}
	if n := rootProposals(servers); n != 0 {
		t.Fatalf("the restarted nodes made %d root user proposals", n)
	}
}

func usersOf(s *metadata.State) []*metadata.User {
	var users []*metadata.User
	for u := range s.Users() {
		users = append(users, u)
	}
	return users
}

// TestClusterLoginBeforeRoot: a node that has not applied the root user's
// creation (here the primary alone, which cannot commit it) answers a login 58,
// the retryable refusal; once the others start the root commits and the same
// login succeeds there.
func TestClusterLoginBeforeRoot(t *testing.T) {
	cfgs := clusterConfigs(t, 3, testClusterSecret)
	first := startTestServer(t, cfgs[0])
	_, err := client.Dial(testContext(t), first.Addr().String(), client.WithCredentials("iggy", "iggy"), client.WithLeaderRedirection(false),
		client.WithTransientRetry(client.TransientRetry{Interval: 20 * time.Millisecond, NotCommittedWindow: 200 * time.Millisecond, NotAcceptedWindow: 200 * time.Millisecond}))
	if code := wire.ErrorCode(0); !errors.As(err, &code) || code != wire.ErrTransientNotAccepted {
		t.Fatalf("login before the root user committed: %v, want 58 TransientNotAccepted", err)
	}
	servers := []*Server{first, startTestServer(t, cfgs[1]), startTestServer(t, cfgs[2])}
	waitUntil(t, "the cluster forms", func() bool { _, ok := agreedLeader(servers); return ok })
	for _, s := range servers {
		dialCluster(t, s)
	}
	if n := rootProposals(servers); n != 1 {
		t.Fatalf("%d root user proposals, want 1", n)
	}
}

// groupMembers is the member count of group 0 of topic 0 of stream 0 on s.
func groupMembers(t *testing.T, s *Server) int {
	n := -1
	onMetaShard(t, s, func(p *metaPlane) {
		if st := p.State().Stream(0); st != nil {
			if tp := st.Topic(0); tp != nil {
				if g := tp.Group(0); g != nil {
					n = len(g.Members)
				}
			}
		}
	})
	return n
}

// TestClusterGroupLeaveAtABackup: a consumer group member connected to a node
// that stopped leading (its shard 0 held up, the others elected) closes its
// connection there: the backup forwards the leave to the primary, and the
// membership ends on every node at once, not at the member's heartbeat timeout.
func TestClusterGroupLeaveAtABackup(t *testing.T) {
	cfgs := clusterConfigs(t, 3, testClusterSecret)
	servers := startCluster(t, cfgs)
	// The SDKs' 2 s of replays of a 58: a loaded machine may hold a node up for
	// a moment while the group is set up.
	member, err := client.Dial(testContext(t), servers[0].Addr().String(), client.WithCredentials("iggy", "iggy"),
		client.WithLeaderRedirection(false), client.WithRequestTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer member.Close()
	ctx := testContext(t)
	mustOK(t, "CreateStream", func() error { _, err := member.CreateStream(ctx, "s"); return err }())
	mustOK(t, "CreateTopic", func() error { _, err := member.CreateTopic(ctx, client.ID(0), "t", 1, nil); return err }())
	mustOK(t, "CreateConsumerGroup", func() error { _, err := member.CreateConsumerGroup(ctx, client.ID(0), client.ID(0), "g"); return err }())
	mustOK(t, "JoinConsumerGroup", member.JoinConsumerGroup(ctx, client.ID(0), client.ID(0), client.ID(0)))
	for i, s := range servers {
		waitUntil(t, fmt.Sprintf("the member reaches node %d", i), func() bool { return groupMembers(t, s) == 1 })
	}

	// Node 0's shard 0 stops for a while: the others elect another, and node 0
	// follows as a backup once it runs again, its client connection still open.
	release := make(chan struct{})
	releaseOnce := sync.OnceFunc(func() { close(release) })
	t.Cleanup(releaseOnce) // before the servers stop, should the test end early
	stalled := make(chan error, 1)
	go func() {
		stalled <- servers[0].rt.Inspect(testContext(t), func(sh *shard.Shard) {
			if sh.Index() == 0 {
				<-release
			}
		})
	}()
	waitUntil(t, "the others elect a new primary", func() bool { l, ok := agreedLeader(servers[1:]); return ok && l != 0 })
	releaseOnce()
	if err := <-stalled; err != nil {
		t.Fatal(err)
	}
	// (Node 0, given the ticks it missed at once, may start another view change:
	// whoever leads then, it is not node 0.)
	waitUntil(t, "node 0 follows a new primary", func() bool { l, ok := agreedLeader(servers); return ok && l != 0 })
	for i, s := range servers {
		if n := groupMembers(t, s); n != 1 {
			t.Fatalf("node %d: %d members before the close, want 1", i, n)
		}
	}

	member.Close()
	for i, s := range servers {
		waitUntil(t, fmt.Sprintf("the member leaves on node %d", i), func() bool { return groupMembers(t, s) == 0 })
	}
}

// TestSingleNodeRefusesAStateWithoutRoot: only a cluster's replica starts without
// a root user and waits for it from the log; a single node on such a state (a
// cluster's data directory whose root never committed) would have nobody to log
// in, and refuses to start, as it refused such a snapshot before.
func TestSingleNodeRefusesAStateWithoutRoot(t *testing.T) {
	store := metafiles.NewSimStorage(segment.NewSimDisk(1))
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfgs := clusterConfigs(t, 3, testClusterSecret)
	m, err := openMetaPlaneOn(log, store, "simdisk", &cfgs[1], 1_000_000)
	if err != nil {
		t.Fatalf("a cluster replica's first start: %v", err)
	}
	if m.State().HasRoot() {
		t.Fatal("a cluster replica created a root user of its own")
	}
	m.Close()
	single := defaultSetup()
	if _, err := openMetaPlaneOn(log, store, "simdisk", &single, 2_000_000); err == nil || !strings.Contains(err.Error(), "no root user") {
		t.Fatalf("a single node on a state without root: %v", err)
	}
}
