package replicanet

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/arena"
	"github.com/iggy-shard/iggy-shard/config"
	"github.com/iggy-shard/iggy-shard/replica"
	"github.com/iggy-shard/iggy-shard/shard"
	"github.com/iggy-shard/iggy-shard/tlsterm"
	"github.com/iggy-shard/iggy-shard/tlsterm/tlstest"
	"github.com/iggy-shard/iggy-shard/wire"
)

// Tests of [cluster.tls]: shard runtimes with replica planes, on loopback, connected
// through NewTLS as server.Start connects them.

const replicaTLSTestSecret = "0123456789abcdef0123456789abcdef-tls"

// replicaTLSNode is one node of a test cluster: its runtime, its replica TLS (nil
// for a plaintext node) and what its handler saw.
type replicaTLSNode struct {
	t   testing.TB
	id  uint8
	rt  *shard.Runtime
	tls *TLS

	mu       sync.Mutex
	up       map[uint8]bool
	received []replicaTLSFrame
	changed  chan struct{}

	sendMu  sync.Mutex
	pending []replicaTLSSend

	bench *replicaTLSBench // set in a benchmark
}

// replicaTLSBench is what a benchmark's two nodes share: replica 0 sends frame to
// replica 1 until remaining is 0; done is closed when target frames have arrived.
type replicaTLSBench struct {
	frame     []byte
	remaining atomic.Int64
	received  atomic.Int64
	target    atomic.Int64
	done      chan struct{}
	sendErrs  atomic.Int64
}

type replicaTLSFrame struct {
	peer      uint8
	command   wire.Command
	size      int
	bodyValid bool
}

type replicaTLSSend struct {
	peer  uint8
	frame []byte
}

func (n *replicaTLSNode) poke() {
	select {
	case n.changed <- struct{}{}:
	default:
	}
}

// waitFor waits until cond holds (under the node's lock, after every change the
// handler reports and every few milliseconds for the counters, which report none),
// or fails the test.
func (n *replicaTLSNode) waitFor(what string, cond func() bool) {
	n.t.Helper()
	deadline := time.NewTimer(15 * time.Second)
	defer deadline.Stop()
	recheck := time.NewTicker(5 * time.Millisecond)
	defer recheck.Stop()
	for {
		n.mu.Lock()
		ok := cond()
		n.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-n.changed:
		case <-recheck.C:
		case <-deadline.C:
			n.t.Fatalf("replica %d: timed out waiting for %s (replica stats %+v, TLS stats %+v)", n.id, what,
				n.rt.ReplicaStats(), n.tls.Stats())
		}
	}
}

func (n *replicaTLSNode) send(peer uint8, frame []byte) {
	n.sendMu.Lock()
	n.pending = append(n.pending, replicaTLSSend{peer: peer, frame: frame})
	n.sendMu.Unlock()
	n.rt.WakeAll()
}

// replicaTLSHandler serves no client; it records the replica frames and
// connections of its node, and sends what the test asked for from the shard that
// owns the peer's connection.
type replicaTLSHandler struct {
	node *replicaTLSNode
}

func (h *replicaTLSHandler) ServeRequest(c *shard.Conn, req *shard.Request) {}
func (h *replicaTLSHandler) ServeMessage(s *shard.Shard, m shard.Message)   {}
func (h *replicaTLSHandler) ConnClosed(c *shard.Conn)                       {}

func (h *replicaTLSHandler) ServeReplica(s *shard.Shard, f *shard.ReplicaFrame) {
	n := h.node
	if b := n.bench; b != nil {
		if b.received.Add(1) == b.target.Load() {
			close(b.done)
		}
		return
	}
	r := replicaTLSFrame{peer: f.Peer, command: f.Header.Command, size: int(f.Header.Size), bodyValid: replicaTLSPatternValid(f.Body)}
	n.mu.Lock()
	n.received = append(n.received, r)
	n.mu.Unlock()
	n.poke()
}

