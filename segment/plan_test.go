package segment

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// osLog opens a log over a FileCache of openMax files over an OSStorage in a
// temporary directory: the storage the server's partitions have, with real
// descriptors.
func osLog(t testing.TB, cfg Config, openMax int) (*Log, *FileCache, string) {
	t.Helper()
	dir := t.TempDir()
	inner, err := NewOSStorage(dir)
	if err != nil {
		t.Fatal(err)
	}
	cache := NewFileCache(openMax)
	return openLog(t, cache.Storage(inner), cfg), cache, dir
}

// planBytes reads what a plan's runs name, through its own descriptors.
func planBytes(t testing.TB, p *Plan) []byte {
	t.Helper()
	var out []byte
	for _, r := range p.Runs {
		buf := make([]byte, r.Length)
		n, err := unix.Pread(r.FD, buf, r.Offset)
		if err != nil || int64(n) != r.Length {
			t.Fatalf("pread run %+v: %d bytes, %v", r, n, err)
		}
		out = append(out, buf...)
	}
	return out
}

// requireClosed checks that Release closed the plan's descriptors.
func requireClosed(t testing.TB, fds []int) {
	t.Helper()
	for _, fd := range fds {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); !errors.Is(err, unix.EBADF) {
			t.Fatalf("descriptor %d still open after Release (%v)", fd, err)
		}
	}
}

func planFDs(p *Plan) []int {
	var fds []int
	for _, r := range p.Runs {
		fds = append(fds, r.FD)
	}
	return fds
}

// cutIn reports whether a copied read holds a batch cut behind a recomputed
// header: what a plan must decline.
func cutIn(p *Polled) bool {
	for _, r := range p.Records {
		if int64(len(r.Header)+len(r.Frames)) != r.Length {
			return true
		}
	}
	return false
}

// TestPlanMatchesRead: for reads of every shape (from each batch's first
// offset and from inside batches, counts ending at and inside batches, across
// segments, by byte bound, every strategy, empty ones), a plan names exactly
// the bytes the copying read returns, with the same counts; it declines
// exactly the reads that cut a batch, that are empty, that touch a batch
// never verified, or that span more than PlanRunsMax segments.
func TestPlanMatchesRead(t *testing.T) {
	cfg := Config{PartitionID: testPartition, SegmentSizeBytes: 8 << 10, EnforceFsync: true}
	l, cache, _ := osLog(t, cfg, 3) // fewer files than segments: plans reopen them
	a := newAppender(t, l, 3, 120)
	var bases []uint64
	for range 80 {
		bases = append(bases, l.NextOffset())
		a.append(1 + a.rng.IntN(9))
	}
	l.WaitIdle()
	end := l.NextOffset()
	rng := rand.New(rand.NewPCG(5, 6))
	var queries []Query
	for i, base := range bases {
		next := end
		if i+1 < len(bases) {
			next = bases[i+1]
		}
		inside := base + uint64(rng.IntN(int(next-base)))
		whole := uint32(next - base)
		queries = append(queries,
			Query{Kind: PollOffset, Value: base, Count: whole},                       // one batch
			Query{Kind: PollOffset, Value: base, Count: uint32(end - base)},          // to the end
			Query{Kind: PollOffset, Value: base, Count: 1 + uint32(rng.IntN(60))},    // ends anywhere
			Query{Kind: PollOffset, Value: inside, Count: 1 + uint32(rng.IntN(60))},  // starts inside
			Query{Kind: PollOffset, Value: base, Count: 1 << 20, MaxBytes: 3 << 10},  // by bytes
			Query{Kind: PollTimestamp, Value: uint64(rng.IntN(1_000_200)), Count: 7}, // by time
		)
	}
	queries = append(queries,
		Query{Kind: PollFirst, Count: 1 << 30},
		Query{Kind: PollLast, Count: 25},
		Query{Kind: PollOffset, Value: end, Count: 10},
		Query{Kind: PollOffset, Value: 0, Count: 0},
		Query{Kind: PollTimestamp, Value: 1 << 62, Count: 10},
	)
	verdicts := map[PlanVerdict]int{}
	var plan Plan
	var polled Polled
	for i, q := range queries {
		if err := l.Read(q, &polled); err != nil {
			t.Fatalf("query %d %+v: %v", i, q, err)
		}
		want := polled.AppendTo(nil)
		before := cache.Stats()
		v := l.PlanRead(q, 0, &plan)
		verdicts[v]++
		// A plan's descriptors are its own: the cache stays within its budget
		// (reads of many segments pin more, over budget, while in flight).
		if s := cache.Stats(); s.OverBudget != before.OverBudget || s.Open > cache.OpenMax() {
			t.Fatalf("query %d %+v: planning took the file cache from %+v to %+v, budget %d", i, q, before, s, cache.OpenMax())
		}
		switch {
		case len(polled.Records) == 0:
			if v != DeclineEmpty {
				t.Fatalf("query %d %+v: empty read, verdict %v", i, q, v)
			}
		case cutIn(&polled):
			if v != DeclineCut {
				t.Fatalf("query %d %+v: a cut read, verdict %v", i, q, v)
			}
		case v == DeclineRuns:
			segments := map[uint64]bool{}
			for _, r := range polled.Records {
				segments[r.Segment] = true
			}
			if len(segments) <= PlanRunsMax {
				t.Fatalf("query %d %+v: %d segments declined for runs", i, q, len(segments))
			}
		case v != Planned:
			t.Fatalf("query %d %+v: whole verified batches, verdict %v", i, q, v)
		default:
			got := planBytes(t, &plan)
			if !bytes.Equal(got, want) {
				t.Fatalf("query %d %+v: the plan's %d bytes differ from the read's %d", i, q, len(got), len(want))
			}
			first := polled.Records[0]
			if plan.MessageCount != polled.MessageCount || plan.CurrentOffset != polled.CurrentOffset ||
				plan.FirstOffset != polled.start || plan.SizeBytes != int64(len(want)) || first.offset != plan.FirstOffset {
				t.Fatalf("query %d %+v: plan count %d current %d first %d size %d; read %d %d %d %d",
					i, q, plan.MessageCount, plan.CurrentOffset, plan.FirstOffset, plan.SizeBytes,
					polled.MessageCount, polled.CurrentOffset, polled.start, len(want))
			}
			fds := planFDs(&plan)
			if err := plan.Release(); err != nil {
				t.Fatal(err)
			}
			requireClosed(t, fds)
		}
	}
	if verdicts[Planned] < 200 || verdicts[DeclineCut] < 100 || verdicts[DeclineEmpty] < 3 || verdicts[DeclineRuns] < 1 {
		t.Fatalf("verdicts %v: the shapes did not cover every case", verdicts)
	}
	if l.Stats().Plans != uint64(verdicts[Planned]) {
		t.Fatalf("Stats.Plans %d, planned %d", l.Stats().Plans, verdicts[Planned])
	}
}

