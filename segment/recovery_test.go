package segment

import (
	"errors"
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

// buildLog appends batches until the log has at least segments segments, closes it
// and returns the disk and the model.
func buildLog(t *testing.T, cfg Config, segments int, seed uint64) (*SimDisk, *model) {
	t.Helper()
	st := NewSimDisk(seed)
	l := openLog(t, st, cfg)
	a := newAppender(t, l, seed, 50)
	for l.SegmentCount() < segments {
		a.append(1 + a.rng.IntN(4))
	}
	// A few batches into the last segment.
	for i := 0; i < 3; i++ {
		a.append(2)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return st, a.sent
}

func lastSegmentName(st *SimDisk) string {
	var last string
	for _, name := range st.Files() {
		if _, ok := parseSegmentName(name, ".log"); ok {
			last = name
		}
	}
	return last
}

func TestRecoveryTornTail(t *testing.T) {
	cfg := Config{PartitionID: testPartition, SegmentSizeBytes: 2048}
	st, original := buildLog(t, cfg, 4, 11)
	last := lastSegmentName(st)
	data := st.ReadFile(last)
	x := index(st.ReadFile(last[:len(last)-4] + ".index"))
	lastBatch := x.position(x.len() - 1)
	lastOffset := x.offset(x.len() - 1)

	cases := []struct {
		name   string
		damage func() []byte
		reason error
	}{
		{"torn inside the last batch", func() []byte { return data[:len(data)-7] }, ErrTornBatch},
		{"torn inside the last header", func() []byte { return data[:lastBatch+100] }, ErrTornBatch},
		{"garbage after the last batch", func() []byte {
			return append(append([]byte(nil), data...), make([]byte, 300)...)
		}, wire.ErrInvalidCommand},
		{"bit flip in the last batch", func() []byte {
			d := append([]byte(nil), data...)
			d[len(d)-3] ^= 0x10
			return d
		}, wire.ErrInvalidMessageChecksum},
		{"huge length in the last header", func() []byte {
			d := append([]byte(nil), data...)
			putU64(d[lastBatch+32:], 1<<40)
			return d
		}, ErrBatchTooLarge},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sent := original.clone()
			disk := st.Crash(1) // a copy: everything was synced at Close
			disk.WriteFile(last, c.damage())
			l, report, err := Open(disk, cfg, Hooks{})
			if err != nil {
				t.Fatal(err)
			}
			if len(report.Truncations) != 1 {
				t.Fatalf("report %s", report)
			}
			cut := report.Truncations[0]
			if !errors.Is(cut.Reason, c.reason) {
				t.Fatalf("cut reason %v, want %v", cut.Reason, c.reason)
			}
			wantEnd := lastOffset
			wantPosition := lastBatch
			if c.name == "garbage after the last batch" {
				wantEnd = sent.next()
				wantPosition = int64(len(data))
			}
			if l.NextOffset() != wantEnd || cut.Position != wantPosition || cut.Offset != wantEnd {
				t.Fatalf("recovered to %d, cut %+v; want end %d at position %d", l.NextOffset(), cut, wantEnd, wantPosition)
			}
			msgs := readAll(t, l, 0, 64)
			sent.check(t, msgs)
			if uint64(len(msgs)) != wantEnd {
				t.Fatalf("read %d messages after recovery, want %d", len(msgs), wantEnd)
			}
			// The log goes on from the cut.
			a := newAppender(t, l, 99, 20)
			a.ts = l.LastTimestamp()
			a.append(3)
			l.WaitIdle()
			sent.truncate(wantEnd)
			for o, p := range a.sent.payloads {
				sent.payloads[o], sent.stamps[o] = p, a.sent.stamps[o]
			}
			sent.check(t, readAll(t, l, 0, 64))
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestRecoveryRebuildsIndexes(t *testing.T) {
	cfg := Config{PartitionID: testPartition, SegmentSizeBytes: 2048}
	st, sent := buildLog(t, cfg, 5, 12)
	var indexes []string
	for _, name := range st.Files() {
		if _, ok := parseSegmentName(name, ".index"); ok {
			indexes = append(indexes, name)
		}
	}
	cases := []struct {
		name   string
		damage func(d *SimDisk)
	}{
		{"missing index of a sealed segment", func(d *SimDisk) { d.RemoveFile(indexes[1]) }},
		{"short index of a sealed segment", func(d *SimDisk) { d.WriteFile(indexes[2], d.ReadFile(indexes[2])[:30]) }},
		{"missing index of the last segment", func(d *SimDisk) { d.RemoveFile(indexes[len(indexes)-1]) }},
		{"index entry pointing past the log", func(d *SimDisk) {
			x := d.ReadFile(indexes[0])
			putU64(x[len(x)-8:], 1<<30)
			d.WriteFile(indexes[0], x)
		}},
		{"every index gone", func(d *SimDisk) {
			for _, name := range indexes {
				d.RemoveFile(name)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			disk := st.Crash(1)
			c.damage(disk)
			l, report, err := Open(disk, cfg, Hooks{})
			if err != nil {
				t.Fatal(err)
			}
			if len(report.RebuiltIndexes) == 0 || len(report.Truncations) != 0 || len(report.RemovedSegments) != 0 {
				t.Fatalf("report %s", report)
			}
			msgs := readAll(t, l, 0, 10)
			sent.check(t, msgs)
			if uint64(len(msgs)) != sent.next() {
				t.Fatalf("read %d messages, want %d", len(msgs), sent.next())
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			// The rebuilt indexes are on disk: a second open repairs nothing.
			l, report, err = Open(disk, cfg, Hooks{})
			if err != nil {
				t.Fatal(err)
			}
			if len(report.RebuiltIndexes) != 0 {
				t.Fatalf("second open rebuilt again: %s", report)
			}
			_ = l.Close()
		})
	}
}

func TestRecoveryOrphansAndGaps(t *testing.T) {
	cfg := Config{PartitionID: testPartition, SegmentSizeBytes: 2048}
	st, sent := buildLog(t, cfg, 4, 13)
	disk := st.Crash(1)
	disk.WriteFile(segmentIndexName(999_999), make([]byte, 48)) // orphan index
	// A segment that does not start where the previous ends, after the last one: a
	// leftover that was never acknowledged.
	disk.WriteFile(segmentLogName(sent.next()+50), makeBatch(t, sent.next()+50, 1<<40, 1, 10, "z"))
	l, report, err := Open(disk, cfg, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	if len(report.RemovedFiles) != 1 || len(report.RemovedSegments) != 1 || report.RemovedSegments[0] != sent.next()+50 {
		t.Fatalf("report %s / %+v", report, report)
	}
	if _, ok := disk.SizeOf(segmentLogName(sent.next() + 50)); ok {
		t.Fatal("gap segment still on disk")
	}
	sent.check(t, readAll(t, l, 0, 10))
	_ = l.Close()
}

// A sealed segment whose last batch is damaged loses its tail, and every later
// segment goes with it: nothing after a segment whose seal was not durable can have
// been acknowledged (recover's decision table).
func TestRecoveryCutsAfterAnUnsealedSegment(t *testing.T) {
	cfg := Config{PartitionID: testPartition, SegmentSizeBytes: 2048}
	st, sent := buildLog(t, cfg, 5, 14)
	disk := st.Crash(1)
	second := segmentLogName(index(disk.ReadFile(segmentIndexName(0))).offset(0))
	_ = second
	// Find the second segment and tear its end, with its index short (the seal chain
	// never finished).
	var logs []string
	for _, name := range disk.Files() {
		if _, ok := parseSegmentName(name, ".log"); ok {
			logs = append(logs, name)
		}
	}
	data := disk.ReadFile(logs[1])
	disk.WriteFile(logs[1], data[:len(data)-10])
	idx := disk.ReadFile(logs[1][:20] + ".index")
	disk.WriteFile(logs[1][:20]+".index", idx[:len(idx)-indexEntrySize])
	l, report, err := Open(disk, cfg, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	if len(report.Truncations) != 1 || len(report.RemovedSegments) != len(logs)-2 {
		t.Fatalf("report %s", report)
	}
	if l.SegmentCount() != 2 {
		t.Fatalf("%d segments after the cut", l.SegmentCount())
	}
	msgs := readAll(t, l, 0, 10)
	sent.check(t, msgs)
	if uint64(len(msgs)) != l.NextOffset() {
		t.Fatalf("read %d, next offset %d", len(msgs), l.NextOffset())
	}
	_ = l.Close()
}

// Rot in the middle of a sealed segment is not cut at recovery (the segment is
// trusted on its index); the read that reaches it fails, naming segment and offset,
// and serves nothing of it. Reads elsewhere still work.
func TestCorruptSealedBatchIsReportedNeverServed(t *testing.T) {
	cfg := Config{PartitionID: testPartition, SegmentSizeBytes: 4096}
	st, sent := buildLog(t, cfg, 4, 15)
	disk := st.Crash(1)
	name := segmentLogName(0)
	x := index(disk.ReadFile(segmentIndexName(0)))
	victim := x.len() / 2
	position := x.position(victim)
	// A payload byte of the victim's first frame.
	if err := disk.FlipBit(name, (position+wire.BatchHeaderSize+wire.FrameHeaderSize+2)*8+1); err != nil {
		t.Fatal(err)
	}
	l, report, err := Open(disk, cfg, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	if len(report.Truncations) != 0 {
		t.Fatalf("a sealed segment was cut: %s", report)
	}
	var p Polled
	err = l.Read(Query{Kind: PollOffset, Value: x.offset(victim), Count: 1}, &p)
	var corrupt *CorruptBatchError
	if !errors.As(err, &corrupt) || corrupt.Segment != 0 || corrupt.Position != position || corrupt.Offset != x.offset(victim) {
		t.Fatalf("read of the rotten batch: %v", err)
	}
	if !errors.Is(err, wire.ErrInvalidMessageChecksum) {
		t.Fatalf("reason %v", err)
	}
	if len(p.Records) != 0 || p.MessageCount != 0 {
		t.Fatal("a failed read left records")
	}
	// A read spanning it fails as a whole; reads beside it succeed.
	if err := l.Read(Query{Kind: PollOffset, Value: 0, Count: 1 << 20}, &p); !errors.As(err, &corrupt) {
		t.Fatalf("spanning read: %v", err)
	}
	after := x.offset(victim + 1)
	if err := l.Read(Query{Kind: PollOffset, Value: after, Count: 5}, &p); err != nil {
		t.Fatal(err)
	}
	sent.check(t, decodePolled(t, &p))
	_ = l.Close()
}

// FuzzRecoverSegment opens a partition whose only segment holds arbitrary bytes
// (after a valid prefix, so the walk gets somewhere): recovery never panics, and
// everything the log then serves is a valid, contiguous run from offset 0.
func FuzzRecoverSegment(f *testing.F) {
	valid := makeBatch(f, 0, 1000, 3, 20, "f")
	second := makeBatch(f, 3, 1001, 2, 20, "f")
	f.Add(valid, []byte{})
	f.Add(append(append([]byte(nil), valid...), second...), []byte{})
	f.Add(append(append([]byte(nil), valid...), second[:100]...), []byte{})
	f.Add(valid[:255], []byte{})
	f.Add([]byte{}, make([]byte, 24))
	f.Add(append(append([]byte(nil), valid...), make([]byte, 256)...), []byte{1, 2, 3})
	idx := index(nil).append(0, 1000, 0).append(3, 1001, int64(len(valid)))
	f.Add(append(append([]byte(nil), valid...), second...), []byte(idx))
	f.Fuzz(func(t *testing.T, log, idx []byte) {
		if len(log) > 1<<20 || len(idx) > 1<<16 {
			return
		}
		disk := NewSimDisk(1)
		disk.WriteFile(segmentLogName(0), log)
		disk.WriteFile(segmentIndexName(0), idx)
		cfg := Config{PartitionID: testPartition, SegmentSizeBytes: 1 << 20, BatchSizeMax: 1 << 20}
		l, _, err := Open(disk, cfg, Hooks{})
		if err != nil {
			t.Fatal(err)
		}
		msgs := readAll(t, l, 0, 7)
		if uint64(len(msgs)) != l.NextOffset() {
			t.Fatalf("read %d messages, next offset %d", len(msgs), l.NextOffset())
		}
		if size, _ := disk.SizeOf(segmentLogName(0)); size > int64(len(log)) {
			t.Fatalf("recovery grew the log from %d to %d bytes", len(log), size)
		}
		_ = l.Close()
	})
}

// Sealed segments keep only their bounds in memory beyond the index cache; a read
// loads the index it needs, checks it, and rebuilds a damaged one from the log. A
// damaged index over a damaged log is interior corruption: reported, never served.
func TestIndexCacheLoadsChecksAndRebuilds(t *testing.T) {
	cfg := Config{PartitionID: testPartition, SegmentSizeBytes: 2048, IndexCacheSegments: 2}
	st, sent := buildLog(t, cfg, 10, 16)
	disk := st.Crash(1)
	// A middle entry of segment 3's index points nowhere near its batch.
	var logs []string
	for _, name := range disk.Files() {
		if _, ok := parseSegmentName(name, ".log"); ok {
			logs = append(logs, name)
		}
	}
	damagedIndex := logs[3][:20] + ".index"
	x := disk.ReadFile(damagedIndex)
	putU64(x[indexEntrySize+16:], 1)
	disk.WriteFile(damagedIndex, x)

	l, report, err := Open(disk, cfg, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	if len(report.RebuiltIndexes) != 0 || len(report.Truncations) != 0 {
		t.Fatalf("recovery read sealed indexes it should trust on their last entry: %s", report)
	}
	msgs := readAll(t, l, 0, 5)
	sent.check(t, msgs)
	if uint64(len(msgs)) != sent.next() {
		t.Fatalf("read %d messages, want %d", len(msgs), sent.next())
	}
	stats := l.Stats()
	if stats.IndexLoads < 8 || stats.IndexRebuilds != 1 {
		t.Fatalf("index loads %d rebuilds %d", stats.IndexLoads, stats.IndexRebuilds)
	}
	if l.indexes.loaded > cfg.IndexCacheSegments {
		t.Fatalf("%d sealed indexes in memory, cache of %d", l.indexes.loaded, cfg.IndexCacheSegments)
	}
	_ = l.Close()

	// Now damage segment 5's index and its log in the middle.
	disk = st.Crash(2)
	victimIndex := logs[5][:20] + ".index"
	x = disk.ReadFile(victimIndex)
	putU64(x[indexEntrySize+16:], 1)
	disk.WriteFile(victimIndex, x)
	position := index(st.ReadFile(victimIndex)).position(1)
	if err := disk.FlipBit(logs[5], (position+wire.BatchHeaderSize+wire.FrameHeaderSize)*8); err != nil {
		t.Fatal(err)
	}
	l, _, err = Open(disk, cfg, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	base, _ := parseSegmentName(logs[5], ".log")
	var p Polled
	err = l.Read(Query{Kind: PollOffset, Value: base, Count: 1}, &p)
	var corrupt *CorruptBatchError
	if !errors.As(err, &corrupt) || corrupt.Segment != base || corrupt.Position != position {
		t.Fatalf("read of a segment with a damaged index and log: %v", err)
	}
	// The segments before it still read, up to it.
	next := uint64(0)
	for next < base {
		if err := l.Read(Query{Kind: PollOffset, Value: next, Count: 5}, &p); err != nil {
			t.Fatalf("read at %d before the damaged segment at %d: %v", next, base, err)
		}
		msgs := decodePolled(t, &p)
		sent.check(t, msgs)
		next = msgs[len(msgs)-1].offset + 1
	}
	if next != base {
		t.Fatalf("reads before the damaged segment ended at %d, want %d", next, base)
	}
	_ = l.Close()
}

// A read is bounded by its count and its bytes, never by the index cache: one read
// of a log with more sealed segments than IndexCacheSegments returns all of it, both
// from a live log (indexes evicted as segments sealed) and after a reopen (sealed
// indexes not loaded at all). partition's crash property polls a recovered log once
// with a count of 1<<20; reads that stopped at the cache made it look as if
// acknowledged messages were lost.
func TestReadSpansMoreSegmentsThanIndexCache(t *testing.T) {
	cfg := Config{PartitionID: testPartition, SegmentSizeBytes: 2048, IndexCacheSegments: 2}
	st := NewSimDisk(31)
	l := openLog(t, st, cfg)
	a := newAppender(t, l, 31, 50)
	for l.SegmentCount() < 12 {
		a.append(1 + a.rng.IntN(4))
	}
	a.append(2)
	l.WaitIdle()
	readWhole := func(l *Log, what string) {
		t.Helper()
		var p Polled
		if err := l.Read(Query{Kind: PollFirst, Count: 1 << 20}, &p); err != nil {
			t.Fatalf("%s: read: %v", what, err)
		}
		msgs := decodePolled(t, &p)
		a.sent.check(t, msgs)
		if uint64(len(msgs)) != l.NextOffset() {
			t.Fatalf("%s: one read of everything over %d segments returned %d of %d messages", what, l.SegmentCount(), len(msgs), l.NextOffset())
		}
		if l.indexes.loaded > cfg.IndexCacheSegments {
			t.Fatalf("%s: %d sealed indexes in memory after the read, cache of %d", what, l.indexes.loaded, cfg.IndexCacheSegments)
		}
	}
	readWhole(l, "live log")
	// A byte bound still ends the read early, after the batch that crosses it.
	var p Polled
	if err := l.Read(Query{Kind: PollFirst, Count: 1 << 20, MaxBytes: 3000}, &p); err != nil {
		t.Fatal(err)
	}
	if msgs := decodePolled(t, &p); len(msgs) == 0 || uint64(len(msgs)) >= l.NextOffset() {
		t.Fatalf("read bounded to 3000 bytes returned %d of %d messages", len(msgs), l.NextOffset())
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, st, cfg)
	readWhole(l, "reopened log")
	_ = l.Close()
}
