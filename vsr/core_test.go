package vsr

import (
	"errors"
	"fmt"
	"testing"
	"unsafe"

	"github.com/iggy-shard/iggy-shard/wire"
)

// memStorage is a journal in memory, for the core's tests: one preallocated buffer
// per slot, so that the normal case allocates nothing.
type memStorage struct {
	headers []wire.PrepareHeader
	bodies  [][]byte
}

func newMemStorage(slots int) *memStorage {
	m := &memStorage{headers: make([]wire.PrepareHeader, slots), bodies: make([][]byte, slots)}
	for i := range m.bodies {
		m.bodies[i] = make([]byte, 0, 256)
	}
	return m
}

func (m *memStorage) put(h *wire.PrepareHeader, body []byte) {
	i := h.Op % uint64(len(m.headers))
	m.headers[i] = *h
	m.bodies[i] = append(m.bodies[i][:0], body...)
}

func (m *memStorage) Body(op uint64, identity wire.Uint128) ([]byte, bool) {
	i := op % uint64(len(m.headers))
	if m.headers[i].Op != op || m.headers[i].Checksum != identity {
		return nil, false
	}
	return m.bodies[i], true
}

// testCluster drives n cores, each through its Driver, whose host (testHost) does
// the Ready work at once: messages queue until deliver, and a link can be cut.
type testCluster struct {
	t        testing.TB
	cores    []*Core
	drivers  []*Driver
	storages []*memStorage
	queue    []queued
	// bodies holds the queued messages' bodies: a message's body is valid only
	// until its Ready's Advance, and the queue keeps it longer. Reused once the
	// queue is empty.
	bodies  []byte
	cut     map[[2]int]bool
	applied [][]uint64
	frame   []byte
	// onFrame, when set, sees every frame deliver delivers.
	onFrame func(frame []byte)
	// forwards collects each replica's Ready.Forwards.
	forwards [][]ForwardOutcome
	// offer and install, when set, are the caller's side of a state transfer:
	// the state replica i answers r with, and its install of one (without offer,
	// a request is answered with no state).
	offer   func(i int, r StateRequest) (uint64, []Artifact)
	install func(i int, in *StateInstall)
	// discarded, when set, collects each replica's Ready.Discards.
	discarded [][]uint64
	// proposals and proposed are the requests proposed through the drivers, by
	// token modulo their length, and what became of them.
	proposals [64]testProposal
	proposed  [64]proposedOutcome
	token     uint64
	// host and driverConfig, when set, make the drivers' hosts and bounds.
	host         func(i int) Host
	driverConfig DriverConfig
}

type testProposal struct {
	p    Proposal
	body []byte
	now  uint64
}

type proposedOutcome struct {
	token uint64
	op    uint64
	err   error
}

// testHost is replica i's side of its Driver in a testCluster.
type testHost struct {
	tc *testCluster
	i  int
}

func (h testHost) Persist(rd *Ready) bool {
	tc := h.tc
	if tc.discarded != nil {
		tc.discarded[h.i] = append(tc.discarded[h.i], rd.Discards...)
	}
	for k := range rd.Writes {
		tc.storages[h.i].put(&rd.Writes[k].Header, rd.Writes[k].Body)
	}
	return true
}

func (h testHost) Send(m *Message) {
	if h.tc.cut[[2]int{h.i, int(m.To)}] {
		return
	}
	tc := h.tc
	if len(tc.queue) == 0 {
		tc.bodies = tc.bodies[:0]
	}
	at := len(tc.bodies)
	tc.bodies = append(tc.bodies, m.Body...)
	tc.queue = append(tc.queue, queued{from: h.i, to: int(m.To), header: m.Header, body: tc.bodies[at:len(tc.bodies):len(tc.bodies)]})
}

func (h testHost) Apply(committed []wire.PrepareHeader) bool {
	for k := range committed {
		h.tc.applied[h.i] = append(h.tc.applied[h.i], committed[k].Op)
	}
	return true
}

func (h testHost) Install(in *StateInstall) bool {
	if !h.tc.cores[h.i].readyOut {
		panic("vsr test: a state installed outside its Ready")
	}
	if h.tc.install != nil {
		h.tc.install(h.i, in)
	}
	return true
}

func (h testHost) Forwarded(outcomes []ForwardOutcome) {
	tc := h.tc
	for len(tc.forwards) <= h.i {
		tc.forwards = append(tc.forwards, nil)
	}
	tc.forwards[h.i] = append(tc.forwards[h.i], outcomes...)
}

