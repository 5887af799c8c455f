package server

import (
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/vsr"
	"github.com/iggy-shard/iggy-shard/wire"
)

func metricsServer(t *testing.T, shards int) *Server {
	cfg := testConfig(t.TempDir(), shards)
	cfg.MetricsAddress, cfg.PprofAddress = "127.0.0.1:0", "127.0.0.1:0"
	return startTestServer(t, cfg)
}

func httpGet(t testing.TB, url string) (int, string) {
	t.Helper()
	hc := http.Client{Timeout: 10 * time.Second}
	resp, err := hc.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.StatusCode, string(body)
}

// metricSum adds up the samples of one metric whose labels contain every
// name="value" pair in with.
func metricSum(t *testing.T, text, name string, with ...string) float64 {
	t.Helper()
	sum, found := 0.0, false
	line := regexp.MustCompile(`^` + regexp.QuoteMeta(name) + `(\{[^}]*\})? (\S+)$`)
	for _, l := range strings.Split(text, "\n") {
		m := line.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		matches := true
		for _, w := range with {
			matches = matches && strings.Contains(m[1], w)
		}
		if !matches {
			continue
		}
		v, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			t.Fatalf("sample %q: %v", l, err)
		}
		sum, found = sum+v, true
	}
	if !found {
		t.Fatalf("no sample of %s%v in:\n%s", name, with, text)
	}
	return sum
}

// TestMetricsMoveAsRequestsAreServed: /metrics answers in the Prometheus text format
// and its counters move with the requests served on every shard; /health answers;
// pprof serves profiles whose goroutines carry their shard's label.
func TestMetricsMoveAsRequestsAreServed(t *testing.T) {
	s := metricsServer(t, 2)
	base := "http://" + s.MetricsAddr().String()
	if code, body := httpGet(t, base+"/health"); code != http.StatusOK || !strings.HasPrefix(body, "serving") {
		t.Fatalf("/health: %d %q", code, body)
	}
	_, before := httpGet(t, base+"/metrics")
	c := dialRoot(t, s)
	ctx := testContext(t)
	for range 5 {
		mustOK(t, "ping", c.Ping(ctx))
	}
	st, err := c.CreateStream(ctx, "m")
	mustOK(t, "create stream", err)
	topic, err := c.CreateTopic(ctx, client.ID(st.ID), "t", 2, nil)
	mustOK(t, "create topic", err)
	_, err = c.SendMessages(ctx, client.ID(st.ID), client.ID(topic.ID), wire.Partitioning{Kind: wire.PartitioningPartitionID, PartitionID: 1}, messages(3, "m"))
	mustOK(t, "send", err)
	_, err = c.CreateStream(ctx, "m")
	wantCode(t, "a second stream of the same name", err, wire.ErrStreamNameAlreadyExists)
	_, after := httpGet(t, base+"/metrics")

	if got := metricSum(t, after, "iggy_requests_total", `command="Ping"`, `outcome="ok"`); got < 5 {
		t.Fatalf("%v pings counted, want at least 5", got)
	}
	if got := metricSum(t, after, "iggy_requests_total", `command="SendMessages"`, `outcome="ok"`); got != 1 {
		t.Fatalf("%v sends counted, want 1", got)
	}
	if got := metricSum(t, after, "iggy_requests_total", `command="CreateStream"`, `outcome="refused"`); got != 1 {
		t.Fatalf("%v refused CreateStream counted, want 1", got)
	}
	if got := metricSum(t, after, "iggy_request_duration_seconds_count", `command="SendMessages"`); got != 1 {
		t.Fatalf("%v send latencies, want 1", got)
	}
	if got := metricSum(t, after, "iggy_metadata_commits_total"); got < 3 { // login, stream, topic
		t.Fatalf("%v metadata commits, want at least 3", got)
	}
	if got := metricSum(t, after, "iggy_metadata_journal_fsync_seconds_count"); got < 3 {
		t.Fatalf("%v journal fsyncs, want at least 3", got)
	}
	if got := metricSum(t, after, "iggy_partition_messages", `partition="1"`); got != 3 {
		t.Fatalf("partition 1 holds %v messages, want 3", got)
	}
	if metricSum(t, after, "iggy_shard_received_bytes_total") <= metricSum(t, before, "iggy_shard_received_bytes_total") {
		t.Fatal("received bytes did not move")
	}
	if got := metricSum(t, after, "iggy_shard_connections"); got != 1 {
		t.Fatalf("%v connections, want 1", got)
	}
	if got := metricSum(t, after, "iggy_scrape_shards_unanswered"); got != 0 {
		t.Fatalf("%v shards did not answer the scrape", got)
	}
	// What the loops cost, per shard.
	for _, name := range []string{"iggy_shard_turns_total", "iggy_shard_ring_enters_total", "iggy_shard_sleeps_total"} {
		for _, sh := range []string{`shard="0"`, `shard="1"`} {
			if metricSum(t, after, name, sh) <= metricSum(t, before, name, sh) {
				t.Errorf("%s{%s} did not move", name, sh)
			}
		}
	}
	for _, name := range []string{"iggy_shard_timer_wakeups_total", "iggy_shard_busy_polls_total", "iggy_shard_disk_ring_enters_total",
		"iggy_shard_throttled_waits_total", "iggy_shard_timers_pending"} {
		metricSum(t, after, name, `shard="1"`)
	}
	if got := metricSum(t, after, "iggy_shard_disk_ring_enters_total"); got == 0 {
		t.Error("a send was written, and no shard entered its disk ring")
	}
	if strings.Contains(after, "iggy_replica_frames") {
		t.Error("a single node reports replica frames")
	}

	pprofBase := "http://" + s.PprofAddr().String()
	if code, _ := httpGet(t, pprofBase+"/debug/pprof/"); code != http.StatusOK {
		t.Fatalf("/debug/pprof/: %d", code)
	}
	_, goroutines := httpGet(t, pprofBase+"/debug/pprof/goroutine?debug=1")
	for _, label := range []string{`"shard":"0"`, `"shard":"1"`} {
		if !strings.Contains(goroutines, label) {
			t.Fatalf("no goroutine labelled %s in the goroutine profile", label)
		}
	}
}

