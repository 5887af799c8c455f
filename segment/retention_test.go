package segment

import (
	"errors"
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

// retentionLog builds a log of several sealed segments whose batches are stamped a
// second apart, so each segment's newest timestamp is known.
func retentionLog(t *testing.T, cfg Config) (*SimDisk, *Log, *model) {
	t.Helper()
	st := NewSimDisk(21)
	l := openLog(t, st, cfg)
	a := newAppender(t, l, 21, 100)
	for l.SegmentCount() < 6 {
		a.ts += 1_000_000
		b := makeBatch(t, l.NextOffset(), a.ts, 3, 100, "r")
		if err := l.Append(b); err != nil {
			t.Fatal(err)
		}
		a.sent.add(b)
	}
	l.WaitIdle()
	return st, l, a.sent
}

func checkAfterRemoval(t *testing.T, st *SimDisk, l *Log, sent *model, removed []RemovedSegment) {
	t.Helper()
	for i, r := range removed {
		if _, ok := st.SizeOf(segmentLogName(r.BaseOffset)); ok {
			t.Fatalf("removed segment %d still on disk", r.BaseOffset)
		}
		if i > 0 && r.BaseOffset != removed[i-1].EndOffset {
			t.Fatalf("removed segments not contiguous: %+v", removed)
		}
	}
	if len(removed) > 0 && l.FirstOffset() != removed[len(removed)-1].EndOffset {
		t.Fatalf("first offset %d after removing up to %d", l.FirstOffset(), removed[len(removed)-1].EndOffset)
	}
	msgs := readAll(t, l, 0, 10)
	sent.check(t, msgs)
	if uint64(len(msgs)) != l.NextOffset()-l.FirstOffset() {
		t.Fatalf("read %d messages, log holds [%d, %d)", len(msgs), l.FirstOffset(), l.NextOffset())
	}
	// First and Next polls start at the new first offset.
	var p Polled
	if err := l.Read(Query{Kind: PollFirst, Count: 1}, &p); err != nil {
		t.Fatal(err)
	}
	if m := decodePolled(t, &p); len(m) != 1 || m[0].offset != l.FirstOffset() {
		t.Fatalf("first poll after retention: %v", m)
	}
}

func TestRetentionByExpiry(t *testing.T) {
	cfg := Config{PartitionID: testPartition, SegmentSizeBytes: 2048, MessageExpiryMicros: 10_000_000}
	st, l, sent := retentionLog(t, cfg)
	first := l.segments[0]
	// Not yet: the first segment's newest batch is exactly at the expiry.
	removed, err := l.ApplyRetention(first.maxTimestamp + 10_000_000)
	if err != nil || len(removed) != 0 {
		t.Fatalf("at the expiry: removed %v, %v", removed, err)
	}
	removed, err = l.ApplyRetention(first.maxTimestamp + 10_000_001)
	if err != nil || len(removed) != 1 || removed[0].BaseOffset != 0 {
		t.Fatalf("just past the expiry: removed %v, %v", removed, err)
	}
	checkAfterRemoval(t, st, l, sent, removed)
	// Far in the future every sealed segment goes, never the open one.
	removed, err = l.ApplyRetention(1 << 62)
	if err != nil || len(removed) == 0 {
		t.Fatalf("far future: removed %v, %v", removed, err)
	}
	checkAfterRemoval(t, st, l, sent, removed)
	if l.SegmentCount() != 1 {
		t.Fatalf("%d segments left, want the open one", l.SegmentCount())
	}
	// No expiry configured: nothing goes.
	cfg.MessageExpiryMicros = 0
	_, l2, _ := retentionLog(t, cfg)
	if removed, _ := l2.ApplyRetention(1 << 62); len(removed) != 0 {
		t.Fatalf("without expiry removed %v", removed)
	}
}

func TestRetentionBySize(t *testing.T) {
	cfg := Config{PartitionID: testPartition, SegmentSizeBytes: 2048}
	st, l, sent := retentionLog(t, cfg)
	total := l.SizeBytes()
	l.cfg.MaxSizeBytes = total - 1 // one byte over: the oldest sealed segment goes
	removed, err := l.ApplyRetention(0)
	if err != nil || len(removed) != 1 {
		t.Fatalf("removed %v, %v", removed, err)
	}
	if l.SizeBytes() > l.cfg.MaxSizeBytes || l.SizeBytes() != total-removed[0].SizeBytes {
		t.Fatalf("size %d after removal, max %d", l.SizeBytes(), l.cfg.MaxSizeBytes)
	}
	checkAfterRemoval(t, st, l, sent, removed)
	l.cfg.MaxSizeBytes = 1 // everything sealed goes; the open segment stays
	removed, _ = l.ApplyRetention(0)
	checkAfterRemoval(t, st, l, sent, removed)
	if l.SegmentCount() != 1 {
		t.Fatalf("%d segments left", l.SegmentCount())
	}
}

func TestDeleteOldestSegmentsAndReopen(t *testing.T) {
	cfg := Config{PartitionID: testPartition, SegmentSizeBytes: 2048}
	st, l, sent := retentionLog(t, cfg)
	segments := l.SegmentCount()
	if _, err := l.DeleteOldestSegments(-1); !errors.Is(err, wire.ErrInvalidSegmentsCount) {
		t.Fatalf("negative count: %v", err)
	}
	removed, err := l.DeleteOldestSegments(2)
	if err != nil || len(removed) != 2 || l.SegmentCount() != segments-2 {
		t.Fatalf("removed %v, %v; %d segments", removed, err, l.SegmentCount())
	}
	checkAfterRemoval(t, st, l, sent, removed)
	removed, _ = l.DeleteOldestSegments(1000) // more than sealed: all sealed, not the open one
	checkAfterRemoval(t, st, l, sent, removed)
	if l.SegmentCount() != 1 {
		t.Fatalf("%d segments left", l.SegmentCount())
	}
	first, next := l.FirstOffset(), l.NextOffset()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, _, err = Open(st, cfg, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	if l.FirstOffset() != first || l.NextOffset() != next {
		t.Fatalf("reopened as [%d, %d), was [%d, %d)", l.FirstOffset(), l.NextOffset(), first, next)
	}
	_ = l.Close()
}

func TestPurge(t *testing.T) {
	cfg := Config{PartitionID: testPartition, SegmentSizeBytes: 2048}
	st, l, _ := retentionLog(t, cfg)
	if err := l.StoreConsumerOffset(Consumer, 3, 5); err != nil {
		t.Fatal(err)
	}
	next := l.NextOffset()
	if err := l.Purge(); err != nil {
		t.Fatal(err)
	}
	if l.SegmentCount() != 1 || l.FirstOffset() != next || l.NextOffset() != next {
		t.Fatalf("after purge: %d segments, [%d, %d), want empty at %d", l.SegmentCount(), l.FirstOffset(), l.NextOffset(), next)
	}
	if cur, ok := l.CurrentOffset(); !ok || cur != next-1 {
		t.Fatalf("a purged log's current offset %d %v, want %d (offsets stay used)", cur, ok, next-1)
	}
	var p Polled
	if err := l.Read(Query{Kind: PollFirst, Count: 10}, &p); err != nil || len(p.Records) != 0 {
		t.Fatalf("a purged log serves %d records (%v)", len(p.Records), err)
	}
	if _, ok := l.ConsumerOffset(Consumer, 3); ok {
		t.Fatal("purge kept a consumer offset")
	}
	if st.hasPrefix("offsets/consumers/") {
		t.Fatal("purge kept a consumer offset file")
	}
	if got := len(st.Files()); got != 2 {
		t.Fatalf("files after purge: %v", st.Files())
	}
	// The log goes on from where it was.
	a := newAppender(t, l, 1, 10)
	a.ts = 1 << 40
	a.append(4)
	l.WaitIdle()
	msgs := readAll(t, l, 0, 10)
	a.sent.check(t, msgs)
	if len(msgs) != 4 || msgs[0].offset != next {
		t.Fatalf("after purge read %v", msgs)
	}
	_ = l.Close()
	l, _, err := Open(st, cfg, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	if l.FirstOffset() != next || l.NextOffset() != next+4 {
		t.Fatalf("reopened purged log as [%d, %d)", l.FirstOffset(), l.NextOffset())
	}
	_ = l.Close()
}
