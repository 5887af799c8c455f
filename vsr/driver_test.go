package vsr

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

// laterHost is a testHost whose journal writes (and, with applyLater, applies)
// complete later, as an io_uring write or a file task does: the test completes
// them (complete) in an order it picks.
type laterHost struct {
	testHost
	work *laterWork
}

type laterWork struct {
	applyLater bool
	// persisting, applying and installing are the replicas whose Ready waits
	// for its Persisted, Applied or Installed, in the order they began.
	persisting, applying, installing []int
	// writes is the number of writes of each Persist, in order.
	writes []int
	events []string
}

func (h laterHost) Persist(rd *Ready) bool {
	h.testHost.Persist(rd) // in the page cache now: the core may read it back
	h.work.persisting = append(h.work.persisting, h.i)
	h.work.writes = append(h.work.writes, len(rd.Writes))
	h.work.events = append(h.work.events, "persist")
	return false
}

func (h laterHost) Send(m *Message) {
	h.work.events = append(h.work.events, "send "+m.Header.Command.String())
	h.testHost.Send(m)
}

func (h laterHost) Apply(committed []wire.PrepareHeader) bool {
	h.testHost.Apply(committed)
	h.work.events = append(h.work.events, "apply")
	if !h.work.applyLater {
		return true
	}
	h.work.applying = append(h.work.applying, h.i)
	return false
}

func (h laterHost) Install(in *StateInstall) bool {
	h.testHost.Install(in)
	h.work.events = append(h.work.events, "install")
	if !h.work.applyLater {
		return true
	}
	h.work.installing = append(h.work.installing, h.i)
	return false
}

func (h laterHost) Advanced() { h.work.events = append(h.work.events, "advanced") }

// later makes every replica of tc complete its durable work later.
func later(tc *testCluster) *laterWork {
	w := &laterWork{}
	tc.host = func(i int) Host { return laterHost{testHost{tc: tc, i: i}, w} }
	return w
}

// complete completes the oldest pending Persist, then the oldest pending Apply;
// it reports whether there was any.
func (w *laterWork) complete(tc *testCluster) bool {
	if len(w.persisting) > 0 {
		i := w.persisting[0]
		w.persisting = w.persisting[1:]
		tc.driver(i).Persisted(nil)
		return true
	}
	if len(w.applying) > 0 {
		i := w.applying[0]
		w.applying = w.applying[1:]
		tc.driver(i).Applied()
		return true
	}
	if len(w.installing) > 0 {
		i := w.installing[0]
		w.installing = w.installing[1:]
		tc.driver(i).Installed(nil)
		return true
	}
	return false
}

// settle delivers and completes everything until quiet.
func (w *laterWork) settle(tc *testCluster) {
	for k := 0; k < 100000; k++ {
		if len(tc.queue) > 0 {
			tc.deliverOne()
			continue
		}
		if !w.complete(tc) {
			return
		}
	}
	tc.t.Fatal("no quiet after 100000 steps")
}

// TestDriverHoldsInputsWhileAReadyIsOut: while a Ready waits for its durable write,
// frames, ticks and proposals are held (no panic); once it is done they are fed in
// arrival order, and a proposal held learns its op then.
func TestDriverHoldsInputsWhileAReadyIsOut(t *testing.T) {
	tc := newTestCluster(t, 3)
	w := later(tc)
	d := tc.driver(0)
	if op := tc.propose(0, 1, 1); op != 1 || !d.ReadyOut() {
		t.Fatalf("proposal A at op %d, ready out %v", op, d.ReadyOut())
	}
	// The prepare left before the write (SendableEarly): replica 1 journals it
	// meanwhile.
	if len(tc.queue) != 1 || tc.queue[0].header.Command != wire.CommandPrepare {
		t.Fatalf("queued %+v, want the early prepare", tc.queue)
	}
	tc.deliverOne()
	// Replica 0's Ready is still out: a proposal and ticks are held.
	tc.token++
	tokenB := tc.token
	tc.proposals[tokenB%64] = testProposal{p: Proposal{Client: wire.Uint128{Lo: 2}, Request: 1, Operation: wire.OperationCreateStream}, body: []byte{2}, now: 2}
	if err := d.Propose(tokenB); err != nil {
		t.Fatal(err)
	}
	for k := 0; k < 3; k++ {
		d.Tick()
	}
	if tc.proposed[tokenB%64].token == tokenB || d.InputsHeld() != 2 || tc.cores[0].Now() != 0 {
		t.Fatalf("while the Ready was out: B reported %v, %d inputs held, clock %d", tc.proposed[tokenB%64].token == tokenB, d.InputsHeld(), tc.cores[0].Now())
	}
	w.complete(tc) // replica 0's write: B goes now, in a Ready of its own
	if got := tc.proposed[tokenB%64]; got.token != tokenB || got.op != 2 || tc.cores[0].Now() != 3 || !d.ReadyOut() {
		t.Fatalf("after the write: B %+v, clock %d, ready out %v", got, tc.cores[0].Now(), d.ReadyOut())
	}
	w.complete(tc) // replica 1's write of op 1: its PrepareOk reaches replica 0, whose Ready is out
	for len(tc.queue) > 0 && tc.queue[0].header.Command != wire.CommandPrepareOk {
		tc.deliverOne()
	}
	held := d.InputsHeld()
	tc.deliverOne()
	if d.InputsHeld() != held+1 {
		t.Fatal("the PrepareOk was not held")
	}
	w.settle(tc)
	for i, c := range tc.cores {
		if c.Op() != 2 {
			t.Errorf("replica %d: op %d, want 2", i, c.Op())
		}
	}
	if tc.cores[0].CommitMax() != 2 {
		t.Fatalf("primary commit %d, want 2", tc.cores[0].CommitMax())
	}
}

