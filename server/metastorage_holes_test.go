package server

import (
	"io"
	"log/slog"
	"testing"

	"github.com/iggy-shard/iggy-shard/segment"
	"github.com/iggy-shard/iggy-shard/vsr"
	"github.com/iggy-shard/iggy-shard/wire"
)

// clusterPeer is another replica of the metadata group, a bare vsr.Core with its
// journal in memory, that makes the frames a plane under test receives.
type clusterPeer struct {
	core   *vsr.Core
	bodies map[uint64][]byte
	// sent are the frames it sent, by destination.
	sent map[uint8][]vsr.Message
}

func (p *clusterPeer) Body(op uint64, _ wire.Uint128) ([]byte, bool) {
	b, ok := p.bodies[op]
	return b, ok
}

func newClusterPeer(t *testing.T, cfg *Config, id uint8) *clusterPeer {
	t.Helper()
	p := &clusterPeer{bodies: map[uint64][]byte{}, sent: map[uint8][]vsr.Message{}}
	core, err := vsr.NewCore(vsr.CoreConfig{
		Config: vsr.Config{Cluster: wire.ClusterID(cfg.Cluster.Name), ReplicaID: id, ReplicaCount: uint8(len(cfg.Cluster.Nodes)), Group: wire.MetadataGroup},
		Timing: testClusterTiming, Storage: p,
	})
	if err != nil {
		t.Fatal(err)
	}
	p.core = core
	return p
}

// drain does the peer's Ready work: bodies kept, frames collected (copied).
func (p *clusterPeer) drain() {
	for p.core.HasReady() {
		rd := p.core.Ready()
		for _, w := range rd.Writes {
			p.bodies[w.Header.Op] = append([]byte(nil), w.Body...)
		}
		for _, m := range rd.Messages {
			m.Body = append([]byte(nil), m.Body...)
			p.sent[m.To] = append(p.sent[m.To], m)
		}
		p.core.Advance()
	}
}

// take removes and returns the frames of command sent to replica.
func (p *clusterPeer) take(to uint8, command wire.Command) []vsr.Message {
	var out, kept []vsr.Message
	for _, m := range p.sent[to] {
		if m.Header.Command == command {
			out = append(out, m)
		} else {
			kept = append(kept, m)
		}
	}
	p.sent[to] = kept
	return out
}

// clusterPlane opens a clustered plane of replica id (of three) on store, its
// journal work run inline; sent collects what it sends.
func clusterPlane(t *testing.T, cfg *Config, store *simMetaStorage, sent *[]vsr.Message) *metaPlane {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	m, err := openMetaPlaneOn(log, store, "simdisk", cfg, 1_000_000)
	if err != nil {
		t.Fatal(err)
	}
	m.cluster.send = func(msg *vsr.Message) {
		c := *msg
		c.Body = append([]byte(nil), msg.Body...)
		*sent = append(*sent, c)
	}
	m.cluster.release = func(*replicaInbound) {}
	return m
}

// pumpPlane runs the plane's journal work inline until it has none.
func pumpPlane(t *testing.T, m *metaPlane) {
	t.Helper()
	for range 1000 {
		task := m.nextTask()
		if task == nil {
			return
		}
		task.then(task.work(nil))
	}
	t.Fatal("the plane never ran out of work")
}

// stepPlane steps frames into the plane's core (no Ready is out) and does the
// work they cause.
func stepPlane(t *testing.T, m *metaPlane, frames []vsr.Message) {
	t.Helper()
	for i := range frames {
		f := &frames[i]
		if err := m.replica.Step(&f.Header, f.Body); err != nil {
			t.Fatalf("step %v: %v", f.Header.Command, err)
		}
	}
	pumpPlane(t, m)
}

