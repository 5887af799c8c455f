package bench

import (
	"math"
	"testing"
	"time"
)

// batchAt measures one batch of 1000 messages of 1000 bytes for st that ended at
// origin+endAt and took latency.
func batchAt(st *actorStats, origin time.Time, endAt, latency time.Duration) {
	end := origin.Add(endAt)
	st.measure(end.Add(-latency), end, 1000, 1_000_000, 1_064_000)
}

func within(got, want, tolerance float64) bool {
	return math.Abs(got-want) <= tolerance*math.Abs(want)
}

// Seconds without a batch are in the series as zeros, the last partial second's
// rate is over the part that ran, and each second's percentiles come from the
// actors' histograms merged: one slow batch among eleven is the p99 of the second,
// where averaging the two actors' p99s would say about half of it.
func TestIntervalsMergeHistogramsPerSecond(t *testing.T) {
	origin := time.Unix(1_000_000, 0)
	fast := &actorStats{role: RoleProducer, index: 0}
	slow := &actorStats{role: RoleProducer, index: 1}
	fast.series.origin, slow.series.origin = origin, origin
	for i := range 10 {
		batchAt(fast, origin, time.Duration(i+1)*50*time.Millisecond, time.Millisecond) // second 0
	}
	batchAt(slow, origin, 900*time.Millisecond, 100*time.Millisecond) // second 0
	batchAt(fast, origin, 2250*time.Millisecond, 2*time.Millisecond)  // second 2, nothing in 1
	batchAt(slow, origin, 2500*time.Millisecond, 4*time.Millisecond)  // the run ends at 2.5 s

	got := intervals(RoleProducer, []*actorStats{fast, slow}, origin, origin.Add(2500*time.Millisecond))
	if len(got) != 3 {
		t.Fatalf("%d intervals, want 3: %+v", len(got), got)
	}
	zero := got[0]
	if zero.Second != 0 || zero.Batches != 11 || zero.Messages != 11_000 || zero.MessagesPerSecond != 11_000 || zero.PayloadMBPerSec != 11 {
		t.Errorf("second 0: %+v", zero)
	}
	if !within(zero.P99Ms, 100, 1.0/64) || !within(zero.P50Ms, 1, 1.0/64) || !within(zero.MaxMs, 100, 0) {
		t.Errorf("second 0 percentiles: p50 %v p99 %v max %v, want 1, 100, 100 ms", zero.P50Ms, zero.P99Ms, zero.MaxMs)
	}
	if one := got[1]; one.Batches != 0 || one.Messages != 0 || one.MessagesPerSecond != 0 || one.P99Ms != 0 {
		t.Errorf("second 1 had no batch: %+v", one)
	}
	// Two batches of 1000 messages in the half second the run had left.
	if two := got[2]; two.Batches != 2 || two.MessagesPerSecond != 4000 || !within(two.P99Ms, 4, 1.0/64) || !within(two.P50Ms, 2, 1.0/64) {
		t.Errorf("second 2: %+v", two)
	}
}

// A long run keeps one compact slot per second, whatever the number of batches.
func TestSecondSeriesCompactsClosedSeconds(t *testing.T) {
	origin := time.Unix(1_000_000, 0)
	st := &actorStats{role: RoleConsumer}
	st.series.origin = origin
	for i := range 5000 {
		batchAt(st, origin, time.Duration(i)*time.Millisecond, time.Duration(100+i%7)*time.Microsecond)
	}
	slots := st.series.seconds()
	if len(slots) != 5 {
		t.Fatalf("%d slots for 5 s, want 5", len(slots))
	}
	var batches uint64
	for i, s := range slots {
		batches += s.batches
		if len(s.buckets) == 0 || len(s.buckets) > 7 {
			t.Errorf("second %d: %d buckets for 7 distinct latencies", i, len(s.buckets))
		}
	}
	if batches != 5000 {
		t.Errorf("%d batches in the slots, want 5000", batches)
	}
}

// An actor measured with no origin (a test driving its turns) starts its series
// at its first batch instead of padding billions of seconds since year 1.
func TestSecondSeriesWithoutOrigin(t *testing.T) {
	var st actorStats
	now := time.Now()
	st.measure(now, now.Add(time.Millisecond), 1, 1, 1)
	st.measure(now.Add(time.Second), now.Add(time.Second+time.Millisecond), 1, 1, 1)
	if n := len(st.series.seconds()); n != 2 {
		t.Fatalf("%d seconds, want 2", n)
	}
}

func TestDistributionIsCumulative(t *testing.T) {
	var h Histogram
	for _, ms := range []int{1, 1, 2, 3, 50} {
		h.Record(time.Duration(ms) * time.Millisecond)
	}
	d := distribution(RoleProducer, &h)
	if len(d.Buckets) != 4 {
		t.Fatalf("%d buckets, want 4: %+v", len(d.Buckets), d.Buckets)
	}
	var count uint64
	for i, b := range d.Buckets {
		count += b.Count
		if i > 0 && (b.UpToMs <= d.Buckets[i-1].UpToMs || b.Cumulative <= d.Buckets[i-1].Cumulative) {
			t.Errorf("bucket %d not ascending: %+v", i, d.Buckets)
		}
	}
	last := d.Buckets[len(d.Buckets)-1]
	if count != 5 || last.Cumulative != 1 || last.UpToMs != 50 || d.Buckets[0].Cumulative != 0.4 {
		t.Errorf("buckets %+v", d.Buckets)
	}
}