// TestDriverHeldProposalsShareOneWrite: proposals made while a Ready is out go
// into the next Ready together: one Persist for all of them.
func TestDriverHeldProposalsShareOneWrite(t *testing.T) {
	tc := newTestCluster(t, 1)
	w := later(tc)
	d := tc.driver(0)
	propose := func(r uint64) uint64 {
		tc.token++
		tc.proposals[tc.token%64] = testProposal{p: Proposal{Client: wire.Uint128{Lo: r}, Request: 1, Operation: wire.OperationCreateStream}, body: []byte{byte(r)}, now: r}
		if err := d.Propose(tc.token); err != nil {
			t.Fatal(err)
		}
		return tc.token
	}
	first := propose(1)
	held := []uint64{propose(2), propose(3), propose(4)}
	for _, token := range held {
		if tc.proposed[token%64].token == token {
			t.Fatalf("proposal %d reported while the Ready was out", token)
		}
	}
	w.settle(tc)
	if got := tc.proposed[first%64]; got.op != 1 {
		t.Fatalf("first proposal at op %d", got.op)
	}
	for k, token := range held {
		if got := tc.proposed[token%64]; got.token != token || got.op != uint64(k+2) || got.err != nil {
			t.Fatalf("held proposal %d: %+v, want op %d", k, got, k+2)
		}
	}
	if !slices.Equal(w.writes, []int{1, 3}) {
		t.Fatalf("writes per Persist %v, want [1 3]: the held proposals in one write", w.writes)
	}
	if tc.cores[0].CommitMin() != 4 {
		t.Fatalf("applied %d, want 4", tc.cores[0].CommitMin())
	}
}

// gatedHost is a testHost whose gate holds every proposal while closed.
type gatedHost struct {
	testHost
	closed *bool
	asked  *int
}

func (h gatedHost) ProposalWaits(uint64) bool {
	*h.asked++
	return *h.closed
}

// TestDriverProposalGate: a proposal the host's gate holds waits without a word
// (not proposed, not refused), and so do those behind it, though the pipeline has
// room; once the gate opens they go, in order, at the next input the Driver feeds.
func TestDriverProposalGate(t *testing.T) {
	tc := newTestCluster(t, 1)
	closed, asked := true, 0
	tc.host = func(i int) Host { return gatedHost{testHost{tc: tc, i: i}, &closed, &asked} }
	d := tc.driver(0)
	var tokens []uint64
	for r := uint64(1); r <= 3; r++ {
		tc.token++
		tc.proposals[tc.token%64] = testProposal{p: Proposal{Client: wire.Uint128{Lo: r}, Request: 1, Operation: wire.OperationCreateStream}, body: []byte{byte(r)}, now: r}
		if err := d.Propose(tc.token); err != nil {
			t.Fatal(err)
		}
		tokens = append(tokens, tc.token)
	}
	d.Tick()
	for _, token := range tokens {
		if got := tc.proposed[token%64]; got.token == token {
			t.Fatalf("proposal %d reported %+v while the gate was closed", token, got)
		}
	}
	if tc.cores[0].Op() != 0 || asked == 0 {
		t.Fatalf("op %d, gate asked %d times: want nothing proposed, the gate asked", tc.cores[0].Op(), asked)
	}
	closed = false
	d.Tick()
	for k, token := range tokens {
		if got := tc.proposed[token%64]; got.token != token || got.op != uint64(k+1) || got.err != nil {
			t.Fatalf("proposal %d after the gate opened: %+v, want op %d", k, got, k+1)
		}
	}
	if tc.cores[0].CommitMin() != 3 {
		t.Fatalf("applied %d, want 3", tc.cores[0].CommitMin())
	}
}