func (h *replicaTLSHandler) ReplicaConnected(s *shard.Shard, peer uint8) {
	n := h.node
	n.mu.Lock()
	n.up[peer] = true
	n.mu.Unlock()
	n.poke()
}

func (h *replicaTLSHandler) ReplicaDisconnected(s *shard.Shard, peer uint8) {
	n := h.node
	n.mu.Lock()
	delete(n.up, peer)
	n.mu.Unlock()
	n.poke()
}

func (h *replicaTLSHandler) Tick(s *shard.Shard) bool {
	n := h.node
	// The benchmark's sender: while the peer's queue has room. Tick runs every
	// turn, so a send's completion, which frees room, brings the next frames.
	if b := n.bench; b != nil {
		for n.id == 0 && b.remaining.Load() > 0 && s.ReplicaQueueRoom(1) > 0 {
			if err := s.SendReplica(1, b.frame[:wire.HeaderSize], b.frame[wire.HeaderSize:]); err != nil {
				b.sendErrs.Add(1)
				return true
			}
			b.remaining.Add(-1)
		}
		return false
	}
	n.sendMu.Lock()
	var mine []replicaTLSSend
	kept := n.pending[:0]
	for _, r := range n.pending {
		if owner, ok := s.ReplicaOwner(r.peer); ok && owner == s.Index() {
			mine = append(mine, r)
		} else {
			kept = append(kept, r)
		}
	}
	n.pending = kept
	n.sendMu.Unlock()
	for _, r := range mine {
		if err := s.SendReplica(r.peer, r.frame[:wire.HeaderSize], r.frame[wire.HeaderSize:]); err != nil {
			n.t.Errorf("replica %d: send to %d: %v", n.id, r.peer, err)
		}
	}
	return false
}

// replicaTLSArena holds a few frames of each size the tests send.
func replicaTLSArena() arena.Config {
	const kib, mib = 1 << 10, 1 << 20
	return arena.Config{Classes: []arena.ClassConfig{
		{BufferSizeBytes: 4 * kib, BufferCount: 1024},
		{BufferSizeBytes: 8 * kib, BufferCount: 256},
		{BufferSizeBytes: 64 * kib, BufferCount: 256},
		{BufferSizeBytes: 1 * mib, BufferCount: 16},
		{BufferSizeBytes: 16 * mib, BufferCount: 2},
	}}
}

// replicaTLSCluster is the [cluster] section of a test cluster of count nodes on
// 127.0.0.1, ports picked at random (tcp_replica 0); each node's TLS settings are
// set by the test.
func replicaTLSCluster(count int) config.Cluster {
	c := config.DefaultCluster()
	c.Enabled = true
	c.Name = "tls-test"
	c.Auth = config.ClusterAuth{Enabled: true, SharedSecret: replicaTLSTestSecret}
	c.MessageBus.ReconnectPeriod = replicaTLSReconnectPeriod
	for id := range count {
		c.Nodes = append(c.Nodes, config.ClusterNode{Name: fmt.Sprintf("node-%d", id), IP: "127.0.0.1", ReplicaID: id})
	}
	return c
}

// replicaTLSReconnectPeriod is the test clusters' redial period, and so the bound of
// each TLS dial: long enough for a handshake on a busy two-CPU machine.
const replicaTLSReconnectPeriod = 200 * time.Millisecond

// replicaTLSSpec is one node of a test: its cluster section (TLS off: a plaintext
// node) and, when set, its replica address as its peers dial it (a relay's).
type replicaTLSSpec struct {
	cluster config.Cluster
	dialAs  string
	bench   *replicaTLSBench
	shards  int
	arena   arena.Config
	queue   int
	log     *slog.Logger
}

