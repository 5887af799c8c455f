package partitionhost

import (
	"bytes"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/iggy-shard/iggy-shard/partition"
	"github.com/iggy-shard/iggy-shard/partitiondir"
	"github.com/iggy-shard/iggy-shard/wire"
)

// A DeleteSegments effect whose op the store did not take (58: a backup, a view
// changing; 57: its outcome unknown) is looked at again, not logged; looked at
// after its partition went, it is over, quietly. One that keeps being refused
// past its attempts, or that a primary installed over cannot tell applied, is
// logged once as a warning, and a failure of another kind as an error.
func TestSegmentsDeleteRefusedIsAskedAgain(t *testing.T) {
	var logged bytes.Buffer
	sh := &stillShard{nowNs: 1_000_000_000}
	h := New(Config{Shard: sh, Log: slog.New(slog.NewTextHandler(&logged, nil)),
		Replication: partition.Replication{ReplicaCount: 3}})
	k := partition.Key{StreamID: 1, TopicID: 1, PartitionID: 0}

	for _, refusal := range []error{wire.ErrTransientNotAccepted, wire.ErrTransientNotCommitted} {
		(&segmentsDelete{h: h, key: k, count: 2, revision: 5, attempts: 1}).settle(refusal)
		if h.SegmentDeletesPending() != 1 {
			t.Fatalf("%d deletions to ask again after %v, want 1", h.SegmentDeletesPending(), refusal)
		}
		h.RetrySegmentDeletes() // not due yet
		if h.SegmentDeletesPending() != 1 {
			t.Fatalf("%d deletions waiting before their retry is due, want 1", h.SegmentDeletesPending())
		}
		sh.nowNs += int64(segmentsDeleteRetry)
		h.RetrySegmentDeletes() // the partition is not open here: gone
		if h.SegmentDeletesPending() != 0 {
			t.Fatalf("%d deletions left once their partition went, want 0", h.SegmentDeletesPending())
		}
	}
	if logged.Len() != 0 {
		t.Fatalf("a refused deletion logged: %s", logged.String())
	}

	(&segmentsDelete{h: h, key: k, count: 2, revision: 5, attempts: segmentsDeleteAttemptsMax}).settle(wire.ErrTransientNotAccepted)
	if h.SegmentDeletesPending() != 0 || !strings.Contains(logged.String(), "level=WARN") {
		t.Fatalf("past its attempts: %d waiting, logged %q; want none waiting and a warning", h.SegmentDeletesPending(), logged.String())
	}
	logged.Reset()
	(&segmentsDelete{h: h, key: k, count: 2, revision: 5, attempts: 1}).settle(partition.ErrDeleteSegmentsUncertain)
	if h.SegmentDeletesPending() != 0 || !strings.Contains(logged.String(), "level=WARN") {
		t.Fatalf("a primary installed over: %d waiting, logged %q; want none waiting and a warning", h.SegmentDeletesPending(), logged.String())
	}
	(&segmentsDelete{h: h, key: k, count: 2, revision: 5, attempts: 1}).settle(wire.ErrCannotDeleteFile)
	if !strings.Contains(logged.String(), "level=ERROR") {
		t.Fatalf("a deletion the partition's files refused logged %q, want an error", logged.String())
	}
}

// A DeleteSegments effect still waiting for its op when its partition is purged
// (a PurgeTopic committed after it) is over: a count resolved after the purge
// would take messages written since.
func TestSegmentsDeleteWaitingIsOverOncePurged(t *testing.T) {
	var logged bytes.Buffer
	sh := &stillShard{nowNs: 1_000_000_000}
	h := New(Config{Shard: sh, Log: slog.New(slog.NewTextHandler(&logged, nil)), SystemPath: t.TempDir(),
		Replication: partition.Replication{ReplicaCount: 3}})
	k := partition.Key{StreamID: 1, TopicID: 1, PartitionID: 0}
	dir := h.Store.Dir(k)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, purged := range []bool{false, true} {
		logged.Reset()
		generation := uint64(3)
		if purged {
			generation = 4
		}
		if err := partitiondir.WriteRecord(dir, partitiondir.Record{Generation: generation, CreatedRevision: 1, Revision: 9}); err != nil {
			t.Fatal(err)
		}
		(&segmentsDelete{h: h, key: k, count: 2, revision: 5, generation: 3}).try()
		if over := strings.Contains(logged.String(), "purged since"); over != purged {
			t.Fatalf("record of generation %d, the op's 3: over %v, want %v (logged %q)", generation, over, purged, logged.String())
		}
	}
}
