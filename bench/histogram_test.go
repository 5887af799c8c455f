package bench

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestHistogramIndexBounds(t *testing.T) {
	for _, tc := range []struct {
		v         uint64
		index     int
		bucketMax uint64
	}{
		{0, 0, 0},
		{1, 1, 1},
		{127, 127, 127},
		{128, 128, 129},             // shift 1: [128,130)
		{129, 128, 129},             //
		{130, 129, 131},             //
		{255, 191, 255},             // last bucket of shift 1
		{256, 192, 259},             // shift 2: [256,260)
		{1000, 317, 1007},           // shift 3: m=125 → [1000,1008)
		{1_000_000, 954, 1_007_615}, // shift 13: m=122
		{math.MaxUint64, histogramBucketCount - 1, math.MaxUint64},
	} {
		if got := histogramIndex(tc.v); got != tc.index {
			t.Errorf("histogramIndex(%d) = %d, want %d", tc.v, got, tc.index)
		}
		if got := histogramBucketMax(tc.index); got != tc.bucketMax {
			t.Errorf("histogramBucketMax(%d) = %d, want %d", tc.index, got, tc.bucketMax)
		}
	}
}

// Every value lies in its bucket, and buckets tile the uint64 range in order.
func TestHistogramBucketsTile(t *testing.T) {
	for i := 1; i < histogramBucketCount; i++ {
		lo := histogramBucketMax(i-1) + 1
		if histogramIndex(lo) != i || histogramIndex(histogramBucketMax(i)) != i {
			t.Fatalf("bucket %d: [%d, %d] maps to %d..%d", i, lo, histogramBucketMax(i), histogramIndex(lo), histogramIndex(histogramBucketMax(i)))
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 100_000 {
		v := rng.Uint64() >> rng.IntN(64)
		i := histogramIndex(v)
		if v > histogramBucketMax(i) || (i > 0 && v <= histogramBucketMax(i-1)) {
			t.Fatalf("value %d outside bucket %d", v, i)
		}
	}
}

func TestHistogramQuantiles(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values []time.Duration
		q      float64
		want   time.Duration
	}{
		{"empty", nil, 0.5, 0},
		{"one", []time.Duration{42}, 0.99, 42},
		{"exact range p50", []time.Duration{1, 2, 3, 4}, 0.5, 2},
		{"exact range p75", []time.Duration{1, 2, 3, 4}, 0.75, 3},
		{"q0 is min", []time.Duration{5 * time.Millisecond, 7 * time.Millisecond}, 0, 5 * time.Millisecond},
		{"q1 is max", []time.Duration{5 * time.Millisecond, 7 * time.Millisecond}, 1, 7 * time.Millisecond},
		{"negative counts as zero", []time.Duration{-5, 10}, 0, 0},
		{"upper bound of bucket", []time.Duration{1000, 1000, 2000}, 0.5, 1007},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h Histogram
			for _, v := range tc.values {
				h.Record(v)
			}
			if got := h.Quantile(tc.q); got != tc.want {
				t.Fatalf("Quantile(%v) = %v, want %v", tc.q, got, tc.want)
			}
		})
	}
}

// Quantiles of random latencies are within the promised 1/64 of the exact ones, and
// merging two histograms equals recording everything into one.
func TestHistogramAccuracyAndMerge(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	var a, b, all Histogram
	values := make([]time.Duration, 0, 20_000)
	for i := range 20_000 {
		v := time.Duration(rng.ExpFloat64() * float64(200*time.Microsecond))
		values = append(values, v)
		all.Record(v)
		if i%2 == 0 {
			a.Record(v)
		} else {
			b.Record(v)
		}
	}
	a.Merge(&b)
	if a != all {
		t.Fatal("merged histogram differs from one recorded with everything")
	}
	slices.Sort(values)
	for _, q := range []float64{0.5, 0.9, 0.95, 0.99, 0.999} {
		exact := values[int(math.Ceil(q*float64(len(values))))-1]
		got := all.Quantile(q)
		if got < exact || float64(got-exact) > float64(exact)/64+1 {
			t.Errorf("q%v = %v, exact %v", q, got, exact)
		}
	}
	if all.Min() != values[0] || all.Max() != values[len(values)-1] || all.Count() != uint64(len(values)) {
		t.Errorf("min %v max %v count %d, want %v %v %d", all.Min(), all.Max(), all.Count(), values[0], values[len(values)-1], len(values))
	}
}

func TestHistogramRecordDoesNotAllocate(t *testing.T) {
	h := new(Histogram)
	if n := testing.AllocsPerRun(1000, func() { h.Record(123 * time.Microsecond) }); n != 0 {
		t.Fatalf("Record allocates %v times", n)
	}
}

func BenchmarkHistogramRecord(b *testing.B) {
	h := new(Histogram)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		h.Record(time.Duration(i) * 977)
	}
}