// TestBackupJournalsAWriteBeyondAGap: a backup that learned a view's headers (a
// StartView) receives the prepare of op 3 before the bodies of ops 1 and 2. It
// acknowledges op 3 (PrepareOk) in the Ready that journals it, so op 3 must be on
// disk, at its own position beyond the gap, by then: a crash right after must
// find it. (It used to wait in memory until the gap filled.)
func TestBackupJournalsAWriteBeyondAGap(t *testing.T) {
	cfg := clusterConfigs(t, 3, testClusterSecret)[1]
	primary := newClusterPeer(t, &cfg, 0)
	for r := range 3 {
		body := createStreamBody(t, "beyond-"+string(rune('a'+r)))
		if _, err := primary.core.Propose(vsr.Proposal{Client: wire.Uint128{Lo: 7}, Request: uint64(r + 1), Operation: wire.OperationCreateStream}, body, 1_000_000+uint64(r)); err != nil {
			t.Fatal(err)
		}
		primary.drain()
	}
	prepares := primary.take(1, wire.CommandPrepare)
	if len(prepares) != 3 {
		t.Fatalf("%d prepares to the backup, want 3", len(prepares))
	}

	store := newSimMetaStorage(segment.NewSimDisk(1))
	var sent []vsr.Message
	m := clusterPlane(t, &cfg, store, &sent)
	pumpPlane(t, m)

	// The backup asks for the view and learns its headers; then op 3 arrives.
	var rsv vsr.Message
	rsv.Header.Cluster, rsv.Header.Size, rsv.Header.Command, rsv.Header.Replica = wire.ClusterID(cfg.Cluster.Name), wire.HeaderSize, wire.CommandRequestStartView, 1
	rsv.Header.RequestStartView().Group = wire.MetadataGroup
	if err := primary.core.Step(&rsv.Header, nil); err != nil {
		t.Fatal(err)
	}
	primary.drain()
	stepPlane(t, m, primary.take(1, wire.CommandStartView))
	if m.replica.Op() != 3 {
		t.Fatalf("the backup's head is op %d after the StartView, want 3", m.replica.Op())
	}
	sent = sent[:0]
	stepPlane(t, m, prepares[2:])
	acked := false
	for _, msg := range sent {
		if msg.Header.Command == wire.CommandPrepareOk && msg.Header.PrepareOk().Op == 3 {
			acked = true
		}
	}
	if !acked {
		t.Fatal("the backup did not acknowledge op 3")
	}

	// The machine loses power now.
	m2 := clusterPlane(t, &cfg, newSimMetaStorage(store.afterCrash(2)), &sent)
	h, ok := m2.replica.Header(3)
	if !ok {
		t.Fatal("op 3 is unknown after the crash")
	}
	if _, ok := m2.bodies.Body(3, h.Checksum); !ok {
		t.Fatal("op 3, acknowledged, is not in the journal after the crash")
	}
	for _, op := range []uint64{1, 2} {
		if b, ok := m2.bodies.byOp[op]; ok {
			t.Fatalf("op %d has a body it never received: %v", op, b)
		}
	}

	// Restarted, the backup holds ops 1 and 2 as faulty (the marker in front of
	// op 3); it follows the primary and repairs them into their places.
	store2 := newSimMetaStorage(store.afterCrash(2))
	sent = sent[:0]
	m2 = clusterPlane(t, &cfg, store2, &sent)
	if m2.replica.Status() != vsr.StatusRecovering {
		t.Fatalf("restarted backup is %v", m2.replica.Status())
	}
	for range testClusterTiming.RequestStartViewRetransmitTicks {
		m2.replica.Tick()
	}
	pumpPlane(t, m2)
	exchange(t, m2, primary, &sent)
	stepPlane(t, m2, prepares[:2]) // the primary's retransmissions
	if m2.replica.Status() != vsr.StatusNormal || len(m2.cluster.holes) != 0 {
		t.Fatalf("after the exchange: %v, holes %v", m2.replica.Status(), m2.cluster.holes)
	}
	m3 := clusterPlane(t, &cfg, newSimMetaStorage(store2.afterCrash(3)), &sent)
	for op := uint64(1); op <= 3; op++ {
		h, ok := primary.core.Header(op)
		if _, held := m3.bodies.Body(op, h.Checksum); !ok || !held {
			t.Fatalf("op %d is not in the journal after the repair and a crash", op)
		}
	}
	if _, err := vsr.ScanJournal(store2.afterCrash(4).ReadFile(journalFileName), metadataFrameMax,
		func(*wire.PrepareHeader, []byte) error { return nil }); err != nil {
		t.Fatalf("the repaired journal: %v", err)
	}
}

// exchange carries frames between the plane (replica 1) and the primary until
// neither has any to send.
func exchange(t *testing.T, m *metaPlane, primary *clusterPeer, sent *[]vsr.Message) {
	t.Helper()
	for range 100 {
		moved := false
		out := append([]vsr.Message(nil), *sent...)
		*sent = (*sent)[:0]
		for i := range out {
			if out[i].To == 0 {
				if err := primary.core.Step(&out[i].Header, out[i].Body); err != nil {
					t.Fatalf("primary refused %v: %v", out[i].Header.Command, err)
				}
				moved = true
			}
		}
		primary.drain()
		in := primary.sent[1]
		primary.sent[1] = nil
		if len(in) > 0 {
			stepPlane(t, m, in)
			moved = true
		}
		if !moved {
			return
		}
	}
	t.Fatal("the exchange never went quiet")
}
