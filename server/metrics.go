package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/iggy-shard/iggy-shard/config"
	"github.com/iggy-shard/iggy-shard/metadata"
	"github.com/iggy-shard/iggy-shard/partition"
	"github.com/iggy-shard/iggy-shard/partitionhost"
	"github.com/iggy-shard/iggy-shard/segment"
	"github.com/iggy-shard/iggy-shard/shard"
	"github.com/iggy-shard/iggy-shard/vsr"
	"github.com/iggy-shard/iggy-shard/wire"
)

// Observability: /metrics in the Prometheus text format and /health on
// config.Config.MetricsAddress, net/http/pprof on config.Config.PprofAddress.
//
// Every figure of the request path is a plain counter of the shard that counts it
// (shard.Stats for the runtime's, requestStats for the requests a handler answered):
// no cache line is shared between shards and nothing is atomic there. A scrape asks
// every shard to copy its figures at its next turn (shard.Runtime.Inspect) and
// merges the copies, so it costs each shard one copy per scrape. Partition figures
// come from the statsTable the owner shards publish anyway (GetStats reads it); the
// metadata journal's fsync latencies from the journal writer's goroutine.

// outcome is how a request was answered, for iggy_requests_total.
type outcome uint8

const (
	outcomeDeferred outcome = iota // answered later; deliver records it
	outcomeOK
	outcomeRefused // a status reply: the request was refused before it was served
	outcomeEvicted
	outcomeCount
)

var outcomeNames = [outcomeCount]string{"", "ok", "refused", "evicted"}

// latencyBoundsNs are the upper bounds of the request latency histograms' buckets,
// 10 µs to 2.5 s.
var latencyBoundsNs = [...]int64{10e3, 25e3, 50e3, 100e3, 250e3, 500e3, 1e6, 2.5e6, 5e6, 10e6, 25e6, 50e6, 100e6, 250e6,
	500e6, 1e9, 2.5e9}

// histogram counts observations by latencyBoundsNs (the last bucket is +Inf).
type histogram struct {
	buckets [len(latencyBoundsNs) + 1]uint64
	count   uint64
	sumNs   int64
}

func (h *histogram) observe(ns int64) {
	i := 0
	for i < len(latencyBoundsNs) && ns > latencyBoundsNs[i] {
		i++
	}
	h.buckets[i]++
	h.count++
	h.sumNs += ns
}

func (h *histogram) merge(o *histogram) {
	for i := range h.buckets {
		h.buckets[i] += o.buckets[i]
	}
	h.count += o.count
	h.sumNs += o.sumNs
}

// metric turns h into a Prometheus histogram in seconds.
func (h *histogram) metric(desc *prometheus.Desc, labels ...string) prometheus.Metric {
	cumulative := make(map[float64]uint64, len(latencyBoundsNs))
	var running uint64
	for i, bound := range latencyBoundsNs {
		running += h.buckets[i]
		cumulative[float64(bound)/1e9] = running
	}
	return prometheus.MustNewConstHistogram(desc, h.count, float64(h.sumNs)/1e9, cumulative, labels...)
}

// commandStats are one shard's figures of one command.
type commandStats struct {
	outcomes [outcomeCount]uint64
	latency  histogram
}

// requestStats are one shard's figures of the requests it answered, by command
// (a command's entry is made the first time it is seen, then reused).
type requestStats map[commandKey]*commandStats

func (r requestStats) record(code commandKey, o outcome, latencyNs int64) {
	cs := r[code]
	if cs == nil {
		cs = &commandStats{}
		r[code] = cs
	}
	cs.outcomes[o]++
	cs.latency.observe(latencyNs)
}

// commandKey names a request's command: the code of an operation-2 read, the
// operation otherwise (a Register comes as code 40 or 45, both one operation).
type commandKey uint32

const commandKeyOperation = 1 << 31

func commandOf(hdr *wire.RequestHeader) commandKey {
	if hdr.Operation == wire.OperationNonReplicated {
		return commandKey(hdr.NonReplicatedCode)
	}
	return commandKeyOperation | commandKey(hdr.Operation)
}

