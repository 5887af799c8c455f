package server

import (
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/iggy-shard/iggy-shard/metafiles"
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

func newClusterPeer(t *testing.T, cfg *setup, id uint8) *clusterPeer {
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
func clusterPlane(t *testing.T, cfg *setup, store *metafiles.SimStorage, sent *[]vsr.Message) *metaPlane {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	m, err := openMetaPlaneOn(log, store, "simdisk", cfg, 1_000_000)
	if err != nil {
		t.Fatal(err)
	}
	m.SendTest = func(msg *vsr.Message) {
		c := *msg
		c.Body = append([]byte(nil), msg.Body...)
		*sent = append(*sent, c)
	}
	return m
}

// pumpPlane has the plane carry out what its core holds: its file work runs
// inline (no router), so nothing is left out when it returns.
func pumpPlane(t *testing.T, m *metaPlane) {
	t.Helper()
	m.Driver().Run()
	if m.Driver().ReadyOut() {
		t.Fatal("a Ready is still out with the file work inline")
	}
}

// stepPlane steps frames into the plane and does the work they cause.
func stepPlane(t *testing.T, m *metaPlane, frames []vsr.Message) {
	t.Helper()
	for i := range frames {
		f := &frames[i]
		if err := m.Step(&f.Header, f.Body); err != nil {
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

	store := metafiles.NewSimStorage(segment.NewSimDisk(1))
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
	if m.Core().Op() != 3 {
		t.Fatalf("the backup's head is op %d after the StartView, want 3", m.Core().Op())
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
	m2 := clusterPlane(t, &cfg, metafiles.NewSimStorage(store.AfterCrash(2)), &sent)
	h, ok := m2.Core().Header(3)
	if !ok {
		t.Fatal("op 3 is unknown after the crash")
	}
	if _, ok := m2.Body(3, h.Checksum); !ok {
		t.Fatal("op 3, acknowledged, is not in the journal after the crash")
	}
	for _, op := range []uint64{1, 2} {
		if h, ok := primary.core.Header(op); ok {
			if b, held := m2.Body(op, h.Checksum); held {
				t.Fatalf("op %d has a body it never received: %v", op, b)
			}
		}
	}

	// Restarted, the backup holds ops 1 and 2 as faulty (the marker in front of
	// op 3); it follows the primary and repairs them into their places.
	store2 := metafiles.NewSimStorage(store.AfterCrash(2))
	sent = sent[:0]
	m2 = clusterPlane(t, &cfg, store2, &sent)
	if m2.Core().Status() != vsr.StatusRecovering {
		t.Fatalf("restarted backup is %v", m2.Core().Status())
	}
	for range testClusterTiming.RequestStartViewRetransmitTicks {
		m2.Core().Tick()
	}
	pumpPlane(t, m2)
	exchange(t, m2, primary, &sent)
	stepPlane(t, m2, prepares[:2]) // the primary's retransmissions
	if m2.Core().Status() != vsr.StatusNormal || m2.Files.HoleCount() != 0 {
		t.Fatalf("after the exchange: %v, holes %d", m2.Core().Status(), m2.Files.HoleCount())
	}
	m3 := clusterPlane(t, &cfg, metafiles.NewSimStorage(store2.AfterCrash(3)), &sent)
	for op := uint64(1); op <= 3; op++ {
		h, ok := primary.core.Header(op)
		if _, held := m3.Body(op, h.Checksum); !ok || !held {
			t.Fatalf("op %d is not in the journal after the repair and a crash", op)
		}
	}
	if _, err := vsr.ScanJournal(store2.AfterCrash(4).ReadFile(metafiles.JournalFileName), metafiles.FrameMax,
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

// TestTruncationDurableBeforeTheStateRecord: a Ready that cuts the journal (a view
// change truncating ops it proved never committed) and records a new log view
// makes the cut durable first (vsr's rule 3). On a filesystem that keeps a
// truncation only at the next fdatasync, a power loss right after the state
// record's replacement would otherwise restart the new log view over the old
// tail: the ops the view change removed come back, the last as the head.
func TestTruncationDurableBeforeTheStateRecord(t *testing.T) {
	cfg := clusterConfigs(t, 3, testClusterSecret)[1]
	primary := newClusterPeer(t, &cfg, 0)
	for r := range 6 {
		if _, err := primary.core.Propose(vsr.Proposal{Client: wire.Uint128{Lo: 7}, Request: uint64(r + 1), Operation: wire.OperationCreateStream},
			createStreamBody(t, fmt.Sprintf("cut-%d", r)), 1_000_000+uint64(r)); err != nil {
			t.Fatal(err)
		}
		primary.drain()
	}
	store := metafiles.NewSimStorage(segment.NewSimDisk(8))
	var sent []vsr.Message
	m := clusterPlane(t, &cfg, store, &sent)
	f := m.Files
	ready := func(rd vsr.Ready) {
		t.Helper()
		if err := f.PersistNow(&rd); err != nil {
			t.Fatal(err)
		}
	}
	var writes []vsr.Write
	for op := uint64(1); op <= 6; op++ {
		h, _ := primary.core.Header(op)
		writes = append(writes, vsr.Write{Header: h, Body: primary.bodies[op]})
	}
	ready(vsr.Ready{Writes: writes})
	store.VolatileTruncation = true
	head, _ := primary.core.Header(2)
	ready(vsr.Ready{Truncate: true, TruncateAbove: 2, State: &vsr.DurableState{View: 1, LogView: 1, CommitMax: 2}, ViewHeaders: []wire.PrepareHeader{head}})

	m2 := clusterPlane(t, &cfg, metafiles.NewSimStorage(store.AfterCrash(9)), &sent)
	if m2.Core().LogView() != 1 || m2.Core().Op() != 2 {
		t.Fatalf("restarted in log view %d with its head at op %d, want log view 1 and op 2: the cut ops came back", m2.Core().LogView(), m2.Core().Op())
	}
}

// TestJournalHolesLayout drives a clustered plane's journal through Readies made
// by hand: writes beyond a gap, into a hole, truncations into a hole, and checks
// after each that the index, the holes and the file agree, and at the end that a
// crash and a restart find every entry.
func TestJournalHolesLayout(t *testing.T) {
	cfg := clusterConfigs(t, 3, testClusterSecret)[1]
	primary := newClusterPeer(t, &cfg, 0)
	for r := range 6 {
		body := createStreamBody(t, "layout-"+string(rune('a'+r)))
		if _, err := primary.core.Propose(vsr.Proposal{Client: wire.Uint128{Lo: 7}, Request: uint64(r + 1), Operation: wire.OperationCreateStream}, body, 1_000_000+uint64(r)); err != nil {
			t.Fatal(err)
		}
		primary.drain()
	}
	write := func(op uint64) vsr.Write {
		h, ok := primary.core.Header(op)
		if !ok {
			t.Fatalf("no header of op %d", op)
		}
		return vsr.Write{Header: h, Body: primary.bodies[op]}
	}
	store := metafiles.NewSimStorage(segment.NewSimDisk(3))
	var sent []vsr.Message
	m := clusterPlane(t, &cfg, store, &sent)
	pumpPlane(t, m)

	f := m.Files
	ready := func(rd vsr.Ready) {
		t.Helper()
		if err := f.PersistNow(&rd); err != nil {
			t.Fatal(err)
		}
	}
	check := func(step string, entries []uint64, holes []uint64) {
		t.Helper()
		var got, gotHoles []uint64
		firstOp, ends := f.JournalIndex()
		raw := store.Disk.ReadFile(metafiles.JournalFileName)
		_, err := vsr.ScanJournalHoles(raw, metafiles.FrameMax, func(h *wire.PrepareHeader, _ []byte, offset int) error {
			if start, ok := f.JournalOffset(h.Op); !ok || start != int64(offset) || ends[h.Op-firstOp] != int64(offset)+int64(h.Size) {
				t.Errorf("%s: op %d at byte %d, indexed at %d (%v)", step, h.Op, offset, start, ok)
			}
			got = append(got, h.Op)
			return nil
		}, func(hl vsr.JournalHole) error {
			for op := hl.FromOp; op <= hl.ToOp; op++ {
				gotHoles = append(gotHoles, op)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if int64(len(raw)) != f.JournalSizeBytes() {
			t.Fatalf("%s: %d bytes on disk, %d indexed", step, len(raw), f.JournalSizeBytes())
		}
		var indexed []uint64
		for op := firstOp; op < firstOp+uint64(len(ends)); op++ {
			if f.Hole(op) {
				indexed = append(indexed, op)
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(entries) || fmt.Sprint(gotHoles) != fmt.Sprint(holes) || fmt.Sprint(indexed) != fmt.Sprint(holes) {
			t.Fatalf("%s: entries %v holes %v (indexed %v), want %v and %v", step, got, gotHoles, indexed, entries, holes)
		}
	}

	ready(vsr.Ready{Writes: []vsr.Write{write(1)}})
	check("an append", []uint64{1}, nil)
	ready(vsr.Ready{Writes: []vsr.Write{write(4)}})
	check("a write beyond a gap", []uint64{1, 4}, []uint64{2, 3})
	ready(vsr.Ready{Writes: []vsr.Write{write(3)}})
	check("a write into the hole", []uint64{1, 3, 4}, []uint64{2})
	ready(vsr.Ready{Truncate: true, TruncateAbove: 2})
	check("a truncation above the hole", []uint64{1}, []uint64{2})
	ready(vsr.Ready{Writes: []vsr.Write{write(3)}})
	check("an append after a kept hole", []uint64{1, 3}, []uint64{2})
	ready(vsr.Ready{Writes: []vsr.Write{write(2)}})
	check("the hole filled", []uint64{1, 2, 3}, nil)
	ready(vsr.Ready{Writes: []vsr.Write{write(6)}})
	check("a gap of two", []uint64{1, 2, 3, 6}, []uint64{4, 5})
	ready(vsr.Ready{Truncate: true, TruncateAbove: 4})
	check("a truncation inside the hole keeps the ops below the cut faulty", []uint64{1, 2, 3}, []uint64{4})
	ready(vsr.Ready{Writes: []vsr.Write{write(5), write(4)}})
	check("two writes out of order in one Ready", []uint64{1, 2, 3, 4, 5}, nil)
	ready(vsr.Ready{Writes: []vsr.Write{write(6)}, Discards: []uint64{5}})
	check("a discard and a write beyond it", []uint64{1, 2, 3, 4, 6}, []uint64{5})
	ready(vsr.Ready{Discards: []uint64{2}})
	check("a discard below entries that stay", []uint64{1, 3, 4, 6}, []uint64{2, 5})
	ready(vsr.Ready{Discards: []uint64{4, 6}})
	check("discards at the top cut the journal, not a hole below them", []uint64{1, 3}, []uint64{2, 4, 5})
	ready(vsr.Ready{Discards: []uint64{3}, Writes: []vsr.Write{write(3), write(4), write(2)}})
	check("a discard rewritten in its Ready", []uint64{1, 2, 3, 4}, []uint64{5})
	ready(vsr.Ready{Writes: []vsr.Write{write(6)}})
	check("a gap again", []uint64{1, 2, 3, 4, 6}, []uint64{5})

	m2 := clusterPlane(t, &cfg, metafiles.NewSimStorage(store.AfterCrash(4)), &sent)
	for _, op := range []uint64{1, 2, 3, 4, 6} {
		h, _ := primary.core.Header(op)
		if _, ok := m2.Body(op, h.Checksum); !ok {
			t.Fatalf("op %d lost in the crash", op)
		}
	}
	if !m2.Files.Hole(5) {
		t.Fatalf("op 5 is not faulty after the restart: holes %d", m2.Files.HoleCount())
	}
}

// TestClusterKeepsATornTailFaulty: in a cluster a torn last entry cannot be proven
// never written (a synced entry the disk damaged reads the same), so the restart
// keeps its bytes and reports its op faulty until its entry replaces them.
func TestClusterKeepsATornTailFaulty(t *testing.T) {
	cfg := clusterConfigs(t, 3, testClusterSecret)[1]
	primary := newClusterPeer(t, &cfg, 0)
	for r := range 3 {
		if _, err := primary.core.Propose(vsr.Proposal{Client: wire.Uint128{Lo: 7}, Request: uint64(r + 1), Operation: wire.OperationCreateStream},
			createStreamBody(t, fmt.Sprintf("torn-%d", r)), 1_000_000+uint64(r)); err != nil {
			t.Fatal(err)
		}
		primary.drain()
	}
	write := func(op uint64) vsr.Write {
		h, _ := primary.core.Header(op)
		return vsr.Write{Header: h, Body: primary.bodies[op]}
	}
	store := metafiles.NewSimStorage(segment.NewSimDisk(6))
	var sent []vsr.Message
	m := clusterPlane(t, &cfg, store, &sent)
	pumpPlane(t, m)
	rd := vsr.Ready{Writes: []vsr.Write{write(1), write(2), write(3)}}
	if err := m.Files.PersistNow(&rd); err != nil {
		t.Fatal(err)
	}

	raw := store.Disk.ReadFile(metafiles.JournalFileName)
	torn := raw[:len(raw)-7]
	store.Disk.WriteFile(metafiles.JournalFileName, torn)
	m = clusterPlane(t, &cfg, metafiles.NewSimStorage(store.Disk), &sent)
	if m.Core().Op() != 3 || !m.Files.Hole(3) {
		t.Fatalf("after a torn op 3: head %d, holes %d", m.Core().Op(), m.Files.HoleCount())
	}
	if got := store.Disk.ReadFile(metafiles.JournalFileName); len(got) != len(torn) {
		t.Fatalf("the torn bytes were cut: %d bytes, had %d", len(got), len(torn))
	}
	pumpPlane(t, m)
	rd = vsr.Ready{Writes: []vsr.Write{write(3)}}
	if err := m.Files.PersistNow(&rd); err != nil {
		t.Fatal(err)
	}
	scan, err := vsr.ScanJournal(store.Disk.ReadFile(metafiles.JournalFileName), metafiles.FrameMax, func(*wire.PrepareHeader, []byte) error { return nil })
	if err != nil || scan.TornTailBytes != 0 || scan.LastOp != 3 || m.Files.HoleCount() != 0 {
		t.Fatalf("op 3 rewritten: %+v, %v, holes %d", scan, err, m.Files.HoleCount())
	}
}