// TestPlanDeclinesUnverifiedAndSmall: a batch not read since it was written
// is copied (the copy verifies it), then planned; a plan below the caller's
// minimum is declined; and a batch the scrubber quarantined is never planned.
func TestPlanDeclinesUnverifiedAndSmall(t *testing.T) {
	cfg := Config{PartitionID: testPartition, SegmentSizeBytes: 4 << 10, EnforceFsync: true}
	l, _, dir := osLog(t, cfg, 16)
	a := newAppender(t, l, 4, 200)
	for range 40 {
		a.append(4)
	}
	l.WaitIdle()
	q := Query{Kind: PollOffset, Value: 0, Count: 8}
	var plan Plan
	if v := l.PlanRead(q, 0, &plan); v != DeclineUnverified {
		t.Fatalf("fresh batches: %v", v)
	}
	var polled Polled
	if err := l.Read(q, &polled); err != nil {
		t.Fatal(err)
	}
	size := int64(len(polled.AppendTo(nil)))
	if v := l.PlanRead(q, size+1, &plan); v != DeclineSmall {
		t.Fatalf("below the minimum: %v", v)
	}
	if v := l.PlanRead(q, size, &plan); v != Planned {
		t.Fatalf("verified, at the minimum: %v", v)
	}
	_ = plan.Release()

	// Corrupt the first batch on disk, under its verified range: the scrubber
	// finds it and no plan names it again.
	f, err := os.OpenFile(filepath.Join(dir, segmentLogName(0)), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0xff}, 300); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, _, err := l.Scrub(1<<20, nil); err == nil {
		t.Fatal("the scrubber missed the corruption")
	}
	if v := l.PlanRead(q, 0, &plan); v != DeclineUnverified {
		t.Fatalf("a quarantined batch: %v", v)
	}
	if v := l.PlanRead(Query{Kind: PollOffset, Value: 4, Count: 4}, 0, &plan); v != Planned {
		t.Fatalf("the batch after it: %v", v)
	}
	_ = plan.Release()
}

// TestPlanDeclinesWithoutDescriptors: a log over the simulated disk (no
// descriptors) never plans; it copies as before.
func TestPlanDeclinesWithoutDescriptors(t *testing.T) {
	l := openLog(t, NewSimDisk(1), Config{PartitionID: testPartition, EnforceFsync: true})
	a := newAppender(t, l, 1, 100)
	a.append(3)
	l.WaitIdle()
	readAll(t, l, 0, 10)
	var plan Plan
	if v := l.PlanRead(Query{Kind: PollFirst, Count: 3}, 0, &plan); v != DeclineDescriptor || plan.Holds() {
		t.Fatalf("verdict %v, holds %v", v, plan.Holds())
	}
	cached := NewFileCache(4).Storage(NewSimDisk(2))
	if _, err := cached.DupDescriptor(1); !errors.Is(err, ErrNoDescriptors) {
		t.Fatalf("a cache over a simulated disk gave a descriptor: %v", err)
	}
}

// TestPlanTrustWrites: with TrustWrites a batch counts as verified once
// written, so its first read is planned, and a copy of it verifies nothing.
func TestPlanTrustWrites(t *testing.T) {
	cfg := Config{PartitionID: testPartition, SegmentSizeBytes: 4 << 10, EnforceFsync: true, TrustWrites: true}
	l, _, _ := osLog(t, cfg, 16)
	a := newAppender(t, l, 5, 200)
	for range 30 {
		a.append(4)
	}
	l.WaitIdle()
	q := Query{Kind: PollOffset, Value: 0, Count: 12}
	var plan Plan
	if v := l.PlanRead(q, 0, &plan); v != Planned {
		t.Fatalf("a written batch, trusted: %v", v)
	}
	var polled Polled
	if err := l.Read(q, &polled); err != nil {
		t.Fatal(err)
	}
	if got := planBytes(t, &plan); !bytes.Equal(got, polled.AppendTo(nil)) {
		t.Fatal("the plan differs from the read")
	}
	_ = plan.Release()
	if n := l.Stats().BatchesVerified; n != 0 {
		t.Fatalf("the read verified %d trusted batches", n)
	}
}