func (k commandKey) String() string {
	if k&commandKeyOperation != 0 {
		op := wire.Operation(k &^ commandKeyOperation)
		if code, ok := op.CommandCode(); ok {
			return code.String()
		}
		return op.String()
	}
	return wire.CommandCode(k).String()
}

// syncedHistogram is a histogram written by one goroutine outside the shards (the
// journal writer) and read by scrapes.
type syncedHistogram struct {
	mu sync.Mutex
	h  histogram
}

func (s *syncedHistogram) observe(d time.Duration) {
	s.mu.Lock()
	s.h.observe(int64(d))
	s.mu.Unlock()
}

func (s *syncedHistogram) snapshot() histogram {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.h
}

// shardFigures is what a scrape copies from one shard.
type shardFigures struct {
	runtime  shard.Stats
	requests map[commandKey]commandStats
	commits  uint64 // shard 0's metadata commits
	held     partitionhost.HeldFrameCounts
	// files is what the shard's partition store did with its file budget,
	// filesMax the budget.
	files    segment.FileCacheStats
	filesMax int
	// metaDrops are the metadata core's ignored inputs (shard 0),
	// partitionDrops the shard's partition groups' summed, when the store
	// counts them (partitionDrops false otherwise).
	metaDrops, partitionDrops vsr.DropCounts
	hasPartitionDrops         bool
	// plans is what the shard's store made of the polls it was asked to
	// splice; lentOut and lentTaken its backups' lent frames (a cluster's).
	plans     partition.PlanStats
	lentOut   int
	lentTaken uint64
}

// dropsCounter is a partition store that sums its groups' ignored inputs by
// reason (partition.Store.Drops, once it has it).
type dropsCounter interface{ Drops() vsr.DropCounts }

// collector is the server's prometheus.Collector: its metric families grouped by
// what they measure.
type collector struct {
	srv *Server

	loop        loopMetrics
	requests    requestMetrics
	partitions  partitionMetrics
	files       fileMetrics
	splice      spliceMetrics
	metadata    metadataMetrics
	replication replicationMetrics
	tls         tlsMetrics
	// scrapeFailed counts the shards that did not answer a scrape in time.
	scrapeFailed *prometheus.Desc
}

// loopMetrics are a shard's event loop: its connections and bytes, its rings,
// its arena, its inbox, and what the loop costs (shard.Stats).
type loopMetrics struct {
	connections, receivedBytes, sentBytes, requestsServed, sqes, cqes  *prometheus.Desc
	arenaInUse, framesWaiting, framesWaited, inboxDepth                *prometheus.Desc
	turns, ringEnters, sleeps, timerWakeups, busyPolls, diskRingEnters *prometheus.Desc
	throttledWaits, timersPending                                      *prometheus.Desc
}

// requestMetrics are the requests answered, by command and outcome, and their
// latency.
type requestMetrics struct {
	answered, duration *prometheus.Desc
}

// partitionMetrics are each partition's figures.
type partitionMetrics struct {
	messages, sizeBytes, segments, currentOffset *prometheus.Desc
}

// fileMetrics are the partition stores' open files against their budget.
type fileMetrics struct {
	openFiles, openFilesPeak, openFilesMax      *prometheus.Desc
	fileReopens, fileEvictions, filesOverBudget *prometheus.Desc
}

// spliceMetrics are the polls answered without a copy (server/pollsplice.go):
// what the owner shards' stores made of the polls they were asked to plan
// (partition.Store.PlanStats), the replies the shards spliced and the pipes they
// spliced through (shard.Stats), and, in a cluster, the replica frames the
// backups journal in place of a copy (partition.Store.LentBodies).
type spliceMetrics struct {
	plans, plansHeld, plansReleased                      *prometheus.Desc
	splicedReplies, splicedBytes                         *prometheus.Desc
	pipesLent, pipesCreated, pipesClosedDirty, pipeWaits *prometheus.Desc
	lentFrames, lentFramesTotal                          *prometheus.Desc
}

// metadataMetrics are the metadata plane's commits and journal.
type metadataMetrics struct {
	commits, journalFsync *prometheus.Desc
}

// replicationMetrics are the replica plane's send classes (shard.ReplicaStats),
// the partition frames held for a creation (partitionhost/heldframes.go), and the consensus
// inputs ignored, by plane and reason (vsr.DropReason).
type replicationMetrics struct {
	framesSent, framesDropped, framesQueueFull *prometheus.Desc
	partitionFramesHeld, vsrDropped            *prometheus.Desc
	dials                                      *prometheus.Desc
}