// startReplicaTLSNodes binds every node's replica port, then starts their runtimes
// (each dials the higher ids as soon as it runs).
func startReplicaTLSNodes(t testing.TB, specs []replicaTLSSpec) []*replicaTLSNode {
	t.Helper()
	nodes := make([]*replicaTLSNode, len(specs))
	addrs := make([]string, len(specs))
	plainListeners := make([]net.Listener, len(specs))
	for id, sp := range specs {
		n := &replicaTLSNode{t: t, id: uint8(id), up: map[uint8]bool{}, changed: make(chan struct{}, 1), bench: sp.bench}
		nodes[id] = n
		log := sp.log
		if log == nil {
			log = replicaTLSLogger(t)
		}
		cfg := sp.cluster
		cfg.ReplicaID = id
		rtls, err := NewTLS(&cfg, &cfg.Nodes[id], log)
		if err != nil {
			t.Fatalf("replica %d: NewTLS: %v", id, err)
		}
		if rtls != nil {
			n.tls = rtls
			addrs[id] = rtls.Addr().String()
		} else {
			// A plaintext node binds its own port: found here, bound by its runtime.
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			plainListeners[id] = ln
			addrs[id] = ln.Addr().String()
		}
	}
	for id := range specs {
		if specs[id].dialAs != "" {
			addrs[id] = specs[id].dialAs
		}
	}
	for id := len(specs) - 1; id >= 0; id-- {
		sp, n := specs[id], nodes[id]
		listen := addrs[id]
		if plainListeners[id] != nil {
			listen = plainListeners[id].Addr().String()
			plainListeners[id].Close() // the runtime binds it now
		}
		auth, err := wire.NewHandshakeAuth([]byte(sp.cluster.Auth.SharedSecret), nil)
		if err != nil {
			t.Fatal(err)
		}
		rc := &shard.ReplicaConfig{
			ListenAddress: listen,
			Handshake: replica.HandshakeConfig{Cluster: wire.ClusterID(sp.cluster.Name), Self: uint8(id),
				ReplicaCount: uint8(len(specs)), Auth: &auth},
			PeerAddresses:     addrs,
			ReconnectPeriod:   replicaTLSReconnectPeriod,
			HandshakeTimeout:  2 * time.Second,
			PeerQueueCapacity: sp.queue,
		}
		n.tls.Configure(rc)
		shards := sp.shards
		if shards == 0 {
			shards = 2
		}
		ar := sp.arena
		if len(ar.Classes) == 0 {
			ar = replicaTLSArena()
		}
		log := sp.log
		if log == nil {
			log = replicaTLSLogger(t)
		}
		rt, err := shard.Start(shard.Config{
			TCPAddress: "127.0.0.1:0",
			ShardCount: shards,
			BusyPoll:   -1, // several runtimes and the TLS goroutines share two CPUs
			Arena:      ar,
			Logger:     log,
			NewHandler: func(s *shard.Shard) shard.Handler { return &replicaTLSHandler{node: n} },
			Replica:    rc,
		})
		if err != nil {
			n.tls.Close()
			t.Fatalf("replica %d: start: %v", id, err)
		}
		n.rt = rt
		if err := n.tls.Attach(rt); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			n.tls.Close()
			if err := rt.Shutdown(ctx); err != nil {
				t.Errorf("replica %d: shutdown: %v", n.id, err)
			}
			<-rt.Done()
			if err := n.tls.Wait(ctx); err != nil {
				t.Errorf("replica %d: TLS wait: %v", n.id, err)
			}
		})
	}
	return nodes
}

func replicaTLSLogger(t testing.TB) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// caModeCluster gives every node a certificate of ca (or, for the ids in others, of
// other) for 127.0.0.1, in files, and ca's file as every node's ca_file.
func caModeCluster(t testing.TB, count int, ca, other *tlstest.CA, others map[int]bool) []replicaTLSSpec {
	t.Helper()
	dir := t.TempDir()
	caFile := ca.WriteCAFile(t, dir)
	specs := make([]replicaTLSSpec, count)
	for id := range count {
		issuer := ca
		if others[id] {
			issuer = other
		}
		nodeDir := filepath.Join(dir, fmt.Sprint(id))
		if err := os.MkdirAll(nodeDir, 0o700); err != nil {
			t.Fatal(err)
		}
		certFile, keyFile := issuer.IssueValid(t).WriteFiles(t, nodeDir)
		c := replicaTLSCluster(count)
		c.TLS = config.ClusterTLS{Enabled: true, CertFile: certFile, KeyFile: keyFile, CAFile: caFile}
		specs[id] = replicaTLSSpec{cluster: c}
	}
	return specs
}

