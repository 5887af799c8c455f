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
	tc.offer = func(i int, r StateRequest) {
		offers++
		c := tc.cores[i]
		applied := make([]byte, 8)
		binary.LittleEndian.PutUint64(applied, c.CommitMin())
		c.OfferState(r, c.CommitMin(), []Artifact{
			{Kind: wire.ArtifactMetadataSnapshot, Frontier: c.CommitMin(), Bytes: applied},
			{Kind: wire.ArtifactClientTable, Bytes: big},
		})
		tc.drain(i)
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
