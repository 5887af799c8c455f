package shard

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zeebo/xxh3"
	"golang.org/x/sys/unix"

	"github.com/iggy-shard/iggy-shard/fdpass"
	"github.com/iggy-shard/iggy-shard/replica"
	"github.com/iggy-shard/iggy-shard/wire"
)

// replicaTestNode is one runtime of a test cluster, with what its handlers saw.
type replicaTestNode struct {
	t  testing.TB
	rt *Runtime
	id uint8

	mu       sync.Mutex
	received []receivedFrame
	up       map[uint8]bool // registered peers, as the observer was told
	events   int            // connects and disconnects seen
	sendErrs []error
	changed  chan struct{} // poked (never blocking) on every change above

	sendMu  sync.Mutex
	pending []replicaSendRequest

	// tids are the threads of the node's shards (each loop is locked to its
	// own), as their last turn saw them: a Releaser tells by them whether it runs
	// on the shard that lent its frame.
	tids [4]atomic.Int32
}

type receivedFrame struct {
	peer      uint8
	shard     int
	command   wire.Command
	size      int
	bodyHash  uint64
	bodyValid bool   // the body is the pattern the builder wrote
	turn      uint64 // the serving shard's loop turn
	group     uint64 // the frame's consensus group
}

type replicaSendRequest struct {
	fromShard int
	peer      uint8
	frame     []byte
	repeat    int      // send it this many times in one turn
	lent      Releaser // send with SendReplicaLent, frame aligned
	parts     bool     // lent with SendReplicaLentParts, the header apart
	// paced: wait (within the turn, up to 10 s) until the peer takes a partition
	// frame before each send.
	paced bool
}

// countingReleaser counts its releases (on the shards; read after they are seen).
type countingReleaser struct{ released atomic.Int64 }

func (r *countingReleaser) Release() { r.released.Add(1) }

func (n *replicaTestNode) poke() {
	select {
	case n.changed <- struct{}{}:
	default:
	}
}

// waitFor waits until cond holds (checked under the node's lock after every change
// the handlers report, and every few milliseconds for the runtime's counters, which
// report none), or fails the test after timeout.
func (n *replicaTestNode) waitFor(what string, timeout time.Duration, cond func() bool) {
	n.t.Helper()
	deadline := time.NewTimer(timeout)
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
			n.t.Fatalf("replica %d: timed out waiting for %s", n.id, what)
		}
	}
}

// send asks shard fromShard of the node to send frame to peer (repeat times), on its
// next turn.
func (n *replicaTestNode) send(fromShard int, peer uint8, frame []byte, repeat int) {
	n.sendMu.Lock()
	n.pending = append(n.pending, replicaSendRequest{fromShard: fromShard, peer: peer, frame: frame, repeat: repeat})
	n.sendMu.Unlock()
	n.rt.WakeAll()
}

// replicaTestHandler is a client-plane testHandler that also serves the replica plane.
type replicaTestHandler struct {
	testHandler
	node *replicaTestNode
}

func (h *replicaTestHandler) ServeReplica(s *Shard, f *ReplicaFrame) {
	r := receivedFrame{peer: f.Peer, shard: s.Index(), command: f.Header.Command, size: int(f.Header.Size),
		bodyHash: xxh3.Hash(f.Body), bodyValid: patternValid(f.Body), turn: s.counters.turns}
	r.group, _ = wire.FrameGroup(f.Header)
	if f.Header.Command == wire.CommandStateChunk {
		// Exercise Retain: keep the frame past ServeReplica, check it, release it.
		kept := f.Retain()
		if xxh3.Hash(kept.Body) != r.bodyHash || kept.Header.Size != uint32(r.size) {
			r.bodyValid = false
		}
		kept.Release()
	}
	n := h.node
	n.mu.Lock()
	n.received = append(n.received, r)
	n.mu.Unlock()
	n.poke()
}

func (h *replicaTestHandler) ReplicaConnected(s *Shard, peer uint8) {
	n := h.node
	n.mu.Lock()
	n.up[peer] = true
	n.events++
	n.mu.Unlock()
	n.poke()
}

func (h *replicaTestHandler) ReplicaDisconnected(s *Shard, peer uint8) {
	n := h.node
	n.mu.Lock()
	delete(n.up, peer)
	n.events++
	n.mu.Unlock()
	n.poke()
}

func (h *replicaTestHandler) Tick(s *Shard) bool {
	n := h.node
	n.tids[s.Index()].Store(int32(unix.Gettid()))
	n.sendMu.Lock()
	var mine []replicaSendRequest
	kept := n.pending[:0]
	for _, r := range n.pending {
		if r.fromShard == s.Index() {
			mine = append(mine, r)
		} else {
			kept = append(kept, r)
		}
	}
	n.pending = kept
	n.sendMu.Unlock()
	var errs []error
	for _, r := range mine {
		for range r.repeat {
			if r.paced {
				waitForRoom(s, r.peer)
			}
			var err error
			if r.lent != nil && r.parts {
				err = s.SendReplicaLentParts(r.peer, r.frame[:256], r.frame[256:], r.lent)
			} else if r.lent != nil {
				err = s.SendReplicaLent(r.peer, r.frame, r.lent)
			} else {
				err = s.SendReplica(r.peer, r.frame[:256], r.frame[256:])
			}
			if err != nil {
				errs = append(errs, err)
			}
		}
	}
	if len(mine) > 0 {
		n.mu.Lock()
		n.sendErrs = append(n.sendErrs, errs...)
		n.mu.Unlock()
		n.poke()
	}
	return false
}