// TestDriverBounds: beyond FramesQueuedMax a held frame is dropped and counted;
// beyond RequestsQueuedMax a proposal is refused at once, never dropped silently.
func TestDriverBounds(t *testing.T) {
	tc := newTestCluster(t, 3)
	tc.driverConfig = DriverConfig{FramesQueuedMax: 2, RequestsQueuedMax: 2}
	w := later(tc)
	d := tc.driver(0)
	tc.propose(0, 1, 1) // its Ready waits
	ok := replicaFrame(wire.CommandPrepareOk, 1, 0, func(h *wire.GenericHeader) {
		o := h.PrepareOk()
		hd, _ := tc.cores[0].Header(1)
		o.Op, o.PrepareChecksum, o.Group = 1, hd.Checksum, wire.MetadataGroup
	})
	for k := 0; k < 3; k++ {
		if err := d.Step(&ok, nil); err != nil {
			t.Fatal(err)
		}
	}
	if got := tc.cores[0].Drops()[DropFramesQueueFull]; got != 1 {
		t.Fatalf("%d frames counted dropped for a full queue, want 1", got)
	}
	for k := 0; k < 2; k++ {
		tc.token++
		tc.proposals[tc.token%64] = testProposal{p: Proposal{Client: wire.Uint128{Lo: uint64(k + 2)}, Request: 1}, body: []byte{1}}
		if err := d.Propose(tc.token); err != nil {
			t.Fatalf("held proposal %d: %v", k, err)
		}
	}
	if err := d.Propose(99); !errors.Is(err, ErrPipelineFull) {
		t.Fatalf("a third held proposal: %v, want ErrPipelineFull", err)
	}
	w.settle(tc)
	if tc.cores[0].Op() != 3 || tc.proposed[99%64].token == 99 {
		t.Fatalf("primary op %d; the refused proposal reported: %v", tc.cores[0].Op(), tc.proposed[99%64].token == 99)
	}
}

// TestDriverKeepsFewFrameBuffers: the buffers of frames held while a Ready was out
// are kept for reuse up to FrameBuffersKeptMaxBytes, the rest let go; by default
// every small one is kept.
func TestDriverKeepsFewFrameBuffers(t *testing.T) {
	for _, keptMax := range []int{0, 2048} {
		tc := newTestCluster(t, 3)
		tc.driverConfig = DriverConfig{FrameBuffersKeptMaxBytes: keptMax}
		w := later(tc)
		d := tc.driver(0)
		tc.propose(0, 1, 1) // its Ready waits
		ok := replicaFrame(wire.CommandPrepareOk, 1, 0, func(h *wire.GenericHeader) {
			o := h.PrepareOk()
			hd, _ := tc.cores[0].Header(1)
			o.Op, o.PrepareChecksum, o.Group = 1, hd.Checksum, wire.MetadataGroup
		})
		const held = 20
		for k := 0; k < held; k++ {
			if err := d.Step(&ok, nil); err != nil {
				t.Fatal(err)
			}
		}
		w.settle(tc)
		kept := 0
		for _, b := range d.free {
			kept += cap(b)
		}
		if kept != d.freeBytes {
			t.Fatalf("keptMax %d: %d bytes in the pool, counted %d", keptMax, kept, d.freeBytes)
		}
		switch {
		case keptMax == 0 && len(d.free) != held:
			t.Fatalf("default: %d buffers kept of %d", len(d.free), held)
		case keptMax > 0 && (kept > keptMax || kept == 0):
			t.Fatalf("keptMax %d: %d bytes kept", keptMax, kept)
		}
	}
}

