package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// Latency summarises a histogram in milliseconds.
type Latency struct {
	Samples uint64  `json:"samples"`
	P50Ms   float64 `json:"p50_ms"`
	P90Ms   float64 `json:"p90_ms"`
	P95Ms   float64 `json:"p95_ms"`
	P99Ms   float64 `json:"p99_ms"`
	P999Ms  float64 `json:"p999_ms"`
	P9999Ms float64 `json:"p9999_ms"`
	MaxMs   float64 `json:"max_ms"`
	MeanMs  float64 `json:"mean_ms"`
}

func summarize(h *Histogram) Latency {
	ms := millis
	return Latency{
		Samples: h.Count(),
		P50Ms:   ms(h.Quantile(0.50)),
		P90Ms:   ms(h.Quantile(0.90)),
		P95Ms:   ms(h.Quantile(0.95)),
		P99Ms:   ms(h.Quantile(0.99)),
		P999Ms:  ms(h.Quantile(0.999)),
		P9999Ms: ms(h.Quantile(0.9999)),
		MaxMs:   ms(h.Max()),
		MeanMs:  ms(h.Mean()),
	}
}

// Figures are the throughput and latency of one actor or of a group of them over
// their measured window. MB is 10^6 bytes. Payload bytes are the messages' own;
// wire bytes are the whole request or reply frames that carried them (headers,
// routing, batch and frame headers included).
type Figures struct {
	Role              Role    `json:"role"`
	Index             int     `json:"index"` // per actor; 0 in totals
	Stream            string  `json:"stream,omitempty"`
	Actors            int     `json:"actors"`
	Messages          uint64  `json:"messages"`
	Batches           uint64  `json:"batches"`
	PayloadBytes      uint64  `json:"payload_bytes"`
	WireBytes         uint64  `json:"wire_bytes"`
	ElapsedSeconds    float64 `json:"elapsed_seconds"`
	MessagesPerSecond float64 `json:"messages_per_second"`
	PayloadMBPerSec   float64 `json:"payload_mb_per_second"`
	WireMBPerSec      float64 `json:"wire_mb_per_second"`
	// Latency is per batch: a send's round trip for producers, a poll's for
	// consumers, a send and the polls that bring it back for producing consumers.
	Latency Latency `json:"batch_latency"`
	// EndToEnd is, for consumers running alongside producers, the time from the
	// producer stamping a batch to the consumer receiving its first message.
	EndToEnd *Latency `json:"end_to_end_latency,omitempty"`
}

func figures(role Role, group []*actorStats) Figures {
	f := Figures{Role: role, Actors: len(group)}
	var start, end time.Time
	var latency, endToEnd Histogram
	for _, s := range group {
		f.Messages += s.messages
		f.Batches += s.batches
		f.PayloadBytes += s.payloadBytes
		f.WireBytes += s.wireBytes
		if s.batches > 0 {
			if start.IsZero() || s.start.Before(start) {
				start = s.start
			}
			if s.end.After(end) {
				end = s.end
			}
		}
		latency.Merge(&s.latency)
		endToEnd.Merge(&s.endToEnd)
	}
	// The group's window runs from its first actor's start to its last actor's
	// end, so the rates are what the server sustained, not a sum of per-actor rates
	// over windows that may not overlap.
	if elapsed := end.Sub(start).Seconds(); elapsed > 0 {
		f.ElapsedSeconds = elapsed
		f.MessagesPerSecond = float64(f.Messages) / elapsed
		f.PayloadMBPerSec = float64(f.PayloadBytes) / elapsed / 1e6
		f.WireMBPerSec = float64(f.WireBytes) / elapsed / 1e6
	}
	f.Latency = summarize(&latency)
	if endToEnd.Count() > 0 {
		e := summarize(&endToEnd)
		f.EndToEnd = &e
	}
	return f
}

// Report is a run's result.
type Report struct {
	Kind          Kind   `json:"kind"`
	ServerAddress string `json:"server_address"`
	// Server describes the server when iggy-bench started it.
	Server           string  `json:"server,omitempty"`
	Producers        int     `json:"producers"`
	Consumers        int     `json:"consumers"`
	Streams          int     `json:"streams"`
	Partitions       int     `json:"partitions_per_stream"`
	ConsumerGroups   int     `json:"consumer_groups"`
	MessagesPerBatch int     `json:"messages_per_batch"`
	MessageSizeBytes int     `json:"message_size_bytes"`
	Batches          int     `json:"batches_per_actor,omitempty"`
	DurationSeconds  float64 `json:"duration_seconds,omitempty"`
	WarmupSeconds    float64 `json:"warmup_seconds"`
	RateLimitBytes   uint64  `json:"rate_limit_bytes_per_second,omitempty"`
	WallSeconds      float64 `json:"wall_seconds"`

	// Totals has one entry per role that ran; Actors one per actor.
	Totals       []Figures    `json:"totals"`
	Actors       []Figures    `json:"actors"`
	Verification Verification `json:"verification"`
	// Baseline is the machine's raw bandwidth measured in the same run, when asked.
	Baseline *Baseline `json:"baseline,omitempty"`
	// Series has each role's figures second by second, roles in the order of Totals.
	Series []Interval `json:"series"`
	// Distributions has each role's merged batch-latency histogram.
	Distributions []Distribution `json:"latency_distributions"`
}