// waitForRoom waits, holding the shard's turn, until peer takes a partition frame,
// or 10 s. The shard's wakes go out after its turn: it knocks on the connection's
// owner itself, which has the frames sent so far to send.
func waitForRoom(s *Shard, peer uint8) {
	deadline := time.Now().Add(10 * time.Second)
	for s.ReplicaRoom(peer, ReplicaPartition) == 0 && time.Now().Before(deadline) {
		if owner, ok := s.ReplicaOwner(peer); ok {
			s.rt.shards[owner].Wake()
		}
		time.Sleep(50 * time.Microsecond)
	}
}

// replicaTestArena holds a few frames of every size class the tests send.
func replicaTestArena() arenaConfig {
	const kib, mib = 1 << 10, 1 << 20
	return arenaConfig{Classes: []arenaClass{
		{BufferSizeBytes: 4 * kib, BufferCount: 1024},
		{BufferSizeBytes: 8 * kib, BufferCount: 256},
		{BufferSizeBytes: 64 * kib, BufferCount: 256},
		{BufferSizeBytes: 1 * mib, BufferCount: 8},
		{BufferSizeBytes: 16 * mib, BufferCount: 4},
	}}
}

const testSecret = "0123456789abcdef0123456789abcdef"

type replicaNodeOptions struct {
	cluster      string
	secret       string // empty: auth off
	addresses    []string
	listen       string
	shardCount   int
	queueFrames  int
	partFrames   int // PartitionQueueCapacity; 0: the default
	messageBytes uint32
	handshake    time.Duration // default 2 s
	frameTimeout time.Duration
	fdPass       fdpass.Mode
	shardZero    bool
	logger       *slog.Logger
	listenerOff  bool
	dial         func(peer uint8, address netip.AddrPort)
	clock        func() int64  // Config.Clock; nil: real time
	reconnect    time.Duration // ReconnectPeriod; default 50 ms
	// handler, when set, makes each shard's handler from the test's own.
	handler func(h *replicaTestHandler) Handler
}

// startReplicaNode starts replica id of a cluster of len(o.addresses) replicas.
func startReplicaNode(t testing.TB, id uint8, o replicaNodeOptions) *replicaTestNode {
	t.Helper()
	n := &replicaTestNode{t: t, id: id, up: map[uint8]bool{}, changed: make(chan struct{}, 1)}
	hs := replica.HandshakeConfig{Cluster: wire.ClusterID(o.cluster), Self: id, ReplicaCount: uint8(len(o.addresses))}
	if o.secret != "" {
		a, err := wire.NewHandshakeAuth([]byte(o.secret), nil)
		if err != nil {
			t.Fatal(err)
		}
		hs.Auth = &a
	}
	if o.listen == "" {
		o.listen = "127.0.0.1:0"
	}
	if o.shardCount == 0 {
		o.shardCount = 2
	}
	if o.handshake == 0 {
		o.handshake = 2 * time.Second
	}
	if o.reconnect == 0 {
		o.reconnect = 50 * time.Millisecond
	}
	n.rt = startTestRuntime(t, Config{
		ShardCount:   o.shardCount,
		FrameTimeout: o.frameTimeout,
		Logger:       o.logger,
		FdPass:       o.fdPass,
		BusyPoll:     -1, // several runtimes share two CPUs
		Clock:        o.clock,
		Arena:        replicaTestArena(),
		NewHandler: func(s *Shard) Handler {
			h := &replicaTestHandler{testHandler: testHandler{shard: s}, node: n}
			if o.handler != nil {
				return o.handler(h)
			}
			return h
		},
		Replica: &ReplicaConfig{
			ListenAddress:          o.listen,
			Handshake:              hs,
			PeerAddresses:          o.addresses,
			ReconnectPeriod:        o.reconnect,
			HandshakeTimeout:       o.handshake,
			PeerQueueCapacity:      o.queueFrames,
			PartitionQueueCapacity: o.partFrames,
			MessageSizeMax:         o.messageBytes,
			ShardZero:              o.shardZero,
			ListenerOff:            o.listenerOff,
			Dial:                   o.dial,
		},
	})
	return n
}

// startMesh starts replicas count-1 down to 0 (each dials only higher ids, whose
// addresses are known by then) and waits until every pair is connected.
func startMesh(t *testing.T, count int, o replicaNodeOptions) []*replicaTestNode {
	t.Helper()
	nodes := make([]*replicaTestNode, count)
	addrs := make([]string, count)
	for id := count - 1; id >= 0; id-- {
		o.addresses = append([]string(nil), addrs...)
		nodes[id] = startReplicaNode(t, uint8(id), o)
		addrs[id] = nodes[id].rt.ReplicaAddr().String()
	}
	for _, n := range nodes {
		n.waitFor("a full mesh", 10*time.Second, func() bool { return len(n.up) == count-1 })
	}
	return nodes
}

// pattern fills a body with bytes a receiver can check without knowing the frame.
func pattern(body []byte) {
	for i := range body {
		body[i] = byte(i*7 + i>>8)
	}
}

func patternValid(body []byte) bool {
	for i, b := range body {
		if b != byte(i*7+i>>8) {
			return false
		}
	}
	return true
}

// commitFrame is the metadata group's Commit (a header, no body).
func commitFrame(cluster string, commit uint64) []byte {
	return commitFrameOf(cluster, commit, wire.MetadataGroup)
}

// partitionCommitFrame is a partition group's Commit.
func partitionCommitFrame(cluster string, commit uint64) []byte {
	group, _ := wire.PartitionGroup(1, 1, uint32(commit%1000))
	return commitFrameOf(cluster, commit, group)
}

