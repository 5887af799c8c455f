package segment

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// planned reads q (verifying it), plans it and returns the bytes the read
// returned; the plan must be made.
func planned(t *testing.T, l *Log, q Query, plan *Plan) []byte {
	t.Helper()
	var polled Polled
	if err := l.Read(q, &polled); err != nil {
		t.Fatal(err)
	}
	if v := l.PlanRead(q, 0, plan); v != Planned {
		t.Fatalf("%+v: %v", q, v)
	}
	want := polled.AppendTo(nil)
	if got := planBytes(t, plan); !bytes.Equal(got, want) {
		t.Fatal("the plan differs from the read")
	}
	return want
}

// TestPlanOutlivesRetentionRolloverAndClose: a plan made, then its segments
// sealed by rollover, deleted by retention (their files unlinked) and the log
// closed (every handle closed, as a topic deletion does before it removes the
// directory): none of that waits for the plan, and the plan's descriptors
// still read the planned bytes until it is released, which closes them.
func TestPlanOutlivesRetentionRolloverAndClose(t *testing.T) {
	cfg := Config{PartitionID: testPartition, SegmentSizeBytes: 4 << 10, EnforceFsync: true}
	l, cache, dir := osLog(t, cfg, 2)
	a := newAppender(t, l, 7, 150)
	for range 12 {
		a.append(3)
	}
	l.WaitIdle()
	var open, sealed Plan
	// The open segment's last batches, and the first sealed segment's.
	last := l.NextOffset()
	openWant := planned(t, l, Query{Kind: PollOffset, Value: last - 6, Count: 6}, &open)
	sealedWant := planned(t, l, Query{Kind: PollOffset, Value: 0, Count: 6}, &sealed)
	openSegment := open.Runs[0].Segment

	for l.SegmentCount() < 6 { // rollover: the planned open segment is sealed
		a.append(3)
	}
	l.WaitIdle()
	removed, err := l.DeleteOldestSegments(l.SegmentCount() - 1)
	if err != nil || len(removed) != l.SegmentCount()+len(removed)-1 {
		t.Fatalf("retention removed %d segments: %v", len(removed), err)
	}
	for _, name := range []string{segmentLogName(0), segmentLogName(openSegment)} {
		if _, err := os.Stat(filepath.Join(dir, name)); !os.IsNotExist(err) {
			t.Fatalf("%s still on disk after retention: %v", name, err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if s := cache.Stats(); s.Open != 0 {
		t.Fatalf("the closed log left %d files open in the cache", s.Open)
	}
	for _, c := range []struct {
		plan *Plan
		want []byte
	}{{&open, openWant}, {&sealed, sealedWant}} {
		if got := planBytes(t, c.plan); !bytes.Equal(got, c.want) {
			t.Fatal("a plan's bytes changed after rollover, retention and close")
		}
		fds := planFDs(c.plan)
		if err := c.plan.Release(); err != nil {
			t.Fatal(err)
		}
		requireClosed(t, fds)
	}
}

// failingWrites is an OSStorage whose next write fails, to start a rewind.
type failingWrites struct {
	*OSStorage
	failNext bool
	failed   []*Request
}

func (s *failingWrites) Submit(r *Request) {
	if s.failNext && r.Op == OpWrite {
		s.failNext = false
		r.Result, r.Err = 0, ErrInjectedIO
		s.failed = append(s.failed, r)
		return
	}
	s.OSStorage.Submit(r)
}

func (s *failingWrites) Poll(wait bool) int {
	failed := s.failed
	s.failed = nil
	if len(failed) == 0 {
		return s.OSStorage.Poll(wait)
	}
	n := s.OSStorage.Poll(false)
	for _, r := range failed {
		r.Done(r)
	}
	return n + len(failed)
}

// TestPlanOutlivesRewind: batches written but not durable are not planned
// (a rewind may cut them); a plan of durable batches keeps its bytes through
// a failure's rewind, which truncates the file after them, and new batches
// written at the positions cut.
func TestPlanOutlivesRewind(t *testing.T) {
	inner, err := NewOSStorage(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	st := &failingWrites{OSStorage: inner}
	cfg := Config{PartitionID: testPartition, SegmentSizeBytes: 1 << 20, MessagesRequiredToSave: 1 << 20, SizeOfMessagesRequiredToSaveBytes: 1 << 30}
	l := openLog(t, st, cfg)
	a := newAppender(t, l, 9, 100)
	for range 4 {
		a.append(5)
	}
	l.WaitIdle()
	q := Query{Kind: PollOffset, Value: 0, Count: 20}
	var polled Polled
	if err := l.Read(q, &polled); err != nil {
		t.Fatal(err)
	}
	var plan Plan
	if v := l.PlanRead(q, 0, &plan); v != DeclineNotDurable {
		t.Fatalf("written, not durable: %v", v)
	}
	l.Sync()
	l.WaitIdle()
	want := planned(t, l, q, &plan)

	a.append(5) // written, not durable
	st.failNext = true
	a.tag = "lost"
	failedAt := l.NextOffset()
	if err := l.Append(makeBatch(t, failedAt, a.ts, 5, 100, a.tag)); err != nil {
		t.Fatal(err)
	}
	l.WaitIdle()
	if l.Stats().Rewinds != 1 || l.NextOffset() != failedAt {
		t.Fatalf("rewinds %d, next offset %d: want 1 and %d", l.Stats().Rewinds, l.NextOffset(), failedAt)
	}
	a.tag = "after"
	for range 3 {
		a.append(5) // new batches at the positions cut
	}
	l.WaitIdle()
	if got := planBytes(t, &plan); !bytes.Equal(got, want) {
		t.Fatal("a plan's bytes changed across a rewind")
	}
	fds := planFDs(&plan)
	if err := plan.Release(); err != nil {
		t.Fatal(err)
	}
	requireClosed(t, fds)
	_ = l.Close()
}
