package server

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/config"
	"github.com/iggy-shard/iggy-shard/internal/freeport"
	"github.com/iggy-shard/iggy-shard/partition"
	"github.com/iggy-shard/iggy-shard/shard"
	"github.com/iggy-shard/iggy-shard/vsr"
	"github.com/iggy-shard/iggy-shard/wire"
)

// testClusterTiming elects within about a second: a backup that hears nothing
// from its primary for 1 s starts a view change (the configuration's floor is 2 s,
// hence testHooks.clusterTiming). Not less: the three nodes of a test share one
// process, and on a loaded 2-core machine it stalls for a few hundred ms now and
// then (GC, the scheduler), which with a 300 ms timeout started view changes the
// tests had not asked for, and their writes at the old primary were refused (58).
var testClusterTiming = vsr.Timing{
	HeartbeatTimeoutTicks:           100,
	CommitBroadcastIntervalTicks:    5,
	PrepareRetransmitIntervalTicks:  5,
	ViewChangeRetransmitTicks:       5,
	ViewChangeStatusTimeoutTicks:    100,
	RequestStartViewRetransmitTicks: 10,
	ViewProbeAttemptsMax:            3,
	RepairRetryIntervalTicks:        10,
	RepairChunkMax:                  64,
}

// clusterWait bounds every wait for the cluster to do something: formation, a
// commit reaching a backup, an election. Polled, never slept through, so it is
// generous: on a loaded 2-core machine three nodes starting took more than 10 s.
const clusterWait = 30 * time.Second

// freeLoopbackPorts is freeport.Loopback as the roster's uint16 ports.
func freeLoopbackPorts(t testing.TB, n int) []uint16 {
	t.Helper()
	ports := make([]uint16, n)
	for i, p := range freeport.Loopback(t, n) {
		ports[i] = uint16(p)
	}
	return ports
}

// clusterConfigs is a roster of n loopback nodes on free ports, one
// configuration per node (each its own data directory), all with secret.
func clusterConfigs(t testing.TB, n int, secret string) []setup {
	t.Helper()
	nodes := make([]config.ClusterNode, n)
	ports := freeLoopbackPorts(t, 2*n)
	for i := range nodes {
		nodes[i] = config.ClusterNode{Name: fmt.Sprintf("node-%d", i), IP: "127.0.0.1", ReplicaID: i,
			Ports: config.NodePorts{TCP: ports[2*i], TCPReplica: ports[2*i+1]}}
	}
	cfgs := make([]setup, n)
	for i := range cfgs {
		cfg := testConfig(t.TempDir(), 2)
		cfg.TCPAddress = "127.0.0.1:0" // the roster's port is bound (clientAddressOf)
		cfg.Cluster = config.DefaultCluster()
		cfg.Cluster.Enabled = true
		cfg.Cluster.ReplicaID = i
		cfg.Cluster.Nodes = nodes
		cfg.Cluster.Auth = config.ClusterAuth{Enabled: true, SharedSecret: secret}
		cfg.Cluster.MessageBus.ReconnectPeriod = 50 * time.Millisecond
		cfg.clusterTiming = &testClusterTiming
		cfgs[i] = cfg
	}
	return cfgs
}

var testClusterSecret = strings.Repeat("s", 32)

// startCluster starts a node per configuration and waits until they agree that
// node 0 leads (every group starts in view 0).
func startCluster(t *testing.T, cfgs []setup) []*Server {
	t.Helper()
	servers := make([]*Server, len(cfgs))
	for i := range cfgs {
		servers[i] = startTestServer(t, cfgs[i])
	}
	waitUntil(t, "the cluster forms", func() bool { l, ok := agreedLeader(servers); return ok && l == 0 })
	return servers
}