func commitFrameOf(cluster string, commit, group uint64) []byte {
	var h wire.CommitHeader
	h.Size = wire.HeaderSize
	h.Command = wire.CommandCommit
	h.Cluster = wire.ClusterID(cluster)
	h.Commit = commit
	h.TimestampMonotonic = commit
	h.Group = group
	frame := make([]byte, wire.HeaderSize)
	wire.PutHeader(frame, &h)
	return frame
}

func stateChunkFrame(cluster string, sizeBytes int) []byte {
	var h wire.StateChunkHeader
	h.Size = uint32(sizeBytes)
	h.Command = wire.CommandStateChunk
	h.Cluster = wire.ClusterID(cluster)
	h.Nonce = wire.Uint128{Lo: 7}
	h.Group = wire.MetadataGroup
	frame := make([]byte, sizeBytes)
	wire.PutHeader(frame, &h)
	pattern(frame[wire.HeaderSize:])
	return frame
}

// prepareFrame builds a Prepare of sizeBytes: a metadata prepare (body sealed) or a
// partition one.
func prepareFrame(cluster string, sizeBytes int, metadata bool) []byte {
	var h wire.PrepareHeader
	h.Size = uint32(sizeBytes)
	h.Command = wire.CommandPrepare
	h.Cluster = wire.ClusterID(cluster)
	h.Op = 1
	h.Client = wire.Uint128{Lo: 9}
	h.Operation = wire.OperationSendMessages
	h.Group, _ = wire.PartitionGroup(1, 1, 0)
	if metadata {
		h.Operation = wire.OperationCreateStream
		h.Group = wire.MetadataGroup
	}
	frame := make([]byte, sizeBytes)
	wire.PutHeader(frame, &h)
	pattern(frame[wire.HeaderSize:])
	return frame
}

func TestReplicaMeshCarriesEverySizeBothWays(t *testing.T) {
	const cluster = "mesh"
	nodes := startMesh(t, 3, replicaNodeOptions{cluster: cluster, secret: testSecret})
	for _, n := range nodes {
		if n.rt.ReplicaStats().HandshakesRefused != 0 {
			t.Fatalf("replica %d refused a handshake in a healthy mesh: %+v", n.id, n.rt.ReplicaStats())
		}
	}
	frames := []struct {
		name  string
		frame []byte
	}{
		{"commit, header only", commitFrame(cluster, 42)},
		{"state chunk 64 KiB", stateChunkFrame(cluster, 64<<10)},
		{"metadata prepare 64 KiB + 1", prepareFrame(cluster, 64<<10+1, true)},
		{"partition prepare 4 MiB", prepareFrame(cluster, 4<<20, false)},
	}
	// Every node sends every frame to every peer, from both shards: shard 1 owns
	// the connections (shard 0 places them), so shard 0's sends cross shards.
	for _, n := range nodes {
		for peer := range nodes {
			if peer == int(n.id) {
				continue
			}
			for i, f := range frames {
				n.send(i%2, uint8(peer), f.frame, 1)
			}
		}
	}
	for _, n := range nodes {
		n.waitFor("every frame from every peer", 20*time.Second, func() bool { return len(n.received) == 2*len(frames) })
	}
	for _, n := range nodes {
		n.mu.Lock()
		got := append([]receivedFrame(nil), n.received...)
		errs := n.sendErrs
		n.mu.Unlock()
		if len(errs) > 0 {
			t.Fatalf("replica %d: send errors %v", n.id, errs)
		}
		for peer := range nodes {
			if peer == int(n.id) {
				continue
			}
			for _, f := range frames {
				found := false
				for _, r := range got {
					if r.peer == uint8(peer) && r.size == len(f.frame) && r.command == wire.Command(f.frame[60]) {
						found = true
						if !r.bodyValid || r.bodyHash != xxh3.Hash(f.frame[256:]) {
							t.Errorf("replica %d: %s from %d arrived damaged", n.id, f.name, peer)
						}
						if r.shard != 1 {
							t.Errorf("replica %d: %s served on shard %d, not the connection's shard 1", n.id, f.name, r.shard)
						}
					}
				}
				if !found {
					t.Errorf("replica %d: %s from %d never arrived", n.id, f.name, peer)
				}
			}
		}
	}
	for _, n := range nodes {
		st := n.rt.ReplicaStats()
		if st.FramesReceived != uint64(2*len(frames)) || st.FramesSent != uint64(2*len(frames)) || st.FramesDropped != 0 {
			t.Errorf("replica %d stats %+v, want %d frames each way and no drop", n.id, st, 2*len(frames))
		}
	}
}

func TestReplicaSendLent(t *testing.T) {
	const cluster = "lent"
	nodes := startMesh(t, 2, replicaNodeOptions{cluster: cluster})
	frame := alignedCopy(prepareFrame(cluster, 200<<10, false)) // unsealed: the runtime seals it
	var done countingReleaser
	n := nodes[0]
	// Shard 1 owns the connection: the frame leaves from the caller's bytes, three
	// times, and done is told three times.
	n.sendMu.Lock()
	n.pending = append(n.pending, replicaSendRequest{fromShard: 1, peer: 1, frame: frame, repeat: 3, lent: &done})
	n.sendMu.Unlock()
	n.rt.WakeAll()
	nodes[1].waitFor("the lent frames", 10*time.Second, func() bool { return len(nodes[1].received) == 3 })
	n.waitFor("the releases", 10*time.Second, func() bool { return done.released.Load() == 3 })
	n.mu.Lock()
	if len(n.sendErrs) != 0 {
		t.Fatalf("send errors: %v", n.sendErrs)
	}
	n.mu.Unlock()
	nodes[1].mu.Lock()
	defer nodes[1].mu.Unlock()
	for _, r := range nodes[1].received {
		if !r.bodyValid || r.size != len(frame) || r.command != wire.CommandPrepare {
			t.Fatalf("a lent frame arrived as %+v", r)
		}
	}
}

