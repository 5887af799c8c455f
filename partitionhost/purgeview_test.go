package partitionhost

import (
	"io"
	"log/slog"
	"testing"

	"github.com/iggy-shard/iggy-shard/metadata"
	"github.com/iggy-shard/iggy-shard/metaview"
	"github.com/iggy-shard/iggy-shard/partition"
	"github.com/iggy-shard/iggy-shard/wire"
)

// The view a committed metadata op carries differs from node to node: it is
// outside the prepare's checksum, and a node that learned the header from a view
// change's suffix holds it as view 0. A purge's new life used to start in that
// view: in the simulator's seed 927 (-purge, two replicas) one node started the
// life Normal in view 0 and the other in view 39, each its primary, and with a
// replication quorum of 1 the first committed alone what the second never took.
// Whatever view each node's copy of the op carries, the life has one primary.
func TestPurgedLifeHasOnePrimaryWhateverViewTheOpCarries(t *testing.T) {
	k := partition.Key{StreamID: 1, TopicID: 1, PartitionID: 0}
	opViews := [2]uint32{0, 39} // replica 0's copy from a StartView, replica 1's as prepared
	var primaries []uint8
	for replica, view := range opViews {
		h := New(Config{Shard: &stillShard{nowNs: 1_000_000_000}, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
			SystemPath: t.TempDir(), Stats: &Stats{},
			Replication: partition.Replication{ReplicaCount: 2, ReplicaID: uint8(replica)}})
		cfg := partition.ConfigFromTopicOptions(wire.TopicOptions{}, 1)
		if err := h.Store.CreateInView(k, cfg, partition.Incarnation{CreatedAtMicros: 1}, 3); err != nil {
			t.Fatal(err)
		}
		purge := []metadata.Effect{{Kind: metadata.EffectPurgeTopic, Stream: k.StreamID, Topic: k.TopicID, Generation: 1}}
		h.ViewEffects(metadata.NewStateWithoutRoot(), purge, &metaview.Entry{Op: 9, View: view, Header: metadata.Header{TimestampMicros: 100}})
		h.RunAllEffects()
		if err := h.Store.Err(k); err != nil {
			t.Fatalf("replica %d: the purge failed: %v", replica, err)
		}
		if h.Store.IsPrimary(k) {
			primaries = append(primaries, uint8(replica))
		}
		if err := h.Store.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if len(primaries) != 1 {
		t.Fatalf("replicas %v lead the purged life, want one", primaries)
	}
}