func selfSignedCluster(count int) []replicaTLSSpec {
	specs := make([]replicaTLSSpec, count)
	for id := range count {
		c := replicaTLSCluster(count)
		c.TLS = config.ClusterTLS{Enabled: true, SelfSigned: true}
		specs[id] = replicaTLSSpec{cluster: c}
	}
	return specs
}

func replicaTLSPattern(body []byte) {
	for i := range body {
		body[i] = byte(i*7 + i>>8)
	}
}

func replicaTLSPatternValid(body []byte) bool {
	for i, b := range body {
		if b != byte(i*7+i>>8) {
			return false
		}
	}
	return true
}

// replicaTLSPrepare is a partition Prepare of sizeBytes, its body a pattern.
func replicaTLSPrepare(cluster string, sizeBytes int) []byte {
	var h wire.PrepareHeader
	h.Size = uint32(sizeBytes)
	h.Command = wire.CommandPrepare
	h.Cluster = wire.ClusterID(cluster)
	h.Op = 1
	h.Client = wire.Uint128{Lo: 9}
	h.Operation = wire.OperationSendMessages
	h.Group, _ = wire.PartitionGroup(1, 1, 0)
	frame := make([]byte, sizeBytes)
	wire.PutHeader(frame, &h)
	replicaTLSPattern(frame[wire.HeaderSize:])
	return frame
}

func waitFullMesh(nodes []*replicaTLSNode) {
	for _, n := range nodes {
		n.waitFor("a full mesh", func() bool { return len(n.up) == len(nodes)-1 })
	}
}

// checkFramesTravel sends a 1 MiB prepare from every node to every peer and
// waits until each has arrived whole.
func checkFramesTravel(t *testing.T, nodes []*replicaTLSNode, cluster string) {
	t.Helper()
	frame := replicaTLSPrepare(cluster, 1<<20)
	for _, n := range nodes {
		for peer := range nodes {
			if peer != int(n.id) {
				n.send(uint8(peer), frame)
			}
		}
	}
	for _, n := range nodes {
		n.waitFor("a frame from every peer", func() bool { return len(n.received) == len(nodes)-1 })
		n.mu.Lock()
		for _, r := range n.received {
			if r.command != wire.CommandPrepare || r.size != len(frame) || !r.bodyValid {
				t.Errorf("replica %d: frame from %d arrived as %v of %d bytes, body valid %v", n.id, r.peer, r.command, r.size, r.bodyValid)
			}
		}
		n.mu.Unlock()
	}
}

// TestReplicaTLSMeshCAMode: three nodes with certificates of one CA form the mesh
// over TLS (every connection is a TLS session: the runtime binds no replica port of
// its own), and frames travel both ways.
func TestReplicaTLSMeshCAMode(t *testing.T) {
	ca := tlstest.NewCA(t, "cluster CA")
	nodes := startReplicaTLSNodes(t, caModeCluster(t, 3, ca, nil, nil))
	waitFullMesh(nodes)
	checkFramesTravel(t, nodes, "tls-test")
	for _, n := range nodes {
		if n.rt.ReplicaAddr() != nil {
			t.Errorf("replica %d: the runtime bound a replica port of its own (%v)", n.id, n.rt.ReplicaAddr())
		}
		// Node i dials the 2-i nodes above it and accepts the i below it (eventually:
		// a duplicate the runtime refused may still be closing).
		n.waitFor("one TLS session per peer", func() bool {
			st := n.tls.Stats()
			return st.DialedOpen == int64(2-n.id) && st.Terminator.SessionsOpen == int64(n.id)
		})
		if rs := n.rt.ReplicaStats(); rs.HandshakesRefused != 0 {
			t.Errorf("replica %d refused a handshake in a healthy mesh: %+v", n.id, rs)
		}
	}
}