// TestReplicaSendLentParts: frames lent as a header and a body (two iovecs each)
// leave whole among copied ones, more of them than one sendmsg's iovecs hold, and
// each is released once.
func TestReplicaSendLentParts(t *testing.T) {
	const cluster = "parts"
	nodes := startMesh(t, 2, replicaNodeOptions{cluster: cluster})
	frame := prepareFrame(cluster, 4<<10, false)
	lent := alignedCopy(frame) // sent as frame[:256] and frame[256:]: two iovecs
	var done countingReleaser
	n := nodes[0]
	n.sendMu.Lock()
	for range 3 {
		n.pending = append(n.pending, replicaSendRequest{fromShard: 1, peer: 1, frame: lent, repeat: 40, lent: &done, parts: true},
			replicaSendRequest{fromShard: 1, peer: 1, frame: frame, repeat: 9}) // odd: a sendmsg's last iovec then falls mid-frame
	}
	n.sendMu.Unlock()
	n.rt.WakeAll()
	nodes[1].waitFor("the frames", 10*time.Second, func() bool { return len(nodes[1].received) == 147 })
	n.waitFor("the releases", 10*time.Second, func() bool { return done.released.Load() == 120 })
	n.mu.Lock()
	if len(n.sendErrs) != 0 {
		t.Fatalf("send errors: %v", n.sendErrs)
	}
	n.mu.Unlock()
	nodes[1].mu.Lock()
	defer nodes[1].mu.Unlock()
	for _, r := range nodes[1].received {
		if !r.bodyValid || r.size != len(frame) || r.command != wire.CommandPrepare {
			t.Fatalf("a frame arrived as %+v", r)
		}
	}
}

// TestReplicaPlacement runs a mesh on runtimes of other shapes: one shard (which then
// owns every connection), three (shard 0 serving none, or, with ShardZero, some), and
// handoffs through the inter-shard queue instead of msg_ring.
func TestReplicaPlacement(t *testing.T) {
	const cluster = "shapes"
	for _, tc := range []struct {
		name   string
		o      replicaNodeOptions
		owners []int // the shards that may own a connection
	}{
		{"one shard", replicaNodeOptions{shardCount: 1}, []int{0}},
		{"three shards", replicaNodeOptions{shardCount: 3}, []int{1, 2}},
		{"three shards, shard zero too", replicaNodeOptions{shardCount: 3, shardZero: true}, []int{0, 1, 2}},
		{"queue handoffs", replicaNodeOptions{shardCount: 2, fdPass: fdpass.ModeQueue}, []int{1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.cluster = cluster
			nodes := startMesh(t, 3, tc.o)
			frame := stateChunkFrame(cluster, 64<<10)
			for _, n := range nodes {
				for peer := range nodes {
					if peer != int(n.id) {
						n.send(0, uint8(peer), frame, 3)
					}
				}
			}
			for _, n := range nodes {
				n.waitFor("the frames", 10*time.Second, func() bool { return len(n.received) == 6 })
				n.mu.Lock()
				for _, r := range n.received {
					if !r.bodyValid || r.size != len(frame) {
						t.Errorf("replica %d: a frame from %d arrived damaged", n.id, r.peer)
					}
					found := false
					for _, o := range tc.owners {
						found = found || r.shard == o
					}
					if !found {
						t.Errorf("replica %d: a frame served on shard %d, not one of %v", n.id, r.shard, tc.owners)
					}
				}
				n.mu.Unlock()
			}
		})
	}
}

// TestReplicaMeshOneConnectionPerPair checks that each pair has exactly one
// connection, dialed by the lower id: a node's accepted connections come only from
// lower ids (the acceptor checks the directional rule) and it has one per peer.
func TestReplicaMeshOneConnectionPerPair(t *testing.T) {
	nodes := startMesh(t, 3, replicaNodeOptions{cluster: "pairs"})
	for _, n := range nodes {
		total := 0
		for peer, c := range n.replicaLinkCounts() {
			total += c.total
			if c.total != 1 {
				t.Errorf("replica %d has %d connections to %d", n.id, c.total, peer)
			}
			if (c.dialed != 0) != (uint8(peer) > n.id) {
				t.Errorf("replica %d: the connection to %d was dialed by the wrong side", n.id, peer)
			}
		}
		if total != 2 {
			t.Errorf("replica %d has %d connections, want 2", n.id, total)
		}
	}
}

type linkCount struct{ total, dialed int }

// replicaLinkCounts collects every shard's registered connections, on the shards'
// own goroutines.
func (n *replicaTestNode) replicaLinkCounts() map[int]linkCount {
	out := map[int]linkCount{}
	var mu sync.Mutex
	err := n.rt.Inspect(context.Background(), func(s *Shard) {
		mu.Lock()
		defer mu.Unlock()
		for peer, c := range s.replica.links {
			if c != nil {
				lc := out[peer]
				lc.total++
				if c.dialed {
					lc.dialed++
				}
				out[peer] = lc
			}
		}
	})
	if err != nil {
		n.t.Fatal(err)
	}
	return out
}