// A clustered node's /metrics counts the replica plane's frames by send class
// (the metadata group's on the control class, the partition groups' on theirs),
// with the ones dropped and refused for a full queue, and the partition frames
// held for a creation, and the frames its backups journal in place of a copy.
func TestMetricsOfTheReplicaPlane(t *testing.T) {
	cfgs := clusterConfigs(t, 3, testClusterSecret)
	cfgs[0].MetricsAddress = "127.0.0.1:0"
	servers := startCluster(t, cfgs)
	c := dialCluster(t, servers[0])
	ctx := testContext(t)
	st, err := c.CreateStream(ctx, "m")
	mustOK(t, "create stream", err)
	topic, err := c.CreateTopic(ctx, client.ID(st.ID), "t", 2, nil)
	mustOK(t, "create topic", err)
	_, err = c.SendMessages(ctx, client.ID(st.ID), client.ID(topic.ID), wire.Partitioning{Kind: wire.PartitioningPartitionID, PartitionID: 1}, messages(3, "m"))
	mustOK(t, "send", err)
	_, text := httpGet(t, "http://"+servers[0].MetricsAddr().String()+"/metrics")
	for _, class := range []string{`class="control"`, `class="partition"`} {
		if got := metricSum(t, text, "iggy_replica_frames_sent_total", class); got == 0 {
			t.Errorf("no frame of %s counted sent", class)
		}
		metricSum(t, text, "iggy_replica_frames_dropped_total", class)
		metricSum(t, text, "iggy_replica_frames_queue_full_total", class)
	}
	for _, outcome := range []string{"held", "stepped", "expired", "refused"} {
		metricSum(t, text, "iggy_partition_frames_held_total", `outcome="`+outcome+`"`)
	}
	// Node 0 dials its higher-id peers: its dials are counted, and the failed
	// ones (a peer not listening yet) have their sample.
	if got := metricSum(t, text, "iggy_replica_dials_total", `outcome="started"`); got < 2 {
		t.Errorf("node 0 counted %v dials to its 2 higher-id peers", got)
	}
	metricSum(t, text, "iggy_replica_dials_total", `outcome="failed"`)
	metricSum(t, text, "iggy_shard_frames_waited_for_buffer_total")
	// The backups' lent frames are counted on a clustered node (only).
	metricSum(t, text, "iggy_partition_lent_frames")
	metricSum(t, text, "iggy_partition_lent_frames_total")
	// Every reason of the metadata core's ignored inputs has its sample.
	for r := vsr.DropReason(0); r < vsr.DropReasonCount; r++ {
		metricSum(t, text, "iggy_vsr_dropped_total", `plane="metadata"`, `reason="`+r.String()+`"`)
	}
}