// tlsMetrics are the TLS terminator's connections, handshakes and sessions.
type tlsMetrics struct {
	accepted, handshakes, sessions *prometheus.Desc
}

func newCollector(s *Server) *collector {
	perShard := []string{"shard"}
	perPartition := []string{"stream", "topic", "partition"}
	d := func(name, help string, labels []string) *prometheus.Desc {
		return prometheus.NewDesc("iggy_"+name, help, labels, nil)
	}
	c := &collector{srv: s}
	c.loop.connections = d("shard_connections", "Client connections the shard serves.", perShard)
	c.loop.receivedBytes = d("shard_received_bytes_total", "Bytes received from clients.", perShard)
	c.loop.sentBytes = d("shard_sent_bytes_total", "Bytes sent to clients.", perShard)
	c.loop.requestsServed = d("shard_requests_received_total", "Valid requests framed and handed to the server.", perShard)
	c.loop.sqes = d("shard_ring_submissions_total", "Submission queue entries prepared on the shard's connection ring.", perShard)
	c.loop.cqes = d("shard_ring_completions_total", "Completion queue entries reaped from the shard's connection ring.", perShard)
	c.loop.arenaInUse = d("shard_arena_buffers_in_use", "Arena buffers taken (requests, replies, backlogs).", perShard)
	c.loop.framesWaiting = d("shard_frames_waiting_for_buffer", "Connections whose next frame waits for an arena buffer.", perShard)
	c.loop.framesWaited = d("shard_frames_waited_for_buffer_total", "Frames that waited for an arena buffer before they could be read.", perShard)
	c.loop.inboxDepth = d("shard_inbox_depth", "Messages from other shards not served yet.", perShard)
	c.requests.answered = d("requests_total", "Requests answered, by command and outcome.", []string{"shard", "command", "outcome"})
	c.requests.duration = d("request_duration_seconds", "Time from a request's arrival to its reply, by command (all shards).", []string{"command"})
	c.partitions.messages = d("partition_messages", "Messages stored in the partition.", perPartition)
	c.partitions.sizeBytes = d("partition_size_bytes", "Bytes of the partition's segments on disk.", perPartition)
	c.partitions.segments = d("partition_segments", "Segments of the partition.", perPartition)
	c.partitions.currentOffset = d("partition_current_offset", "Offset of the partition's newest message.", perPartition)
	c.metadata.commits = d("metadata_commits_total", "Metadata operations committed since the start.", nil)
	c.metadata.journalFsync = d("metadata_journal_fsync_seconds", "Latency of the metadata journal's append and fdatasync.", nil)
	c.scrapeFailed = d("scrape_shards_unanswered", "Shards that did not answer this scrape in time (their figures are missing).", nil)
	c.tls.accepted = d("tls_connections_accepted_total", "TCP connections accepted on the TLS port.", nil)
	c.tls.handshakes = d("tls_handshakes_total", "TLS handshakes by outcome (ok, failed, timed_out, cut).", []string{"outcome"})
	c.tls.sessions = d("tls_sessions_open", "TLS sessions handed to the shards and not ended.", nil)
	c.loop.turns = d("shard_turns_total", "Iterations of the shard's loop.", perShard)
	c.loop.ringEnters = d("shard_ring_enters_total", "io_uring_enter calls on the shard's connection ring, busy polls included.", perShard)
	c.loop.sleeps = d("shard_sleeps_total", "Waits of the shard's loop that blocked.", perShard)
	c.loop.timerWakeups = d("shard_timer_wakeups_total", "Blocking waits ended by a timer, not a completion.", perShard)
	c.loop.busyPolls = d("shard_busy_polls_total", "Busy-poll rounds begun after a turn with completions.", perShard)
	c.loop.diskRingEnters = d("shard_disk_ring_enters_total", "io_uring_enter calls on the shard's disk ring.", perShard)
	c.loop.throttledWaits = d("shard_throttled_waits_total", "Sleeps between turns asked for without progress (a handler that spins).", perShard)
	c.loop.timersPending = d("shard_timers_pending", "Timers armed on the shard (deadlines, wake-ups).", perShard)
	c.replication.framesSent = d("replica_frames_sent_total", "Replica-plane frames that left whole, by send class.", []string{"class"})
	c.replication.framesDropped = d("replica_frames_dropped_total",
		"Replica-plane frames refused or dropped, by send class (consensus retransmits them).", []string{"class"})
	c.replication.framesQueueFull = d("replica_frames_queue_full_total",
		"Of the frames dropped, those refused because the class's queue to the peer was full (back-pressure).", []string{"class"})
	c.replication.partitionFramesHeld = d("partition_frames_held_total",
		"Partition groups' frames for partitions not created here yet, by what became of them (held, stepped, expired, refused).",
		[]string{"shard", "outcome"})
	c.replication.dials = d("replica_dials_total",
		"Connections this node started to its higher-id peers on the replica plane, by outcome (started; failed: refused, failed or cancelled, then redialled after a growing delay).",
		[]string{"outcome"})
	c.replication.vsrDropped = d("vsr_dropped_total",
		"Consensus inputs (peer frames, requests) a replica ignored or refused, by plane (metadata, partition: the shards' partition groups summed) and reason.",
		[]string{"plane", "reason"})
	c.files.openFiles = d("partition_open_files", "Partition files the shard's store holds open.", perShard)
	c.files.openFilesPeak = d("partition_open_files_peak", "The most partition files the shard's store held open at once.", perShard)
	c.files.openFilesMax = d("partition_open_files_max", "The shard's budget of open partition files (its share of the node's).", perShard)
	c.files.fileReopens = d("partition_file_reopens_total", "Partition files opened again for a request after the budget closed them.", perShard)
	c.files.fileEvictions = d("partition_file_evictions_total", "Partition files closed to stay within the budget.", perShard)
	c.files.filesOverBudget = d("partition_files_over_budget_total", "Partition files opened past the budget because every open one was in use.", perShard)
	c.splice.plans = d("poll_plans_total",
		"Polls a shard's partitions were asked to splice, by verdict: planned (spliced), or why it was copied (segment.PlanVerdict; plans_full: splice_plans_max were held).",
		[]string{"shard", "verdict"})
	c.splice.plansHeld = d("poll_plans_held", "Spliced replies whose segment files the shard's partitions hold now.", perShard)
	c.splice.plansReleased = d("poll_plans_released_total", "Spliced replies whose segment files were let go.", perShard)
	c.splice.splicedReplies = d("shard_spliced_replies_total", "Poll replies the shard sent whole by splices, file to pipe to socket.", perShard)
	c.splice.splicedBytes = d("shard_spliced_bytes_total", "File bytes the shard spliced to clients (in shard_sent_bytes_total too).", perShard)
	c.splice.pipesLent = d("shard_pipes_lent", "Pipes of the shard's pool lent to spliced replies now.", perShard)
	c.splice.pipesCreated = d("shard_pipes_created_total", "Pipes the shard made for its pool.", perShard)
	c.splice.pipesClosedDirty = d("shard_pipes_closed_dirty_total", "Pipes closed holding bytes of a spliced reply cut short.", perShard)
	c.splice.pipeWaits = d("shard_pipe_waits_total", "Spliced replies that found every pipe lent and waited for one.", perShard)
	c.splice.lentFrames = d("partition_lent_frames", "Replica frames the shard's backups journal in place of a copy now.", perShard)
	c.splice.lentFramesTotal = d("partition_lent_frames_total", "Replica frames the shard's backups journaled in place of a copy.", perShard)
	return c
}