func TestReplicaWrongSecretOrClusterNeverRegisters(t *testing.T) {
	for _, tc := range []struct {
		name            string
		dialer          replicaNodeOptions
		acceptorRefuses bool // the acceptor counts the refusal (else only the dialer)
	}{
		{"wrong shared secret", replicaNodeOptions{cluster: "c", secret: strings.Repeat("x", 32)}, true},
		{"another cluster name", replicaNodeOptions{cluster: "other", secret: testSecret}, true},
		{"auth off against auth on", replicaNodeOptions{cluster: "c"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			refusals := &countingLog{msg: "replica connection refused"}
			acceptor := startReplicaNode(t, 1, replicaNodeOptions{cluster: "c", secret: testSecret, addresses: []string{"", ""},
				logger: slog.New(refusals)})
			tc.dialer.addresses = []string{"", acceptor.rt.ReplicaAddr().String()}
			dialer := startReplicaNode(t, 0, tc.dialer)
			// Several redials, each refused: then neither side ever registered.
			acceptor.waitFor("refused handshakes", 10*time.Second, func() bool {
				return acceptor.rt.ReplicaStats().HandshakesRefused >= 3 && dialer.rt.ReplicaStats().HandshakesRefused >= 3
			})
			// A frame the dialer tries to send finds no connection.
			dialer.send(0, 1, commitFrame(tc.dialer.cluster, 1), 1)
			dialer.waitFor("the send's outcome", 5*time.Second, func() bool { return len(dialer.sendErrs) == 1 })
			dialer.mu.Lock()
			sendErr := dialer.sendErrs[0]
			dialer.mu.Unlock()
			if !errors.Is(sendErr, ErrReplicaPeerDown) {
				t.Fatalf("send to a peer that never registered: %v", sendErr)
			}
			for _, n := range []*replicaTestNode{acceptor, dialer} {
				n.mu.Lock()
				events, received := n.events, len(n.received)
				n.mu.Unlock()
				if events != 0 || received != 0 || n.rt.ReplicaConnected(1-n.id) {
					t.Fatalf("replica %d: %d connect events, %d frames received", n.id, events, received)
				}
			}
			// Refused again and again, for one reason, from one address: logged once.
			if n := refusals.count.Load(); n != 1 {
				t.Fatalf("the acceptor logged %d refusals of %d, want 1", n, acceptor.rt.ReplicaStats().HandshakesRefused)
			}
		})
	}
}

func TestReplicaKilledPeerIsRedialed(t *testing.T) {
	const cluster = "redial"
	nodes := startMesh(t, 3, replicaNodeOptions{cluster: cluster, secret: testSecret})
	killed := nodes[2]
	addr := killed.rt.ReplicaAddr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := killed.rt.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes[:2] {
		n.waitFor("the loss of replica 2", 10*time.Second, func() bool { return !n.up[2] })
	}
	// The same node again, on the same address: replicas 0 and 1 dial it.
	back := startReplicaNode(t, 2, replicaNodeOptions{cluster: cluster, secret: testSecret, listen: addr,
		addresses: []string{"", "", addr}})
	back.waitFor("replicas 0 and 1 back", 10*time.Second, func() bool { return len(back.up) == 2 })
	for _, n := range nodes[:2] {
		n.waitFor("replica 2 back", 10*time.Second, func() bool { return n.up[2] })
	}
	nodes[0].send(1, 2, commitFrame(cluster, 5), 1)
	back.waitFor("a frame over the new connection", 10*time.Second, func() bool { return len(back.received) == 1 })
}

func TestReplicaFloodBeyondTheQueueIsDropped(t *testing.T) {
	const cluster = "flood"
	// Replica 1 is a test peer that completes the handshake and then reads nothing:
	// the node's queue to it fills, the kernel's socket buffers too, and the rest
	// of the flood must be dropped, counted, without the shard waiting.
	peer := newFakeAcceptor(t, cluster, 1)
	n := startReplicaNode(t, 0, replicaNodeOptions{cluster: cluster, addresses: []string{"", peer.addr()}, queueFrames: 8})
	peer.handshake()
	n.waitFor("the fake peer registered", 10*time.Second, func() bool { return n.up[1] })
	const floodFrames = 400
	frame := stateChunkFrame(cluster, 64<<10)
	// All in one turn of shard 1, which owns the connection: the queue takes 8 (its
	// first send leaves at the end of the turn), the rest is refused at once.
	n.send(1, 1, frame, floodFrames)
	n.waitFor("the flood's outcome", 10*time.Second, func() bool { return len(n.sendErrs) > 0 })
	st := n.rt.ReplicaStats()
	n.mu.Lock()
	errs := n.sendErrs
	n.mu.Unlock()
	for _, err := range errs {
		if !errors.Is(err, ErrReplicaQueueFull) {
			t.Fatalf("flood: %v, want ErrReplicaQueueFull", err)
		}
	}
	if st.FramesDropped != uint64(len(errs)) || len(errs) != floodFrames-8 {
		t.Fatalf("flood of %d frames into a queue of 8: %d refused, stats %+v", floodFrames, len(errs), st)
	}
	// The shard did not wait for the peer: it still serves, here a partition
	// group's frame (a class with room of its own) another shard sends through it.
	// The peer, reading at last, gets the frames the queue took, intact and in
	// order, then that one.
	n.send(0, 1, partitionCommitFrame(cluster, 1), 1)
	for i := range 8 {
		got := peer.read(len(frame))
		if !bytes.Equal(got[256:], frame[256:]) || wire.Command(got[60]) != wire.CommandStateChunk {
			t.Fatalf("queued frame %d arrived damaged", i)
		}
	}
	if got := peer.read(256); wire.Command(got[60]) != wire.CommandCommit {
		t.Fatalf("the frame after the flood is command %d", got[60])
	}
	n.waitFor("the frames counted as sent", 5*time.Second, func() bool { return n.rt.ReplicaStats().FramesSent == 9 })
	peer.close()
}

// fakePeer is a replica the test plays by hand over a net.Conn.
type fakePeer struct {
	t       testing.TB
	cfg     replica.HandshakeConfig
	ln      net.Listener
	conn    net.Conn
	cluster string
}

