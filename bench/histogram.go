package bench

import (
	"math"
	"math/bits"
	"time"
)

// Histogram counts latencies in log-linear buckets, HdrHistogram's layout cut down to
// what a load generator needs: values below 128 ns have a bucket each, and every
// power of two above that is split into 64 equal buckets, so a quantile is within
// 1/64 (1.6 %) of the true value while the whole range of a uint64 fits in 3776
// counters (30 KiB). Record is a few instructions and never allocates, so each actor
// keeps its own and the run merges them at the end.
//
// We chose this over github.com/HdrHistogram/hdrhistogram-go for two reasons: the
// fixed array makes Record allocation-free and bounds-check-free without a
// configuration step that can fail, and 1.6 % is finer than the run-to-run noise of
// any network benchmark, so HdrHistogram's configurable precision buys nothing here.
//
//	bucket index  0..127                       value exactly
//	              128 + (shift-1)·64 + (m-64)   value in [m·2^shift, (m+1)·2^shift)
//	                                            where shift = bitlen(value)-7, m = value>>shift ∈ [64,128)
type Histogram struct {
	counts [histogramBucketCount]uint64
	count  uint64
	sumNs  float64 // float: a sum of many uint64 nanosecond values can overflow
	minNs  uint64
	maxNs  uint64
}

const (
	histogramExactMax      = 128 // values below this have a bucket each
	histogramSubBucketBits = 6   // 64 buckets per power of two above histogramExactMax
	histogramSubBuckets    = 1 << histogramSubBucketBits
	// 64-bit values have bit lengths 8..64 above the exact range: 57 octaves.
	histogramBucketCount = histogramExactMax + (64-histogramSubBucketBits-1)*histogramSubBuckets
)

func histogramIndex(v uint64) int {
	if v < histogramExactMax {
		return int(v)
	}
	shift := bits.Len64(v) - histogramSubBucketBits - 1
	m := v >> shift
	return histogramExactMax + (shift-1)*histogramSubBuckets + int(m-histogramSubBuckets)
}

// histogramBucketMax is the largest value bucket i holds.
func histogramBucketMax(i int) uint64 {
	if i < histogramExactMax {
		return uint64(i)
	}
	i -= histogramExactMax
	shift := i/histogramSubBuckets + 1
	m := uint64(i%histogramSubBuckets + histogramSubBuckets)
	return (m+1)<<shift - 1
}

// Record counts one latency; a negative duration (a clock that stepped back) counts
// as zero.
func (h *Histogram) Record(d time.Duration) {
	var v uint64
	if d > 0 {
		v = uint64(d)
	}
	h.counts[histogramIndex(v)]++
	if h.count == 0 || v < h.minNs {
		h.minNs = v
	}
	if v > h.maxNs {
		h.maxNs = v
	}
	h.count++
	h.sumNs += float64(v)
}

// Merge adds every count of other to h.
func (h *Histogram) Merge(other *Histogram) {
	if other.count == 0 {
		return
	}
	for i, n := range other.counts {
		h.counts[i] += n
	}
	if h.count == 0 || other.minNs < h.minNs {
		h.minNs = other.minNs
	}
	if other.maxNs > h.maxNs {
		h.maxNs = other.maxNs
	}
	h.count += other.count
	h.sumNs += other.sumNs
}

// Count is the number of recorded values.
func (h *Histogram) Count() uint64 { return h.count }

// Min and Max are the exact extremes (zero when empty).
func (h *Histogram) Min() time.Duration { return time.Duration(h.minNs) }
func (h *Histogram) Max() time.Duration { return time.Duration(h.maxNs) }

// Mean is the exact mean (zero when empty).
func (h *Histogram) Mean() time.Duration {
	if h.count == 0 {
		return 0
	}
	return time.Duration(math.Round(h.sumNs / float64(h.count)))
}

// Quantile returns the smallest bucket bound at or below which a fraction q of the
// values lie (q in [0, 1]; the nearest-rank definition), clamped to the exact min and
// max so that Quantile(0) and Quantile(1) are exact. Zero when empty.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.count == 0 {
		return 0
	}
	q = min(max(q, 0), 1)
	rank := uint64(math.Ceil(q * float64(h.count)))
	if rank <= 1 {
		return time.Duration(h.minNs) // the first rank is the minimum itself
	}
	var seen uint64
	for i, n := range h.counts {
		seen += n
		if seen >= rank {
			v := min(max(histogramBucketMax(i), h.minNs), h.maxNs)
			return time.Duration(v)
		}
	}
	return time.Duration(h.maxNs) // unreachable: the counts add up to h.count
}