func (h testHost) OfferState(r StateRequest) (uint64, []Artifact) {
	if h.tc.cores[h.i].readyOut {
		panic("vsr test: a state offered before its Ready's Advance")
	}
	if h.tc.offer == nil {
		return 0, nil
	}
	return h.tc.offer(h.i, r)
}

func (h testHost) Proposal(token uint64) (Proposal, []byte, uint64) {
	p := &h.tc.proposals[token%uint64(len(h.tc.proposals))]
	return p.p, p.body, p.now
}

func (h testHost) Proposed(token, op uint64, err error) {
	h.tc.proposed[token%uint64(len(h.tc.proposed))] = proposedOutcome{token: token, op: op, err: err}
}

func (h testHost) Advanced() {}

func (h testHost) ForwardSent(uint64, wire.Uint128, error) {}

type queued struct {
	from   int
	to     int
	header wire.GenericHeader
	body   []byte
}

var testTiming = Timing{
	HeartbeatTimeoutTicks:           40,
	CommitBroadcastIntervalTicks:    8,
	PrepareRetransmitIntervalTicks:  5,
	ViewChangeRetransmitTicks:       10,
	ViewChangeStatusTimeoutTicks:    60,
	RequestStartViewRetransmitTicks: 10,
	ViewProbeAttemptsMax:            3,
	RepairRetryIntervalTicks:        10,
	RepairChunkMax:                  8,
}

func newTestCluster(t testing.TB, n int) *testCluster { return newTestClusterSlots(t, n, 256) }

func newTestClusterSlots(t testing.TB, n, slots int) *testCluster {
	tc := &testCluster{t: t, cut: make(map[[2]int]bool), applied: make([][]uint64, n)}
	buf := make([]byte, 1<<20+wire.HeaderAlignment)
	off := (wire.HeaderAlignment - int(uintptr(unsafe.Pointer(&buf[0]))%wire.HeaderAlignment)) % wire.HeaderAlignment
	tc.frame = buf[off:]
	for i := 0; i < n; i++ {
		st := newMemStorage(slots)
		c, err := NewCore(CoreConfig{
			Config:       Config{Cluster: wire.ClusterID("test"), ReplicaID: uint8(i), ReplicaCount: uint8(n), Group: wire.MetadataGroup},
			Timing:       testTiming,
			JournalSlots: slots,
			Storage:      st,
		})
		if err != nil {
			t.Fatal(err)
		}
		tc.cores = append(tc.cores, c)
		tc.drivers = append(tc.drivers, nil)
		tc.storages = append(tc.storages, st)
		tc.applied[i] = make([]uint64, 0, 1024)
	}
	return tc
}

// driver is replica i's Driver, a new one when the test replaced its core (a
// restart).
func (tc *testCluster) driver(i int) *Driver {
	if d := tc.drivers[i]; d != nil && d.Core() == tc.cores[i] {
		return d
	}
	var host Host = testHost{tc: tc, i: i}
	if tc.host != nil {
		host = tc.host(i)
	}
	tc.drivers[i] = NewDriver(tc.cores[i], host, tc.driverConfig)
	return tc.drivers[i]
}

// drain carries out replica i's Readies: what a test fed its core directly.
func (tc *testCluster) drain(i int) { tc.driver(i).Run() }

// deliver delivers every queued message (and what they cause) until quiet, at most
// limit messages.
func (tc *testCluster) deliver(limit int) {
	for delivered := 0; len(tc.queue) > 0; delivered++ {
		if delivered == limit {
			tc.t.Fatalf("still delivering after %d messages", limit)
		}
		tc.deliverOne()
	}
}

// deliverOne delivers the first queued message.
func (tc *testCluster) deliverOne() {
	{
		q := tc.queue[0]
		tc.queue = tc.queue[1:]
		if len(tc.queue) == 0 {
			tc.queue = tc.queue[:0:cap(tc.queue)]
		}
		frame := tc.frame[:wire.HeaderSize+len(q.body)]
		q.header.Put(frame)
		copy(frame[wire.HeaderSize:], q.body)
		if tc.onFrame != nil {
			tc.onFrame(frame)
		}
		h, err := wire.DecodeReplicaHeader(frame, 1<<20)
		if err != nil {
			tc.t.Fatalf("replica %d sent a frame the decoder refuses: %v", q.from, err)
		}
		// The frame buffer is reused: hand the core a copy of the body it may alias.
		body := append([]byte(nil), frame[wire.HeaderSize:]...)
		if err := tc.driver(q.to).Step(h, body); err != nil {
			tc.t.Fatalf("replica %d refused %v from %d: %v", q.to, q.header.Command, q.from, err)
		}
	}
}