func newFakeAcceptor(t testing.TB, cluster string, id uint8) *fakePeer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return &fakePeer{t: t, ln: ln, cluster: cluster,
		cfg: replica.HandshakeConfig{Cluster: wire.ClusterID(cluster), Self: id, ReplicaCount: 2}}
}

func (p *fakePeer) addr() string { return p.ln.Addr().String() }

// handshake accepts the node's dial and answers its Hello (auth off).
func (p *fakePeer) handshake() {
	p.t.Helper()
	conn, err := p.ln.Accept()
	if err != nil {
		p.t.Fatal(err)
	}
	p.conn = conn
	a := replica.NewAcceptor(p.cfg, [32]byte{1})
	step := a.Receive(p.read(wire.HeaderSize))
	if step.Err != nil || !step.Done {
		p.t.Fatalf("fake acceptor: %+v", step)
	}
	p.write(step.Send)
}

// dialFake connects to a node's replica listener as replica id and completes the
// handshake as the dialer (auth off).
func dialFake(t testing.TB, node *replicaTestNode, cluster string, id uint8) *fakePeer {
	t.Helper()
	conn, err := net.Dial("tcp", node.rt.ReplicaAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	p := &fakePeer{t: t, conn: conn, cluster: cluster,
		cfg: replica.HandshakeConfig{Cluster: wire.ClusterID(cluster), Self: id, ReplicaCount: 2}}
	t.Cleanup(func() { conn.Close() })
	d, hello, err := replica.NewDialer(p.cfg, node.id, [32]byte{2})
	if err != nil {
		t.Fatal(err)
	}
	p.write(hello)
	step := d.Receive(p.read(wire.HeaderSize))
	if step.Err != nil || !step.Done {
		t.Fatalf("fake dialer: %+v", step)
	}
	return p
}

func (p *fakePeer) read(n int) []byte {
	p.t.Helper()
	b := make([]byte, n)
	p.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(p.conn, b); err != nil {
		p.t.Fatalf("fake peer read: %v", err)
	}
	return b
}

func (p *fakePeer) write(b []byte) {
	p.t.Helper()
	if _, err := p.conn.Write(b); err != nil {
		p.t.Fatalf("fake peer write: %v", err)
	}
}

// expectClosed waits for the node to close the connection.
func (p *fakePeer) expectClosed() {
	p.t.Helper()
	p.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	var b [512]byte
	for range 1 << 12 {
		_, err := p.conn.Read(b[:])
		if err == nil {
			continue
		}
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			p.t.Fatal("the node kept the connection open")
		}
		return
	}
	p.t.Fatal("the node kept sending")
}

func (p *fakePeer) close() {
	if p.conn != nil {
		p.conn.Close()
	}
}

func TestReplicaBadFramesCloseTheConnection(t *testing.T) {
	const cluster = "bad"
	badSeal := func() []byte {
		f := commitFrame(cluster, 3)
		h, _ := wire.ViewHeader[wire.GenericHeader](alignedCopy(f))
		wire.SealReplica(h, nil)
		out := append([]byte(nil), h.Bytes()[:]...)
		out[200] ^= 1 // after the seal: the frame no longer matches it
		return out
	}
	badIdentity := func() []byte {
		f := prepareFrame(cluster, 1024, false)
		h, _ := wire.ViewHeader[wire.GenericHeader](alignedCopy(f))
		wire.SealReplica(h, f[256:])
		out := append(append([]byte(nil), h.Bytes()[:]...), f[256:]...)
		out[180] ^= 1 // the op
		return out
	}
	badBody := func() []byte {
		f := prepareFrame(cluster, 1024, true)
		h, _ := wire.ViewHeader[wire.GenericHeader](alignedCopy(f))
		wire.SealReplica(h, f[256:])
		out := append(append([]byte(nil), h.Bytes()[:]...), f[256:]...)
		out[700] ^= 1 // the body, under the metadata prepare's body seal
		return out
	}
	client := func(command wire.Command) func() []byte {
		return func() []byte {
			f := commitFrame(cluster, 1)
			f[60] = byte(command)
			return f
		}
	}
	oversized := func() []byte {
		f := sealed(stateChunkFrame(cluster, 8<<10))
		h, _ := wire.ViewHeader[wire.GenericHeader](alignedCopy(f))
		h.Size = 1<<20 + 1 // past the node's MessageSizeMax, sealed as such
		wire.SealReplica(h, nil)
		return h.Bytes()[:]
	}
	otherCluster := func() []byte { return sealed(commitFrame("elsewhere", 1)) }
	handshakeAgain := func() []byte {
		f := make([]byte, 256)
		wire.PutReplicaHello(f, wire.ClusterID(cluster), 0, nil)
		return f
	}
	for _, tc := range []struct {
		name  string
		frame func() []byte
	}{
		{"bad frame seal", badSeal},
		{"bad prepare identity", badIdentity},
		{"bad body seal", badBody},
		{"Reply (8)", client(wire.CommandReply)},
		{"Eviction (13)", client(wire.CommandEviction)},
		{"Request (5)", client(wire.CommandRequest)},
		{"over max message size", oversized},
		{"another cluster id", otherCluster},
		{"a handshake frame after the handshake", handshakeAgain},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node := startReplicaNode(t, 1, replicaNodeOptions{cluster: cluster, addresses: []string{"", ""}, messageBytes: 1 << 20})
			peer := dialFake(t, node, cluster, 0)
			node.waitFor("the fake peer registered", 10*time.Second, func() bool { return node.up[0] })
			// A valid frame first: the connection works, and what follows is refused.
			peer.write(sealed(commitFrame(cluster, 2)))
			node.waitFor("the valid frame", 10*time.Second, func() bool { return len(node.received) == 1 })
			peer.write(tc.frame())
			peer.write(sealed(commitFrame(cluster, 4))) // after the bad one: never served
			peer.expectClosed()
			node.waitFor("the connection's end", 10*time.Second, func() bool { return !node.up[0] })
			node.mu.Lock()
			received := len(node.received)
			node.mu.Unlock()
			if received != 1 {
				t.Fatalf("%d frames reached the handler, want only the valid one", received)
			}
			if st := node.rt.ReplicaStats(); st.FramesRefused != 1 {
				t.Fatalf("stats %+v, want one refused frame", st)
			}
		})
	}
}

