package client

import (
	"context"
	"errors"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/wire"
)

// fakeCluster is a roster of fake servers that answer logins and GetClusterMetadata
// with one shared roster, and writes (CreateStream, SendMessages) only on the node
// the roster names leader; the others answer writes 58, as a backup does.
type fakeCluster struct {
	nodes []*fakeServer

	mu sync.Mutex
	// leader is the index of the node listed as leader, -1 for none.
	leader int
	// roster overrides what GetClusterMetadata lists, when set.
	roster func(asked int) []wire.ClusterNode
	// metadataAsks counts GetClusterMetadata requests per node.
	metadataAsks []int
}

func newFakeCluster(t *testing.T, n, leader int) *fakeCluster {
	t.Helper()
	fc := &fakeCluster{leader: leader, metadataAsks: make([]int, n)}
	for i := range n {
		fc.nodes = append(fc.nodes, newFakeServer(t, fc.handler(i)))
	}
	return fc
}

// session of node i's logins, so that a test can tell where a request was stamped.
func nodeSession(i int) uint64 { return testSession + uint64(i)*0x100 }

func (fc *fakeCluster) setLeader(i int) {
	fc.mu.Lock()
	fc.leader = i
	fc.mu.Unlock()
}

func (fc *fakeCluster) asks(i int) int {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	return fc.metadataAsks[i]
}

// defaultRoster lists every node, healthy, with the leader's role.
func (fc *fakeCluster) defaultRoster() []wire.ClusterNode {
	var nodes []wire.ClusterNode
	for i, s := range fc.nodes {
		host, port, _ := net.SplitHostPort(s.addr())
		p, _ := strconv.Atoi(port)
		role := wire.ClusterRoleFollower
		if i == fc.leader {
			role = wire.ClusterRoleLeader
		}
		nodes = append(nodes, wire.ClusterNode{Name: []byte("node-" + strconv.Itoa(i)), IP: []byte(host),
			TCPPort: uint16(p), Role: role, Status: wire.ClusterNodeHealthy})
	}
	return nodes
}

func (fc *fakeCluster) handler(i int) handlerFunc {
	return func(req *wire.RequestHeader, body []byte) ([]byte, bool) {
		switch {
		case req.Operation == wire.OperationRegister:
			r := wire.LoginRegisterReply{Session: nodeSession(i), ServerProtocolVersion: wire.ServerProtocolVersion,
				ServerVersion: []byte("0.11.0")}
			b, err := r.Append(nil)
			if err != nil {
				panic(err)
			}
			return reply(req, b), false
		case req.Operation == wire.OperationNonReplicated && req.NonReplicatedCode == wire.CodeGetClusterMetadata:
			fc.mu.Lock()
			fc.metadataAsks[i]++
			var nodes []wire.ClusterNode
			if fc.roster != nil {
				nodes = fc.roster(fc.metadataAsks[i])
			} else {
				nodes = fc.defaultRoster()
			}
			fc.mu.Unlock()
			m := wire.ClusterMetadata{Name: []byte("fake"), Nodes: nodes}
			return reply(req, m.Append(nil)), false
		case req.Operation == wire.OperationNonReplicated:
			return reply(req, nil), false
		}
		fc.mu.Lock()
		leader := fc.leader == i
		fc.mu.Unlock()
		if !leader {
			return denial(req, wire.ErrTransientNotAccepted), false
		}
		if req.Operation == wire.OperationSendMessages {
			return reply(req, wire.AppendSendConfirmations(nil, wire.SendConfirmation{})), false
		}
		d := wire.StreamDetails{StreamHeader: wire.StreamHeader{Name: []byte("s")}}
		return reply(req, d.Append(nil)), false
	}
}

// registersAt counts the logins node i received.
func registersAt(s *fakeServer) int {
	n := 0
	for _, f := range s.recorded() {
		if f.header.Operation == wire.OperationRegister {
			n++
		}
	}
	return n
}

// writesAt are the write requests (neither login nor read) node i received.
func writesAt(s *fakeServer) []recordedFrame {
	var out []recordedFrame
	for _, f := range s.recorded() {
		if op := f.header.Operation; op != wire.OperationRegister && op != wire.OperationNonReplicated {
			out = append(out, f)
		}
	}
	return out
}

