package partition

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/segment"
	"github.com/iggy-shard/iggy-shard/wire"
	"golang.org/x/sys/unix"
)

// osStore is a store of real files (descriptors to plan with) holding
// testKey, whose plans start at any size.
func osStore(t testing.TB, cfg Config, plans PlanConfig) *Store {
	t.Helper()
	if plans.ReplyBytesMin == 0 {
		plans.ReplyBytesMin = 1
	}
	s := NewReplicatedStore(t.TempDir(), OSStorages{}, Replication{Plans: plans})
	if err := s.Create(testKey, cfg, 1234); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// copyPoll serves req by Poll and returns the reply body.
func copyPoll(t testing.TB, s *Store, req PollRequest) []byte {
	t.Helper()
	var res PollResult
	var rec pollRecorder
	if err := s.Poll(testKey, req, &res, &rec, 1); err != nil {
		t.Fatal(err)
	}
	s.WaitIdle()
	if rec.calls != 1 || rec.err != nil {
		t.Fatalf("poll: %d completions, %v", rec.calls, rec.err)
	}
	return AppendPollReply(nil, &res)
}

// planBody is what a client receives for a plan: the prefix, then the runs
// read through the plan's descriptors.
func planBody(t testing.TB, plan *PollPlan) []byte {
	t.Helper()
	body := append([]byte(nil), plan.Prefix()...)
	for _, r := range plan.Runs() {
		buf := make([]byte, r.Length)
		if n, err := unix.Pread(r.FD, buf, r.Offset); err != nil || int64(n) != r.Length {
			t.Fatalf("pread run %+v: %d, %v", r, n, err)
		}
		body = append(body, buf...)
	}
	if len(body) != plan.ReplySizeBytes() {
		t.Fatalf("plan body %d bytes, ReplySizeBytes %d", len(body), plan.ReplySizeBytes())
	}
	return body
}

// servePoll serves req as the server will: by a plan when PlanPoll makes one
// (released once read), else by Poll.
func servePoll(t testing.TB, s *Store, req PollRequest, plan *PollPlan) ([]byte, bool) {
	t.Helper()
	planned, err := s.PlanPoll(testKey, req, plan, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !planned {
		if plan.Held() || len(plan.Runs()) != 0 {
			t.Fatal("a declined plan holds descriptors")
		}
		return copyPoll(t, s, req), false
	}
	body := planBody(t, plan)
	if err := plan.Release(); err != nil {
		t.Fatal(err)
	}
	return body, true
}

// sendBatches sends n batches of 1..12 messages of 50..400 bytes.
func sendBatches(t testing.TB, s *Store, rng *rand.Rand, n int) (bases []uint64, end uint64) {
	for range n {
		count := 1 + rng.IntN(12)
		base := mustSend(t, s, testKey, makeBatch(t, end, count, 50+rng.IntN(350)), 1000+end)
		bases = append(bases, base)
		end = base + uint64(count)
	}
	return bases, end
}

// TestPlanPollMatchesPoll: for polls of every shape (from batch starts and
// from inside batches, counts ending at and inside batches, across segments,
// bounded by bytes, by timestamp, first, last, empty, and next with
// auto-commit), with and without enforce_fsync, a client receives the same
// bytes whether the poll was planned or copied, and auto-commit stores the
// same offsets.
func TestPlanPollMatchesPoll(t *testing.T) {
	for _, fsync := range []bool{true, false} {
		cfg := Config{SegmentSizeBytes: 16 << 10, PartitionsCount: 1, EnforceFsync: fsync}
		s := osStore(t, cfg, PlanConfig{})
		rng := rand.New(rand.NewPCG(11, 12))
		bases, end := sendBatches(t, s, rng, 150)
		alice := Consumer{Kind: wire.ConsumerSingle, ID: 1}
		strategy := func(kind wire.PollingKind, value uint64) wire.PollingStrategy {
			return wire.PollingStrategy{Kind: kind, Value: value}
		}
		var reqs []PollRequest
		for i, base := range bases {
			next := end
			if i+1 < len(bases) {
				next = bases[i+1]
			}
			inside := base + uint64(rng.IntN(int(next-base)))
			reqs = append(reqs,
				PollRequest{Consumer: alice, Strategy: strategy(wire.PollingOffset, base), Count: uint32(next - base)},
				PollRequest{Consumer: alice, Strategy: strategy(wire.PollingOffset, base), Count: uint32(end - base)},
				PollRequest{Consumer: alice, Strategy: strategy(wire.PollingOffset, base), Count: 1 + uint32(rng.IntN(80))},
				PollRequest{Consumer: alice, Strategy: strategy(wire.PollingOffset, inside), Count: 1 + uint32(rng.IntN(80))},
				PollRequest{Consumer: alice, Strategy: strategy(wire.PollingOffset, base), Count: 1 << 20, MaxBytes: 5 << 10},
				PollRequest{Consumer: alice, Strategy: strategy(wire.PollingTimestamp, 1000+uint64(rng.IntN(int(end)))), Count: 10},
			)
		}
		reqs = append(reqs,
			PollRequest{Consumer: alice, Strategy: strategy(wire.PollingFirst, 0), Count: 1 << 30},
			PollRequest{Consumer: alice, Strategy: strategy(wire.PollingLast, 0), Count: 30},
			PollRequest{Consumer: alice, Strategy: strategy(wire.PollingOffset, end), Count: 10},
			PollRequest{Consumer: alice, Strategy: strategy(wire.PollingOffset, 0), Count: 0},
			PollRequest{Consumer: alice, Strategy: strategy(wire.PollingTimestamp, 1<<60), Count: 10},
		)
		var plan PollPlan
		planned := 0
		for i, req := range reqs {
			want := copyPoll(t, s, req) // and verifies what it reads
			got, wasPlanned := servePoll(t, s, req, &plan)
			if !bytes.Equal(got, want) {
				t.Fatalf("fsync=%v poll %d %+v (planned %v): %d bytes, the copy %d", fsync, i, req, wasPlanned, len(got), len(want))
			}
			if wasPlanned {
				planned++
			}
		}

		// Next with auto-commit: bob is served as the server will, carol by
		// copies only; both see the same replies and store the same offsets.
		bob := Consumer{Kind: wire.ConsumerSingle, ID: 2}
		carol := Consumer{Kind: wire.ConsumerGroup, ID: 3}
		steps := 0
		for ; steps < 1000; steps++ {
			count := 1 + uint32(rng.IntN(40))
			want := copyPoll(t, s, PollRequest{Consumer: carol, Strategy: strategy(wire.PollingNext, 0), Count: count, AutoCommit: true})
			got, wasPlanned := servePoll(t, s, PollRequest{Consumer: bob, Strategy: strategy(wire.PollingNext, 0), Count: count, AutoCommit: true}, &plan)
			if !bytes.Equal(got, want) {
				t.Fatalf("fsync=%v next step %d (planned %v): replies differ", fsync, steps, wasPlanned)
			}
			if wasPlanned {
				planned++
			}
			b, bok, _ := s.ConsumerOffset(testKey, bob)
			c, cok, _ := s.ConsumerOffset(testKey, carol)
			if bok != cok || b.StoredOffset != c.StoredOffset {
				t.Fatalf("fsync=%v next step %d: stored offsets %v/%v and %v/%v", fsync, steps, b.StoredOffset, bok, c.StoredOffset, cok)
			}
			if len(want) == wire.PolledMessagesPrefixSize {
				break
			}
		}
		stats := s.PlanStats()
		t.Logf("fsync=%v: %d polls, %d planned; verdicts %v", fsync, len(reqs)+steps, planned, stats.Verdicts)
		if planned < 200 || stats.Verdicts[segment.DeclineCut] < 100 || stats.Verdicts[segment.DeclineEmpty] < 3 {
			t.Fatalf("fsync=%v: verdicts %v: the shapes did not cover the cases", fsync, stats.Verdicts)
		}
		if stats.Held != 0 || stats.Released != uint64(planned) {
			t.Fatalf("fsync=%v: %d held, %d released, %d planned", fsync, stats.Held, stats.Released, planned)
		}
	}
}

// heldPlan makes a plan of the first batches, about kib KiB of them (after a
// copy verified them), and returns the body a client would receive.
func heldPlan(t testing.TB, s *Store, kib int64, plan *PollPlan, nowNs int64) []byte {
	t.Helper()
	req := PollRequest{Strategy: wire.PollingStrategy{Kind: wire.PollingFirst}, Count: 1 << 20, MaxBytes: kib << 10}
	want := copyPoll(t, s, req)
	planned, err := s.PlanPoll(testKey, req, plan, nowNs)
	if err != nil || !planned {
		t.Fatalf("planned %v, %v", planned, err)
	}
	if got := planBody(t, plan); !bytes.Equal(got, want) {
		t.Fatal("the plan differs from the copy")
	}
	return want
}

func fdsOf(plan *PollPlan) []int {
	var fds []int
	for _, r := range plan.Runs() {
		fds = append(fds, r.FD)
	}
	return fds
}

func requireFDsClosed(t testing.TB, fds []int) {
	t.Helper()
	for _, fd := range fds {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); !errors.Is(err, unix.EBADF) {
			t.Fatalf("descriptor %d open after Release (%v)", fd, err)
		}
	}
}

// TestPlanPollHeldThroughRetentionPurgeAndDeletion: plans held while
// retention deletes their segments, the partition is purged, and then
// deleted with its directory (a topic deletion): each of those proceeds at
// once, and every plan still sends the bytes it planned until released.
func TestPlanPollHeldThroughRetentionPurgeAndDeletion(t *testing.T) {
	cfg := Config{SegmentSizeBytes: 8 << 10, PartitionsCount: 1, EnforceFsync: true}
	s := osStore(t, cfg, PlanConfig{})
	rng := rand.New(rand.NewPCG(3, 4))
	sendBatches(t, s, rng, 60)
	var retained, purged PollPlan
	retainedWant := heldPlan(t, s, 20, &retained, 0)
	removed, err := s.DeleteSegments(testKey, 100)
	if err != nil || len(removed) == 0 {
		t.Fatalf("retention removed %d segments: %v", len(removed), err)
	}
	if info, _ := s.Info(testKey); info.SegmentsCount != 1 {
		t.Fatalf("%d segments left", info.SegmentsCount)
	}
	sendBatches(t, s, rng, 30)
	if err := s.Purge(testKey, 1); err != nil {
		t.Fatal(err)
	}
	sendBatches(t, s, rng, 30)
	purgedWant := heldPlan(t, s, 30, &purged, 0)
	dir := s.Dir(testKey)
	if err := s.Delete(testKey); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the deleted partition's directory: %v", err)
	}
	if s.PlanStats().Held != 2 {
		t.Fatalf("%d plans held", s.PlanStats().Held)
	}
	for _, c := range []struct {
		plan *PollPlan
		want []byte
	}{{&retained, retainedWant}, {&purged, purgedWant}} {
		if got := planBody(t, c.plan); !bytes.Equal(got, c.want) {
			t.Fatal("a held plan's bytes changed")
		}
		fds := fdsOf(c.plan)
		if err := c.plan.Release(); err != nil {
			t.Fatal(err)
		}
		requireFDsClosed(t, fds)
	}
	if st := s.PlanStats(); st.Held != 0 || st.Released != 2 {
		t.Fatalf("after release: %+v", st)
	}
}