// newReport sums up the actors' stats; origin is the start of the measured window.
func newReport(cfg *Config, stats []*actorStats, origin time.Time, wall time.Duration) *Report {
	r := &Report{
		Kind: cfg.Kind, ServerAddress: cfg.ServerAddress,
		Producers: cfg.Producers, Consumers: cfg.Consumers, Streams: cfg.Streams,
		Partitions: cfg.Partitions, ConsumerGroups: cfg.ConsumerGroups,
		MessagesPerBatch: cfg.MessagesPerBatch, MessageSizeBytes: cfg.MessageSizeBytes,
		Batches: cfg.Batches, DurationSeconds: cfg.Duration.Seconds(), WarmupSeconds: cfg.Warmup.Seconds(),
		RateLimitBytes: cfg.RateLimitBytesPerSecond, WallSeconds: wall.Seconds(),
	}
	for _, role := range []Role{RoleProducer, RoleConsumer, RoleProducingConsumer} {
		var group []*actorStats
		for _, s := range stats {
			if s.role == role {
				group = append(group, s)
			}
		}
		if len(group) == 0 {
			continue
		}
		total := figures(role, group)
		r.Totals = append(r.Totals, total)
		var merged Histogram
		end := origin
		for _, s := range group {
			merged.Merge(&s.latency)
			if s.end.After(end) {
				end = s.end
			}
		}
		r.Distributions = append(r.Distributions, distribution(role, &merged))
		r.Series = append(r.Series, intervals(role, group, origin, end)...)
		for _, s := range group {
			f := figures(role, []*actorStats{s})
			f.Index, f.Stream = s.index, s.stream
			r.Actors = append(r.Actors, f)
		}
	}
	return r
}

// verify compares what every reader saw with what the server confirmed.
func verify(cfg *Config, streams []*stream, consumers []*consumer, producing []*producingConsumer, stats []*actorStats) Verification {
	v := Verification{Enabled: !cfg.SkipMessageChecks}
	for _, s := range streams {
		v.MessagesProduced += s.producedTotal()
	}
	account := func(reader string, s *stream, index int, t *partitionTracker) {
		produced := s.produced[index].Load()
		v.MessagesExpected += produced
		v.Duplicated += t.duplicates
		if t.duplicates > 0 {
			v.problem("%s: %s partition %d: %d messages delivered twice", reader, s.name, s.partitionIDs[index], t.duplicates)
		}
		switch {
		case t.next < produced || len(t.pending) > 0:
			missing := produced - min(t.next, produced)
			for _, n := range t.pending {
				missing -= min(n, missing)
			}
			v.Lost += max(missing, 1)
			v.problem("%s: %s partition %d: read up to offset %d (%d later polls waiting on a gap) of %d confirmed", reader, s.name, s.partitionIDs[index], t.next, len(t.pending), produced)
		case t.next > produced:
			v.Duplicated += t.next - produced
			v.problem("%s: %s partition %d: read %d messages, the server confirmed %d", reader, s.name, s.partitionIDs[index], t.next, produced)
		}
	}
	for _, k := range consumers {
		if k.group == nil {
			account(k.stats.name(), k.s, 0, k.trackers[0])
		}
	}
	if cfg.Kind.groups() {
		for _, s := range streams {
			for p, t := range s.groupTrackers {
				account(GroupName+" on "+s.name, s, p, t)
			}
		}
	}
	for _, a := range producing {
		account(a.stats.name(), a.s, 0, a.tracker)
	}
	for _, st := range stats {
		v.merge(&st.check.Verification)
	}
	return v
}

