package server

import (
	"fmt"
	"testing"

	"github.com/iggy-shard/iggy-shard/metadata"
	"github.com/iggy-shard/iggy-shard/metafiles"
	"github.com/iggy-shard/iggy-shard/metaplane"
	"github.com/iggy-shard/iggy-shard/segment"
	"github.com/iggy-shard/iggy-shard/vsr"
	"github.com/iggy-shard/iggy-shard/wire"
)

// statePeer is another replica of the metadata group: a bare vsr.Core with its
// journal in memory, that applies what commits to a state of its own (a plane
// without storage) and offers that state when a replica asks for one.
type statePeer struct {
	core    *vsr.Core
	applier *metaplane.Machine
	bodies  map[uint64][]byte
	headers map[uint64]wire.PrepareHeader
	sent    []vsr.Message
}

func (p *statePeer) Body(op uint64, identity wire.Uint128) ([]byte, bool) {
	h, ok := p.headers[op]
	if !ok || h.Checksum != identity {
		return nil, false
	}
	return p.bodies[op], true
}

// newStatePeer is replica id of cfg's roster, with a header window of slots ops:
// a replica further behind is answered RangeEvicted.
func newStatePeer(t *testing.T, cfg *setup, id uint8, slots int) *statePeer {
	t.Helper()
	p := &statePeer{bodies: map[uint64][]byte{}, headers: map[uint64]wire.PrepareHeader{}}
	core, err := vsr.NewCore(vsr.CoreConfig{
		Config:       vsr.Config{Cluster: wire.ClusterID(cfg.Cluster.Name), ReplicaID: id, ReplicaCount: uint8(len(cfg.Cluster.Nodes)), Group: wire.MetadataGroup},
		Timing:       testClusterTiming,
		JournalSlots: slots,
		Storage:      p,
	})
	if err != nil {
		t.Fatal(err)
	}
	p.core = core
	p.applier = metaplane.NewMachine(metadata.NewStateWithoutRoot(), vsr.NewClientTable(vsr.ClientsTableMaxDefault), serverVersion)
	return p
}

// drain does the peer's Ready work: bodies kept, commits applied, frames
// collected (copied), states offered as of its applied op.
func (p *statePeer) drain() {
	for p.core.HasReady() {
		rd := p.core.Ready()
		for _, w := range rd.Writes {
			p.headers[w.Header.Op] = w.Header
			p.bodies[w.Header.Op] = append([]byte(nil), w.Body...)
		}
		for _, m := range rd.Messages {
			m.Body = append([]byte(nil), m.Body...)
			p.sent = append(p.sent, m)
		}
		for i := range rd.Committed {
			h := rd.Committed[i]
			p.applier.Apply(&h, p.bodies[h.Op])
		}
		requests := append([]vsr.StateRequest(nil), rd.StateRequests...)
		p.core.Advance()
		for _, r := range requests {
			p.core.OfferState(r, p.applier.Applied.Op, p.applier.Artifacts())
		}
	}
}

// metaNet carries frames between a plane under test and statePeers, in rounds,
// until none moves. hold decides, frame by frame, which stay in held instead.
type metaNet struct {
	t       *testing.T
	plane   *metaPlane
	planeID uint8
	sent    []vsr.Message // the plane's
	peers   []*statePeer  // by replica id, nil at the plane's
	hold    func(from uint8, m *vsr.Message) bool
	held    []vsr.Message
	// stop, when set, ends a run as soon as it holds (checked after each frame
	// the plane took).
	stop func() bool
}

func (n *metaNet) deliver(m *vsr.Message) {
	n.t.Helper()
	if m.To == n.planeID {
		stepPlane(n.t, n.plane, []vsr.Message{*m})
		return
	}
	p := n.peers[m.To]
	if err := p.core.Step(&m.Header, m.Body); err != nil {
		n.t.Fatalf("replica %d refused %v: %v", m.To, m.Header.Command, err)
	}
	p.drain()
}