func TestReplicaHandshakeFailureDeliversNothing(t *testing.T) {
	const cluster = "early"
	node := startReplicaNode(t, 1, replicaNodeOptions{cluster: cluster, secret: testSecret, addresses: []string{"", ""}})
	conn, err := net.Dial("tcp", node.rt.ReplicaAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	p := &fakePeer{t: t, conn: conn}
	// A Hello without a nonce (auth off) and consensus frames behind it at once.
	hello := make([]byte, 256)
	wire.PutReplicaHello(hello, wire.ClusterID(cluster), 0, nil)
	p.write(append(append(hello, sealed(commitFrame(cluster, 1))...), sealed(stateChunkFrame(cluster, 4096))...))
	p.expectClosed()
	node.waitFor("the refusal", 10*time.Second, func() bool { return node.rt.ReplicaStats().HandshakesRefused == 1 })
	node.mu.Lock()
	defer node.mu.Unlock()
	if len(node.received) != 0 || node.events != 0 {
		t.Fatalf("a peer that failed the handshake delivered %d frames, %d events", len(node.received), node.events)
	}
}

// TestReplicaSecondConnectionIsRefused: a second connection from a peer that is
// registered completes its handshake and is then refused; the first one keeps
// carrying frames.
func TestReplicaSecondConnectionIsRefused(t *testing.T) {
	const cluster = "twice"
	node := startReplicaNode(t, 1, replicaNodeOptions{cluster: cluster, addresses: []string{"", ""}})
	first := dialFake(t, node, cluster, 0)
	node.waitFor("the first connection", 10*time.Second, func() bool { return node.up[0] })
	second := dialFake(t, node, cluster, 0) // auth off: the acceptor is done at the Hello
	second.expectClosed()
	node.waitFor("the refusal", 10*time.Second, func() bool { return node.rt.ReplicaStats().HandshakesRefused == 1 })
	first.write(sealed(commitFrame(cluster, 7)))
	node.waitFor("a frame on the first connection", 10*time.Second, func() bool { return len(node.received) == 1 })
	node.mu.Lock()
	defer node.mu.Unlock()
	if node.events != 1 || !node.up[0] {
		t.Fatalf("%d connect events, peer up %v: the refused connection touched the registered one", node.events, node.up[0])
	}
}

// TestReplicaRefusalsCarryTheirStatus: a refusal the protocol sends reaches the
// dialer as a Challenge with the status, then the connection closes.
func TestReplicaRefusalsCarryTheirStatus(t *testing.T) {
	const cluster = "status"
	// Replica 2 is down (nothing listens on port 1): the node dials it in vain.
	node := startReplicaNode(t, 1, replicaNodeOptions{cluster: cluster, addresses: []string{"", "", "127.0.0.1:1"}})
	for _, tc := range []struct {
		name    string
		cluster string
		from    uint8
		command wire.Command
		want    wire.HandshakeStatus
	}{
		{"a higher id dials a lower one", cluster, 2, wire.CommandReplicaHello, wire.HandshakeDirectionalRule},
		{"another cluster", "elsewhere", 0, wire.CommandReplicaHello, wire.HandshakeClusterMismatch},
		{"not a Hello first", cluster, 0, wire.CommandReplicaFinish, wire.HandshakeUnknownCommand},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", node.rt.ReplicaAddr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			p := &fakePeer{t: t, conn: conn}
			hello := make([]byte, 256)
			wire.PutReplicaHello(hello, wire.ClusterID(tc.cluster), tc.from, nil)
			hello[60] = byte(tc.command)
			p.write(hello)
			challenge := p.read(256)
			if wire.Command(challenge[60]) != wire.CommandReplicaChallenge || wire.HandshakeStatus(challenge[192]) != tc.want {
				t.Fatalf("answer: command %d status %d, want a Challenge with %s", challenge[60], challenge[192], tc.want)
			}
			p.expectClosed()
		})
	}
}