// WriteJSON writes the report as one indented JSON document.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTable writes the report for a person: the setup, a table of the totals and
// of each actor, and the verification.
func (r *Report) WriteTable(w io.Writer) error {
	if _, err := io.WriteString(w, r.setupLine()+"\n\n"); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "actor\tmessages\tmsg/s\tpayload MB/s\twire MB/s\tbatch p50 ms\tp90\tp95\tp99\tp999\tp9999\tmax\te2e p50 ms\te2e p99\t")
	row := func(name string, f Figures) {
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.1f\t%.1f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t", name, f.Messages, f.MessagesPerSecond,
			f.PayloadMBPerSec, f.WireMBPerSec, f.Latency.P50Ms, f.Latency.P90Ms, f.Latency.P95Ms, f.Latency.P99Ms, f.Latency.P999Ms, f.Latency.P9999Ms, f.Latency.MaxMs)
		if f.EndToEnd != nil {
			fmt.Fprintf(tw, "%.3f\t%.3f\t\n", f.EndToEnd.P50Ms, f.EndToEnd.P99Ms)
		} else {
			fmt.Fprint(tw, "-\t-\t\n")
		}
	}
	for _, f := range r.Totals {
		row(fmt.Sprintf("all %d %ss", f.Actors, f.Role), f)
	}
	for _, f := range r.Actors {
		row(fmt.Sprintf("%s %d (%s)", f.Role, f.Index, f.Stream), f)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	out := "\n" + r.verificationLine() + "\n"
	if b := r.Baseline; b != nil {
		out += fmt.Sprintf("\nbaseline, same run: raw loopback TCP %.1f MB/s (%d connections)", b.Loopback.WireMBPerSec, b.Loopback.Actors)
		for _, d := range b.SequentialWrite {
			out += fmt.Sprintf(", sequential write %s %.1f MB/s", d.Name, d.MBPerSec)
		}
		out += "\n"
		for _, ratio := range b.Ratios {
			out += fmt.Sprintf("  %ss: %.1f wire MB/s = %.2f× loopback, %.2f× page-cache write, %.2f× fdatasync-per-MiB write\n",
				ratio.Role, ratio.WireMBPerSecond, ratio.ToLoopback, ratio.ToPageCache, ratio.ToSyncedWrite)
		}
	}
	_, err := io.WriteString(w, out)
	return err
}

// setupLine says what ran, in one line.
func (r *Report) setupLine() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s against %s: ", r.Kind, r.ServerAddress)
	var who []string
	if r.Producers > 0 {
		label := "producers"
		if r.Kind == EndToEndProducingConsumer {
			label = "producing consumers"
		}
		who = append(who, fmt.Sprintf("%d %s", r.Producers, label))
	}
	if r.Consumers > 0 {
		who = append(who, fmt.Sprintf("%d consumers", r.Consumers))
	}
	if r.ConsumerGroups > 0 {
		who = append(who, fmt.Sprintf("%d consumer group(s)", r.ConsumerGroups))
	}
	fmt.Fprintf(&b, "%s, %d stream(s) × %d partition(s), %d messages × %d B per batch", strings.Join(who, ", "), r.Streams, r.Partitions, r.MessagesPerBatch, r.MessageSizeBytes)
	if r.Batches > 0 {
		fmt.Fprintf(&b, ", %d batches per actor", r.Batches)
	} else {
		fmt.Fprintf(&b, ", for %gs", r.DurationSeconds)
	}
	if r.WarmupSeconds > 0 {
		fmt.Fprintf(&b, ", warm-up %gs", r.WarmupSeconds)
	}
	if r.RateLimitBytes > 0 {
		fmt.Fprintf(&b, ", rate limit %d B/s", r.RateLimitBytes)
	}
	fmt.Fprintf(&b, " (%.2fs wall)", r.WallSeconds)
	if r.Server != "" {
		fmt.Fprintf(&b, "\nserver: %s", r.Server)
	}
	return b.String()
}

// verificationLine says what the verification found: one line, with one more per
// problem when it failed.
func (r *Report) verificationLine() string {
	v := &r.Verification
	switch {
	case r.Kind == RawLoopbackKind:
		return "baseline: plain TCP to a reader that discards the bytes; no server, nothing to verify"
	case v.MessagesExpected == 0:
		return fmt.Sprintf("verification: %d messages produced and confirmed by the server; nothing consumed", v.MessagesProduced)
	case v.OK():
		checks := "counts and offsets"
		if v.Enabled {
			checks = "checksums, ids, offsets and counts"
		}
		return fmt.Sprintf("verification OK: %d messages consumed of %d expected (%d produced): %s", v.MessagesConsumed, v.MessagesExpected, v.MessagesProduced, checks)
	default:
		out := fmt.Sprintf("verification FAILED: %d consumed of %d expected (%d produced); lost %d, duplicated %d, checksum failures %d, misplaced %d",
			v.MessagesConsumed, v.MessagesExpected, v.MessagesProduced, v.Lost, v.Duplicated, v.ChecksumFailures, v.Misplaced)
		for _, p := range v.Problems {
			out += "\n  " + p
		}
		return out
	}
}
