package segment

import (
	"errors"
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

// OldestSealedEnd resolves a count into the offset where that many oldest sealed
// segments end, and DeleteSegmentsBelow deletes exactly them; below an offset
// inside a segment, that segment stays whole; applied again, nothing more goes;
// never the open segment.
func TestDeleteSegmentsBelowTheEndOfTheOldest(t *testing.T) {
	cfg := Config{PartitionID: testPartition, SegmentSizeBytes: 2048}
	st, l, sent := retentionLog(t, cfg)
	segments := l.SegmentCount()
	if segments < 4 {
		t.Fatalf("%d segments: the test needs 4 or more", segments)
	}
	if _, _, err := l.OldestSealedEnd(-1); !errors.Is(err, wire.ErrInvalidSegmentsCount) {
		t.Fatalf("negative count: %v", err)
	}
	if end, n, err := l.OldestSealedEnd(0); end != 0 || n != 0 || err != nil {
		t.Fatalf("count 0: end %d, %d segments, %v", end, n, err)
	}
	end, n, err := l.OldestSealedEnd(2)
	if err != nil || n != 2 {
		t.Fatalf("count 2: end %d, %d segments, %v", end, n, err)
	}
	removed, err := l.DeleteSegmentsBelow(end - 1) // the second segment holds end-1: it stays
	if err != nil || len(removed) != 1 || removed[0].EndOffset > end-1 {
		t.Fatalf("below %d: removed %v, %v", end-1, removed, err)
	}
	checkAfterRemoval(t, st, l, sent, removed)
	removed, err = l.DeleteSegmentsBelow(end)
	if err != nil || len(removed) != 1 || removed[0].EndOffset != end || l.FirstOffset() != end {
		t.Fatalf("below %d: removed %v, %v; first offset %d", end, removed, err, l.FirstOffset())
	}
	checkAfterRemoval(t, st, l, sent, removed)
	if removed, err := l.DeleteSegmentsBelow(end); len(removed) != 0 || err != nil {
		t.Fatalf("below %d again: removed %v, %v", end, removed, err)
	}
	if all, n, _ := l.OldestSealedEnd(1000); n != segments-3 {
		t.Fatalf("count 1000: end %d, %d segments, want the %d sealed", all, n, segments-3)
	}
	removed, _ = l.DeleteSegmentsBelow(l.NextOffset()) // everything: all sealed, not the open one
	checkAfterRemoval(t, st, l, sent, removed)
	if l.SegmentCount() != 1 {
		t.Fatalf("%d segments left, want the open one", l.SegmentCount())
	}
	_ = l.Close()
}