// TestReplicaTLSMeshSelfSigned: in self-signed mode each node makes its own
// certificate and the dialers accept any; the mesh forms.
func TestReplicaTLSMeshSelfSigned(t *testing.T) {
	nodes := startReplicaTLSNodes(t, selfSignedCluster(3))
	waitFullMesh(nodes)
	checkFramesTravel(t, nodes, "tls-test")
}

// TestReplicaTLSRefusesAnotherCA: node 2's certificate comes from a CA the others do
// not trust: nodes 0 and 1, which dial it, refuse it, and connect to each other.
func TestReplicaTLSRefusesAnotherCA(t *testing.T) {
	ca, other := tlstest.NewCA(t, "cluster CA"), tlstest.NewCA(t, "another CA")
	specs := caModeCluster(t, 3, ca, other, map[int]bool{2: true})
	logs := make([]*lockedBuffer, 3)
	for id := range specs {
		logs[id] = &lockedBuffer{}
		specs[id].log = slog.New(slog.NewTextHandler(logs[id], &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	nodes := startReplicaTLSNodes(t, specs)
	nodes[0].waitFor("the connection to replica 1", func() bool { return nodes[0].up[1] })
	for _, n := range nodes[:2] {
		n.waitFor("two refused dials of replica 2", func() bool { return n.tls.Stats().DialsFailed >= 2 })
		if !strings.Contains(logs[n.id].String(), "certificate signed by unknown authority") {
			t.Errorf("replica %d: the refusal does not name the certificate's authority:\n%s", n.id, logs[n.id].String())
		}
	}
	for _, n := range nodes {
		n.mu.Lock()
		up2, upCount := n.up[2], len(n.up)
		n.mu.Unlock()
		if up2 || (n.id == 2 && upCount > 0) {
			t.Errorf("replica %d: connected to the node of another CA", n.id)
		}
	}
}

// TestReplicaTLSRefusesPlaintextPeers: a plaintext node and a TLS node never connect,
// whichever dials: the terminator refuses the plaintext Hello, the plaintext runtime
// the ClientHello.
func TestReplicaTLSRefusesPlaintextPeers(t *testing.T) {
	for _, tlsID := range []int{0, 1} {
		t.Run(fmt.Sprintf("tls=replica%d", tlsID), func(t *testing.T) {
			specs := selfSignedCluster(2)
			plainID := 1 - tlsID
			specs[plainID].cluster.TLS = config.ClusterTLS{}
			nodes := startReplicaTLSNodes(t, specs)
			tlsNode, plainNode := nodes[tlsID], nodes[plainID]
			if tlsID == 0 { // the TLS node dials the plaintext one
				tlsNode.waitFor("refused dials", func() bool { return tlsNode.tls.Stats().DialsFailed >= 2 })
				plainNode.waitFor("refused handshakes", func() bool { return plainNode.rt.ReplicaStats().HandshakesRefused >= 2 })
			} else { // the plaintext node dials the TLS one
				tlsNode.waitFor("refused TLS handshakes", func() bool { return tlsNode.tls.Stats().Terminator.HandshakesFailed >= 2 })
			}
			for _, n := range nodes {
				if n.rt.ReplicaConnected(uint8(1 - n.id)) {
					t.Errorf("replica %d connected across TLS and plaintext", n.id)
				}
			}
		})
	}
}

// TestReplicaTLSExporterBindsTheHandshake: a relay that terminates the dialer's TLS
// with a certificate of its own (self-signed mode accepts any) and opens its own
// session to the acceptor passes every byte of the PSK handshake unchanged, yet the
// handshake fails: each side's MACs bind its own session's exporter, and the two
// sessions' differ.
func TestReplicaTLSExporterBindsTheHandshake(t *testing.T) {
	specs := selfSignedCluster(2)
	relayCert, err := tlsterm.SelfSigned(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	relayLn, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{relayCert},
		MinVersion: tls.VersionTLS13, NextProtos: []string{tlsterm.ReplicaALPN}})
	if err != nil {
		t.Fatal(err)
	}
	var relayed atomic.Int64
	acceptorAddr := make(chan string, 1)
	var relayWG sync.WaitGroup
	var conns sync.Map
	// Registered before the nodes start, so run after their cleanups have stopped
	// them: nothing dials the relay any more.
	t.Cleanup(func() {
		relayLn.Close()
		close(acceptorAddr)
		conns.Range(func(k, _ any) bool { k.(net.Conn).Close(); return true })
		relayWG.Wait()
	})
	relayWG.Add(1)
	go func() {
		defer relayWG.Done()
		target, ok := <-acceptorAddr
		if !ok {
			return
		}
		for {
			in, err := relayLn.Accept()
			if err != nil {
				return
			}
			conns.Store(in, nil)
			relayWG.Add(1)
			go func() {
				defer relayWG.Done()
				defer in.Close()
				out, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", target,
					&tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13, NextProtos: []string{tlsterm.ReplicaALPN}})
				if err != nil {
					return
				}
				conns.Store(out, nil)
				defer out.Close()
				relayed.Add(1)
				relayWG.Add(1)
				go func() {
					defer relayWG.Done()
					io.Copy(out, in)
					out.CloseWrite()
				}()
				io.Copy(in, out)
			}()
		}
	}()
	specs[1].dialAs = relayLn.Addr().String()
	dialerLog := &lockedBuffer{}
	specs[0].log = slog.New(slog.NewTextHandler(dialerLog, nil))
	nodes := startReplicaTLSNodes(t, specs)
	acceptorAddr <- nodes[1].tls.Addr().String()
	// The dialer checks the acceptor's MAC first, and refuses it.
	nodes[0].waitFor("the relayed handshake refused for its MAC", func() bool {
		return nodes[0].rt.ReplicaStats().HandshakesRefused >= 1 && strings.Contains(dialerLog.String(), "MacMismatch")
	})
	if relayed.Load() == 0 {
		t.Fatal("the relay carried no session")
	}

	for _, n := range nodes {
		if n.rt.ReplicaConnected(uint8(1 - n.id)) {
			t.Errorf("replica %d connected through the relay", n.id)
		}
	}
}