// TestPlanPollBounds: at most PlansMax plans are held, and a poll past it is
// copied, never refused or made to wait; a plan's deadline is PinMax after
// it was made; plans are released from other goroutines (the connection's
// shard); a plan never released keeps its place and its descriptors (its
// holder must release it) while retention goes on; and over thousands of
// plans made and released no descriptor leaks.
func TestPlanPollBounds(t *testing.T) {
	cfg := Config{SegmentSizeBytes: 8 << 10, PartitionsCount: 1, EnforceFsync: true}
	pinMax := time.Second
	s := osStore(t, cfg, PlanConfig{PlansMax: 3, PinMax: pinMax})
	rng := rand.New(rand.NewPCG(5, 6))
	sendBatches(t, s, rng, 60)
	openBefore := openDescriptors(t)

	var plans [3]PollPlan
	for i := range plans {
		heldPlan(t, s, 10, &plans[i], int64(i)*int64(time.Millisecond))
	}
	req := PollRequest{Strategy: wire.PollingStrategy{Kind: wire.PollingFirst}, Count: 1 << 20, MaxBytes: 10 << 10}
	var extra PollPlan
	if planned, err := s.PlanPoll(testKey, req, &extra, 0); planned || err != nil {
		t.Fatalf("a fourth plan: %v, %v", planned, err)
	}
	if s.PlanStats().Full != 1 {
		t.Fatalf("stats %+v", s.PlanStats())
	}
	copyPoll(t, s, req) // the copying path serves it

	last := &plans[2]
	if last.DeadlineNs() != int64(pinMax)+2*int64(time.Millisecond) || last.Overdue(last.DeadlineNs()-1) || !last.Overdue(last.DeadlineNs()) {
		t.Fatalf("deadline %d, PinMax %v", last.DeadlineNs(), pinMax)
	}
	// plans[0] is never released. Retention goes on under it.
	sendBatches(t, s, rng, 60)
	if removed, err := s.DeleteSegments(testKey, 1000); err != nil || len(removed) == 0 {
		t.Fatalf("retention under a held plan: %d removed, %v", len(removed), err)
	}
	released := make(chan error, 2)
	for i := 1; i < 3; i++ {
		go func(p *PollPlan) { released <- p.Release() }(&plans[i])
	}
	for range 2 {
		if err := <-released; err != nil {
			t.Fatal(err)
		}
	}
	// Many plans, made and released, through the two places left.
	sendBatches(t, s, rng, 20)
	var cycle [2]PollPlan
	copyPoll(t, s, PollRequest{Strategy: wire.PollingStrategy{Kind: wire.PollingFirst}, Count: 1 << 20, MaxBytes: 20 << 10})
	for i := range 2000 {
		p := &cycle[i%2]
		if p.Held() {
			if err := p.Release(); err != nil {
				t.Fatal(err)
			}
		}
		req := PollRequest{Strategy: wire.PollingStrategy{Kind: wire.PollingFirst}, Count: 1 << 20, MaxBytes: int64(1+i%20) << 10}
		if planned, err := s.PlanPoll(testKey, req, p, int64(i)); err != nil || !planned {
			t.Fatalf("cycle %d: planned %v, %v", i, planned, err)
		}
	}
	for i := range cycle {
		_ = cycle[i].Release()
	}
	if st := s.PlanStats(); st.Held != 1 || st.Verdicts[segment.Planned] < 2000 {
		t.Fatalf("after the cycle: %+v", st)
	}
	if err := plans[0].Release(); err != nil {
		t.Fatal(err)
	}
	if after := openDescriptors(t); after > openBefore {
		t.Fatalf("%d descriptors open, %d before the plans", after, openBefore)
	}
}

