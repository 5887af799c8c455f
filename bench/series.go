package bench

import "time"

// secondSeries is one actor's figures per second of the measured window, second k
// holding the batches that ended in [origin+k s, origin+(k+1) s). The open second
// records into a full Histogram; when a batch ends in a later second the open one is
// compacted into its non-empty buckets (a few hundred bytes instead of 30 KiB), so a
// long run keeps little memory and the actor allocates once per second, never per
// batch or message.
//
// The zero value is ready; origin is set by the run to the start of its measured
// window.
type secondSeries struct {
	origin  time.Time
	open    int  // index of the open second
	hasOpen bool // false before the first batch
	slot    secondCounts
	hist    Histogram
	closed  []secondSlot // one per second from 0 to open-1, gaps included
}

type secondCounts struct {
	messages     uint64
	batches      uint64
	payloadBytes uint64
}

type secondSlot struct {
	secondCounts
	buckets []bucketCount // the second's latency histogram, non-empty buckets only
	minNs   uint64
	maxNs   uint64
	sumNs   float64
}

type bucketCount struct {
	index int32
	count uint64
}

// record counts one batch that ended at end.
func (s *secondSeries) record(end time.Time, messages, payloadBytes uint64, latency time.Duration) {
	if s.origin.IsZero() {
		// An actor measured outside a run (a test driving its turns): its series
		// starts with its first batch rather than at year 1, billions of seconds ago.
		s.origin = end.Add(-latency)
	}
	second := max(int(end.Sub(s.origin)/time.Second), 0)
	if !s.hasOpen || second != s.open {
		if s.hasOpen && second < s.open {
			second = s.open // a clock stepped back: keep it in the open second
		} else {
			s.close(second)
		}
	}
	s.slot.messages += messages
	s.slot.batches++
	s.slot.payloadBytes += payloadBytes
	s.hist.Record(latency)
}

// close compacts the open second, pads the seconds without a batch, and opens next.
func (s *secondSeries) close(next int) {
	if s.hasOpen {
		slot := secondSlot{secondCounts: s.slot, minNs: s.hist.minNs, maxNs: s.hist.maxNs, sumNs: s.hist.sumNs}
		for i, n := range s.hist.counts {
			if n > 0 {
				slot.buckets = append(slot.buckets, bucketCount{int32(i), n})
			}
		}
		s.closed = append(s.closed, slot)
		s.hist = Histogram{}
		s.slot = secondCounts{}
	}
	for len(s.closed) < next {
		s.closed = append(s.closed, secondSlot{})
	}
	s.open, s.hasOpen = next, true
}

// seconds returns every second, the open one closed.
func (s *secondSeries) seconds() []secondSlot {
	if s.hasOpen {
		s.close(s.open + 1)
		s.hasOpen = false
	}
	return s.closed
}

// mergeInto adds the slot's latencies to h.
func (slot *secondSlot) mergeInto(h *Histogram) {
	if slot.batches == 0 {
		return
	}
	for _, b := range slot.buckets {
		h.counts[b.index] += b.count
	}
	if h.count == 0 || slot.minNs < h.minNs {
		h.minNs = slot.minNs
	}
	h.maxNs = max(h.maxNs, slot.maxNs)
	h.count += slot.batches
	h.sumNs += slot.sumNs
}

// Interval is one role's figures over one second of the measured window: what the
// actors of the role moved in batches that ended in it, and the percentiles of those
// batches' latencies (from the actors' histograms merged, not from per-actor
// percentiles). The last second of a role is usually partial; its rates are over
// the part its actors ran.
type Interval struct {
	Second            int     `json:"second"` // from the start of the measured window
	Role              Role    `json:"role"`
	Messages          uint64  `json:"messages"`
	Batches           uint64  `json:"batches"`
	MessagesPerSecond float64 `json:"messages_per_second"`
	PayloadMBPerSec   float64 `json:"payload_mb_per_second"`
	P50Ms             float64 `json:"p50_ms"`
	P99Ms             float64 `json:"p99_ms"`
	MaxMs             float64 `json:"max_ms"`
}

// intervals merges the series of one role's actors second by second. end is the
// role's last batch, origin the start of the measured window.
func intervals(role Role, group []*actorStats, origin, end time.Time) []Interval {
	var perActor [][]secondSlot
	seconds := 0
	for _, s := range group {
		slots := s.series.seconds()
		perActor = append(perActor, slots)
		seconds = max(seconds, len(slots))
	}
	out := make([]Interval, 0, seconds)
	for k := range seconds {
		var h Histogram
		var c secondCounts
		for _, slots := range perActor {
			if k < len(slots) {
				c.messages += slots[k].messages
				c.batches += slots[k].batches
				c.payloadBytes += slots[k].payloadBytes
				slots[k].mergeInto(&h)
			}
		}
		span := time.Second
		if k == seconds-1 {
			if d := end.Sub(origin.Add(time.Duration(k) * time.Second)); d > 0 && d < span {
				span = d
			}
		}
		in := Interval{Second: k, Role: role, Messages: c.messages, Batches: c.batches,
			MessagesPerSecond: float64(c.messages) / span.Seconds(),
			PayloadMBPerSec:   float64(c.payloadBytes) / span.Seconds() / 1e6,
		}
		if h.Count() > 0 {
			in.P50Ms, in.P99Ms, in.MaxMs = millis(h.Quantile(0.50)), millis(h.Quantile(0.99)), millis(h.Max())
		}
		out = append(out, in)
	}
	return out
}

// Distribution is one role's merged batch-latency histogram: each non-empty bucket
// by its upper bound, in ascending order, with the fraction of batches at or below it, for plots of the
// latency distribution and percentile spectrum.
type Distribution struct {
	Role    Role     `json:"role"`
	Buckets []Bucket `json:"buckets"`
}

// Bucket is one histogram bucket: batches with a latency of at most UpToMs (and
// above the previous bucket's bound), and the cumulative fraction up to it.
type Bucket struct {
	UpToMs     float64 `json:"up_to_ms"`
	Count      uint64  `json:"count"`
	Cumulative float64 `json:"cumulative"`
}

func distribution(role Role, h *Histogram) Distribution {
	d := Distribution{Role: role}
	var seen uint64
	for i, n := range h.counts {
		if n == 0 {
			continue
		}
		seen += n
		upTo := min(max(histogramBucketMax(i), h.minNs), h.maxNs)
		d.Buckets = append(d.Buckets, Bucket{UpToMs: millis(time.Duration(upTo)), Count: n, Cumulative: float64(seen) / float64(h.count)})
	}
	return d
}

func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
