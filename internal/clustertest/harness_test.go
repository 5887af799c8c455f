package clustertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/internal/freeport"
	"github.com/iggy-shard/iggy-shard/wire"
)

// binDir holds the binary the tests build; TestMain removes it.
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "iggy-shard-clustertest-")
	if err != nil {
		panic(err)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// buildBinary builds cmd/iggy-shard with go build, once per test run; or, when
// IGGY_CLUSTERTEST_BIN names a binary, uses that one (a benchmark of two builds in
// one session: the same test binary against the binary of each).
var buildBinary = sync.OnceValues(func() (string, error) {
	if bin := os.Getenv("IGGY_CLUSTERTEST_BIN"); bin != "" {
		return bin, nil
	}
	path := filepath.Join(binDir, "iggy-shard")
	out, err := exec.Command("go", "build", "-o", path, "github.com/iggy-shard/iggy-shard/cmd/iggy-shard").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build: %w\n%s", err, out)
	}
	return path, nil
})

const (
	rootUsername = "iggy"
	rootPassword = "iggy"
	// sharedSecret is at least 32 bytes, as the cluster's handshake requires.
	sharedSecret = "clustertest-shared-secret-of-48-bytes-0123456789"
	clusterName  = "clustertest"
)

// Consensus timings: short, so that a failover takes seconds, and valid under the
// reference's rules (heartbeat_timeout >= 2 s and >= 4 x commit_broadcast_interval;
// view_change_status_timeout >= 4 x view_change_retransmit_interval).
const timingsTOML = `heartbeat_timeout = "2s"
commit_broadcast_interval = "200ms"
prepare_retransmit_interval = "100ms"
view_change_retransmit_interval = "200ms"
view_change_status_timeout = "1s"
request_start_view_retransmit_interval = "500ms"
repair_retry_interval = "500ms"
`

// cluster is a roster of nodes on 127.0.0.1, each a child process when running.
type cluster struct {
	t     testing.TB
	bin   string
	nodes []*node
	// shards is each node's --shards.
	shards int
	// single runs the one node without [cluster]: the single-node server the
	// benchmarks compare with.
	single bool
	// productionTimings leaves the consensus timings and the reconnect period at
	// their defaults, as a new user's files do, instead of the short test timings.
	productionTimings bool
	// pprof serves net/http/pprof on each node (--pprof, on a port of its own), for
	// benchmarks that profile the nodes.
	pprof bool
}

// node is one roster entry: its ports, data directory, TOML file and, while it
// runs, its process.
type node struct {
	c           *cluster
	id          int
	tcpPort     int
	replicaPort int
	// metricsPort serves /debug/replicated-state (and /metrics): the digest of the
	// node's replicated state, compared at the end of every test.
	metricsPort int
	// httpPort serves the HTTP API (the roster's ports.http).
	httpPort int
	// pprofPort serves net/http/pprof when the cluster's pprof is on (0 until the
	// node first starts so).
	pprofPort  int
	dir        string
	configPath string
	// secret and name are what this node's TOML says; a test may make them wrong.
	secret, name string

	proc *process
	// admin is a logged-in connection to this node alone (no leader redirection),
	// kept between polls: a login costs a password hash.
	admin *client.Client
}

// singleNodeBuild is how a build of iggy-shard without the replica plane refuses
// cluster.enabled (server.Start).
const singleNodeBuild = "runs single-node only"

