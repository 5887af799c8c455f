package segment

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
	"golang.org/x/sys/unix"
)

func openLog(t testing.TB, st Storage, cfg Config) *Log {
	t.Helper()
	l, _, err := Open(st, cfg, Hooks{})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return l
}

func newAppender(t testing.TB, l *Log, seed uint64, payload int) *appender {
	return &appender{t: t, l: l, rng: rand.New(rand.NewPCG(seed, 1)), ts: 1_000_000, tag: "t", sent: newModel(), payload: payload}
}

// storages runs a test over both storages.
func storages(t *testing.T, test func(t *testing.T, st Storage)) {
	t.Run("sim", func(t *testing.T) { test(t, NewSimDisk(1)) })
	t.Run("os", func(t *testing.T) {
		st, err := NewOSStorage(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		test(t, st)
	})
}

func TestAppendReadAcrossSegments(t *testing.T) {
	storages(t, func(t *testing.T, st Storage) {
		for _, fsync := range []bool{false, true} {
			cfg := Config{PartitionID: testPartition, SegmentSizeBytes: 4096, EnforceFsync: fsync}
			if fsync {
				// A fresh directory per configuration.
				if sim, ok := st.(*SimDisk); ok {
					_ = sim
					st = NewSimDisk(2)
				} else {
					var err error
					st, err = NewOSStorage(filepath.Join(st.(*OSStorage).Dir(), "fsync"))
					if err != nil {
						t.Fatal(err)
					}
				}
			}
			l := openLog(t, st, cfg)
			a := newAppender(t, l, 3, 40)
			for i := 0; i < 200; i++ {
				a.append(1 + a.rng.IntN(5))
			}
			l.WaitIdle()
			if !fsync {
				if l.DurableEnd() == l.NextOffset() {
					t.Fatalf("without fsync and below the save thresholds, all %d offsets are durable", l.NextOffset())
				}
				l.Sync()
				l.WaitIdle()
			}
			if l.SegmentCount() < 5 {
				t.Fatalf("expected several segments, got %d", l.SegmentCount())
			}
			if l.DurableEnd() != l.NextOffset() || l.WrittenEnd() != l.NextOffset() {
				t.Fatalf("idle log: written %d durable %d next %d", l.WrittenEnd(), l.DurableEnd(), l.NextOffset())
			}
			// Every count, from every offset, including those that straddle batches and
			// segments.
			for _, count := range []uint32{1, 2, 3, 7, 50, 10_000} {
				msgs := readAll(t, l, 0, count)
				if uint64(len(msgs)) != l.NextOffset() {
					t.Fatalf("count %d: read %d messages, log has %d", count, len(msgs), l.NextOffset())
				}
				a.sent.check(t, msgs)
			}
			for o := uint64(0); o < l.NextOffset(); o += 3 {
				var p Polled
				if err := l.Read(Query{Kind: PollOffset, Value: o, Count: 4}, &p); err != nil {
					t.Fatal(err)
				}
				msgs := decodePolled(t, &p)
				want := min(4, l.NextOffset()-o)
				if uint64(len(msgs)) != want || msgs[0].offset != o {
					t.Fatalf("read 4 at %d: got %d messages from %d", o, len(msgs), msgs[0].offset)
				}
				a.sent.check(t, msgs)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			// Reopen: a clean shutdown recovers without cutting or rebuilding anything.
			l2, report, err := Open(st, cfg, Hooks{})
			if err != nil {
				t.Fatal(err)
			}
			if len(report.Truncations) != 0 || len(report.RebuiltIndexes) != 0 || len(report.RemovedSegments) != 0 {
				t.Fatalf("clean reopen repaired something: %s", report)
			}
			if l2.NextOffset() != a.sent.next() {
				t.Fatalf("reopened at %d, want %d", l2.NextOffset(), a.sent.next())
			}
			a.sent.check(t, readAll(t, l2, 0, 100))
			if err := l2.Close(); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func (m *model) next() uint64 {
	var n uint64
	for o := range m.payloads {
		n = max(n, o+1)
	}
	return n
}

func TestReadStrategies(t *testing.T) {
	st := NewSimDisk(4)
	cfg := Config{PartitionID: testPartition, SegmentSizeBytes: 2048}
	l := openLog(t, st, cfg)
	a := newAppender(t, l, 5, 30)
	type stamped struct{ base, ts uint64 }
	var batches []stamped
	for i := 0; i < 60; i++ {
		a.ts += 10 // distinct, spaced timestamps: polls by time fall between batches
		b := makeBatch(t, l.NextOffset(), a.ts, 1+i%4, 30, "s")
		batches = append(batches, stamped{l.NextOffset(), a.ts})
		if err := l.Append(b); err != nil {
			t.Fatal(err)
		}
		a.sent.add(b)
	}
	l.WaitIdle()
	end := l.NextOffset()
	var p Polled
	read := func(q Query) []message {
		t.Helper()
		if err := l.Read(q, &p); err != nil {
			t.Fatalf("%+v: %v", q, err)
		}
		msgs := decodePolled(t, &p)
		a.sent.check(t, msgs)
		return msgs
	}

	// By timestamp: exactly at a batch's stamp, and between two batches (it starts
	// at the later one); after every batch nothing.
	for _, b := range batches {
		for _, ts := range []uint64{b.ts, b.ts - 5} {
			msgs := read(Query{Kind: PollTimestamp, Value: ts, Count: 3})
			if len(msgs) == 0 || msgs[0].offset != b.base {
				t.Fatalf("timestamp %d: got %v, want offset %d first", ts, msgs, b.base)
			}
		}
	}
	if msgs := read(Query{Kind: PollTimestamp, Value: a.ts + 1, Count: 3}); len(msgs) != 0 {
		t.Fatalf("timestamp after the last batch read %d messages", len(msgs))
	}
	if msgs := read(Query{Kind: PollFirst, Count: 5}); len(msgs) != 5 || msgs[0].offset != 0 {
		t.Fatalf("first: %v", msgs)
	}
	msgs := read(Query{Kind: PollLast, Count: 5})
	if len(msgs) != 5 || msgs[4].offset != end-1 {
		t.Fatalf("last 5: got %d ending at %d, want end %d", len(msgs), msgs[len(msgs)-1].offset, end-1)
	}
	if msgs := read(Query{Kind: PollLast, Count: 1 << 30}); uint64(len(msgs)) != end {
		t.Fatalf("last of more than stored: %d messages, want %d", len(msgs), end)
	}
	// Next: from the oldest without a stored offset, after it with one.
	if msgs := read(Query{Kind: PollNext, Count: 2, ConsumerKind: Consumer, ConsumerID: 9}); msgs[0].offset != 0 {
		t.Fatalf("next without stored offset starts at %d", msgs[0].offset)
	}
	if err := l.StoreConsumerOffset(Consumer, 9, 41); err != nil {
		t.Fatal(err)
	}
	if msgs := read(Query{Kind: PollNext, Count: 2, ConsumerKind: Consumer, ConsumerID: 9}); msgs[0].offset != 42 {
		t.Fatalf("next after 41 starts at %d", msgs[0].offset)
	}
	if msgs := read(Query{Kind: PollNext, Count: 2, ConsumerKind: ConsumerGroup, ConsumerID: 9}); msgs[0].offset != 0 {
		t.Fatalf("a group does not share a consumer's offset: starts at %d", msgs[0].offset)
	}
	// Past the end, zero count, unknown kind: empty, no error.
	for _, q := range []Query{{Kind: PollOffset, Value: end, Count: 5}, {Kind: PollOffset, Count: 0}, {Kind: 9, Count: 5}} {
		if msgs := read(q); len(msgs) != 0 {
			t.Fatalf("%+v read %d messages", q, len(msgs))
		}
	}
	// MaxBytes stops after the crossing batch but always returns one.
	if msgs := read(Query{Kind: PollOffset, Value: 0, Count: 1000, MaxBytes: 1}); len(msgs) == 0 || len(msgs) > 4 {
		t.Fatalf("max bytes 1 read %d messages", len(msgs))
	}
}

func TestAppendRefusesBadBatches(t *testing.T) {
	l := openLog(t, NewSimDisk(1), Config{PartitionID: testPartition})
	good := makeBatch(t, 0, 100, 2, 10, "x")
	cases := []struct {
		name  string
		batch []byte
		want  error
	}{
		{"short", good[:100], wire.ErrInvalidCommand},
		{"trailing bytes", append(append([]byte(nil), good...), 0), wire.ErrInvalidCommand},
		{"wrong offset", makeBatch(t, 5, 100, 2, 10, "x"), ErrOffsetMismatch},
		{"wrong partition", func() []byte {
			b := makeBatch(t, 0, 100, 2, 10, "x")
			wire.StampBatch(b, testPartition+1, 0, 100)
			return b
		}(), ErrPartitionMismatch},
	}
	for _, c := range cases {
		if err := l.Append(c.batch); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	if err := l.Append(good); err != nil {
		t.Fatal(err)
	}
	if err := l.Append(makeBatch(t, 2, 99, 1, 10, "x")); !errors.Is(err, ErrTimestampRegression) {
		t.Fatalf("older timestamp: %v", err)
	}
	l.WaitIdle()
	if l.NextOffset() != 2 {
		t.Fatalf("next offset %d after refused appends", l.NextOffset())
	}
}

func TestConsumerOffsetsPersist(t *testing.T) {
	storages(t, func(t *testing.T, st Storage) {
		cfg := Config{PartitionID: testPartition, EnforceFsync: true}
		l := openLog(t, st, cfg)
		if err := l.StoreConsumerOffset(Consumer, 1, 0); !errors.Is(err, wire.ErrInvalidOffset) {
			t.Fatalf("store into an empty log: %v", err)
		}
		a := newAppender(t, l, 1, 10)
		a.append(10)
		l.WaitIdle()
		if err := l.StoreConsumerOffset(Consumer, 1, 10); !errors.Is(err, wire.ErrInvalidOffset) {
			t.Fatalf("store above the current offset: %v", err)
		}
		for i := uint64(0); i < 5; i++ {
			if err := l.StoreConsumerOffset(Consumer, 1, i); err != nil { // stores while one is in flight coalesce
				t.Fatal(err)
			}
		}
		if err := l.StoreConsumerOffset(ConsumerGroup, 1, 8); err != nil {
			t.Fatal(err)
		}
		if err := l.StoreConsumerOffset(Consumer, 2, 9); err != nil {
			t.Fatal(err)
		}
		if err := l.DeleteConsumerOffset(Consumer, 2); err != nil {
			t.Fatal(err)
		}
		if err := l.DeleteConsumerOffset(Consumer, 2); !errors.Is(err, wire.ErrConsumerOffsetNotFound) {
			t.Fatalf("delete twice: %v", err)
		}
		l.WaitIdle()
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		l2, report, err := Open(st, cfg, Hooks{})
		if err != nil {
			t.Fatal(err)
		}
		if report.Offsets.Loaded != 2 {
			t.Fatalf("loaded %d offsets, want 2: %+v", report.Offsets.Loaded, report.Offsets)
		}
		if o, ok := l2.ConsumerOffset(Consumer, 1); !ok || o != 4 {
			t.Fatalf("consumer 1: %d %v, want 4", o, ok)
		}
		if o, ok := l2.ConsumerOffset(ConsumerGroup, 1); !ok || o != 8 {
			t.Fatalf("group 1: %d %v, want 8", o, ok)
		}
		if _, ok := l2.ConsumerOffset(Consumer, 2); ok {
			t.Fatal("deleted offset came back")
		}
		_ = l2.Close()
	})
}

func TestConsumerOffsetFilesDamaged(t *testing.T) {
	st := NewSimDisk(1)
	cfg := Config{PartitionID: testPartition}
	l := openLog(t, st, cfg)
	a := newAppender(t, l, 1, 10)
	a.append(20)
	l.WaitIdle()
	for id := uint32(1); id <= 4; id++ {
		if err := l.StoreConsumerOffset(Consumer, id, 15); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// 1 intact; 2 torn; 3 bit-rotten; 4 legacy 8-byte form pointing past the end.
	st.WriteFile("offsets/consumers/2", st.ReadFile("offsets/consumers/2")[:11])
	if err := st.FlipBit("offsets/consumers/3", 3); err != nil {
		t.Fatal(err)
	}
	legacy := make([]byte, 8)
	putU64(legacy, 500)
	st.WriteFile("offsets/consumers/4", legacy)
	l2, report, err := Open(st, cfg, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	if len(report.Offsets.Discarded) != 2 || len(report.Offsets.Clamped) != 1 {
		t.Fatalf("offsets report %+v", report.Offsets)
	}
	if o, _ := l2.ConsumerOffset(Consumer, 1); o != 15 {
		t.Fatalf("intact offset %d", o)
	}
	if o, _ := l2.ConsumerOffset(Consumer, 4); o != 19 {
		t.Fatalf("legacy offset past the end clamped to %d, want 19", o)
	}
	for _, id := range []uint32{2, 3} {
		if _, ok := l2.ConsumerOffset(Consumer, id); ok {
			t.Fatalf("damaged offset %d loaded", id)
		}
	}
	_ = l2.Close()
}

func TestOSStorageFilesOnDisk(t *testing.T) {
	dir := t.TempDir()
	st, err := NewOSStorage(dir)
	if err != nil {
		t.Fatal(err)
	}
	l := openLog(t, st, Config{PartitionID: testPartition, SegmentSizeBytes: 1024})
	a := newAppender(t, l, 1, 100)
	for i := 0; i < 20; i++ {
		a.append(2)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	names, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	if len(names) < 5 || filepath.Base(names[0]) != "00000000000000000000.log" {
		t.Fatalf("segment files %v", names)
	}
	// Each sealed segment's index has one entry per batch and matches the log size.
	for _, name := range names[:len(names)-1] {
		info, _ := os.Stat(name)
		idx, _ := os.ReadFile(name[:len(name)-len(".log")] + ".index")
		x := index(idx)
		if x.len() == 0 || checkIndex(x, x.offset(0), info.Size()) != x.len() {
			t.Fatalf("%s: index of %d entries does not check against %d bytes", name, x.len(), info.Size())
		}
	}
}

// With save thresholds far above what is in flight, appends must not stall on the
// in-flight bound: without enforce_fsync an append's slot is freed once written.
func TestHighSaveThresholdsDoNotStall(t *testing.T) {
	st := NewSimDisk(8)
	l := openLog(t, st, Config{
		PartitionID:                       testPartition,
		InflightBatchesMax:                4,
		MessagesRequiredToSave:            messagesRequiredToSaveMax,
		SizeOfMessagesRequiredToSaveBytes: sizeOfMessagesRequiredToSaveBytesMax,
	})
	a := newAppender(t, l, 8, 10)
	for i := 0; i < 100; i++ {
		a.append(1)
		st.Poll(true)
	}
	l.WaitIdle()
	if l.WrittenEnd() != 100 || l.DurableEnd() != 0 {
		t.Fatalf("written %d durable %d", l.WrittenEnd(), l.DurableEnd())
	}
	l.Sync()
	l.WaitIdle()
	if l.DurableEnd() != 100 {
		t.Fatalf("durable %d after Sync", l.DurableEnd())
	}
}

func TestPreallocateSegments(t *testing.T) {
	dir := t.TempDir()
	st, err := NewOSStorage(dir)
	if err != nil {
		t.Fatal(err)
	}
	l := openLog(t, st, Config{PartitionID: testPartition, SegmentSizeBytes: 1 << 20, PreallocateSegments: true})
	a := newAppender(t, l, 1, 100)
	b := a.append(3)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	var stat unix.Stat_t
	if err := unix.Stat(filepath.Join(dir, segmentLogName(0)), &stat); err != nil {
		t.Fatal(err)
	}
	if stat.Size != int64(len(b)) {
		t.Fatalf("preallocation changed the file size: %d, want %d", stat.Size, len(b))
	}
	if stat.Blocks*512 < 1<<20 {
		t.Skipf("filesystem did not reserve (%d blocks): fallocate unsupported here", stat.Blocks)
	}
}

// Reads that start just before a segment's first offset cross into it: the answer
// holds one record from each segment, sliced where the range cuts a batch.
func TestReadsAtSegmentBoundaries(t *testing.T) {
	st := NewSimDisk(9)
	l := openLog(t, st, Config{PartitionID: testPartition, SegmentSizeBytes: 1024})
	a := newAppender(t, l, 9, 60)
	for l.SegmentCount() < 8 {
		a.append(3)
	}
	l.WaitIdle()
	var p Polled
	for _, s := range l.segments[1:] {
		if s.index.len() == 0 {
			continue
		}
		for _, from := range []uint64{s.baseOffset - 2, s.baseOffset - 1, s.baseOffset} {
			if err := l.Read(Query{Kind: PollOffset, Value: from, Count: 3}, &p); err != nil {
				t.Fatal(err)
			}
			msgs := decodePolled(t, &p)
			a.sent.check(t, msgs)
			if len(msgs) != 3 || msgs[0].offset != from {
				t.Fatalf("read 3 at %d (segment at %d): %d messages from %d", from, s.baseOffset, len(msgs), msgs[0].offset)
			}
			segmentsTouched := map[uint64]bool{}
			for _, r := range p.Records {
				segmentsTouched[r.Segment] = true
			}
			if from < s.baseOffset && len(segmentsTouched) != 2 {
				t.Fatalf("read at %d across segment %d touched %v", from, s.baseOffset, segmentsTouched)
			}
		}
	}
}

// A save's fdatasync comes due at every append here, faster than the disk completes
// them: at most one is in flight at a time (they piled up in the kernel's io-wq
// workers, which the appends' writes share), and the saves that came due meanwhile
// are not lost: the log still becomes durable.
func TestSavesOneAtATime(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		st := NewSimDisk(seed)
		l := openLog(t, st, Config{
			PartitionID:            testPartition,
			InflightBatchesMax:     256,
			MessagesRequiredToSave: 1,
		})
		a := newAppender(t, l, seed, 10)
		syncsQueued := func() int {
			n := 0
			for _, r := range st.queue {
				if r.Op == OpSync {
					n++
				}
			}
			return n
		}
		most := 0
		for range 100 {
			a.append(1)
			most = max(most, syncsQueued())
			st.Poll(false)
			most = max(most, syncsQueued())
		}
		if most > 1 {
			t.Fatalf("seed %d: %d save fdatasyncs in flight at once, want at most 1", seed, most)
		}
		if l.Stats().Syncs == 0 {
			t.Fatalf("seed %d: no save fdatasync issued", seed)
		}
		l.WaitIdle()
		l.Sync()
		l.WaitIdle()
		if l.WrittenEnd() != 100 || l.DurableEnd() != 100 {
			t.Fatalf("seed %d: written %d durable %d, want 100", seed, l.WrittenEnd(), l.DurableEnd())
		}
	}
}
