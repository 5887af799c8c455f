package metaplane

import (
	"testing"

	"github.com/iggy-shard/iggy-shard/metadata"
	"github.com/iggy-shard/iggy-shard/vsr"
	"github.com/iggy-shard/iggy-shard/wire"
)

// memHost is a plane's host in memory: every durable write is done at once, the
// messages are collected for the test to deliver, the answers and commits kept.
type memHost struct {
	p       *Plane
	sent    []vsr.Message
	answers map[uint64]Answer
	commits []Commit
}

func (h *memHost) Persist(*vsr.Ready) (bool, error) { return true, nil }
func (h *memHost) Send(m *vsr.Message) {
	c := *m
	c.Body = append([]byte(nil), m.Body...)
	h.sent = append(h.sent, c)
}
func (h *memHost) WriteCheckpoint(*Checkpoint) (CheckpointResult, bool) {
	return CheckpointResult{Written: true}, true
}
func (h *memHost) InstallState(*Install) (bool, error) { return true, nil }
func (h *memHost) Committed(c *Commit)                 { h.commits = append(h.commits, *c) }
func (h *memHost) StateReplaced()                      {}
func (h *memHost) Answer(token uint64, a *Answer) {
	if _, ok := h.answers[token]; ok {
		panic("answered twice")
	}
	h.answers[token] = *a
}
func (h *memHost) HashPassword(uint64, *PasswordWork) bool { return false }
func (h *memHost) Entropy(b []byte) {
	for i := range b {
		b[i] = byte(i)
	}
}
func (h *memHost) Advanced() {}

// testTiming is the reference's timing: the test counts its ticks by it.
var testTiming = vsr.TimingDefault

// testGroup is a group of three planes in memory, a root user on each.
type testGroup struct {
	t      *testing.T
	planes []*Plane
	hosts  []*memHost
}

func newTestGroup(t *testing.T) *testGroup {
	t.Helper()
	g := &testGroup{t: t}
	for id := range 3 {
		h := &memHost{answers: map[uint64]Answer{}}
		cfg := Config{
			Replica:               vsr.Config{Cluster: wire.ClusterID("test"), ReplicaID: uint8(id), ReplicaCount: 3},
			Clustered:             true,
			Timing:                testTiming,
			CheckpointIntervalOps: CheckpointIntervalOpsMax(JournalSlotsMin),
			ServerVersion:         "test",
		}
		rec := &Recovered{Fresh: true, Snapshot: &Snapshot{State: metadata.NewState("iggy", "x", 1), Table: vsr.NewClientTable(64)}}
		p, err := Open(cfg, rec, h)
		if err != nil {
			t.Fatal(err)
		}
		h.p = p
		g.planes, g.hosts = append(g.planes, p), append(g.hosts, h)
	}
	return g
}

// deliver delivers the frames sent so far, in rounds, until none moves; keep,
// when set, decides frame by frame which are held back (returned, in order).
func (g *testGroup) deliver(keep func(from int, m *vsr.Message) bool) []vsr.Message {
	g.t.Helper()
	var held []vsr.Message
	for range 1000 {
		moved := false
		for from, h := range g.hosts {
			out := h.sent
			h.sent = nil
			for i := range out {
				m := &out[i]
				if keep != nil && keep(from, m) {
					held = append(held, *m)
					continue
				}
				moved = true
				if err := g.planes[m.To].Step(&m.Header, m.Body); err != nil {
					g.t.Fatalf("replica %d refused %v from %d: %v", m.To, m.Header.Command, from, err)
				}
			}
		}
		if !moved {
			return held
		}
	}
	g.t.Fatal("the frames never stopped moving")
	return nil
}

// TestPreparedWriteOfAStepDownWaitsForItsFate: a primary prepares a write, its
// backups journal it, and it learns of a view change (a StartViewChange) before
// the op commits. It is no longer the primary, but the write may still commit in
// the new view: it is not answered 58 (not admitted) then, as it once was, but
// kept until its op applies here, and answered with its commit.
func TestPreparedWriteOfAStepDownWaitsForItsFate(t *testing.T) {
	g := newTestGroup(t)
	primary := g.planes[0]
	client := wire.Uint128{Lo: 1}
	primary.Register(1, &wire.RequestHeader{Client: client}, 0, 1)
	g.deliver(nil)
	epoch := g.hosts[0].answers[1].Epoch
	if epoch == 0 {
		t.Fatalf("no session: %+v", g.hosts[0].answers[1])
	}
	body, _ := wire.AppendName(nil, []byte("fate"))
	hdr := &wire.RequestHeader{Client: client, Session: epoch, Request: 1, Operation: wire.OperationCreateStream, RequestChecksum: wire.RequestChecksum(body)}
	primary.Write(2, Request{Header: hdr, Body: body, NowMicros: 2})
	// The backups journal the prepare; their acknowledgements never reach the
	// primary.
	g.deliver(func(from int, m *vsr.Message) bool { return m.To == 0 })
	op := g.planes[1].Core().Op()
	if g.planes[1].Core().CommitMax() >= op {
		t.Fatalf("op %d committed at a backup already", op)
	}
	// The backups time out on their primary and start view 1.
	for range testTiming.HeartbeatTimeoutTicks + 1 {
		for _, p := range g.planes[1:] {
			p.Tick()
		}
	}
	held := g.deliver(func(from int, m *vsr.Message) bool { return m.To == 0 })
	// The old primary hears of the view change first, alone.
	for i := range held {
		if m := &held[i]; m.Header.Command == wire.CommandStartViewChange {
			if err := primary.Step(&m.Header, m.Body); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	if primary.Core().IsPrimary() {
		t.Fatal("the old primary still leads after a StartViewChange")
	}
	if a, ok := g.hosts[0].answers[2]; ok {
		t.Fatalf("the write was answered while its fate was unknown: %+v", a)
	}
	// Then everything else: the new view commits the op, the old primary
	// follows it and applies it.
	for i := range held {
		if m := &held[i]; m.Header.Command != wire.CommandStartViewChange {
			_ = primary.Step(&m.Header, m.Body)
		}
	}
	for range 200 {
		for _, p := range g.planes {
			p.Tick()
		}
		g.deliver(nil)
		if _, ok := g.hosts[0].answers[2]; ok {
			break
		}
	}
	a, ok := g.hosts[0].answers[2]
	if !ok || a.Frame == nil {
		t.Fatalf("the write: answered %v, %+v; want its commit", ok, a)
	}
	var rh wire.ReplyHeader
	copy(wire.HeaderBytes(&rh)[:], a.Frame)
	if _, result, _ := wire.SplitResult(a.Frame[wire.HeaderSize:]); rh.Op != op || result != 0 {
		t.Fatalf("the write's reply: op %d result %d, want op %d committed", rh.Op, result, op)
	}
}