func (n *metaNet) run() {
	n.t.Helper()
	for range 10_000 {
		var out []vsr.Message
		var from []uint8
		for id, p := range n.peers {
			if p == nil {
				continue
			}
			p.drain()
			for _, m := range p.sent {
				out, from = append(out, m), append(from, uint8(id))
			}
			p.sent = nil
		}
		for _, m := range n.sent {
			out, from = append(out, m), append(from, n.planeID)
		}
		n.sent = n.sent[:0]
		if len(out) == 0 {
			return
		}
		for i := range out {
			if n.hold != nil && n.hold(from[i], &out[i]) {
				n.held = append(n.held, out[i])
				continue
			}
			n.deliver(&out[i])
			if out[i].To == n.planeID && n.stop != nil && n.stop() {
				return
			}
		}
	}
	n.t.Fatal("the frames never stopped moving")
}

// TestInstalledStateKeepsTheJournaledOpsAboveIt: a backup far behind (replica 2,
// the end of the replication chain) learns the primary's log from a StartView,
// asks for a state (its peers no longer hold the ops it lacks), and, while the
// state is on its way, journals and acknowledges the primary's next ops, which
// are above the state's op. It installs the state; the core keeps those ops as
// journaled. The machine loses power right after: the restart must find them in
// the journal (they were acknowledged: a view change may count on them), and the
// backup then follows the primary to its head.
func TestInstalledStateKeepsTheJournaledOpsAboveIt(t *testing.T) {
	cfgs := clusterConfigs(t, 3, testClusterSecret)
	// The peers' window; the plane's is twice that, the least that leaves room
	// for a snapshot interval beside two pipelines (vsr.CheckpointIntervalOpsMax).
	const slots = 64
	cfg := cfgs[2]
	cfg.metaJournalSlots = 2 * slots
	primary := newStatePeer(t, &cfgs[0], 0, slots)
	backup := newStatePeer(t, &cfgs[1], 1, slots)
	store := metafiles.NewSimStorage(segment.NewSimDisk(11))
	n := &metaNet{t: t, planeID: 2, peers: []*statePeer{primary, backup, nil}}
	n.plane = clusterPlane(t, &cfg, store, &n.sent)
	pumpPlane(t, n.plane)

	request := uint64(0)
	propose := func(name string) uint64 {
		t.Helper()
		request++
		op, err := primary.core.Propose(vsr.Proposal{Client: wire.Uint128{Lo: 7}, Request: request, Operation: wire.OperationCreateStream},
			createStreamBody(t, name), 1_000_000+request)
		if err != nil {
			t.Fatalf("propose %s: %v", name, err)
		}
		primary.drain()
		return op
	}

	// The backup under test is down while ops 1..80 commit: more than its peers'
	// windows hold.
	n.hold = func(from uint8, m *vsr.Message) bool { return from == 2 || m.To == 2 }
	const committed = 80
	for i := range committed {
		propose(fmt.Sprintf("before-%d", i))
		n.run()
	}
	if primary.core.CommitMin() != committed {
		t.Fatalf("the primary applied op %d, want %d", primary.core.CommitMin(), committed)
	}

	// It comes back while ops 81..83 are being prepared (the other backup's
	// acknowledgements delayed, so the state offered is of op 80 at most): the
	// first prepare it is handed shows it a gap, so it asks for the view, learns
	// the log to op 83 and asks for a state. The state's chunks wait.
	n.held = nil
	var prepares []vsr.Message
	n.hold = func(from uint8, m *vsr.Message) bool {
		switch {
		case m.To == 2 && m.Header.Command == wire.CommandPrepare:
			prepares = append(prepares, *m)
			return len(prepares) > 1 // the first shows the gap
		case from == 1 && m.To == 0 && m.Header.Command == wire.CommandPrepareOk:
			return true
		case m.To == 2 && m.Header.Command == wire.CommandStateChunk:
			return true
		}
		return false
	}
	for i := range 3 {
		propose(fmt.Sprintf("above-%d", i))
	}
	n.run()
	m := n.plane
	if !m.Core().Transferring() || m.Core().Op() != committed+3 {
		t.Fatalf("the backup is not fetching a state with the log to op %d: transferring %v, op %d", committed+3, m.Core().Transferring(), m.Core().Op())
	}
	if len(prepares) != 3 {
		t.Fatalf("%d prepares reached the backup, want 3", len(prepares))
	}

	// Now the prepares of ops 81..83 reach it: it journals them (in their place,
	// beyond the ops it lacks) and acknowledges them.
	n.sent = n.sent[:0]
	chunks := n.held
	n.held = nil
	n.hold = func(_ uint8, m *vsr.Message) bool {
		return m.To == 2 && m.Header.Command == wire.CommandStateChunk
	}
	for i := range prepares {
		stepPlane(t, m, prepares[i:i+1])
	}
	acked := map[uint64]bool{}
	for _, msg := range n.sent {
		if msg.Header.Command == wire.CommandPrepareOk {
			acked[msg.Header.PrepareOk().Op] = true
		}
	}
	for op := uint64(committed + 1); op <= committed+3; op++ {
		if !acked[op] || m.Files.Hole(op) {
			t.Fatalf("op %d: acknowledged %v, journaled %v", op, acked[op], !m.Files.Hole(op))
		}
	}

	// The state arrives and is installed; the machine loses power right after.
	n.stop = func() bool { return m.TransfersInstalled() > 0 }
	n.hold = nil
	for i := range chunks {
		n.deliver(&chunks[i])
		if n.stop() {
			break
		}
		n.run()
		if n.stop() {
			break
		}
	}
	if m.TransfersInstalled() != 1 {
		t.Fatal("the backup did not install the state")
	}
	installedOp := m.Applied().Op
	if installedOp >= committed+1 {
		t.Fatalf("the state installed is of op %d, not below the journaled ops", installedOp)
	}
	for op := uint64(committed + 1); op <= committed+3; op++ {
		if _, ok := m.Core().Header(op); !ok {
			t.Fatalf("the core dropped op %d at the install", op)
		}
	}

	crashed := store.AfterCrash(12)
	restarted := metafiles.NewSimStorage(crashed)
	n.sent = n.sent[:0]
	m2 := clusterPlane(t, &cfg, restarted, &n.sent)
	if m2.Applied().Op != installedOp {
		t.Fatalf("restarted at op %d, want the installed state's %d", m2.Applied().Op, installedOp)
	}
	for op := uint64(committed + 1); op <= committed+3; op++ {
		want := primary.headers[op]
		h, ok := m2.Core().Header(op)
		if !ok || h.Checksum != want.Checksum {
			t.Fatalf("op %d, acknowledged, is not recovered after the crash (known %v)", op, ok)
		}
		if _, ok := m2.Body(op, h.Checksum); !ok || m2.Files.Hole(op) {
			t.Fatalf("op %d, acknowledged, is not in the journal after the crash", op)
		}
	}

	// The restarted backup asks for the view and repairs what lies between the
	// state and the ops it kept; it follows the primary to op 83.
	n.plane, n.stop = m2, nil
	for range testClusterTiming.RequestStartViewRetransmitTicks {
		m2.Core().Tick()
	}
	pumpPlane(t, m2)
	n.run()
	if m2.Core().Status() != vsr.StatusNormal || m2.Applied().Op != committed+3 {
		t.Fatalf("after the restart: %v, applied op %d, want %d", m2.Core().Status(), m2.Applied().Op, committed+3)
	}
	// The journal it keeps reads back whole.
	if _, err := vsr.ScanJournalHoles(restarted.Disk.ReadFile(metafiles.JournalFileName), metafiles.FrameMax,
		func(*wire.PrepareHeader, []byte, int) error { return nil }, func(vsr.JournalHole) error { return nil }); err != nil {
		t.Fatal(err)
	}
}