// TestDriverWaitsForRoom: with WaitForRoom a proposal that finds the pipeline full
// waits and goes, in order, once ops commit; without it Proposed reports
// ErrPipelineFull at once.
func TestDriverWaitsForRoom(t *testing.T) {
	for _, wait := range []bool{false, true} {
		tc := newTestCluster(t, 3)
		tc.driverConfig.WaitForRoom = wait
		tc.cut[[2]int{0, 1}], tc.cut[[2]int{0, 2}] = true, true
		for r := 1; r <= PipelineDepthDefault; r++ {
			tc.propose(0, uint64(r), 1)
		}
		var extra []uint64
		for r := 1; r <= 3; r++ {
			tc.token++
			tc.proposals[tc.token%64] = testProposal{p: Proposal{Client: wire.Uint128{Lo: uint64(100 + r)}, Request: 1}, body: []byte{1}}
			if err := tc.driver(0).Propose(tc.token); err != nil {
				t.Fatal(err)
			}
			extra = append(extra, tc.token)
		}
		for _, token := range extra {
			got := tc.proposed[token%64]
			if wait && got.token == token {
				t.Fatalf("wait: proposal %d reported %+v while the pipeline was full", token, got)
			}
			if !wait && (got.token != token || !errors.Is(got.err, ErrPipelineFull)) {
				t.Fatalf("no wait: proposal %d reported %+v, want ErrPipelineFull", token, got)
			}
		}
		clear(tc.cut)
		tc.tick(int(testTiming.PrepareRetransmitIntervalTicks) * 8)
		if !wait {
			continue
		}
		for k, token := range extra {
			if got := tc.proposed[token%64]; got.token != token || got.op != uint64(PipelineDepthDefault+1+k) {
				t.Fatalf("waiting proposal %d: %+v, want op %d", k, got, PipelineDepthDefault+1+k)
			}
		}
		if c := tc.cores[0]; c.CommitMax() != PipelineDepthDefault+3 {
			t.Fatalf("commit %d, want %d", c.CommitMax(), PipelineDepthDefault+3)
		}
	}
}

// TestDriverStopMidReady: a replica that stops (a crash) while its Ready waits for
// the disk never sends what that Ready promised; the proposals it held are told;
// a completion that comes after is ignored. A failed write stops it the same way.
func TestDriverStopMidReady(t *testing.T) {
	for _, failed := range []bool{false, true} {
		tc := newTestCluster(t, 3)
		w := later(tc)
		tc.propose(0, 1, 1)
		w.complete(tc)
		tc.deliverOne() // the prepare at replica 1: it journals (later) and acks
		d := tc.driver(1)
		if !d.ReadyOut() {
			t.Fatal("replica 1 has no Ready out")
		}
		// The forwarded prepare left early; the PrepareOk waits for the write.
		for _, q := range tc.queue {
			if q.header.Command == wire.CommandPrepareOk {
				t.Fatal("a PrepareOk left before its write")
			}
		}
		tc.token++
		if err := d.Propose(tc.token); err != nil {
			t.Fatal(err)
		}
		if failed {
			w.persisting = w.persisting[1:]
			d.Persisted(errors.New("EIO"))
			if d.Err() == nil || !strings.Contains(d.Err().Error(), "EIO") {
				t.Fatalf("after a failed write: Err %v", d.Err())
			}
		} else {
			d.Stop(nil)
			d.Persisted(nil) // late: ignored
			w.persisting = w.persisting[1:]
		}
		for _, q := range tc.queue {
			if q.header.Command == wire.CommandPrepareOk && q.from == 1 {
				t.Fatalf("failed %v: replica 1 acknowledged a write it never finished", failed)
			}
		}
		if got := tc.proposed[tc.token%64]; got.token != tc.token || got.err == nil {
			t.Fatalf("failed %v: the held proposal was told %+v", failed, got)
		}
		if err := d.Step(&tc.queue[0].header, tc.queue[0].body); err == nil {
			t.Fatal("a stopped driver took a frame")
		}
	}
}

// TestDriverOrder: a backup's Ready is carried out in the package doc's order: the
// prepare it forwards leaves before its write, its ack after; its commits apply
// after its messages; the host hears Advanced last.
func TestDriverOrder(t *testing.T) {
	tc := newTestCluster(t, 3)
	w := later(tc)
	tc.propose(0, 1, 1)
	w.settle(tc)
	tc.propose(0, 1, 2) // carries op 1's commit to the backups
	w.complete(tc)
	w.events = w.events[:0]
	tc.deliverOne() // the prepare at replica 1
	w.complete(tc)
	want := []string{"send Prepare", "persist", "send PrepareOk", "apply", "advanced"}
	if !slices.Equal(w.events, want) {
		t.Fatalf("replica 1 did %v, want %v", w.events, want)
	}
}