// process is a running iggy-shard.
type process struct {
	cmd     *exec.Cmd
	log     lockedBuffer
	exited  chan struct{}
	exitErr error
	// exitedAt is when Wait returned: set before exited is closed.
	exitedAt time.Time
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// newCluster lays out n nodes (not started): free loopback ports, a data directory
// and a TOML file each.
func newCluster(t testing.TB, n int) *cluster {
	t.Helper()
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{t: t, bin: bin, shards: 1}
	ports := freeport.Loopback(t, 4*n)
	configDir := t.TempDir()
	for i := range n {
		nd := &node{c: c, id: i, tcpPort: ports[4*i], replicaPort: ports[4*i+1], metricsPort: ports[4*i+2], httpPort: ports[4*i+3],
			dir: t.TempDir(), secret: sharedSecret, name: clusterName}
		nd.configPath = filepath.Join(configDir, fmt.Sprintf("node%d.toml", i))
		c.nodes = append(c.nodes, nd)
	}
	t.Cleanup(func() {
		// The nodes still running at the end hold the same replicated state.
		if !t.Failed() && !c.single {
			var running []*node
			for _, nd := range c.nodes {
				if nd.running() {
					running = append(running, nd)
				}
			}
			if len(running) > 1 {
				ctx, cancel := context.WithTimeout(context.Background(), replicatedStateWait)
				if err := awaitSameReplicatedState(ctx, running); err != nil {
					t.Error(err)
				}
				cancel()
			}
		}
		for _, nd := range c.nodes {
			if nd.admin != nil {
				nd.admin.Close()
			}
			if nd.running() {
				nd.kill()
			}
		}
		if t.Failed() {
			for _, nd := range c.nodes {
				t.Logf("--- node %d log (last 8 KiB) ---\n%s", nd.id, nd.logTail(8192))
			}
		}
	})
	return c
}

func (n *node) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(n.tcpPort)) }

// toml is this node's configuration file: the shared roster, this node's data
// directory and client address, and its own view of the secret and the name.
func (n *node) toml() string {
	var b strings.Builder
	fmt.Fprintf(&b, "[system]\npath = %q\n\n[tcp]\naddress = %q\n\n", n.dir, n.addr())
	fmt.Fprintf(&b, "[metrics]\naddress = %q\n\n", net.JoinHostPort("127.0.0.1", strconv.Itoa(n.metricsPort)))
	// HTTP is on by default, at 127.0.0.1:3000: a port of its own, so that two
	// nodes (or a node and anything else on the machine) never share one.
	fmt.Fprintf(&b, "[http]\naddress = %q\n\n", net.JoinHostPort("127.0.0.1", strconv.Itoa(n.httpPort)))
	if n.c.single {
		return b.String()
	}
	timings := timingsTOML
	if n.c.productionTimings {
		timings = ""
	}
	fmt.Fprintf(&b, "[cluster]\nenabled = true\nname = %q\n%s\n", n.name, timings)
	fmt.Fprintf(&b, "[cluster.auth]\nenabled = true\nshared_secret = %q\n\n", n.secret)
	if !n.c.productionTimings {
		fmt.Fprintf(&b, "[message_bus]\nreconnect_period = \"200ms\"\n\n")
	}
	for _, peer := range n.c.nodes {
		fmt.Fprintf(&b, "[[cluster.nodes]]\nname = \"node-%d\"\nip = \"127.0.0.1\"\nreplica_id = %d\nports = { tcp = %d, tcp_replica = %d, http = %d }\n\n",
			peer.id, peer.id, peer.tcpPort, peer.replicaPort, peer.httpPort)
	}
	return b.String()
}

// start writes the node's TOML and runs it. It does not wait for it to serve.
func (n *node) start() {
	t := n.c.t
	t.Helper()
	if n.running() {
		t.Fatalf("node %d started twice", n.id)
	}
	if err := os.WriteFile(n.configPath, []byte(n.toml()), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"--config", n.configPath, "--shards", strconv.Itoa(n.c.shards), "--pin-cpus=false", "--busy-poll", "0"}
	if !n.c.single {
		args = append(args, "--replica-id", strconv.Itoa(n.id))
	}
	if n.c.pprof {
		if n.pprofPort == 0 {
			n.pprofPort = freeport.Loopback(t, 1)[0]
		}
		args = append(args, "--pprof", net.JoinHostPort("127.0.0.1", strconv.Itoa(n.pprofPort)))
	}
	cmd := exec.Command(n.c.bin, args...)
	cmd.Env = append(os.Environ(), "IGGY_ROOT_USERNAME="+rootUsername, "IGGY_ROOT_PASSWORD="+rootPassword)
	p := &process{cmd: cmd, exited: make(chan struct{})}
	if n.proc != nil {
		// Keep the earlier runs' log lines for a failure's dump.
		p.log.buf.WriteString(n.proc.log.String())
		p.log.buf.WriteString("--- restarted ---\n")
	}
	cmd.Stdout = &p.log
	cmd.Stderr = &p.log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.exitErr = cmd.Wait()
		p.exitedAt = time.Now()
		close(p.exited)
	}()
	n.proc = p
}