func (tc *testCluster) tick(ticks int) {
	for k := 0; k < ticks; k++ {
		for i := range tc.cores {
			tc.driver(i).Tick()
		}
		tc.deliver(10000)
	}
}

// proposeThrough proposes p through replica i's driver and returns what became of
// it (the driver's host answers at once).
func (tc *testCluster) proposeThrough(i int, p Proposal, body []byte, now uint64) (uint64, error) {
	tc.token++
	slot := tc.token % uint64(len(tc.proposals))
	tc.proposals[slot] = testProposal{p: p, body: body, now: now}
	tc.proposed[slot] = proposedOutcome{}
	if err := tc.driver(i).Propose(tc.token); err != nil {
		return 0, err
	}
	out := tc.proposed[slot]
	if out.token != tc.token {
		tc.t.Fatalf("proposal %d on %d: no outcome reported", tc.token, i)
	}
	return out.op, out.err
}

func (tc *testCluster) propose(i int, client, request uint64) uint64 {
	tc.t.Helper()
	body := []byte{byte(client), byte(request), 1, 2, 3}
	op, err := tc.proposeThrough(i, Proposal{Client: wire.Uint128{Lo: client}, Request: request, Operation: wire.OperationCreateStream}, body, 1000)
	if err != nil {
		tc.t.Fatalf("propose on %d: %v", i, err)
	}
	return op
}

func TestCoreSingleReplicaCommitsOnItsOwnAppend(t *testing.T) {
	tc := newTestCluster(t, 1)
	c := tc.cores[0]
	var parent wire.Uint128
	for i := uint64(1); i <= 5; i++ {
		op := tc.propose(0, 7, i)
		h, ok := c.Header(op)
		if !ok || op != i || h.Parent != parent || !h.IdentityValid() || h.ChecksumBody.IsZero() {
			t.Fatalf("op %d: header %+v", op, h)
		}
		parent = h.Checksum
	}
	if c.CommitMax() != 5 || c.CommitMin() != 5 || len(tc.applied[0]) != 5 || len(tc.queue) != 0 {
		t.Fatalf("commit %d/%d, applied %v, %d messages", c.CommitMin(), c.CommitMax(), tc.applied[0], len(tc.queue))
	}
}

func TestCoreNormalCaseChainAndQuorum(t *testing.T) {
	tc := newTestCluster(t, 3)
	op := tc.propose(0, 1, 1)
	// The primary's Ready sends one prepare, to its chain successor only.
	if len(tc.queue) != 1 || tc.queue[0].to != 1 || tc.queue[0].header.Command != wire.CommandPrepare {
		t.Fatalf("primary sent %+v", tc.queue)
	}
	tc.deliver(100)
	for i, c := range tc.cores {
		if c.Op() != op {
			t.Errorf("replica %d op %d, want %d", i, c.Op(), op)
		}
	}
	if tc.cores[0].CommitMax() != op || len(tc.applied[0]) != 1 {
		t.Fatalf("primary commit %d, applied %v", tc.cores[0].CommitMax(), tc.applied[0])
	}
	// Backups learn the commit point from the heartbeat.
	tc.tick(int(testTiming.CommitBroadcastIntervalTicks))
	for i, c := range tc.cores {
		if c.CommitMin() != op {
			t.Errorf("replica %d applied %d after the heartbeat, want %d", i, c.CommitMin(), op)
		}
	}
}

func TestCoreCommitWaitsForQuorumAndRetransmits(t *testing.T) {
	tc := newTestCluster(t, 3)
	tc.cut[[2]int{0, 1}] = true // the chain's first hop is down
	op := tc.propose(0, 1, 1)
	tc.deliver(100)
	if tc.cores[0].CommitMax() != 0 {
		t.Fatalf("committed op %d with only the primary's ack", op)
	}
	// The retransmission goes straight to every replica missing from the ack set.
	tc.tick(int(testTiming.PrepareRetransmitIntervalTicks))
	if tc.cores[0].CommitMax() != op || tc.cores[2].Op() != op || tc.cores[1].Op() != 0 {
		t.Fatalf("after retransmit: commit %d, replica 2 op %d, replica 1 op %d", tc.cores[0].CommitMax(), tc.cores[2].Op(), tc.cores[1].Op())
	}
}