// A login at a follower ends on the leader: metadata asked at the follower, the
// login replayed at the leader, and writes go there under the leader's session.
func TestLeaderRedirectAfterLogin(t *testing.T) {
	fc := newFakeCluster(t, 3, 2)
	c := dialTest(t, fc.nodes[0], WithCredentials("iggy", "iggy"))
	if got, want := c.Addr(), fc.nodes[2].addr(); got != want {
		t.Fatalf("client on %s, want the leader %s", got, want)
	}
	if id, ok := c.Identity(); !ok || id.Session != nodeSession(2) {
		t.Fatalf("identity %+v (logged in %v), want the leader's session", id, ok)
	}
	if _, err := c.CreateStream(testContext(t), "s"); err != nil {
		t.Fatal(err)
	}
	if n := registersAt(fc.nodes[0]); n != 1 {
		t.Fatalf("%d logins at the follower", n)
	}
	if n := registersAt(fc.nodes[2]); n != 1 {
		t.Fatalf("%d logins at the leader", n)
	}
	if fc.asks(0) != 1 || fc.asks(2) != 1 || fc.asks(1) != 0 {
		t.Fatalf("metadata asked %v times per node, want [1 0 1]", fc.metadataAsks)
	}
	writes := writesAt(fc.nodes[2])
	if len(writes) != 1 || writes[0].header.Session != nodeSession(2) || writes[0].header.Request != 1 {
		t.Fatalf("writes at the leader: %+v", writes)
	}
	if len(writesAt(fc.nodes[0])) != 0 || len(fc.nodes[1].recorded()) != 0 {
		t.Fatal("the follower got a write, or the other node a request")
	}
	// The login at the leader is a new client to it.
	frames := fc.nodes[2].recorded()
	if frames[0].header.Client == fc.nodes[0].recorded()[0].header.Client {
		t.Fatal("the login at the leader reused the follower's client id")
	}
}

// WithLeaderRedirection(false) stays where it was dialed.
func TestLeaderRedirectionOff(t *testing.T) {
	fc := newFakeCluster(t, 3, 2)
	c := dialTest(t, fc.nodes[0], WithCredentials("iggy", "iggy"), WithLeaderRedirection(false),
		WithTransientRetry(TransientRetry{Interval: time.Millisecond, NotCommittedWindow: time.Second, NotAcceptedWindow: 10 * time.Millisecond}))
	if c.Addr() != fc.nodes[0].addr() || len(fc.nodes[2].recorded()) != 0 {
		t.Fatal("redirected with redirection off")
	}
	_, err := c.CreateStream(testContext(t), "s")
	mustCode(t, err, wire.ErrTransientNotAccepted)
	if fc.asks(0) != 1 {
		t.Fatalf("metadata asked %d times, want once (after the login)", fc.asks(0))
	}
}

