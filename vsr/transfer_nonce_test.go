package vsr

import (
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

// A replica restarted (or another incarnation of the group's ids) counts its
// state transfer requests anew: without a seed its first request carries the
// nonce the previous boot's first one did, and an answer to that one, late, is
// taken as the answer to this one (an offer of another state, whose chunks then
// miss its manifest). With its per-boot NonceSeed the answer is stale.
func TestStateTransferTargetOfAnotherBootIsStale(t *testing.T) {
	// What a boot counting from zero asked first, as replica 2.
	previous := wire.Uint128{Lo: 1, Hi: 3}
	for _, seed := range []uint64{0, 0x5EED_0F_B007} {
		c, err := NewCore(CoreConfig{
			Config:       Config{Cluster: wire.ClusterID("test"), ReplicaID: 2, ReplicaCount: 3, Group: wire.MetadataGroup},
			Timing:       testTiming,
			JournalSlots: 64,
			Storage:      newMemStorage(64),
			NonceSeed:    seed,
		})
		if err != nil {
			t.Fatal(err)
		}
		if !c.RequestTransfer(0) {
			t.Fatalf("seed %#x: replica 2 asks for no state", seed)
		}
		target := replicaFrame(wire.CommandStateTransferTarget, 0, 0, func(h *wire.GenericHeader) {
			s := (*wire.StateTransferTargetHeader)(headerPointer(h))
			s.Nonce, s.Group, s.Available, s.CommitOp = previous, wire.MetadataGroup, 1, 5
		})
		body := wire.AppendManifest(nil, []wire.StateArtifact{{Kind: wire.ArtifactMetadataSnapshot, SizeBytes: 4, Checksum: wire.ArtifactChecksum([]byte("last"))}})
		sealed(&target, body)
		if seed == 0 {
			// Counted from zero, the nonces of two boots collide: the old answer
			// is taken (what the seed is for).
			if err := c.Step(&target, body); err != nil || c.transfer.phase != transferFetching {
				t.Fatalf("without a seed: Step = %v, transfer %v; want the previous boot's target taken", err, c.transfer.phase)
			}
			continue
		}
		if c.transfer.nonce == previous {
			t.Fatalf("seed %#x: the first request's nonce is %v, a boot's from zero", seed, c.transfer.nonce)
		}
		expectDrop(t, c, DropStale, &target, body)
		if c.transfer.phase != transferAwaitingTarget {
			t.Fatalf("seed %#x: transfer %v after another boot's target", seed, c.transfer.phase)
		}
	}
}
