package server

import (
	"fmt"
	"slices"
	"testing"

	"github.com/iggy-shard/iggy-shard/metadata"
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
	store := newSimMetaStorage(segment.NewSimDisk(11))
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
		if !acked[op] || m.files.journalHole(op) {
			t.Fatalf("op %d: acknowledged %v, journaled %v", op, acked[op], !m.files.journalHole(op))
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

	crashed := store.afterCrash(12)
	restarted := newSimMetaStorage(crashed)
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
		if _, ok := m2.Body(op, h.Checksum); !ok || m2.files.journalHole(op) {
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
	if _, err := vsr.ScanJournalHoles(restarted.disk.ReadFile(journalFileName), metadataFrameMax,
		func(*wire.PrepareHeader, []byte, int) error { return nil }, func(vsr.JournalHole) error { return nil }); err != nil {
		t.Fatal(err)
	}
}

// TestInstalledJournalLayout lays out the journal kept by an install at several
// ops of one journal (entries 1, 2, 3, a marker for 4 and 5, entry 6) and checks
// that a restart's scan against the installed state reads back what the index
// says: the state's own entry kept when it is the state's, a hole run cut at the
// state's op marked anew, an entry that does not chain to the state kept as a
// hole; and that where the old journal would be refused with the new snapshot
// (a crash between the two replacements), the bridge written first is read with
// the old snapshot and the new.
func TestInstalledJournalLayout(t *testing.T) {
	cfg := clusterConfigs(t, 3, testClusterSecret)[1]
	primary := newClusterPeer(t, &cfg, 0)
	headers := map[uint64]wire.PrepareHeader{}
	for r := range 6 {
		op, err := primary.core.Propose(vsr.Proposal{Client: wire.Uint128{Lo: 7}, Request: uint64(r + 1), Operation: wire.OperationCreateStream},
			createStreamBody(t, fmt.Sprintf("layout-%d", r)), 1_000_000+uint64(r))
		if err != nil {
			t.Fatal(err)
		}
		headers[op], _ = primary.core.Header(op)
		primary.drain()
	}
	var a appendWork
	var ends []int64
	for _, op := range []uint64{1, 2, 3} {
		h := headers[op]
		a.put(&h, primary.bodies[op])
		ends = append(ends, int64(len(a.entries)))
	}
	ends = append(ends, int64(len(a.entries)))
	a.entries = vsr.AppendJournalMarker(a.entries, 4, 5)
	ends = append(ends, int64(len(a.entries)))
	h6 := headers[6]
	a.put(&h6, primary.bodies[6])
	ends = append(ends, int64(len(a.entries)))
	raw := a.entries
	holes := map[uint64]bool{4: true, 5: true}

	stranger := wire.Uint128{Lo: 0xdead, Hi: 0xbeef} // a state of another log at op 2
	for i, c := range []struct {
		head      metaplane.Applied
		firstOp   uint64
		entries   []uint64
		faulty    []uint64
		sizeBytes int64
		// bridge: the old journal has an entry of another log at the state's op
		// or the one after; marked as holes first.
		bridge bool
	}{
		{head: metaplane.Applied{Op: 2, Identity: headers[2].Checksum}, firstOp: 2, entries: []uint64{2, 3, 6}, faulty: []uint64{4, 5},
			sizeBytes: int64(headers[2].Size+headers[3].Size+headers[6].Size) + vsr.JournalMarkerSize},
		{head: metaplane.Applied{Op: 2, Identity: stranger}, firstOp: 3, entries: []uint64{6}, faulty: []uint64{3, 4, 5},
			sizeBytes: int64(headers[6].Size) + vsr.JournalMarkerSize, bridge: true},
		{head: metaplane.Applied{Op: 3, Identity: stranger}, firstOp: 4, entries: []uint64{6}, faulty: []uint64{4, 5},
			sizeBytes: int64(headers[6].Size) + vsr.JournalMarkerSize, bridge: true},
		{head: metaplane.Applied{Op: 3, Identity: headers[3].Checksum}, firstOp: 3, entries: []uint64{3, 6}, faulty: []uint64{4, 5},
			sizeBytes: int64(headers[3].Size+headers[6].Size) + vsr.JournalMarkerSize},
		{head: metaplane.Applied{Op: 4, Identity: headers[4].Checksum}, firstOp: 5, entries: []uint64{6}, faulty: []uint64{5},
			sizeBytes: int64(headers[6].Size) + vsr.JournalMarkerSize},
		{head: metaplane.Applied{Op: 6, Identity: headers[6].Checksum}, firstOp: 6, entries: []uint64{6}, sizeBytes: int64(headers[6].Size)},
		{head: metaplane.Applied{Op: 9, Identity: stranger}, firstOp: 10},
	} {
		ij, bridge, err := planInstalledJournal(raw, 1, ends, holes, c.head)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if (bridge != nil) != c.bridge {
			t.Fatalf("case %d: bridge %v, want %v", i, bridge != nil, c.bridge)
		}
		if bridge != nil {
			// A crash between the snapshot's replacement and the journal's: the
			// old journal would be refused with the new snapshot; the bridge is
			// read with either.
			if _, err := scanMetaJournal(raw, c.head, true); err == nil {
				t.Fatalf("case %d: the old journal is read with the new snapshot: no bridge needed", i)
			}
			b, err := layJournal(raw, nil, bridge.pieces)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := scanMetaJournal(b, metaplane.Applied{}, true); err != nil {
				t.Fatalf("case %d: the bridge with the old snapshot: %v", i, err)
			}
			rec, err := scanMetaJournal(b, c.head, true)
			if err != nil {
				t.Fatalf("case %d: the bridge with the new snapshot: %v", i, err)
			}
			var entries []uint64
			for _, e := range rec.entries {
				entries = append(entries, e.Header.Op)
			}
			if !slices.Equal(entries, c.entries) || !slices.Equal(rec.faulty, c.faulty) {
				t.Fatalf("case %d: the bridge with the new snapshot reads entries %v faulty %v, want %v and %v", i, entries, rec.faulty, c.entries, c.faulty)
			}
		}
		store := newSimMetaStorage(segment.NewSimDisk(uint64(20 + i)))
		old, err := store.OpenJournal(journalFileName, 0)
		if err != nil {
			t.Fatal(err)
		}
		store.disk.WriteFile(journalFileName, raw)
		j, err := replaceJournal(store, old, raw, nil, ij.pieces)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		j.Close()
		kept := store.afterCrash(uint64(30 + i)).ReadFile(journalFileName)
		rec, err := scanMetaJournal(kept, c.head, true)
		if err != nil {
			t.Fatalf("case %d (state of op %d): the restart refuses the journal: %v", i, c.head.Op, err)
		}
		var entries []uint64
		for _, e := range rec.entries {
			entries = append(entries, e.Header.Op)
		}
		if int64(len(kept)) != c.sizeBytes || rec.firstOp != c.firstOp || ij.firstOp != c.firstOp ||
			!slices.Equal(entries, c.entries) || !slices.Equal(rec.faulty, c.faulty) || !slices.Equal(ij.holes, c.faulty) ||
			!slices.Equal(rec.ends, ij.ends) || len(ij.ends) > 0 && ij.ends[len(ij.ends)-1] != c.sizeBytes {
			t.Fatalf("case %d (state of op %d): %d bytes, want %d; read from op %d entries %v faulty %v ends %v; indexed from op %d holes %v ends %v; want from op %d, %v, %v",
				i, c.head.Op, len(kept), c.sizeBytes, rec.firstOp, entries, rec.faulty, rec.ends, ij.firstOp, ij.holes, ij.ends, c.firstOp, c.entries, c.faulty)
		}
	}
}