// The client on the leader stays; one node in the roster keeps it where it is,
// whatever address that node advertises.
func TestLeaderStays(t *testing.T) {
	t.Run("on the leader", func(t *testing.T) {
		fc := newFakeCluster(t, 3, 1)
		c := dialTest(t, fc.nodes[1], WithCredentials("iggy", "iggy"))
		if c.Addr() != fc.nodes[1].addr() || len(fc.nodes[0].recorded())+len(fc.nodes[2].recorded()) != 0 {
			t.Fatal("moved away from the leader")
		}
	})
	t.Run("one node", func(t *testing.T) {
		fc := newFakeCluster(t, 2, 1)
		fc.roster = func(int) []wire.ClusterNode { return fc.defaultRoster()[1:] }
		c := dialTest(t, fc.nodes[0], WithCredentials("iggy", "iggy"))
		if c.Addr() != fc.nodes[0].addr() || len(fc.nodes[1].recorded()) != 0 {
			t.Fatal("a one-node roster moved the client")
		}
	})
	t.Run("leader unreachable", func(t *testing.T) {
		fc := newFakeCluster(t, 2, 1)
		ln := listenLoopback(t)
		dead := ln.Addr().(*net.TCPAddr)
		ln.Close()
		fc.roster = func(int) []wire.ClusterNode {
			nodes := fc.defaultRoster()
			nodes[1].TCPPort = uint16(dead.Port)
			return nodes
		}
		c := dialTest(t, fc.nodes[0], WithCredentials("iggy", "iggy"))
		if c.Addr() != fc.nodes[0].addr() {
			t.Fatal("moved to an address that cannot be dialed")
		}
		if _, ok := c.Identity(); !ok {
			t.Fatal("not logged in where it stayed")
		}
		if err := c.Ping(testContext(t)); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("metadata error", func(t *testing.T) {
		s := newFakeServer(t, func(req *wire.RequestHeader, body []byte) ([]byte, bool) {
			if req.Operation == wire.OperationNonReplicated && req.NonReplicatedCode == wire.CodeGetClusterMetadata {
				return denial(req, wire.ErrFeatureUnavailable), false
			}
			return session(nil)(req, body)
		})
		c := dialTest(t, s, WithCredentials("iggy", "iggy"))
		if err := c.Ping(testContext(t)); err != nil {
			t.Fatal(err)
		}
	})
}

// A roster without a healthy leader is asked again every 250 ms until one appears.
func TestLeaderPolledWhileLeaderless(t *testing.T) {
	fc := newFakeCluster(t, 2, 1)
	fc.roster = func(asked int) []wire.ClusterNode {
		nodes := fc.defaultRoster()
		switch {
		case asked == 1:
			nodes[1].Role = wire.ClusterRoleFollower // an election
		case asked == 2:
			nodes[1].Status = wire.ClusterNodeStarting // a leader, not healthy yet
		}
		return nodes
	}
	start := time.Now()
	c := dialTest(t, fc.nodes[0], WithCredentials("iggy", "iggy"))
	took := time.Since(start)
	if c.Addr() != fc.nodes[1].addr() {
		t.Fatal("did not move to the leader once it appeared")
	}
	if fc.asks(0) != 3 {
		t.Fatalf("metadata asked %d times at the follower, want 3", fc.asks(0))
	}
	if took < 2*LeaderPollInterval {
		t.Fatalf("three asks in %v: not %v apart", took, LeaderPollInterval)
	}
}

// A roster that never names a healthy leader is polled for LeaderPollWindow, then
// the client stays; a done context ends the wait earlier, with its error.
func TestLeaderPollBounded(t *testing.T) {
	fc := newFakeCluster(t, 2, -1)
	t.Run("deadline", func(t *testing.T) {
		// A deadline that would fall in the wait ends it early, logged in where
		// it is; a cancellation ends it with the context's error.
		ctx, cancel := context.WithTimeout(context.Background(), 3*LeaderPollInterval)
		defer cancel()
		c, err := Dial(ctx, fc.nodes[0].addr(), WithCredentials("iggy", "iggy"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if ctx.Err() != nil || c.Addr() != fc.nodes[0].addr() {
			t.Fatalf("login returned after its deadline (%v), or moved", ctx.Err())
		}
		cancelled, cancel2 := context.WithCancel(context.Background())
		time.AfterFunc(LeaderPollInterval/2, cancel2)
		if _, err := c.Login(cancelled, "iggy", "iggy"); !errors.Is(err, context.Canceled) {
			t.Fatalf("login cancelled while no leader was known: %v", err)
		}
	})
	t.Run("window", func(t *testing.T) {
		start := time.Now()
		c := dialTest(t, fc.nodes[1], WithCredentials("iggy", "iggy"))
		took := time.Since(start)
		if c.Addr() != fc.nodes[1].addr() {
			t.Fatal("moved without a leader")
		}
		if took < LeaderPollWindow-LeaderPollInterval || took > LeaderPollWindow+2*time.Second {
			t.Fatalf("stayed after %v, want about %v", took, LeaderPollWindow)
		}
		if n := fc.asks(1); n < 15 || n > 21 {
			t.Fatalf("metadata asked %d times in %v", n, took)
		}
	})
}

// Each node names the next one leader: the client moves three times, then stays.
func TestLeaderRedirectsCapped(t *testing.T) {
	fc := newFakeCluster(t, 3, -1)
	var self []int // the node each roster request came to, by request order
	fc.roster = func(int) []wire.ClusterNode {
		// Which node is asking: the one whose count just rose.
		nodes := fc.defaultRoster()
		total := 0
		for _, n := range fc.metadataAsks {
			total += n
		}
		asking := (total - 1) % 3
		self = append(self, asking)
		nodes[(asking+1)%3].Role = wire.ClusterRoleLeader
		return nodes
	}
	c := dialTest(t, fc.nodes[0], WithCredentials("iggy", "iggy"))
	if got := registersAt(fc.nodes[0]) + registersAt(fc.nodes[1]) + registersAt(fc.nodes[2]); got != MaxLeaderRedirects+1 {
		t.Fatalf("%d logins, want %d (the first and %d redirects)", got, MaxLeaderRedirects+1, MaxLeaderRedirects)
	}
	if c.Addr() != fc.nodes[MaxLeaderRedirects%3].addr() {
		t.Fatalf("client on %s after the cap", c.Addr())
	}
	if _, ok := c.Identity(); !ok {
		t.Fatal("not logged in after the cap")
	}
}

// A write answered 58 for a whole window re-checks the leader, moves to it, logs in
// there and is stamped afresh under the new session and client id.
func TestLeaderFollowedOnNotAccepted(t *testing.T) {
	fc := newFakeCluster(t, 3, 0)
	c := dialTest(t, fc.nodes[0], WithCredentials("iggy", "iggy"),
		WithTransientRetry(TransientRetry{Interval: time.Millisecond, NotCommittedWindow: 5 * time.Second, NotAcceptedWindow: 20 * time.Millisecond}))
	if _, err := c.CreateStream(testContext(t), "first"); err != nil {
		t.Fatal(err)
	}
	fc.setLeader(1) // node 0 lost the leadership: it answers writes 58
	if _, err := c.CreateStream(testContext(t), "second"); err != nil {
		t.Fatal(err)
	}
	if c.Addr() != fc.nodes[1].addr() {
		t.Fatalf("client on %s, want the new leader", c.Addr())
	}
	refused := writesAt(fc.nodes[0])
	if len(refused) < 3 {
		t.Fatalf("%d writes at the old leader: the 58 was not replayed", len(refused))
	}
	accepted := writesAt(fc.nodes[1])
	if len(accepted) != 1 {
		t.Fatalf("%d writes at the new leader, want 1", len(accepted))
	}
	w := accepted[0]
	if w.header.Session != nodeSession(1) || w.header.Client == refused[len(refused)-1].header.Client {
		t.Fatalf("the write at the new leader carries session %x, client %v: not stamped afresh", w.header.Session, w.header.Client)
	}
	if string(w.body) != string(refused[len(refused)-1].body) {
		t.Fatal("the write's body changed on the way to the leader")
	}
	// The client is fully usable there.
	if _, err := c.CreateStream(testContext(t), "third"); err != nil {
		t.Fatal(err)
	}
}

// With no other leader to go to, 58s go on until the request's deadline and the 58
// is returned, the connection intact.
func TestNotAcceptedUntilTheDeadline(t *testing.T) {
	s := newFakeServer(t, session(func(req *wire.RequestHeader, body []byte) ([]byte, bool) {
		return denial(req, wire.ErrTransientNotAccepted), false
	}))
	c := loggedIn(t, s, WithTransientRetry(TransientRetry{Interval: time.Millisecond, NotCommittedWindow: time.Second,
		NotAcceptedWindow: 20 * time.Millisecond}))
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := c.DeleteStream(ctx, ID(0))
	mustCode(t, err, wire.ErrTransientNotAccepted)
	if took := time.Since(start); took < 200*time.Millisecond {
		t.Fatalf("58 returned after %v, before the request's deadline", took)
	}
	metadata := 0
	for _, f := range s.recorded() {
		if f.header.Operation == wire.OperationNonReplicated && f.header.NonReplicatedCode == wire.CodeGetClusterMetadata {
			metadata++
		}
	}
	if metadata < 3 {
		t.Fatalf("the leader was checked %d times (one after the login)", metadata)
	}
	if err := c.Ping(testContext(t)); err != nil {
		t.Fatal(err)
	}
}

// A pipelined producer dialed at a follower produces on the leader.
func TestPipelinedProducerFollowsTheLeader(t *testing.T) {
	fc := newFakeCluster(t, 3, 1)
	p, err := DialPipelinedProducer(testContext(t), fc.nodes[2].addr(), ID(0), ID(0),
		wire.Partitioning{Kind: wire.PartitioningPartitionID, PartitionID: 0}, PipelineOptions{},
		WithCredentials("iggy", "iggy"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	pending, err := p.Send(testContext(t), []Message{{Payload: []byte("m")}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pending.Wait(testContext(t)); err != nil {
		t.Fatal(err)
	}
	if n := len(writesAt(fc.nodes[1])); n != 1 {
		t.Fatalf("%d batches at the leader", n)
	}
	if n := len(writesAt(fc.nodes[2])); n != 0 {
		t.Fatalf("%d batches at the follower", n)
	}
}

func TestSameNodeAddress(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		same bool
	}{
		{"127.0.0.1:8090", "127.0.0.1:8090", true},
		{"localhost:8090", "127.0.0.1:8090", true},
		{"LOCALHOST:8090", "127.0.0.1:8090", true},
		{"127.0.0.1:8090", "127.0.0.1:8091", false},
		{"127.0.0.1:8090", "127.0.0.2:8090", false},
		{"[::]:8090", "[::1]:8090", true},
		{"[::ffff:127.0.0.1]:8090", "127.0.0.1:8090", true},
		{"[0:0:0:0:0:0:0:1]:8090", "[::1]:8090", true},
		{"Node-A.example:8090", "node-a.example:8090", true},
		{"node-a.example:8090", "10.0.0.1:8090", false},
		{"no-port", "NO-PORT", true},
	} {
		if got := sameNodeAddress(tc.a, tc.b); got != tc.same {
			t.Errorf("sameNodeAddress(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.same)
		}
	}
}
