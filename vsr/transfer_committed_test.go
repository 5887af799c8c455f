package vsr

import (
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

// TestStateContradicts: the trusted headers a replica holds at a state's op and
// the op above decide; an unnamed identity, untrusted headers and headers the
// replica lacks do not.
func TestStateContradicts(t *testing.T) {
	chain, _ := forgedChain(1, 4, wire.Uint128{})
	other, _ := forgedChain(3, 3, wire.Uint128{Lo: 0xbad})
	cases := []struct {
		name     string
		held     []wire.PrepareHeader // ops 1..4 held, trusted unless untrusted says
		trustLow uint64
		op       uint64
		identity wire.Uint128
		want     bool
	}{
		{"the held op itself", chain, 1, 3, chain[2].Checksum, false},
		{"another op at a held op", chain, 1, 3, other[0].Checksum, true},
		{"another op below the held one above", chain[2:], 3, 2, other[0].Checksum, true},
		{"the parent of the held one above", chain[2:], 3, 2, chain[1].Checksum, false},
		{"an identity not named", chain, 1, 3, wire.Uint128{}, false},
		{"another op where the replica holds nothing", chain[:2], 1, 3, other[0].Checksum, false},
		{"another op at a header not trusted", chain, 5, 3, other[0].Checksum, false},
		{"another op at the head, nothing held above", chain, 1, 4, other[0].Checksum, true},
		{"an op above the head", chain, 1, 5, other[0].Checksum, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newTestCluster(t, 3).cores[1]
			for _, h := range tc.held {
				s := &c.log.slots[h.Op%uint64(len(c.log.slots))]
				*s = slot{header: h, trusted: h.Op >= tc.trustLow, body: bodyDurable}
				c.op = h.Op
			}
			if got := c.stateContradicts(tc.op, tc.identity); got != tc.want {
				t.Fatalf("stateContradicts(%d) = %v, want %v", tc.op, got, tc.want)
			}
		})
	}
}

// incarnationPair is our group (ours) with replica 1 far behind, holding the
// view's head from its StartView but none of its bodies, beside another
// incarnation of the same group ids (theirs), which committed as many ops of its
// own. Each offers its applied state as one artifact naming the cluster.
func incarnationPair(t *testing.T, ops uint64) (ours, theirs *testCluster, installs *[]StateInstall) {
	ours = behindCluster(t, ops)
	theirs = newTestClusterSlots(t, 3, 64)
	for r := uint64(1); r <= ops; r++ {
		theirs.propose(0, 7, r)
		theirs.deliver(1000)
	}
	theirs.tick(int(testTiming.CommitBroadcastIntervalTicks))
	if c := theirs.cores[0]; c.CommitMin() != ops {
		t.Fatalf("their primary applied %d of %d ops", c.CommitMin(), ops)
	}
	offer := func(name string, tc *testCluster) func(int, StateRequest) (uint64, []Artifact) {
		return func(i int, _ StateRequest) (uint64, []Artifact) {
			c := tc.cores[i]
			return c.CommitMin(), []Artifact{{Kind: wire.ArtifactMetadataSnapshot, Frontier: c.CommitMin(), Bytes: []byte(name)}}
		}
	}
	ours.offer, theirs.offer = offer("ours", ours), offer("theirs", theirs)
	installs = new([]StateInstall)
	ours.install = func(i int, in *StateInstall) {
		if i == 1 {
			*installs = append(*installs, *in)
		}
	}
	return ours, theirs, installs
}

// bridge carries the state transfer of our replica 1 to their replicas and back,
// rounds ticks of replica 1 long: its requests to a peer go to their replica of
// that id, their answers to it; every other frame of either cluster is dropped.
func bridge(t *testing.T, ours, theirs *testCluster, rounds int) {
	t.Helper()
	for k := 0; k < rounds; k++ {
		ours.drain(1)
		for _, q := range ours.queue {
			if q.from == 1 && (q.header.Command == wire.CommandRequestStateTransfer || q.header.Command == wire.CommandRequestStateChunk) {
				h := q.header
				if err := theirs.driver(q.to).Step(&h, append([]byte(nil), q.body...)); err != nil {
					t.Fatalf("their replica %d refused our %v: %v", q.to, h.Command, err)
				}
			}
		}
		ours.queue = ours.queue[:0]
		for i := range theirs.cores {
			theirs.drain(i)
		}
		for _, q := range theirs.queue {
			if q.to == 1 && (q.header.Command == wire.CommandStateTransferTarget || q.header.Command == wire.CommandStateChunk) {
				h := q.header
				if err := ours.driver(1).Step(&h, append([]byte(nil), q.body...)); err != nil {
					t.Fatalf("our replica 1 refused their %v: %v", h.Command, err)
				}
			}
		}
		theirs.queue = theirs.queue[:0]
		ours.driver(1).Tick()
	}
}