// openDescriptors counts this process's open descriptors.
func openDescriptors(t testing.TB) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd:", err)
	}
	return len(entries)
}

// TestPlanPollAllocatesNothing: a planned poll, auto-commit included, and its
// release allocate nothing once the plan has grown.
func TestPlanPollAllocatesNothing(t *testing.T) {
	cfg := Config{SegmentSizeBytes: 1 << 20, PartitionsCount: 1, EnforceFsync: true}
	s := osStore(t, cfg, PlanConfig{})
	sendBatches(t, s, rand.New(rand.NewPCG(7, 8)), 40)
	req := PollRequest{Consumer: Consumer{Kind: wire.ConsumerSingle, ID: 1}, Strategy: wire.PollingStrategy{Kind: wire.PollingFirst}, Count: 1 << 20, AutoCommit: true}
	copyPoll(t, s, req)
	var plan PollPlan
	allocs := testing.AllocsPerRun(200, func() {
		planned, err := s.PlanPoll(testKey, req, &plan, 0)
		if err != nil || !planned {
			t.Fatalf("planned %v, %v", planned, err)
		}
		if err := plan.Release(); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%.1f allocations a planned poll", allocs)
	}
}

// TestPlanPollTrustWrites: with PlanConfig.TrustWrites the first poll of
// batches just sent is planned, and the client receives what a copy gives.
func TestPlanPollTrustWrites(t *testing.T) {
	cfg := Config{SegmentSizeBytes: 64 << 10, PartitionsCount: 1, EnforceFsync: true}
	s := osStore(t, cfg, PlanConfig{TrustWrites: true})
	sendBatches(t, s, rand.New(rand.NewPCG(9, 10)), 40)
	req := PollRequest{Strategy: wire.PollingStrategy{Kind: wire.PollingFirst}, Count: 1 << 20, MaxBytes: 20 << 10}
	var plan PollPlan
	planned, err := s.PlanPoll(testKey, req, &plan, 0)
	if err != nil || !planned {
		t.Fatalf("the first poll of trusted batches: planned %v, %v (verdicts %v)", planned, err, s.PlanStats().Verdicts)
	}
	got := planBody(t, &plan)
	_ = plan.Release()
	if want := copyPoll(t, s, req); !bytes.Equal(got, want) {
		t.Fatal("the plan differs from the copy")
	}
}