// TestNewReplicaTLSSettings: the files of CA mode are checked at start, each failure
// naming its key; TLS off builds nothing.
func TestNewReplicaTLSSettings(t *testing.T) {
	ca := tlstest.NewCA(t, "cluster CA")
	dir := t.TempDir()
	certFile, keyFile := ca.IssueValid(t).WriteFiles(t, dir)
	caFile := ca.WriteCAFile(t, dir)
	missing := filepath.Join(dir, "missing.pem")
	cases := []struct {
		name    string
		tls     config.ClusterTLS
		setting string
	}{
		{"missing cert", config.ClusterTLS{Enabled: true, CertFile: missing, KeyFile: keyFile, CAFile: caFile}, "cluster.tls.cert_file"},
		{"missing key", config.ClusterTLS{Enabled: true, CertFile: certFile, KeyFile: missing, CAFile: caFile}, "cluster.tls.key_file"},
		{"missing CA", config.ClusterTLS{Enabled: true, CertFile: certFile, KeyFile: keyFile, CAFile: missing}, "cluster.tls.ca_file"},
		{"CA file of a key", config.ClusterTLS{Enabled: true, CertFile: certFile, KeyFile: keyFile, CAFile: keyFile}, "cluster.tls.ca_file"},
	}
	for _, c := range cases {
		cfg := replicaTLSCluster(1)
		cfg.TLS = c.tls
		_, err := NewTLS(&cfg, &cfg.Nodes[0], replicaTLSLogger(t))
		se, ok := err.(*config.SettingError)
		if !ok || se.Setting != c.setting {
			t.Errorf("%s: error %v, want a config.SettingError of %s", c.name, err, c.setting)
		}
	}
	cfg := replicaTLSCluster(1)
	if r, err := NewTLS(&cfg, &cfg.Nodes[0], nil); r != nil || err != nil {
		t.Fatalf("TLS off: %v, %v", r, err)
	}
	var rc shard.ReplicaConfig
	var off *TLS
	off.Configure(&rc)
	if rc.ListenerOff || rc.Dial != nil || off.Attach(nil) != nil || off.Addr() != nil || off.Wait(context.Background()) != nil {
		t.Fatal("a nil TLS changed something")
	}
	// Self-signed mode names the node's ip, and reads no file.
	cfg.TLS = config.ClusterTLS{Enabled: true, SelfSigned: true, CertFile: missing}
	logs := &lockedBuffer{}
	r, err := NewTLS(&cfg, &cfg.Nodes[0], slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	leaf := r.layer.Certificate().Leaf
	if err := leaf.VerifyHostname("127.0.0.1"); err != nil {
		t.Fatalf("the self-signed certificate does not name the node's ip: %v", err)
	}
	// A CA-mode certificate that does not name the node's ip is warned of.
	cfg.Nodes[0].IP = "127.0.0.2"
	cfg.TLS = config.ClusterTLS{Enabled: true, CertFile: certFile, KeyFile: keyFile, CAFile: caFile}
	logs = &lockedBuffer{}
	r2, err := NewTLS(&cfg, &cfg.Nodes[0], slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Skipf("127.0.0.2 cannot be bound here: %v", err)
	}
	defer r2.Close()
	if !strings.Contains(logs.String(), "will refuse this node's certificate") {
		t.Fatalf("no warning of a certificate without the node's ip:\n%s", logs.String())
	}
}

// BenchmarkReplicaTLSThroughput moves replica frames from replica 0 to replica 1,
// two runtimes of one shard each on loopback, over TLS (each direction through a
// bridge: TLS 1.3 AES-GCM on goroutines, a socketpair to the shard) and, in the same
// run, over plain replica connections: the cost of [cluster.tls] on the plane. The
// TLS side's allocations are crypto/tls's own: its record reader allocates once per
// read from the socket (Conn.readFromUntil), about twice per 64 KiB; the bridge and
// the runtime allocate nothing per frame.
func BenchmarkReplicaTLSThroughput(b *testing.B) {
	for _, size := range []int{64 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("plane=plain/size=%d", size), func(b *testing.B) { benchReplicaTLS(b, size, false) })
		b.Run(fmt.Sprintf("plane=tls/size=%d", size), func(b *testing.B) { benchReplicaTLS(b, size, true) })
	}
}