// TestDriverAsynchronousCluster: three replicas whose journal writes, applies and
// state installs all complete later, in a random order, with a view change in the
// middle (and a replica left a journal behind takes a state): the replicas end
// on one log, every one of them applied it, and inputs came while Readies were
// out.
func TestDriverAsynchronousCluster(t *testing.T) {
	totalInstalls := 0
	for seed := uint64(1); seed <= 20; seed++ {
		tc := newTestCluster(t, 3)
		tc.driverConfig.WaitForRoom = true
		w := later(tc)
		w.applyLater = true
		installs := 0
		tc.offer = func(i int, _ StateRequest) (uint64, []Artifact) {
			return tc.cores[i].CommitMin(), []Artifact{{Kind: wire.ArtifactMetadataSnapshot, Bytes: []byte{1}}}
		}
		tc.install = func(i int, in *StateInstall) {
			installs++
			if tc.cores[i].readyOut != true {
				t.Fatal("a state installed after its Ready's Advance")
			}
			h, _ := tc.cores[i].Header(in.CommitOp)
			in.Identity = h.Checksum
		}
		rng := rand.New(rand.NewPCG(seed, 7))
		answered := map[uint64]uint64{}
		next := uint64(0)
		propose := func() {
			primary := -1
			for i, c := range tc.cores {
				if c.IsPrimary() {
					primary = i
				}
			}
			if primary < 0 {
				return
			}
			next++
			tc.token++
			tc.proposals[tc.token%64] = testProposal{p: Proposal{Client: wire.Uint128{Lo: next}, Request: 1, Operation: wire.OperationCreateStream}, body: []byte{byte(next)}, now: next}
			_ = tc.driver(primary).Propose(tc.token)
		}
		collect := func() {
			for _, out := range tc.proposed {
				if out.token != 0 && out.err == nil && out.op != 0 {
					answered[out.token] = out.op
				}
			}
		}
		for step := 0; step < 3000; step++ {
			if step == 1000 {
				for _, to := range []int{1, 2} { // the primary goes silent
					tc.cut[[2]int{0, to}], tc.cut[[2]int{to, 0}] = true, true
				}
			}
			if step == 2000 {
				clear(tc.cut)
			}
			switch r := rng.IntN(10); {
			case r < 4 && len(tc.queue) > 0:
				k := rng.IntN(min(len(tc.queue), 3)) // some reordering
				tc.queue[0], tc.queue[k] = tc.queue[k], tc.queue[0]
				tc.deliverOne()
			case r < 7:
				w.complete(tc)
			case r < 8:
				propose()
			default:
				for i := range tc.cores {
					tc.driver(i).Tick()
				}
			}
			collect()
		}
		for k := 0; k < 200; k++ {
			w.settle(tc)
			for i := range tc.cores {
				tc.driver(i).Tick()
			}
		}
		w.settle(tc)
		collect()
		var head uint64
		for _, c := range tc.cores {
			head = max(head, c.CommitMax())
		}
		for i, c := range tc.cores {
			if c.CommitMin() != head || c.Status() != StatusNormal {
				t.Fatalf("seed %d: replica %d %v applied %d of %d", seed, i, c.Status(), c.CommitMin(), head)
			}
			for op := uint64(1); op <= head; op++ {
				// Below a replica's journal window or an installed state it holds
				// no header.
				h, ok := c.Header(op)
				want, wantOK := tc.cores[0].Header(op)
				if ok && wantOK && h.Checksum != want.Checksum {
					t.Fatalf("seed %d: replica %d holds another op %d", seed, i, op)
				}
			}
			if _, ok := c.Header(head); !ok {
				t.Fatalf("seed %d: replica %d holds no header of the head %d", seed, i, head)
			}
		}
		totalInstalls += installs
		if len(answered) < 10 || head == 0 {
			t.Fatalf("seed %d: %d proposals answered with an op, commit %d", seed, len(answered), head)
		}
		held := uint64(0)
		for i := range tc.cores {
			held += tc.driver(i).InputsHeld()
		}
		if held == 0 {
			t.Fatalf("seed %d: no input ever arrived while a Ready was out", seed)
		}
	}
	if totalInstalls == 0 {
		t.Fatal("no seed installed a state: the asynchronous install went untested")
	}
}