func TestCorePipelineDepth(t *testing.T) {
	tc := newTestCluster(t, 3)
	tc.cut[[2]int{0, 1}] = true
	tc.cut[[2]int{0, 2}] = true
	for i := 0; i < PipelineDepthDefault; i++ {
		tc.propose(0, uint64(i+1), 1)
	}
	_, err := tc.cores[0].Propose(Proposal{Client: wire.Uint128{Lo: 99}, Request: 1}, []byte{1}, 0)
	if !errors.Is(err, ErrPipelineFull) {
		t.Fatalf("proposal %d: %v, want ErrPipelineFull", PipelineDepthDefault+1, err)
	}
	if _, err := tc.cores[1].Propose(Proposal{Client: wire.Uint128{Lo: 99}, Request: 1}, []byte{1}, 0); !errors.Is(err, ErrNotPrimary) {
		t.Fatalf("a backup's proposal: %v, want ErrNotPrimary", err)
	}
}

func TestCoreViewChangeKeepsCommittedAndElectsNextPrimary(t *testing.T) {
	tc := newTestCluster(t, 3)
	for r := uint64(1); r <= 3; r++ {
		tc.propose(0, r, 1)
		tc.deliver(100)
	}
	committed := tc.cores[0].CommitMax()
	// The primary goes silent; the backups time out and elect view 1, primary 1.
	for _, to := range []int{1, 2} {
		tc.cut[[2]int{0, to}] = true
		tc.cut[[2]int{to, 0}] = true
	}
	tc.tick(int(testTiming.HeartbeatTimeoutTicks) + 5)
	b := tc.cores[1]
	if b.Status() != StatusNormal || b.View() != 1 || !b.IsPrimary() || b.LogView() != 1 {
		t.Fatalf("replica 1: %v view %d log view %d primary %v", b.Status(), b.View(), b.LogView(), b.IsPrimary())
	}
	if b.CommitMax() < committed || b.Op() < committed {
		t.Fatalf("new primary op %d commit %d, old commit %d", b.Op(), b.CommitMax(), committed)
	}
	op := tc.propose(1, 9, 1)
	tc.deliver(100)
	if b.CommitMax() != op {
		t.Fatalf("new view does not commit: commit %d, op %d", b.CommitMax(), op)
	}
	// The old primary comes back, learns the view and follows it.
	clear(tc.cut)
	tc.tick(int(testTiming.CommitBroadcastIntervalTicks) + int(testTiming.RequestStartViewRetransmitTicks))
	old := tc.cores[0]
	if old.View() != 1 || old.Status() != StatusNormal || old.CommitMin() != op {
		t.Fatalf("old primary: %v view %d applied %d, want view 1 applied %d", old.Status(), old.View(), old.CommitMin(), op)
	}
}

func TestCoreUncommittedOpOfLostPrimaryIsTruncatedByNacks(t *testing.T) {
	tc := newTestCluster(t, 3)
	tc.propose(0, 1, 1)
	tc.deliver(100)
	// The next op never leaves the primary, which then dies.
	for _, to := range []int{1, 2} {
		tc.cut[[2]int{0, to}] = true
		tc.cut[[2]int{to, 0}] = true
	}
	lost := tc.propose(0, 2, 1)
	tc.tick(int(testTiming.HeartbeatTimeoutTicks) + 5)
	b := tc.cores[1]
	if b.View() != 1 || !b.IsPrimary() || b.Op() != lost-1 {
		t.Fatalf("new primary view %d op %d, want view 1 op %d", b.View(), b.Op(), lost-1)
	}
	// The old primary rejoins and its unreplicated op gives way to the view's.
	op := tc.propose(1, 3, 1)
	clear(tc.cut)
	tc.tick(int(testTiming.CommitBroadcastIntervalTicks) + int(testTiming.RequestStartViewRetransmitTicks) + int(testTiming.RepairRetryIntervalTicks))
	want, _ := b.Header(op)
	got, ok := tc.cores[0].Header(op)
	if !ok || got.Checksum != want.Checksum || tc.cores[0].CommitMin() != op {
		t.Fatalf("old primary holds %v at op %d (applied %d), want the view's %v", got.Checksum, op, tc.cores[0].CommitMin(), want.Checksum)
	}
}

