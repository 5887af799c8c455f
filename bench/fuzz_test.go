package bench

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/zeebo/xxh3"
)

// Polls of contiguous ranges, observed in any order and with one range possibly
// seen twice, leave the tracker at the total with nothing pending and exactly the
// repeated messages counted as duplicates.
func FuzzPartitionTracker(f *testing.F) {
	f.Add([]byte{0, 5, 5, 5})
	f.Add([]byte{1, 1, 2, 3, 4, 5, 6})
	f.Add([]byte{3, 16, 1, 16, 1, 200})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 2 || len(data) > 200 {
			return
		}
		type span struct{ first, count uint64 }
		var spans []span
		var total uint64
		for _, b := range data[1:] {
			n := uint64(b%16) + 1
			spans = append(spans, span{total, n})
			total += n
		}
		rng := rand.New(rand.NewPCG(xxh3.Hash(data), 0))
		var repeated uint64
		if data[0]&1 == 1 {
			r := spans[rng.IntN(len(spans))]
			spans = append(spans, r)
			repeated = r.count
		}
		rng.Shuffle(len(spans), func(i, j int) { spans[i], spans[j] = spans[j], spans[i] })
		var tr partitionTracker
		for _, s := range spans {
			tr.observe(s.first, s.count)
		}
		if tr.next != total || len(tr.pending) != 0 || tr.duplicates != repeated {
			t.Fatalf("next %d (want %d), %d pending, %d duplicates (want %d)", tr.next, total, len(tr.pending), tr.duplicates, repeated)
		}
	})
}

// Quantiles of any values are monotonic in q, exact at 0 and 1, and each lies in the
// bucket of the exact nearest-rank value.
func FuzzHistogram(f *testing.F) {
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 200, 0, 0, 0, 0, 0, 0, 0})
	f.Add(binary.LittleEndian.AppendUint64(nil, math.MaxUint64))
	f.Fuzz(func(t *testing.T, data []byte) {
		var h Histogram
		var values []time.Duration
		for len(data) >= 8 && len(values) < 1000 {
			v := time.Duration(binary.LittleEndian.Uint64(data) >> 1)
			values = append(values, v)
			h.Record(v)
			data = data[8:]
		}
		if len(values) == 0 {
			return
		}
		slices.Sort(values)
		if h.Quantile(0) != values[0] || h.Quantile(1) != values[len(values)-1] {
			t.Fatalf("q0 %v q1 %v, want %v %v", h.Quantile(0), h.Quantile(1), values[0], values[len(values)-1])
		}
		previous := time.Duration(0)
		for _, q := range []float64{0.1, 0.5, 0.9, 0.95, 0.99, 0.999} {
			got := h.Quantile(q)
			exact := values[max(int(math.Ceil(q*float64(len(values))))-1, 0)]
			if got < previous || got < exact || uint64(got) > histogramBucketMax(histogramIndex(uint64(exact))) {
				t.Fatalf("q%v = %v, exact %v, previous %v", q, got, exact, previous)
			}
			previous = got
		}
	})
}