func (n *node) running() bool {
	if n.proc == nil {
		return false
	}
	select {
	case <-n.proc.exited:
		return false
	default:
		return true
	}
}

// kill sends SIGKILL and waits (at most 10 s) for the process to be gone. It
// returns when the signal was sent and when the process was seen to exit (zero
// when it was not): a reply the process sent before it died may still be read
// after the signal, none after the exit.
func (n *node) kill() (signalledAt, exitedAt time.Time) {
	if n.admin != nil {
		n.admin.Close()
		n.admin = nil
	}
	if n.proc == nil {
		return time.Time{}, time.Time{}
	}
	signalledAt = time.Now()
	_ = n.proc.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-n.proc.exited:
	case <-time.After(10 * time.Second):
		n.c.t.Errorf("node %d still running 10 s after SIGKILL", n.id)
		return signalledAt, time.Time{}
	}
	n.awaitPortsReleased()
	return signalledAt, n.proc.exitedAt
}

// awaitPortsReleased waits (at most 10 s) until the node's listening ports can be
// bound again. The kernel tears an io_uring down after its process has exited, and
// a listening socket an accept in flight holds lives until then: a restart in
// that window fails with "address already in use".
func (n *node) awaitPortsReleased() {
	deadline := time.Now().Add(10 * time.Second)
	for _, port := range []int{n.tcpPort, n.replicaPort, n.metricsPort} {
		for {
			ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
			if err == nil {
				ln.Close()
				break
			}
			if time.Now().After(deadline) {
				n.c.t.Errorf("node %d: port %d still bound 10 s after its process exited: %v", n.id, port, err)
				return
			}
			time.Sleep(20 * time.Millisecond) // polls the kernel's teardown; nothing to wait on
		}
	}
}

func (n *node) logText() string {
	if n.proc == nil {
		return ""
	}
	return n.proc.log.String()
}

func (n *node) logTail(size int) string {
	s := n.logText()
	if len(s) > size {
		s = s[len(s)-size:]
	}
	return s
}

// exitedEarly fails the test if the node's process is gone while it should run.
func (n *node) checkAlive() error {
	if n.proc != nil && !n.running() {
		return fmt.Errorf("node %d exited: %v\n%s", n.id, n.proc.exitErr, n.logTail(2048))
	}
	return nil
}

// dial logs in at this node (and, by default, follows the leader from there).
func (n *node) dial(ctx context.Context, opts ...client.Option) (*client.Client, error) {
	opts = append([]client.Option{client.WithCredentials(rootUsername, rootPassword),
		client.WithRequestTimeout(10 * time.Second)}, opts...)
	return client.Dial(ctx, n.addr(), opts...)
}

// adminClient is a logged-in connection to this node alone, redialed after a
// failure.
func (n *node) adminClient(ctx context.Context) (*client.Client, error) {
	if n.admin != nil {
		return n.admin, nil
	}
	c, err := n.dial(ctx, client.WithLeaderRedirection(false))
	if err != nil {
		return nil, err
	}
	n.admin = c
	return c, nil
}

// dropAdmin forgets the admin connection after an error on it.
func (n *node) dropAdmin() {
	if n.admin != nil {
		n.admin.Close()
		n.admin = nil
	}
}

// metadata asks this node for GetClusterMetadata.
func (n *node) metadata(ctx context.Context) (*wire.ClusterMetadata, error) {
	c, err := n.adminClient(ctx)
	if err != nil {
		return nil, err
	}
	m, err := c.GetClusterMetadata(ctx)
	if err != nil {
		n.dropAdmin()
	}
	return m, err
}

// stop kills every node that runs.
func (c *cluster) stop() {
	for _, n := range c.nodes {
		if n.running() {
			n.kill()
		}
	}
}

// startAll starts every node.
func (c *cluster) startAll() {
	for _, n := range c.nodes {
		n.start()
	}
}