func TestCoreStepRefusesBadInput(t *testing.T) {
	tc := newTestCluster(t, 3)
	tc.propose(0, 1, 1)
	prepare := tc.queue[0]
	tc.queue = nil
	backup := tc.cores[1]
	for _, tcase := range []struct {
		name   string
		mutate func(h *wire.PrepareHeader, body []byte) []byte
	}{
		{"cluster", func(h *wire.PrepareHeader, body []byte) []byte { h.Cluster = wire.ClusterID("other"); return body }},
		{"group", func(h *wire.PrepareHeader, body []byte) []byte { h.Group = 5; return body }},
		{"identity", func(h *wire.PrepareHeader, body []byte) []byte { h.Timestamp++; return body }},
		{"body", func(h *wire.PrepareHeader, body []byte) []byte { body[0] ^= 1; return body }},
		{"size", func(h *wire.PrepareHeader, body []byte) []byte { return body[:1] }},
		{"replica", func(h *wire.PrepareHeader, body []byte) []byte { h.Replica = 7; return body }},
	} {
		g := prepare.header
		h := (*wire.PrepareHeader)(unsafe.Pointer(&g))
		body := tcase.mutate(h, append([]byte(nil), prepare.body...))
		if err := backup.Step(&g, body); !errors.Is(err, ErrBadMessage) {
			t.Errorf("%s: Step = %v, want ErrBadMessage", tcase.name, err)
		}
	}
	if backup.Op() != 0 || backup.HasReady() {
		t.Fatalf("a refused prepare changed the backup: op %d", backup.Op())
	}
}