// TestReplicaAdoptedSessions plays the TLS layering without TLS: neither node
// listens, node 0's Dial hook makes a socketpair and adopts one end on each node, as
// a TLS dialer and terminator would their bridged sessions, each with the session's
// exporter. The same exporter on both ends: the mesh forms and carries frames.
// Different ones (a relay terminating two sessions): the MACs fail and it never does.
func TestReplicaAdoptedSessions(t *testing.T) {
	const cluster = "adopted"
	for _, tc := range []struct {
		name     string
		acceptor [32]byte // the exporter the acceptor's session reports
		connects bool
	}{
		{"one session", [32]byte{7}, true},
		{"two sessions", [32]byte{8}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var acceptor, dialer *replicaTestNode
			ready := make(chan struct{}) // closed once both are set
			dialerExporter := [32]byte{7}
			dial := func(peer uint8, address netip.AddrPort) {
				<-ready
				fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
				if err != nil {
					panic(err)
				}
				if err := acceptor.rt.AdoptReplica(fds[1], netip.AddrPort{}, -1, &tc.acceptor); err != nil {
					unix.Close(fds[0])
					unix.Close(fds[1])
					return
				}
				if err := dialer.rt.AdoptReplica(fds[0], address, int(peer), &dialerExporter); err != nil {
					unix.Close(fds[0])
				}
			}
			acceptor = startReplicaNode(t, 1, replicaNodeOptions{cluster: cluster, secret: testSecret, listenerOff: true,
				addresses: []string{"", ""}})
			dialer = startReplicaNode(t, 0, replicaNodeOptions{cluster: cluster, secret: testSecret, listenerOff: true,
				addresses: []string{"", "127.0.0.1:9"}, dial: dial})
			close(ready)
			if acceptor.rt.ReplicaAddr() != nil {
				t.Fatal("a node with ListenerOff listens")
			}
			if !tc.connects {
				acceptor.waitFor("refused sessions", 10*time.Second, func() bool {
					return acceptor.rt.ReplicaStats().HandshakesRefused >= 2 && dialer.rt.ReplicaStats().HandshakesRefused >= 2
				})
				if acceptor.rt.ReplicaConnected(0) || dialer.rt.ReplicaConnected(1) {
					t.Fatal("sessions with different exporters connected")
				}
				return
			}
			// The dialer registers the session once it has sent its Finish, the
			// acceptor once it has checked it: a send before then is refused.
			dialer.waitFor("the adopted session", 10*time.Second, func() bool { return dialer.up[1] })
			acceptor.waitFor("the adopted session", 10*time.Second, func() bool { return acceptor.up[0] })
			dialer.send(0, 1, sealed(stateChunkFrame(cluster, 100<<10)), 2)
			acceptor.send(1, 0, commitFrame(cluster, 3), 1)
			acceptor.waitFor("frames", 10*time.Second, func() bool { return len(acceptor.received) == 2 })
			dialer.waitFor("frames", 10*time.Second, func() bool { return len(dialer.received) == 1 })
		})
	}
}

func TestReplicaHandshakeTimeout(t *testing.T) {
	node := startReplicaNode(t, 1, replicaNodeOptions{cluster: "slow", addresses: []string{"", ""}, handshake: 200 * time.Millisecond})
	conn, err := net.Dial("tcp", node.rt.ReplicaAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	p := &fakePeer{t: t, conn: conn}
	p.write(make([]byte, 100)) // half a Hello, then silence
	p.expectClosed()
	if st := node.rt.ReplicaStats(); st.HandshakesRefused != 1 {
		t.Fatalf("stats %+v, want one refused handshake", st)
	}
}

func TestReplicaFrameTimeout(t *testing.T) {
	const cluster = "stall"
	node := startReplicaNode(t, 1, replicaNodeOptions{cluster: cluster, addresses: []string{"", ""},
		handshake: 100 * time.Millisecond, frameTimeout: 200 * time.Millisecond})
	peer := dialFake(t, node, cluster, 0)
	node.waitFor("the fake peer registered", 10*time.Second, func() bool { return node.up[0] })
	frame := sealed(stateChunkFrame(cluster, 200<<10))
	peer.write(frame[:100<<10]) // half a frame, then silence
	peer.expectClosed()
	node.mu.Lock()
	defer node.mu.Unlock()
	if len(node.received) != 0 {
		t.Fatalf("%d frames reached the handler", len(node.received))
	}
}

// countingLog counts the records whose message is msg.
type countingLog struct {
	msg   string
	count atomic.Int64
}

func (l *countingLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *countingLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message == l.msg {
		l.count.Add(1)
	}
	return nil
}
func (l *countingLog) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *countingLog) WithGroup(string) slog.Handler      { return l }

// sealed returns a copy of frame with its seals stamped.
func sealed(frame []byte) []byte {
	c := alignedCopy(frame)
	h, _ := wire.ViewHeader[wire.GenericHeader](c)
	wire.SealReplica(h, c[256:])
	return c
}

func alignedCopy(frame []byte) []byte {
	c := alignedHeapBytes(len(frame))
	copy(c, frame)
	return c
}

func TestReplicaConfigValidation(t *testing.T) {
	base := func() *ReplicaConfig {
		return &ReplicaConfig{ListenAddress: "127.0.0.1:0",
			Handshake:     replica.HandshakeConfig{Cluster: wire.ClusterID("c"), Self: 0, ReplicaCount: 2},
			PeerAddresses: []string{"", "127.0.0.1:1"}}
	}
	for _, tc := range []struct {
		name   string
		change func(c *ReplicaConfig)
		want   string
	}{
		{"self out of range", func(c *ReplicaConfig) { c.Handshake.Self = 2 }, "not below"},
		{"roster length", func(c *ReplicaConfig) { c.PeerAddresses = c.PeerAddresses[:1] }, "addresses for"},
		{"hostname", func(c *ReplicaConfig) { c.PeerAddresses[1] = "node-1:9090" }, "replica 1 address"},
		{"queue", func(c *ReplicaConfig) { c.PeerQueueCapacity = -1 }, "peer queue capacity"},
		{"partition queue", func(c *ReplicaConfig) { c.PartitionQueueCapacity = 1<<16 + 1 }, "partition queue capacity"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := base()
			tc.change(c)
			_, _, err := c.withDefaults()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%v, want an error about %q", err, tc.want)
			}
		})
	}
	if _, _, err := base().withDefaults(); err != nil {
		t.Fatal(err)
	}
	_, err := Start(Config{ShardCount: 1, TCPAddress: "127.0.0.1:0", Arena: replicaTestArena(), Logger: testLogger(t),
		NewHandler: func(s *Shard) Handler { return &testHandler{shard: s} }, Replica: base()})
	if err == nil || !strings.Contains(err.Error(), "ReplicaHandler") {
		t.Fatalf("a handler without ServeReplica: %v", err)
	}
}