// Describe implements prometheus.Collector.
func (c *collector) Describe(ch chan<- *prometheus.Desc) { prometheus.DescribeByCollect(c, ch) }

// Collect implements prometheus.Collector.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	s := c.srv
	figures := make([]*shardFigures, s.shardCount)
	var mu sync.Mutex // the shards copy concurrently
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = s.rt.Inspect(ctx, func(sh *shard.Shard) {
		h := s.handlers[sh.Index()]
		f := &shardFigures{runtime: sh.Stats(), requests: make(map[commandKey]commandStats, len(h.requests))}
		for code, cs := range h.requests {
			f.requests[code] = *cs
		}
		if h.meta != nil {
			f.commits = h.meta.Commits()
			f.metaDrops = h.meta.Plane().Core().Drops()
		}
		f.held = h.owned.HeldCounts()
		f.files, f.filesMax = h.owned.Store.OpenFiles(), h.owned.FilesMax
		f.plans = h.owned.Store.PlanStats()
		f.lentOut, f.lentTaken = h.owned.Store.LentBodies()
		if d, ok := any(h.owned.Store).(dropsCounter); ok {
			f.partitionDrops, f.hasPartitionDrops = d.Drops(), true
		}
		mu.Lock()
		figures[sh.Index()] = f
		mu.Unlock()
	})
	mu.Lock()
	defer mu.Unlock()
	unanswered := 0
	var metaDrops, partitionDrops vsr.DropCounts
	hasPartitionDrops := false
	latency := make(map[commandKey]*histogram)
	counter, gauge := prometheus.CounterValue, prometheus.GaugeValue
	for i, f := range figures {
		if f == nil {
			unanswered++
			continue
		}
		sh := strconv.Itoa(i)
		rt := &f.runtime
		ch <- prometheus.MustNewConstMetric(c.loop.connections, gauge, float64(rt.Connections), sh)
		ch <- prometheus.MustNewConstMetric(c.loop.receivedBytes, counter, float64(rt.BytesReceived), sh)
		ch <- prometheus.MustNewConstMetric(c.loop.sentBytes, counter, float64(rt.BytesSent), sh)
		ch <- prometheus.MustNewConstMetric(c.loop.requestsServed, counter, float64(rt.RequestsServed), sh)
		ch <- prometheus.MustNewConstMetric(c.loop.sqes, counter, float64(rt.SQEsPrepared), sh)
		ch <- prometheus.MustNewConstMetric(c.loop.cqes, counter, float64(rt.CQEsReaped), sh)
		ch <- prometheus.MustNewConstMetric(c.loop.arenaInUse, gauge, float64(rt.ArenaBuffersInUse), sh)
		ch <- prometheus.MustNewConstMetric(c.loop.framesWaiting, gauge, float64(rt.FramesWaitingForBuffer), sh)
		ch <- prometheus.MustNewConstMetric(c.loop.framesWaited, counter, float64(rt.FramesWaitedForBuffer), sh)
		ch <- prometheus.MustNewConstMetric(c.loop.inboxDepth, gauge, float64(rt.InboxDepth), sh)
		for _, m := range []struct {
			desc *prometheus.Desc
			v    uint64
		}{{c.loop.turns, rt.Turns}, {c.loop.ringEnters, rt.RingEnters}, {c.loop.sleeps, rt.Sleeps}, {c.loop.timerWakeups, rt.TimerWakeups},
			{c.loop.busyPolls, rt.BusyPolls}, {c.loop.diskRingEnters, rt.DiskRingEnters}, {c.loop.throttledWaits, rt.ThrottledWaits}} {
			ch <- prometheus.MustNewConstMetric(m.desc, counter, float64(m.v), sh)
		}
		ch <- prometheus.MustNewConstMetric(c.loop.timersPending, gauge, float64(rt.TimersPending), sh)
		ch <- prometheus.MustNewConstMetric(c.files.openFiles, gauge, float64(f.files.Open), sh)
		ch <- prometheus.MustNewConstMetric(c.files.openFilesPeak, gauge, float64(f.files.OpenPeak), sh)
		ch <- prometheus.MustNewConstMetric(c.files.openFilesMax, gauge, float64(f.filesMax), sh)
		ch <- prometheus.MustNewConstMetric(c.files.fileReopens, counter, float64(f.files.Reopens), sh)
		ch <- prometheus.MustNewConstMetric(c.files.fileEvictions, counter, float64(f.files.Evictions), sh)
		ch <- prometheus.MustNewConstMetric(c.files.filesOverBudget, counter, float64(f.files.OverBudget), sh)
		c.collectSplice(ch, f, sh, s.cluster != nil)
		for r := range metaDrops {
			metaDrops[r] += f.metaDrops[r]
			partitionDrops[r] += f.partitionDrops[r]
		}
		hasPartitionDrops = hasPartitionDrops || f.hasPartitionDrops
		if s.cluster != nil {
			for outcome, n := range map[string]uint64{"held": f.held.Held, "stepped": f.held.Stepped, "expired": f.held.Expired,
				"refused": f.held.Refused} {
				ch <- prometheus.MustNewConstMetric(c.replication.partitionFramesHeld, counter, float64(n), sh, outcome)
			}
		}
		for code, cs := range f.requests {
			name := code.String()
			for o := outcomeOK; o < outcomeCount; o++ {
				if n := cs.outcomes[o]; n > 0 {
					ch <- prometheus.MustNewConstMetric(c.requests.answered, counter, float64(n), sh, name, outcomeNames[o])
				}
			}
			merged := latency[code]
			if merged == nil {
				merged = &histogram{}
				latency[code] = merged
			}
			merged.merge(&cs.latency)
		}
		if i == 0 {
			ch <- prometheus.MustNewConstMetric(c.metadata.commits, counter, float64(f.commits))
		}
	}
	for code, h := range latency {
		ch <- h.metric(c.requests.duration, code.String())
	}
	for r := vsr.DropReason(0); r < vsr.DropReasonCount; r++ {
		if figures[0] != nil {
			ch <- prometheus.MustNewConstMetric(c.replication.vsrDropped, counter, float64(metaDrops[r]), "metadata", r.String())
		}
		if hasPartitionDrops {
			ch <- prometheus.MustNewConstMetric(c.replication.vsrDropped, counter, float64(partitionDrops[r]), "partition", r.String())
		}
	}
	fsync := s.journalFsyncs.snapshot()
	ch <- fsync.metric(c.metadata.journalFsync)
	ch <- prometheus.MustNewConstMetric(c.scrapeFailed, gauge, float64(unanswered))
	if s.cluster != nil {
		r := s.replicaStats()
		for _, class := range []struct {
			name string
			st   shard.ReplicaClassStats
		}{{"control", r.Control}, {"partition", r.Partition}} {
			ch <- prometheus.MustNewConstMetric(c.replication.framesSent, counter, float64(class.st.FramesSent), class.name)
			ch <- prometheus.MustNewConstMetric(c.replication.framesDropped, counter, float64(class.st.FramesDropped), class.name)
			ch <- prometheus.MustNewConstMetric(c.replication.framesQueueFull, counter, float64(class.st.QueueFull), class.name)
		}
		ch <- prometheus.MustNewConstMetric(c.replication.dials, counter, float64(r.Dials), "started")
		ch <- prometheus.MustNewConstMetric(c.replication.dials, counter, float64(r.DialsFailed), "failed")
	}
	if s.tls != nil {
		t := s.TLSStats()
		ch <- prometheus.MustNewConstMetric(c.tls.accepted, counter, float64(t.Accepted))
		for outcome, n := range map[string]uint64{"ok": t.Handshakes, "failed": t.HandshakesFailed,
			"timed_out": t.HandshakesTimedOut, "cut": t.HandshakesCut} {
			ch <- prometheus.MustNewConstMetric(c.tls.handshakes, counter, float64(n), outcome)
		}
		ch <- prometheus.MustNewConstMetric(c.tls.sessions, gauge, float64(t.SessionsOpen))
	}
	s.stats.Range(func(key partition.Key, ps metadata.PartitionStats) {
		labels := []string{strconv.FormatUint(uint64(key.StreamID), 10), strconv.FormatUint(uint64(key.TopicID), 10),
			strconv.FormatUint(uint64(key.PartitionID), 10)}
		ch <- prometheus.MustNewConstMetric(c.partitions.messages, gauge, float64(ps.MessagesCount), labels...)
		ch <- prometheus.MustNewConstMetric(c.partitions.sizeBytes, gauge, float64(ps.SizeBytes), labels...)
		ch <- prometheus.MustNewConstMetric(c.partitions.segments, gauge, float64(ps.SegmentsCount), labels...)
		ch <- prometheus.MustNewConstMetric(c.partitions.currentOffset, gauge, float64(ps.CurrentOffset), labels...)
	})
}