func TestCoreRestartedReplicaProbesThenFollows(t *testing.T) {
	tc := newTestCluster(t, 3)
	for r := uint64(1); r <= 4; r++ {
		tc.propose(0, r, 1)
		tc.deliver(100)
	}
	tc.tick(int(testTiming.CommitBroadcastIntervalTicks))
	// Replica 2 restarts from its journal.
	st := tc.storages[2]
	var rec CoreRecovered
	for op := uint64(1); op <= 4; op++ {
		rec.Headers = append(rec.Headers, st.headers[op])
	}
	rec.State = tc.cores[2].durable
	c, err := NewCore(CoreConfig{Config: tc.cores[2].cfg.Config, Timing: testTiming, JournalSlots: 256, Storage: st, Incarnation: wire.Uint128{Lo: 2}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Recover(rec); err != nil {
		t.Fatal(err)
	}
	if c.Status() != StatusRecovering {
		t.Fatalf("restarted replica is %v, want Recovering", c.Status())
	}
	tc.cores[2] = c
	tc.drain(2)
	tc.deliver(100)
	if c.Status() != StatusNormal || c.CommitMin() != 4 {
		t.Fatalf("after the probe: %v applied %d", c.Status(), c.CommitMin())
	}
}

func TestCoreRestartAloneElectsAfterProbes(t *testing.T) {
	tc := newTestCluster(t, 3)
	tc.propose(0, 1, 1)
	tc.deliver(100)
	for i := range tc.cores {
		rec := CoreRecovered{State: tc.cores[i].durable}
		if h := tc.storages[i].headers[1]; h.Op == 1 {
			rec.Headers = append(rec.Headers, h)
		}
		c, err := NewCore(CoreConfig{Config: tc.cores[i].cfg.Config, Timing: testTiming, JournalSlots: 256, Storage: tc.storages[i], Incarnation: wire.Uint128{Lo: uint64(i) + 10}})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Recover(rec); err != nil {
			t.Fatal(err)
		}
		tc.cores[i] = c
		tc.drain(i)
	}
	tc.deliver(100)
	// Nobody leads a view: after the probes the cluster elects on its journals.
	tc.tick(int(testTiming.RequestStartViewRetransmitTicks)*testTiming.ViewProbeAttemptsMax + 30)
	primaries := 0
	for i, c := range tc.cores {
		if c.Status() != StatusNormal || c.CommitMin() != 1 {
			t.Errorf("replica %d: %v applied %d", i, c.Status(), c.CommitMin())
		}
		if c.IsPrimary() {
			primaries++
		}
	}
	if primaries != 1 {
		t.Fatalf("%d primaries", primaries)
	}
}

func TestCoreTimingValidated(t *testing.T) {
	bad := testTiming
	bad.HeartbeatTimeoutTicks = 3 * bad.CommitBroadcastIntervalTicks
	if _, err := NewCore(CoreConfig{Config: Config{ReplicaCount: 3}, Timing: bad, Storage: newMemStorage(8)}); err == nil {
		t.Fatal("heartbeat below 4x the commit interval accepted")
	}
	if _, err := NewCore(CoreConfig{Config: Config{ReplicaCount: 3}}); err == nil {
		t.Fatal("a core without storage accepted")
	}
}

func TestCoreNormalCaseAllocatesNothing(t *testing.T) {
	tc := newTestCluster(t, 3)
	tc.queue = make([]queued, 0, 64)
	body := []byte{1, 2, 3, 4}
	request := uint64(0)
	step := func() {
		request++
		if _, err := tc.proposeThrough(0, Proposal{Client: wire.Uint128{Lo: 1}, Request: request}, body, request); err != nil {
			t.Fatal(err)
		}
		tc.deliverNoCopy()
	}
	for i := 0; i < 300; i++ { // warm every reused buffer
		step()
	}
	if n := testing.AllocsPerRun(200, step); n != 0 {
		t.Fatalf("normal case allocates %v times per prepare", n)
	}
}

// deliverNoCopy is deliver without the defensive body copy: the normal case's
// bodies are read before the next frame reuses the buffer.
func (tc *testCluster) deliverNoCopy() {
	for head := 0; head < len(tc.queue); head++ {
		q := &tc.queue[head]
		frame := tc.frame[:wire.HeaderSize+len(q.body)]
		q.header.Put(frame)
		copy(frame[wire.HeaderSize:], q.body)
		h, err := wire.DecodeReplicaHeader(frame, 1<<20)
		if err != nil {
			tc.t.Fatal(err)
		}
		if err := tc.driver(q.to).Step(h, frame[wire.HeaderSize:]); err != nil {
			tc.t.Fatal(err)
		}
	}
	tc.queue = tc.queue[:0]
}

// BenchmarkCoreNormalCase is the normal case of n replicas, each Ready carried
// out by a loop written by hand (rawDrain): the baseline of
// BenchmarkDriverNormalCase.
func BenchmarkCoreNormalCase(b *testing.B) {
	for _, n := range []int{1, 3, 5} {
		b.Run(fmt.Sprintf("replicas=%d", n), func(b *testing.B) {
			tc := newTestCluster(b, n)
			tc.queue = make([]queued, 0, 64)
			body := make([]byte, 128)
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for i := 0; b.Loop(); i++ {
				if _, err := tc.cores[0].Propose(Proposal{Client: wire.Uint128{Lo: 1}, Request: uint64(i + 1)}, body, uint64(i)); err != nil {
					b.Fatal(err)
				}
				tc.rawDrain(0)
				for head := 0; head < len(tc.queue); head++ {
					q := &tc.queue[head]
					frame := tc.frame[:wire.HeaderSize+len(q.body)]
					q.header.Put(frame)
					copy(frame[wire.HeaderSize:], q.body)
					h, err := wire.DecodeReplicaHeader(frame, 1<<20)
					if err != nil {
						b.Fatal(err)
					}
					if err := tc.cores[q.to].Step(h, frame[wire.HeaderSize:]); err != nil {
						b.Fatal(err)
					}
					tc.rawDrain(q.to)
				}
				tc.queue = tc.queue[:0]
				tc.trimApplied()
			}
		})
	}
}

// BenchmarkDriverNormalCase is BenchmarkCoreNormalCase through the Driver.
func BenchmarkDriverNormalCase(b *testing.B) {
	for _, n := range []int{1, 3, 5} {
		b.Run(fmt.Sprintf("replicas=%d", n), func(b *testing.B) {
			tc := newTestCluster(b, n)
			tc.queue = make([]queued, 0, 64)
			body := make([]byte, 128)
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for i := 0; b.Loop(); i++ {
				if _, err := tc.proposeThrough(0, Proposal{Client: wire.Uint128{Lo: 1}, Request: uint64(i + 1)}, body, uint64(i)); err != nil {
					b.Fatal(err)
				}
				tc.deliverNoCopy()
				tc.trimApplied()
			}
		})
	}
}

func (tc *testCluster) trimApplied() {
	if len(tc.applied[0]) > 512 {
		for k := range tc.applied {
			tc.applied[k] = tc.applied[k][:0]
		}
	}
}

// rawDrain is the Ready loop of the core's tests before the Driver, kept as the
// benchmark's baseline: writes, messages, commits, Advance.
func (tc *testCluster) rawDrain(i int) {
	c := tc.cores[i]
	for c.HasReady() {
		rd := c.Ready()
		for k := range rd.Writes {
			tc.storages[i].put(&rd.Writes[k].Header, rd.Writes[k].Body)
		}
		for k := range rd.Messages {
			m := &rd.Messages[k]
			tc.queue = append(tc.queue, queued{from: i, to: int(m.To), header: m.Header, body: m.Body})
		}
		for k := range rd.Committed {
			tc.applied[i] = append(tc.applied[i], rd.Committed[k].Op)
		}
		c.Advance()
	}
}

func TestCoreSingleReplicaRecoversFromCheckpointAndJournal(t *testing.T) {
	tc := newTestCluster(t, 1)
	for r := uint64(1); r <= 6; r++ {
		tc.propose(0, 1, r)
	}
	st := tc.storages[0]
	// A snapshot at op 4; the journal still holds ops 3..6 (3 and 4 overlap it).
	four := st.headers[4]
	rec := CoreRecovered{Checkpoint: Checkpoint{Op: 4, Identity: four.Checksum, Timestamp: four.Timestamp}}
	for op := uint64(3); op <= 6; op++ {
		rec.Headers = append(rec.Headers, st.headers[op])
	}
	c, err := NewCore(CoreConfig{Config: tc.cores[0].cfg.Config, Timing: testTiming, JournalSlots: 256, Storage: st})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Recover(rec); err != nil {
		t.Fatal(err)
	}
	tc.cores[0] = c
	tc.applied[0] = tc.applied[0][:0]
	tc.drain(0)
	if c.CommitMin() != 6 || len(tc.applied[0]) != 2 || tc.applied[0][0] != 5 {
		t.Fatalf("after recovery: applied %d, re-applied %v, want ops 5 and 6", c.CommitMin(), tc.applied[0])
	}
	op := tc.propose(0, 1, 7)
	h, _ := c.Header(op)
	if op != 7 || h.Parent != st.headers[6].Checksum {
		t.Fatalf("next op %d parent %v, want 7 chained to op 6", op, h.Parent)
	}
	// After a hole, a single replica's journal holds only the torn rest of its last
	// unsynced batch: it is truncated.
	c2, _ := NewCore(CoreConfig{Config: tc.cores[0].cfg.Config, Timing: testTiming, JournalSlots: 256, Storage: st})
	if err := c2.Recover(CoreRecovered{Headers: []wire.PrepareHeader{st.headers[1], st.headers[3]}}); err != nil {
		t.Fatal(err)
	}
	if rd := c2.Ready(); c2.Op() != 1 || !rd.Truncate || rd.TruncateAbove != 1 {
		t.Fatalf("journal {1, 3}: head %d, truncate %v above %d", c2.Op(), rd.Truncate, rd.TruncateAbove)
	}
}

func TestCoreNoteLivenessStandsInForHeartbeats(t *testing.T) {
	tc := newTestCluster(t, 3)
	tc.propose(0, 1, 1)
	tc.deliver(100)
	// The primary's heartbeats of this group are lost, but the shard hears from
	// the primary's node (another group's frames): no election.
	tc.cut[[2]int{0, 1}] = true
	tc.cut[[2]int{0, 2}] = true
	for k := 0; k < 3*int(testTiming.HeartbeatTimeoutTicks); k++ {
		for i := 1; i < 3; i++ {
			tc.cores[i].NoteLiveness(0)
		}
		tc.tick(1)
	}
	for i, c := range tc.cores {
		if c.View() != 0 || c.Status() != StatusNormal {
			t.Fatalf("replica %d: %v view %d, want Normal view 0", i, c.Status(), c.View())
		}
	}
	// An idle backup has one deadline (its heartbeat), an idle primary its next
	// Commit broadcast: a shard keeps groups ordered by NextDeadline.
	if d := tc.cores[1].NextDeadline(); d != tc.cores[1].Now()+testTiming.HeartbeatTimeoutTicks-1 && d != tc.cores[1].Now()+testTiming.HeartbeatTimeoutTicks {
		t.Fatalf("backup deadline %d at tick %d", d, tc.cores[1].Now())
	}
	if d := tc.cores[0].NextDeadline(); d <= tc.cores[0].Now() || d > tc.cores[0].Now()+testTiming.CommitBroadcastIntervalTicks {
		t.Fatalf("primary deadline %d at tick %d", d, tc.cores[0].Now())
	}
}

// TestCoreQuietWhenIdle: an idle QuietWhenIdle primary stops its Commit broadcasts
// after a few carrying an unchanged commit point and has no deadline left; a
// proposal wakes it; a backup that holds an op above its commit point is not kept
// waiting by the primary node's liveness.
func TestCoreQuietWhenIdle(t *testing.T) {
	tc := newTestCluster(t, 3)
	for _, c := range tc.cores {
		c.cfg.QuietWhenIdle = true
	}
	// The backups hear from the primary's node (its other groups, its keep-alive).
	tickAlive := func(ticks int) {
		for k := 0; k < ticks; k++ {
			tc.cores[1].NoteLiveness(0)
			tc.cores[2].NoteLiveness(0)
			tc.tick(1)
		}
	}
	tc.propose(0, 1, 1)
	tc.deliver(100)
	tickAlive(int(testTiming.CommitBroadcastIntervalTicks) * (quietAfterBroadcasts + 2))
	if d := tc.cores[0].NextDeadline(); d != 0 {
		t.Fatalf("idle quiet primary still has a deadline at %d (now %d)", d, tc.cores[0].Now())
	}
	for i := 1; i < 3; i++ {
		if got := tc.cores[i].CommitMin(); got != 1 {
			t.Fatalf("backup %d applied %d before the primary went quiet, want 1", i, got)
		}
	}
	frames := 0
	tc.onFrame = func([]byte) { frames++ }
	tickAlive(3 * int(testTiming.HeartbeatTimeoutTicks))
	tc.onFrame = nil
	if frames != 0 || tc.cores[0].NextDeadline() != 0 {
		t.Fatalf("a quiet idle group sent %d frames or armed a deadline", frames)
	}
	tc.propose(0, 1, 2)
	if tc.cores[0].NextDeadline() == 0 {
		t.Fatal("a proposal did not wake the quiet primary")
	}

	// Backup 1 gets op 2 but no Commit for it; the primary goes quiet.
	tc.cut[[2]int{0, 1}] = true
	tc.cut[[2]int{1, 0}] = true
	tc.deliver(100)
	tc.cut[[2]int{1, 0}] = false
	if tc.cores[1].Op() != 2 || tc.cores[1].CommitMax() >= 2 {
		t.Fatalf("backup 1 at op %d commit %d, want op 2 uncommitted", tc.cores[1].Op(), tc.cores[1].CommitMax())
	}
	before := tc.cores[1].View()
	tickAlive(3 * int(testTiming.HeartbeatTimeoutTicks))
	if tc.cores[1].View() == before && tc.cores[1].CommitMax() < 2 {
		t.Fatalf("backup 1 waits forever on an op above its commit point (view %d, commit %d)", tc.cores[1].View(), tc.cores[1].CommitMax())
	}
}

// TestCoreChainSkipsASilentHop: with the chain's next hop down, the first op
// commits after its retransmission to the other backup; from then on the primary
// sends each prepare to every backup itself, so an op commits without waiting for
// a timer; the hop's return restores the chain.
func TestCoreChainSkipsASilentHop(t *testing.T) {
	tc := newTestCluster(t, 3)
	for _, peer := range []int{0, 2} {
		tc.cut[[2]int{peer, 1}] = true
		tc.cut[[2]int{1, peer}] = true
	}
	tc.propose(0, 1, 1)
	tc.deliver(100)
	if tc.cores[0].CommitMax() != 0 {
		t.Fatal("op 1 committed down a chain whose next hop is cut")
	}
	tc.tick(int(testTiming.PrepareRetransmitIntervalTicks))
	if tc.cores[0].CommitMax() != 1 {
		t.Fatalf("op 1 not committed after its retransmission: commit %d", tc.cores[0].CommitMax())
	}
	tc.propose(0, 1, 2)
	tc.deliver(100)
	if tc.cores[0].CommitMax() != 2 {
		t.Fatalf("op 2 waits for a timer with the next hop silent: commit %d", tc.cores[0].CommitMax())
	}
	clear(tc.cut)
	tc.tick(int(testTiming.PrepareRetransmitIntervalTicks) * 4) // the hop catches up
	tc.propose(0, 1, 3)
	tc.deliver(100)
	if tc.cores[0].CommitMax() != 3 || tc.cores[0].normal.hopSilent {
		t.Fatalf("after the hop came back: commit %d, hop silent %v", tc.cores[0].CommitMax(), tc.cores[0].normal.hopSilent)
	}
}