// TestOtherIncarnationsStateIsRefused: our replica 1, far behind, asks for a state
// and a replica of another incarnation of the group's ids answers: a state at the
// op our view's head holds, of another log. Its target names the identity of its
// op, which contradicts the head replica 1 trusts: the target is refused
// (DropContradictsCommitted) and nothing of it is fetched or installed. Without the
// check replica 1 installed their state and counted their op applied at its
// head's number. Replica 1 then takes our state, the head's.
func TestOtherIncarnationsStateIsRefused(t *testing.T) {
	const ops = 70
	ours, theirs, installs := incarnationPair(t, ops)
	c := ours.cores[1]
	for _, peer := range []int{0, 2} {
		delete(ours.cut, [2]int{1, peer})
	}
	head, _ := c.Header(ops)
	if !c.Transferring() {
		t.Fatalf("replica 1 at op %d applied %d asks for no state", c.Op(), c.CommitMin())
	}
	bridge(t, ours, theirs, 4*int(testTiming.RepairRetryIntervalTicks))
	if len(*installs) != 0 {
		in := (*installs)[0]
		t.Fatalf("our replica 1 installed %q's state at op %d", in.Artifacts[0].Bytes, in.CommitOp)
	}
	if c.Drops()[DropContradictsCommitted] == 0 {
		t.Fatal("their state transfer target was not refused as contradicting")
	}
	clear(ours.cut)
	for k := 0; k < 400 && c.CommitMin() < ops; k++ {
		ours.tick(1)
	}
	if len(*installs) != 1 || (*installs)[0].Identity != head.Checksum || string((*installs)[0].Artifacts[0].Bytes) != "ours" {
		t.Fatalf("replica 1's installs %+v, want one of our state at op %d", *installs, ops)
	}
	if h, ok := c.Header(ops); c.CommitMin() < ops || !ok || h.Checksum != head.Checksum {
		t.Fatalf("replica 1 applied %d, head kept %v", c.CommitMin(), ok && h.Checksum == head.Checksum)
	}
}

// TestStateContradictedWhileFetchedIsNotInstalled: our replica 1, cut off with
// nothing of the view's log, asks for a state (RequestTransfer) and another
// incarnation's replica answers: a state above everything replica 1 holds, which
// nothing refutes yet. As its last chunk arrives, and before the Ready hands the
// state out, our primary's StartView names the view's head at the state's op:
// the state is withheld (DropContradictsCommitted) and asked for again, never
// installed. Without the check at Ready replica 1 installed their state over the
// head it had just trusted.
func TestStateContradictedWhileFetchedIsNotInstalled(t *testing.T) {
	const ops = 70
	ours := cutOffCluster(t, ops)
	_, theirs, _ := incarnationPair(t, ops)
	ours.offer = func(int, StateRequest) (uint64, []Artifact) { return 0, nil }
	var installs []StateInstall
	ours.install = func(i int, in *StateInstall) { installs = append(installs, *in) }
	c := ours.cores[1]
	if c.Op() != 0 || !c.RequestTransfer(0) {
		t.Fatalf("replica 1 at op %d asks for no state", c.Op())
	}
	for _, peer := range []int{0, 2} {
		delete(ours.cut, [2]int{1, peer})
	}
	bridge(t, ours, theirs, 1) // their target
	if c.transfer.phase != transferFetching || c.transfer.commitOp != ops {
		t.Fatalf("replica 1's transfer %v at op %d, want their state at %d fetched", c.transfer.phase, c.transfer.commitOp, ops)
	}
	peer := int(c.transfer.peer)
	ask := ours.take(wire.CommandRequestStateChunk, peer)
	if err := theirs.driver(peer).Step(&ask.header, ask.body); err != nil {
		t.Fatal(err)
	}
	chunk := theirs.take(wire.CommandStateChunk, 1)
	if err := c.Step(&chunk.header, chunk.body); err != nil {
		t.Fatal(err)
	}
	if c.rd.Install == nil {
		t.Fatal("their state is not handed out for install")
	}
	ours.cores[0].sendStartView(1, wire.Uint128{})
	ours.drain(0)
	sv := ours.take(wire.CommandStartView, 1)
	if err := c.Step(&sv.header, sv.body); err != nil {
		t.Fatal(err)
	}
	head, ok := c.Header(ops)
	if !ok {
		t.Fatalf("replica 1 does not trust the view's head after its StartView (op %d)", c.Op())
	}
	ours.drain(1)
	if len(installs) != 0 {
		t.Fatalf("replica 1 installed %q's state at op %d over the view's head", installs[0].Artifacts[0].Bytes, installs[0].CommitOp)
	}
	if c.Drops()[DropContradictsCommitted] != 1 || c.transfer.phase != transferAwaitingTarget || !c.transfer.forced {
		t.Fatalf("%d refused, transfer %v (forced %v); want their state refused once, a target asked for again, still forced", c.Drops()[DropContradictsCommitted], c.transfer.phase, c.transfer.forced)
	}
	if h, ok := c.Header(ops); !ok || h.Checksum != head.Checksum || c.CommitMin() != 0 {
		t.Fatalf("replica 1 applied %d, the view's head kept %v", c.CommitMin(), ok)
	}
}