// collectSplice sends one shard's spliceMetrics.
func (c *collector) collectSplice(ch chan<- prometheus.Metric, f *shardFigures, sh string, cluster bool) {
	counter, gauge := prometheus.CounterValue, prometheus.GaugeValue
	for v, n := range f.plans.Verdicts {
		verdict := strings.ReplaceAll(segment.PlanVerdict(v).String(), " ", "_")
		ch <- prometheus.MustNewConstMetric(c.splice.plans, counter, float64(n), sh, verdict)
	}
	ch <- prometheus.MustNewConstMetric(c.splice.plans, counter, float64(f.plans.Full), sh, "plans_full")
	ch <- prometheus.MustNewConstMetric(c.splice.plansHeld, gauge, float64(f.plans.Held), sh)
	ch <- prometheus.MustNewConstMetric(c.splice.plansReleased, counter, float64(f.plans.Released), sh)
	rt := &f.runtime
	ch <- prometheus.MustNewConstMetric(c.splice.splicedReplies, counter, float64(rt.SplicedReplies), sh)
	ch <- prometheus.MustNewConstMetric(c.splice.splicedBytes, counter, float64(rt.SplicedBytes), sh)
	ch <- prometheus.MustNewConstMetric(c.splice.pipesLent, gauge, float64(rt.PipesLent), sh)
	ch <- prometheus.MustNewConstMetric(c.splice.pipesCreated, counter, float64(rt.PipesCreated), sh)
	ch <- prometheus.MustNewConstMetric(c.splice.pipesClosedDirty, counter, float64(rt.PipesClosedDirty), sh)
	ch <- prometheus.MustNewConstMetric(c.splice.pipeWaits, counter, float64(rt.PipeWaits), sh)
	if cluster {
		ch <- prometheus.MustNewConstMetric(c.splice.lentFrames, gauge, float64(f.lentOut), sh)
		ch <- prometheus.MustNewConstMetric(c.splice.lentFramesTotal, counter, float64(f.lentTaken), sh)
	}
}