func benchReplicaTLS(b *testing.B, size int, withTLS bool) {
	const cluster = "tls-test"
	bench := &replicaTLSBench{frame: replicaTLSPrepare(cluster, size), done: make(chan struct{})}
	var specs []replicaTLSSpec
	if withTLS {
		specs = selfSignedCluster(2)
	} else {
		specs = []replicaTLSSpec{{cluster: replicaTLSCluster(2)}, {cluster: replicaTLSCluster(2)}}
	}
	for i := range specs {
		specs[i].bench = bench
		specs[i].shards = 1
		specs[i].arena = shard.ArenaConfigDefault()
		// The sender's arena holds 64 frames of 1 MiB: a deeper queue would only
		// meet ErrReplicaBuffersExhausted.
		specs[i].queue = 32
		specs[i].log = slog.New(slog.DiscardHandler)
	}
	nodes := startReplicaTLSNodes(b, specs)
	nodes[0].waitFor("the connection to replica 1", func() bool { return nodes[0].up[1] })
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	bench.target.Store(int64(b.N))
	bench.remaining.Store(int64(b.N))
	nodes[0].rt.WakeAll()
	select {
	case <-bench.done:
	case <-time.After(5 * time.Minute):
		b.Fatalf("received %d of %d frames", bench.received.Load(), b.N)
	}
	b.StopTimer()
	if n := bench.sendErrs.Load(); n > 0 {
		b.Fatalf("%d sends failed", n)
	}
}

// lockedBuffer is a log destination the runtime's goroutines write to while the
// test reads it.
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