// The partition stores' open files are on /metrics against each shard's share of
// the node's budget: with a budget below what the partitions written hold, files
// are closed to make room (evictions) and opened again for a poll (reopens), and
// no more than the budget is open.
func TestMetricsOfThePartitionFiles(t *testing.T) {
	cfg := testConfig(t.TempDir(), 1)
	cfg.MetricsAddress = "127.0.0.1:0"
	cfg.openFilesMax = 4
	s := startTestServer(t, cfg)
	c := dialRoot(t, s)
	ctx := testContext(t)
	st, err := c.CreateStream(ctx, "files")
	mustOK(t, "create stream", err)
	const partitions = 6
	topic, err := c.CreateTopic(ctx, client.ID(st.ID), "t", partitions, nil)
	mustOK(t, "create topic", err)
	for p := uint32(0); p < partitions; p++ {
		_, err = c.SendMessages(ctx, client.ID(st.ID), client.ID(topic.ID), wire.Partitioning{Kind: wire.PartitioningPartitionID, PartitionID: p}, messages(2, "f"))
		mustOK(t, "send", err)
	}
	for p := uint32(0); p < partitions; p++ {
		_, err := c.PollMessages(ctx, &wire.PollMessages{Consumer: client.SingleConsumer(client.ID(1)),
			StreamID: client.ID(st.ID), TopicID: client.ID(topic.ID), Partition: wire.SomePartition(p),
			Strategy: wire.PollingStrategy{Kind: wire.PollingOffset}, Count: 10})
		mustOK(t, "poll", err)
	}
	_, text := httpGet(t, "http://"+s.MetricsAddr().String()+"/metrics")
	if got := metricSum(t, text, "iggy_partition_open_files_max"); got != 4 {
		t.Errorf("budget %v, want 4", got)
	}
	if open, peak := metricSum(t, text, "iggy_partition_open_files"), metricSum(t, text, "iggy_partition_open_files_peak"); open > 4 || peak > 4 || peak == 0 {
		t.Errorf("open files %v, peak %v: want within the budget of 4", open, peak)
	}
	if got := metricSum(t, text, "iggy_partition_file_evictions_total"); got == 0 {
		t.Error("no file closed for room")
	}
	if got := metricSum(t, text, "iggy_partition_file_reopens_total"); got == 0 {
		t.Error("no file opened again")
	}
	metricSum(t, text, "iggy_partition_files_over_budget_total")
	metricSum(t, text, "iggy_vsr_dropped_total", `plane="metadata"`)
}

// BenchmarkPingDuringScrapes: PING round trips on a 2-shard server while /metrics is
// scraped every 100 ms, against the same PINGs with no scrape: a scrape costs each
// shard one copy of its figures at its next turn, so the p99 should not move.
func BenchmarkPingDuringScrapes(b *testing.B) {
	for _, scraping := range []bool{false, true} {
		name := "no-scrape"
		if scraping {
			name = "scrape-every-100ms"
		}
		b.Run(name, func(b *testing.B) {
			s, pinger := benchServerWith(b, func(cfg *setup) { cfg.MetricsAddress = "127.0.0.1:0" })
			stop, scraperDone := make(chan struct{}), make(chan struct{})
			scrapes := 0
			go func() {
				defer close(scraperDone)
				if !scraping {
					return
				}
				tick := time.NewTicker(100 * time.Millisecond)
				defer tick.Stop()
				hc := http.Client{Timeout: 5 * time.Second}
				for {
					select {
					case <-stop:
						return
					case <-tick.C:
					}
					resp, err := hc.Get("http://" + s.MetricsAddr().String() + "/metrics")
					if err != nil {
						b.Error(err)
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					scrapes++
				}
			}()
			latencies := timePings(b, pinger)
			close(stop)
			<-scraperDone
			reportLatencies(b, latencies)
			b.ReportMetric(float64(scrapes), "scrapes")
		})
	}
}

// /debug/replicated-state tells the op a node applied and the digest of its
// replicated state (the one the in-process tests compare, metaPlane.Digest), so
// that a test outside the process can compare the nodes (internal/clustertest).
func TestReplicatedStateDiagnostic(t *testing.T) {
	cfgs := clusterConfigs(t, 3, testClusterSecret)
	for i := range cfgs {
		cfgs[i].MetricsAddress = "127.0.0.1:0"
	}
	servers := startCluster(t, cfgs)
	c := dialCluster(t, servers[0])
	_, err := c.CreateStream(testContext(t), "digest")
	mustOK(t, "create stream", err)
	op, digests := replicatedDigests(t, servers)
	for i, s := range servers {
		code, body := httpGet(t, "http://"+s.MetricsAddr().String()+"/debug/replicated-state")
		want := fmt.Sprintf("applied_op=%d commit=%d digest=%016x\n", op, op, digests[i])
		if code != http.StatusOK || body != want {
			t.Fatalf("node %d: /debug/replicated-state %d %q, want %q", i, code, body, want)
		}
	}
}