// serveHTTP starts the metrics and pprof listeners the configuration asks for.
func (s *Server) serveHTTP() error {
	if s.cfg.MetricsAddress != "" {
		registry := prometheus.NewRegistry()
		registry.MustRegister(newCollector(s))
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(registry, promhttp.HandlerOpts{}))
		mux.HandleFunc("/health", s.health)
		mux.HandleFunc("GET /debug/replicated-state", s.serveReplicatedState)
		addr, err := s.listenHTTP("metrics", s.cfg.MetricsAddress, mux)
		if err != nil {
			return err
		}
		s.metricsAddr = addr
	}
	if s.cfg.PprofAddress != "" {
		mux := http.NewServeMux()
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		addr, err := s.listenHTTP("pprof", s.cfg.PprofAddress, mux)
		if err != nil {
			return err
		}
		s.pprofAddr = addr
	}
	return nil
}

func (s *Server) listenHTTP(what, address string, handler http.Handler) (net.Addr, error) {
	ln, err := net.Listen("tcp", address)
	if err != nil {
		return nil, &config.SettingError{Setting: what + ".address", Value: address, Reason: err.Error()}
	}
	hs := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	s.httpServers = append(s.httpServers, hs)
	go func() {
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error(what+" endpoint stopped", "err", err)
		}
	}()
	s.log.Info(what+" endpoint", "address", ln.Addr().String())
	return ln.Addr(), nil
}

// health answers /health: 200 while the node serves clients, 503 once it stops.
func (s *Server) health(w http.ResponseWriter, _ *http.Request) {
	select {
	case <-s.rt.Done():
		http.Error(w, "stopped\n", http.StatusServiceUnavailable)
	default:
		fmt.Fprintf(w, "serving: %d shards, %d connections\n", s.shardCount, s.rt.ConnectionCount())
	}
}

// stopHTTP closes the metrics and pprof endpoints.
func (s *Server) stopHTTP(ctx context.Context) {
	for _, hs := range s.httpServers {
		_ = hs.Shutdown(ctx)
	}
}

// MetricsAddr is where /metrics, /health and /debug/replicated-state are served,
// nil when they are not.
func (s *Server) MetricsAddr() net.Addr { return s.metricsAddr }

// PprofAddr is where /debug/pprof/ is served, nil when it is not.
func (s *Server) PprofAddr() net.Addr { return s.pprofAddr }