// waitUntil polls cond until it holds or clusterWait passes.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(clusterWait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, clusterWait)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// agreedLeader is the metadata primary every server of running names, if they
// agree and are all connected to one another.
func agreedLeader(running []*Server) (uint8, bool) {
	var leader uint8
	for i, s := range running {
		l, ok := s.metadataLeader()
		if !ok || i > 0 && l != leader {
			return 0, false
		}
		leader = l
		for _, o := range running {
			if o != s && !s.rt.ReplicaConnected(o.cluster.self) {
				return 0, false
			}
		}
	}
	return leader, len(running) > 0
}

func streamNames(t *testing.T, c *client.Client) []string {
	t.Helper()
	streams, err := c.GetStreams(testContext(t))
	if err != nil {
		t.Fatalf("GetStreams: %v", err)
	}
	names := make([]string, len(streams))
	for i, s := range streams {
		names[i] = string(s.Name)
	}
	return names
}

func hasStream(t *testing.T, c *client.Client, name string) bool {
	for _, n := range streamNames(t, c) {
		if n == name {
			return true
		}
	}
	return false
}

// dialCluster logs in as root at s, staying there (no leader redirection), with
// 58 returned after 100 ms instead of the SDKs' 2 s of retries, so that a refusal
// shows. A request, and its replays while answered 57, may take the SDKs' 30 s:
// on a loaded 2-core machine a commit (a checkpoint's fsync, a backup catching
// up) took more than the 5 s these tests allowed before.
func dialCluster(t *testing.T, s *Server) *client.Client {
	t.Helper()
	c, err := client.Dial(testContext(t), s.Addr().String(), client.WithCredentials("iggy", "iggy"), client.WithLeaderRedirection(false),
		client.WithRequestTimeout(client.DefaultRequestTimeout),
		client.WithTransientRetry(client.TransientRetry{Interval: 20 * time.Millisecond, NotCommittedWindow: client.DefaultNotCommittedRetryWindow,
			NotAcceptedWindow: 100 * time.Millisecond}))
	if err != nil {
		t.Fatalf("Dial %s: %v", s.Addr(), err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func leaderOf(t *testing.T, c *client.Client) (string, int) {
	t.Helper()
	md, err := c.GetClusterMetadata(testContext(t))
	if err != nil {
		t.Fatalf("GetClusterMetadata: %v", err)
	}
	leader, leaders := "", 0
	for _, n := range md.Nodes {
		if n.Role == wire.ClusterRoleLeader {
			leader, leaders = string(n.Name), leaders+1
		}
	}
	return leader, leaders
}

func TestClusterMetadataPlane(t *testing.T) {
	cfgs := clusterConfigs(t, 3, testClusterSecret)
	servers := make([]*Server, len(cfgs))
	for i := range cfgs {
		servers[i] = startTestServer(t, cfgs[i])
	}
	var leader uint8
	waitUntil(t, "the cluster forms", func() (ok bool) { leader, ok = agreedLeader(servers); return ok })
	primary := servers[leader]
	backups := make([]*Server, 0, 2)
	for _, s := range servers {
		if s != primary {
			backups = append(backups, s)
		}
	}

	// A write at the primary commits and every node reads it, followers too,
	// through sessions that logged in at backups (forwarded to the primary).
	pc := dialCluster(t, primary)
	if _, err := pc.CreateStream(testContext(t), "orders"); err != nil {
		t.Fatalf("CreateStream at the primary: %v", err)
	}
	clients := make([]*client.Client, len(backups))
	for i, b := range backups {
		clients[i] = dialCluster(t, b)
		c := clients[i]
		waitUntil(t, "the stream reaches a backup", func() bool { return hasStream(t, c, "orders") })
		me, err := c.GetMe(testContext(t))
		if err != nil || me.UserID != 0 {
			t.Fatalf("GetMe at a backup: %+v, %v", me, err)
		}
	}

	// A write at a backup is refused as not accepted, and changes nothing.
	clientAt := map[*Server]*client.Client{primary: pc, backups[0]: clients[0], backups[1]: clients[1]}
	leader = refusedAtABackup(t, servers, clientAt)
	primary = servers[leader]
	backups = backups[:0]
	for _, s := range servers {
		if s != primary {
			backups = append(backups, s)
		}
	}

	// Every node names the same single leader.
	for i, c := range append([]*client.Client{pc}, clients...) {
		name, count := leaderOf(t, c)
		if count != 1 || name != fmt.Sprintf("node-%d", leader) {
			t.Fatalf("GetClusterMetadata at client %d: leader %q of %d leaders, want node-%d", i, name, count, leader)
		}
	}

	// A logout at a backup is forwarded too; a login after it works.
	if err := clientAt[backups[1]].Logout(testContext(t)); err != nil {
		t.Fatalf("Logout at a backup: %v", err)
	}

	// The primary stops: the others elect one of them and go on committing.
	stopServer(t, primary)
	started := time.Now()
	var next uint8
	waitUntil(t, "a new primary is elected", func() (ok bool) {
		next, ok = agreedLeader(backups)
		return ok && next != leader
	})
	t.Logf("new primary %d elected %v after the old one stopped", next, time.Since(started).Round(time.Millisecond))
	nc := dialCluster(t, servers[next])
	if _, err := nc.CreateStream(testContext(t), "after-failover"); err != nil {
		t.Fatalf("CreateStream at the new primary: %v", err)
	}
	for _, b := range backups {
		c := dialCluster(t, b)
		waitUntil(t, "the write after the failover reaches every node", func() bool {
			return hasStream(t, c, "after-failover") && hasStream(t, c, "orders")
		})
	}
}

// refusedAtABackup checks that a write at a backup is refused as not accepted
// (58) and changes nothing, through the client of clientAt for the backup, and
// returns the leader then. A view change under way, or one that makes the node
// primary before the write reaches it (a stall of the loaded test process can
// start one), is no refusal to check: the write, if taken, must have met such a
// view change, and is tried again at a backup of the new view, a few times.
func refusedAtABackup(t *testing.T, servers []*Server, clientAt map[*Server]*client.Client) uint8 {
	t.Helper()
	const attemptsMax = 3
	for attempt := range attemptsMax {
		var leader uint8
		waitUntil(t, "the cluster agrees on a leader", func() (ok bool) { leader, ok = agreedLeader(servers); return ok })
		backup := servers[(int(leader)+1)%len(servers)]
		viewBefore := metadataView(t, backup)
		name := fmt.Sprint("at-a-backup-", attempt)
		_, err := clientAt[backup].CreateStream(testContext(t), name)
		viewAfter := metadataView(t, backup)
		if code := wire.ErrorCode(0); errors.As(err, &code) && code == wire.ErrTransientNotAccepted {
			if hasStream(t, clientAt[servers[leader]], name) {
				t.Fatal("a write refused at a backup reached the primary")
			}
			if viewAfter == viewBefore {
				return leader
			}
		} else if viewAfter == viewBefore {
			t.Fatalf("CreateStream at a backup: %v, want 58 TransientNotAccepted (view %d all along)", err, viewBefore)
		}
		t.Logf("CreateStream at node %d, a backup in view %d: %v in view %d; tried again", backup.cluster.self, viewBefore, err, viewAfter)
	}
	t.Fatalf("no write at a backup without a view change meanwhile in %d attempts", attemptsMax)
	return 0
}

// metadataView is the view s's metadata replica is in.
func metadataView(t *testing.T, s *Server) (view uint32) {
	t.Helper()
	onMetaShard(t, s, func(p *metaPlane) { view = p.Core().View() })
	return view
}

func TestClusterRefusesStrangers(t *testing.T) {
	// Four nodes: 0 and 1 share the secret and the name; 2 has another secret and
	// 3 another cluster name. View 0 commits with two replicas of four (the
	// replication quorum), so 0 and 1 serve while the strangers never join.
	cfgs := clusterConfigs(t, 4, testClusterSecret)
	cfgs[2].Cluster.Auth.SharedSecret = strings.Repeat("x", 32)
	cfgs[3].Cluster.Name = "another-cluster"
	servers := make([]*Server, len(cfgs))
	for i := range cfgs {
		servers[i] = startTestServer(t, cfgs[i])
	}
	members := servers[:2]
	waitUntil(t, "the members form", func() bool { l, ok := agreedLeader(members); return ok && l == 0 })
	waitUntil(t, "the strangers' handshakes are refused", func() bool {
		return servers[0].replicaStats().HandshakesRefused+servers[1].replicaStats().HandshakesRefused > 0 &&
			servers[2].replicaStats().HandshakesRefused+servers[3].replicaStats().HandshakesRefused > 0
	})
	pc := dialCluster(t, servers[0])
	if _, err := pc.CreateStream(testContext(t), "members-only"); err != nil {
		t.Fatalf("CreateStream: %v", err)
	}
	bc := dialCluster(t, servers[1])
	waitUntil(t, "the stream reaches the other member", func() bool { return hasStream(t, bc, "members-only") })
	for _, stranger := range servers[2:] {
		for _, peer := range []uint8{0, 1} {
			if stranger.rt.ReplicaConnected(peer) {
				t.Fatalf("stranger %d is connected to member %d", stranger.cluster.self, peer)
			}
		}
		if stranger.replicaStats().FramesReceived != 0 {
			t.Fatalf("stranger %d received %d frames", stranger.cluster.self, stranger.replicaStats().FramesReceived)
		}
	}
	for _, m := range members {
		if got := m.cluster.view.Load(); got != 0 {
			t.Fatalf("member %d moved to view %d: the strangers changed something", m.cluster.self, got)
		}
	}
	// The members hold one state; the strangers hold none of theirs.
	skipReplicatedStateCheck(t, "the strangers never join: the members are compared here")
	pc.Close()
	bc.Close()
	sameMetadata(t, members)
}

// TestClusterRestart: a backup stopped while the others write catches up when it
// starts again, and a whole cluster restarted elects and holds every write. The
// writes go through a user that follows the leader (clusterUser).
func TestClusterRestart(t *testing.T) {
	cfgs := clusterConfigs(t, 3, testClusterSecret)
	servers := formCluster(t, cfgs)
	u := dialClusterUser(t, servers[0])
	u.createStream("before")

	// A backup misses writes while it is down (more than a snapshot interval,
	// so the others cut their journals meanwhile), then recovers (Recovering,
	// RequestStartView) and repairs what it missed.
	down := u.aFollowerToStop(servers)
	stopServer(t, servers[down])
	const missed = 20
	for i := range missed {
		u.createStream(fmt.Sprintf("missed-%d", i))
	}
	servers[down] = startTestServer(t, cfgs[down])
	awaitAgreedLeader(t, servers)
	bc := dialCluster(t, servers[down])
	waitUntil(t, "the restarted backup catches up", func() bool {
		return hasStream(t, bc, "before") && hasStream(t, bc, fmt.Sprintf("missed-%d", missed-1))
	})

	// The whole cluster restarts: every node recovers, none trusts its log
	// alone, and after the probes go unanswered they elect on what they hold.
	for _, s := range servers {
		stopServer(t, s)
	}
	for i := range cfgs {
		servers[i] = startTestServer(t, cfgs[i])
	}
	leader := awaitAgreedLeader(t, servers)
	dialClusterUser(t, servers[leader]).createStream("after")
	for _, s := range servers {
		c := dialCluster(t, s)
		waitUntil(t, "every node holds every write", func() bool {
			return hasStream(t, c, "before") && hasStream(t, c, fmt.Sprintf("missed-%d", missed-1)) && hasStream(t, c, "after")
		})
	}
}

// polledCount polls partition 0 of orders/events from offset 0 at c.
func polledCount(t *testing.T, c *client.Client) int {
	t.Helper()
	polled, err := c.PollMessages(testContext(t), &wire.PollMessages{
		Consumer: client.SingleConsumer(client.ID(1)), StreamID: client.NameID("orders"), TopicID: client.NameID("events"),
		Partition: wire.SomePartition(0), Strategy: wire.PollingStrategy{Kind: wire.PollingOffset}, Count: 100,
	})
	if err != nil {
		return -1 // the partition is not open here yet
	}
	n := 0
	for it := polled.Messages(); it.Next(); n++ {
	}
	return n
}

func TestClusterPartitionPlane(t *testing.T) {
	t.Run("enforce_fsync=false", func(t *testing.T) { testClusterPartitionPlane(t, false) })
	// With enforce_fsync a backup's Ready waits for its journal file: the prepare
	// it forwards down the chain leaves after that.
	t.Run("enforce_fsync=true", func(t *testing.T) { testClusterPartitionPlane(t, true) })
}

func testClusterPartitionPlane(t *testing.T, enforceFsync bool) {
	cfgs := clusterConfigs(t, 3, testClusterSecret)
	servers := formCluster(t, cfgs)
	u := dialClusterUser(t, servers[0])
	stream := u.createStream("orders")
	var options []byte
	if enforceFsync {
		var err error
		if options, err = wire.AppendOption(nil, "enforce_fsync", wire.HeaderBool, []byte{1}); err != nil {
			t.Fatal(err)
		}
	}
	topic := u.createTopic("orders", "events", 1, options)
	k := partition.Key{StreamID: stream.ID, TopicID: topic.ID, PartitionID: 0}
	clients := []*client.Client{dialCluster(t, servers[0]), dialCluster(t, servers[1]), dialCluster(t, servers[2])}
	for _, c := range clients {
		waitUntil(t, "the topic reaches every node", func() bool { return polledCount(t, c) == 0 })
	}

	// A send at the partition's primary is replicated and polled at every node,
	// followers included.
	u.sendTo("orders", "events", 0, messages(5, "m"))
	for i, c := range clients {
		waitUntil(t, fmt.Sprintf("the messages reach node %d", i), func() bool { return polledCount(t, c) == 5 })
	}
	// A send at a backup of the partition's group is refused as not accepted.
	held := 5 + sendRefusedAtABackup(t, servers, clients, k)

	// The partition's primary stops: its group elects among the others, and one
	// of them takes sends again.
	primary := partitionPrimary(t, servers, k)
	stopServer(t, servers[primary])
	var rest []*client.Client
	var restNodes []*Server
	var restIndexes []int
	for i := range servers {
		if i != primary {
			rest, restNodes, restIndexes = append(rest, clients[i]), append(restNodes, servers[i]), append(restIndexes, i)
		}
	}
	dialClusterUser(t, restNodes[0]).sendTo("orders", "events", 0, messages(1, "after"))
	for _, c := range rest {
		waitUntil(t, "the others hold every message", func() bool { return polledCount(t, c) == held+1 })
	}
	t.Logf("node %d led the partition; node %d took the send after the failover", primary, restIndexes[partitionPrimary(t, restNodes, k)])
}

// partitionPrimaries are the indexes in servers of the nodes whose replica of
// partition k's group is its primary.
func partitionPrimaries(t *testing.T, servers []*Server, k partition.Key) []int {
	t.Helper()
	var primaries []int
	for i, s := range servers {
		var mu sync.Mutex
		primary := false
		err := s.rt.Inspect(testContext(t), func(sh *shard.Shard) {
			if s.ownerOf(k) == sh.Index() && s.handlers[sh.Index()].owned.Store.IsPrimary(k) {
				mu.Lock()
				primary = true
				mu.Unlock()
			}
		})
		if err != nil {
			t.Fatalf("Inspect node %d: %v", i, err)
		}
		if primary {
			primaries = append(primaries, i)
		}
	}
	return primaries
}

// partitionPrimary waits until exactly one of servers leads partition k's group
// and returns it.
func partitionPrimary(t *testing.T, servers []*Server, k partition.Key) int {
	t.Helper()
	var primaries []int
	waitUntil(t, "the partition's group has one primary", func() bool {
		primaries = partitionPrimaries(t, servers, k)
		return len(primaries) == 1
	})
	return primaries[0]
}

// sendRefusedAtABackup checks that a send to partition k at a backup of its group
// (through that node's client of clients, which stays there) is refused as not
// accepted, and returns how many messages sends it made were taken. A send that
// met a move of the group's primary (a stall of the test process starts view
// changes) is no refusal to check: it is tried again at a backup of the new
// primary, a few times.
func sendRefusedAtABackup(t *testing.T, servers []*Server, clients []*client.Client, k partition.Key) (taken int) {
	t.Helper()
	const attemptsMax = 3
	to := wire.Partitioning{Kind: wire.PartitioningPartitionID, PartitionID: k.PartitionID}
	for range attemptsMax {
		primary := partitionPrimary(t, servers, k)
		backup := (primary + 1) % len(servers)
		_, err := clients[backup].SendMessages(testContext(t), wire.NumericIdentifier(k.StreamID), wire.NumericIdentifier(k.TopicID), to, messages(1, "b"))
		after := partitionPrimaries(t, servers, k)
		if code := wire.ErrorCode(0); errors.As(err, &code) && code == wire.ErrTransientNotAccepted {
			return taken
		}
		if err == nil {
			taken++
		}
		if slices.Equal(after, []int{primary}) {
			t.Fatalf("SendMessages at node %d, a backup of node %d's group: %v, want 58 TransientNotAccepted", backup, primary, err)
		}
		t.Logf("SendMessages at node %d, a backup of node %d's group: %v, primaries now %v; tried again", backup, primary, err, after)
	}
	t.Fatalf("no send at a backup without a move of the primary meanwhile in %d attempts", attemptsMax)
	return 0
}

func TestClusterStateTransfer(t *testing.T) {
	// A header window of 128 ops (the least with room for a snapshot interval
	// beside two pipelines): a backup more than that behind is answered
	// RangeEvicted and pulls the whole state.
	cfgs := clusterConfigs(t, 3, testClusterSecret)
	for i := range cfgs {
		cfgs[i].metaJournalSlots = 128
	}
	servers := formCluster(t, cfgs)
	u := dialClusterUser(t, servers[0])
	down := u.aFollowerToStop(servers)
	stopServer(t, servers[down])
	const writes = 200
	for i := range writes {
		u.createStream(fmt.Sprintf("s-%d", i))
	}
	servers[down] = startTestServer(t, cfgs[down])
	waitUntil(t, "the lagging backup installs a state", func() bool { return servers[down].meta.TransfersInstalled() > 0 })
	bc := dialCluster(t, servers[down])
	waitUntil(t, "the lagging backup holds every write", func() bool {
		return len(streamNames(t, bc)) == writes
	})
	// It goes on following the log after the transfer.
	u.createStream("after-transfer")
	waitUntil(t, "a write after the transfer reaches it", func() bool { return hasStream(t, bc, "after-transfer") })
}

// TestClusterOverTLS: with [cluster.tls] (self-signed mode) the nodes form the
// cluster through the TLS terminator and dialer, and a write at the primary
// reaches every node.
func TestClusterOverTLS(t *testing.T) {
	cfgs := clusterConfigs(t, 3, testClusterSecret)
	for i := range cfgs {
		cfgs[i].Cluster.TLS = config.ClusterTLS{Enabled: true, SelfSigned: true}
	}
	servers := make([]*Server, len(cfgs))
	for i := range cfgs {
		servers[i] = startTestServer(t, cfgs[i])
		if servers[i].replicaTLS == nil || servers[i].rt.ReplicaAddr() != nil {
			t.Fatalf("node %d: the replica port is not served by the TLS terminator", i)
		}
	}
	var leader uint8
	waitUntil(t, "the cluster forms over TLS", func() (ok bool) { leader, ok = agreedLeader(servers); return ok })
	pc := dialCluster(t, servers[leader])
	if _, err := pc.CreateStream(testContext(t), "over-tls"); err != nil {
		t.Fatalf("CreateStream at the primary: %v", err)
	}
	for i, s := range servers {
		c := dialCluster(t, s)
		waitUntil(t, fmt.Sprintf("the stream reaches node %d", i), func() bool { return hasStream(t, c, "over-tls") })
	}
}
