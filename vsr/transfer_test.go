package vsr

import (
	"encoding/binary"
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

// TestStateTransferCatchesUpAReplicaBeyondTheJournal: replica 2 misses more ops
// than a journal holds; repair answers RangeEvicted, and a state transfer (one
// chunk in flight, each artifact verified whole) brings it to the primary's applied
// op, after which it follows the view again.
func TestStateTransferCatchesUpAReplicaBeyondTheJournal(t *testing.T) {
	const slots = 64
	tc := newTestClusterSlots(t, 3, slots)
	for _, peer := range []int{0, 1} {
		tc.cut[[2]int{peer, 2}] = true
		tc.cut[[2]int{2, peer}] = true
	}
	for r := uint64(1); r <= 3*slots; r++ {
		tc.propose(0, 1, r)
		tc.deliver(1000)
	}
	clear(tc.cut)
	big := make([]byte, 3*StateChunkBytesMax+17) // several chunks
	for i := range big {
		big[i] = byte(i * 7)
	}
	offers, installs := 0, 0
	var installed *StateInstall
	tc.offer = func(i int, r StateRequest) (uint64, []Artifact) {
		offers++
		c := tc.cores[i]
		applied := make([]byte, 8)
		binary.LittleEndian.PutUint64(applied, c.CommitMin())
		return c.CommitMin(), []Artifact{
			{Kind: wire.ArtifactMetadataSnapshot, Frontier: c.CommitMin(), Bytes: applied},
			{Kind: wire.ArtifactClientTable, Bytes: big},
		}
	}
	tc.install = func(_ int, in *StateInstall) {
		installs++
		installed = in
		// The caller's snapshot names the prepare it was taken at.
		h, _ := tc.cores[0].Header(in.CommitOp)
		in.Identity = h.Checksum
	}
	for k := 0; k < 400 && tc.cores[2].CommitMin() < tc.cores[0].CommitMin(); k++ {
		tc.tick(1)
	}
	c := tc.cores[2]
	if installs != 1 || offers < 1 {
		t.Fatalf("%d offers, %d installs", offers, installs)
	}
	if binary.LittleEndian.Uint64(installed.Artifacts[0].Bytes) != installed.CommitOp || string(installed.Artifacts[1].Bytes) != string(big) {
		t.Fatal("installed artifacts differ from the offered ones")
	}
	if c.CommitMin() != tc.cores[0].CommitMin() || c.Transferring() {
		t.Fatalf("replica 2 applied %d (transferring %v), primary %d", c.CommitMin(), c.Transferring(), tc.cores[0].CommitMin())
	}
	op := tc.propose(0, 2, 1)
	tc.tick(int(testTiming.CommitBroadcastIntervalTicks))
	if c.CommitMin() != op {
		t.Fatalf("after the transfer replica 2 applied %d, want %d", c.CommitMin(), op)
	}
}

// TestTakeOverMovesThePrimary: a backup that takes over starts a view change to the
// next view it leads; the group follows it there, keeps every committed op, and the
// new primary commits a new one.
func TestTakeOverMovesThePrimary(t *testing.T) {
	tc := newTestClusterSlots(t, 3, 64)
	for r := uint64(1); r <= 5; r++ {
		tc.propose(0, 1, r)
		tc.deliver(1000)
	}
	committed := tc.cores[0].CommitMax()
	if tc.cores[0].TakeOver() {
		t.Fatal("the primary took over its own group")
	}
	if !tc.cores[2].TakeOver() {
		t.Fatal("a normal backup did not take over")
	}
	tc.drain(2)
	for k := 0; k < 400 && !tc.cores[2].IsPrimary(); k++ {
		tc.tick(1)
	}
	c := tc.cores[2]
	if !c.IsPrimary() || c.View() != 2 {
		t.Fatalf("replica 2 is %v in view %d, want the primary of view 2", c.Status(), c.View())
	}
	if c.CommitMax() < committed {
		t.Fatalf("the new primary's commit point %d is below the old %d", c.CommitMax(), committed)
	}
	op := tc.propose(2, 2, 1)
	for k := 0; k < 400 && tc.cores[0].CommitMin() < op; k++ {
		tc.tick(1)
	}
	if tc.cores[0].CommitMin() < op {
		t.Fatalf("replica 0 applied %d, want %d from the new primary", tc.cores[0].CommitMin(), op)
	}
}

// TestStateOfANewerViewWaitsForItsStartView: a backup still in the view of a
// primary that was cut off holds that primary's uncommitted op, and asks for a
// state (RequestTransfer) from a replica that joined the newer view, whose log
// committed another op at that number. The caller names the installed state's
// identity from the header it holds at the state's op (as a partition does): were
// the state taken, the cut-off primary's op would stand committed there. The backup
// joins the newer view first, and ends with that view's op.
func TestStateOfANewerViewWaitsForItsStartView(t *testing.T) {
	tc := newTestCluster(t, 5)
	tc.propose(0, 1, 1)
	tc.deliver(1000)
	tc.tick(int(testTiming.CommitBroadcastIntervalTicks))
	// Replicas 0 and 1 see only each other: replica 0's next op reaches replica
	// 1 and no further, and never commits.
	cutOff := func(a, b []int, on bool) {
		for _, x := range a {
			for _, y := range b {
				tc.cut[[2]int{x, y}], tc.cut[[2]int{y, x}] = on, on
			}
		}
	}
	cutOff([]int{0, 1}, []int{2, 3, 4}, true)
	stale := tc.propose(0, 2, 1)
	tc.deliver(1000)
	if h, ok := tc.cores[1].Header(stale); !ok || tc.cores[1].CommitMin() >= stale {
		t.Fatalf("replica 1 holds op %d: %v (applied %d)", stale, ok, tc.cores[1].CommitMin())
	} else if h.View != 0 {
		t.Fatalf("replica 1 holds op %d of view %d", stale, h.View)
	}
	// Replicas 2, 3 and 4 elect a view of their own and commit another op there.
	var p *Core
	for k := 0; k < 1000 && p == nil; k++ {
		tc.tick(1)
		for _, i := range []int{2, 3, 4} {
			if tc.cores[i].IsPrimary() {
				p = tc.cores[i]
			}
		}
	}
	if p == nil {
		t.Fatal("replicas 2, 3 and 4 elected no primary")
	}
	op := tc.propose(int(p.ReplicaID()), 3, 1)
	tc.deliver(1000)
	if op != stale {
		t.Fatalf("the new view's op is %d, want %d", op, stale)
	}
	want, _ := p.Header(op)
	// Replica 0 joins the new view and applies its op; replica 1 still sees only
	// replica 0, and takes it for the primary of view 0.
	cutOff([]int{0}, []int{2, 3, 4}, false)
	for k := 0; k < 200 && tc.cores[0].CommitMin() < op; k++ {
		tc.tick(1)
	}
	if tc.cores[0].CommitMin() < op || tc.cores[1].View() != 0 || tc.cores[1].Status() != StatusNormal {
		t.Fatalf("replica 0 applied %d in view %d; replica 1 is %v in view %d", tc.cores[0].CommitMin(), tc.cores[0].View(), tc.cores[1].Status(), tc.cores[1].View())
	}
	installs := 0
	tc.offer = func(i int, r StateRequest) (uint64, []Artifact) {
		c := tc.cores[i]
		return c.CommitMin(), []Artifact{{Kind: wire.ArtifactMetadataSnapshot, Frontier: c.CommitMin(), Bytes: []byte{1, 2, 3}}}
	}
	tc.install = func(i int, in *StateInstall) {
		installs++
		h, _ := tc.cores[i].Header(in.CommitOp)
		in.Identity = h.Checksum
	}
	b := tc.cores[1]
	if !b.RequestTransfer(b.CommitMin()) {
		t.Fatal("replica 1 asked for no state")
	}
	tc.drain(1)
	tc.deliver(1000)
	if h, ok := b.Header(op); b.CommitMin() >= op && (!ok || h.Checksum != want.Checksum) {
		t.Fatalf("replica 1 applied %d with op %d the cut-off primary's, not the view's", b.CommitMin(), op)
	}
	if installs != 0 {
		t.Fatalf("replica 1 installed a state of view %d from view %d", tc.cores[0].View(), b.View())
	}
	clear(tc.cut)
	for k := 0; k < 400 && b.CommitMin() < op; k++ {
		tc.tick(1)
	}
	if h, ok := b.Header(op); b.CommitMin() < op || !ok || h.Checksum != want.Checksum || b.View() != p.View() {
		t.Fatalf("replica 1 applied %d in view %d (op %d is the view's: %v), want the view %d's op", b.CommitMin(), b.View(), op, ok && h.Checksum == want.Checksum, p.View())
	}
}