// byTCPPort is the node whose client port is port, or nil.
func (c *cluster) byTCPPort(port uint16) *node {
	for _, n := range c.nodes {
		if n.tcpPort == int(port) {
			return n
		}
	}
	return nil
}

// leaderSeenBy reads one node's roster: the node it names leader (healthy), or an
// error naming what is wrong with the roster.
func (c *cluster) leaderSeenBy(ctx context.Context, n *node) (*node, error) {
	attempt, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	m, err := n.metadata(attempt)
	if err != nil {
		return nil, err
	}
	if len(m.Nodes) != len(c.nodes) {
		return nil, fmt.Errorf("node %d lists %d nodes, the roster has %d", n.id, len(m.Nodes), len(c.nodes))
	}
	var leader *node
	for _, entry := range m.Nodes {
		if string(entry.IP) != "127.0.0.1" || c.byTCPPort(entry.TCPPort) == nil {
			return nil, fmt.Errorf("node %d lists %s:%d, which is no node's client address", n.id, entry.IP, entry.TCPPort)
		}
		if entry.Role != wire.ClusterRoleLeader {
			continue
		}
		if leader != nil {
			return nil, fmt.Errorf("node %d lists two leaders", n.id)
		}
		if entry.Status != wire.ClusterNodeHealthy {
			return nil, fmt.Errorf("node %d lists a leader of status %d", n.id, entry.Status)
		}
		leader = c.byTCPPort(entry.TCPPort)
	}
	if leader == nil {
		return nil, fmt.Errorf("node %d lists no leader", n.id)
	}
	return leader, nil
}

// awaitLeader waits (bounded by ctx and 30 s) until every node of among that runs
// names the same leader, itself one of among, and returns it.
func (c *cluster) awaitLeader(ctx context.Context, among []*node) *node {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var lastErr error
	for {
		leader, err := c.agreedLeader(ctx, among)
		if err == nil {
			return leader
		}
		lastErr = err
		for _, n := range among {
			if err := n.checkAlive(); err != nil {
				if strings.Contains(n.logText(), singleNodeBuild) {
					// Only the build's own refusal of any cluster, by name: once
					// the server runs clusters, every failure fails.
					c.t.Skipf("this build of iggy-shard refuses cluster.enabled (%q): the cluster tests need its replica plane", singleNodeBuild)
				}
				c.t.Fatal(err)
			}
		}
		if !waitCtx(ctx, 100*time.Millisecond) {
			c.t.Fatalf("no agreed leader among nodes %v: %v", ids(among), lastErr)
		}
	}
}

func (c *cluster) agreedLeader(ctx context.Context, among []*node) (*node, error) {
	var agreed *node
	for _, n := range among {
		leader, err := c.leaderSeenBy(ctx, n)
		if err != nil {
			return nil, err
		}
		if agreed != nil && leader != agreed {
			return nil, fmt.Errorf("nodes disagree on the leader: %d and %d", agreed.id, leader.id)
		}
		agreed = leader
	}
	if !contains(among, agreed) {
		return nil, fmt.Errorf("the leader named, node %d, is not among %v", agreed.id, ids(among))
	}
	return agreed, nil
}

func (c *cluster) others(excluded ...*node) []*node {
	var out []*node
	for _, n := range c.nodes {
		if !contains(excluded, n) {
			out = append(out, n)
		}
	}
	return out
}

func contains(nodes []*node, n *node) bool {
	for _, m := range nodes {
		if m == n {
			return true
		}
	}
	return false
}

func ids(nodes []*node) []int {
	out := make([]int, len(nodes))
	for i, n := range nodes {
		out[i] = n.id
	}
	return out
}

// waitCtx waits d, or less when ctx ends first, and reports whether ctx is still
// live. It paces polls of a condition; it never stands in for one.
func waitCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// isConnectionLoss reports errors after which a client must dial again.
func isConnectionLoss(err error) bool {
	var conn *client.ConnectionError
	var ev *client.EvictionError
	return errors.As(err, &conn) || errors.As(err, &ev) || errors.Is(err, wire.ErrNotConnected)
}