// TestStateTargetNamesItsOp: an offer names the identity of the prepare at its op
// (the offering replica's applied header), which the install carries; an offer
// from a node before the field names none (zero) and is taken unchecked, as
// before it, with the identity left to the caller.
func TestStateTargetNamesItsOp(t *testing.T) {
	for _, older := range []bool{false, true} {
		t.Run(map[bool]string{false: "named", true: "from an older node"}[older], func(t *testing.T) {
			const ops = 70
			tc := behindCluster(t, ops)
			tc.offer = func(i int, _ StateRequest) (uint64, []Artifact) {
				c := tc.cores[i]
				return c.CommitMin(), []Artifact{{Kind: wire.ArtifactMetadataSnapshot, Frontier: c.CommitMin(), Bytes: []byte("ours")}}
			}
			var installs []StateInstall
			tc.install = func(i int, in *StateInstall) {
				installs = append(installs, *in)
				if in.Identity.IsZero() {
					h, _ := tc.cores[i].Header(in.CommitOp)
					in.Identity = h.Checksum
				}
			}
			var named []wire.Uint128
			tc.onFrame = func(frame []byte) {
				if c, _ := wire.PeekCommand(frame); c != wire.CommandStateTransferTarget {
					return
				}
				g, err := wire.ViewHeader[wire.GenericHeader](frame)
				if err != nil {
					t.Fatal(err)
				}
				target := (*wire.StateTransferTargetHeader)(headerPointer(g))
				if target.Available == 0 {
					return
				}
				named = append(named, target.CommitChecksum)
				if older {
					target.CommitChecksum = wire.Uint128{}
					wire.SealFrame(g.Bytes())
				}
			}
			clear(tc.cut)
			c := tc.cores[1]
			for k := 0; k < 400 && c.CommitMin() < ops; k++ {
				tc.tick(1)
			}
			head, _ := tc.cores[0].Header(ops)
			if len(installs) != 1 || c.CommitMin() != ops {
				t.Fatalf("replica 1 applied %d after %d installs", c.CommitMin(), len(installs))
			}
			if len(named) == 0 || named[0] != head.Checksum {
				t.Fatalf("targets named %v, want the identity of op %d", named, ops)
			}
			if want := map[bool]wire.Uint128{false: head.Checksum}[older]; installs[0].Identity != want {
				t.Fatalf("the install carries identity %v, want %v", installs[0].Identity, want)
			}
			if h, ok := c.Header(ops); !ok || h.Checksum != head.Checksum {
				t.Fatal("replica 1 lost the view's head at the installed op")
			}
		})
	}
}

// lyingSource serves bytes its checksum does not name, as a peer that offered
// another's state under the same nonce, or whose source changed, would.
type lyingSource struct{ served *int }

func (lyingSource) SizeBytes() uint64 { return 64 }
func (lyingSource) Checksum() uint64  { return 1 }
func (s lyingSource) ReadAt(p []byte, _ uint64) error {
	*s.served++
	clear(p)
	return nil
}

// TestStateTransferMovesOnFromBytesThatMissTheManifest: the first peer replica 1
// asks serves an artifact whose bytes never match its manifest entry. Replica 1
// fetches it again once (a chunk may be damaged on its way), then asks the next
// peer, whose state it installs. Before, it fetched the same bytes again and
// again: each chunk reset the stall count that moves a transfer on.
func TestStateTransferMovesOnFromBytesThatMissTheManifest(t *testing.T) {
	const ops = 70
	tc := behindCluster(t, ops)
	served, liar := 0, -1
	tc.offer = func(i int, _ StateRequest) (uint64, []Artifact) {
		c := tc.cores[i]
		if liar < 0 {
			liar = i
		}
		if i == liar {
			return c.CommitMin(), []Artifact{{Kind: wire.ArtifactMetadataSnapshot, Frontier: c.CommitMin(), Source: lyingSource{&served}}}
		}
		return c.CommitMin(), []Artifact{{Kind: wire.ArtifactMetadataSnapshot, Frontier: c.CommitMin(), Bytes: []byte("ours")}}
	}
	installs := 0
	tc.install = func(int, *StateInstall) { installs++ }
	clear(tc.cut)
	c := tc.cores[1]
	for k := 0; k < 400 && c.CommitMin() < ops; k++ {
		tc.tick(1)
	}
	if installs != 1 || c.CommitMin() != ops || served != 2 {
		t.Fatalf("replica 1 applied %d after %d installs, the lying peer %d served its bytes %d times; want one install, two fetches", c.CommitMin(), installs, liar, served)
	}
}
