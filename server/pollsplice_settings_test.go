package server

import (
	"testing"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/config"
	"github.com/iggy-shard/iggy-shard/partition"
	"github.com/iggy-shard/iggy-shard/shard"
	"github.com/iggy-shard/iggy-shard/wire"
)

// [system.partition]'s defaults, which package config repeats, are the
// packages' own.
func TestPartitionSettingsDefaultsAreThePackages(t *testing.T) {
	got := config.DefaultPartition()
	want := config.Partition{
		SpliceReplyBytesMin: partition.PlanReplyBytesMinDefault,
		SplicePinMax:        partition.PlanPinMaxDefault,
		SplicePlansMax:      partition.PlansMaxDefault,
		SplicePipesPerShard: shard.PipesPerShardMaxDefault,
		SplicePipeSizeBytes: shard.PipeSizeBytesDefault,
		SpliceRing:          true, // the server's choice, measured (config/partition.go)
		ScrubBytesPerSecond: partition.ScrubBytesPerSecondDefault,
	}
	if got != want {
		t.Fatalf("config.DefaultPartition() = %+v, want the packages' %+v", got, want)
	}
	s := &Server{cfg: setup{Config: config.Default()}}
	if p := s.pollPlanConfig(); p.ReplyBytesMin != want.SpliceReplyBytesMin || p.TrustWrites {
		t.Fatalf("the default plan config %+v", p)
	}
	s.cfg.Partition.ScrubBytesPerSecond = 0
	if r := s.scrubBytesPerSecond(); r >= 0 {
		t.Fatalf("scrub_bytes_per_second = 0 gives the store a rate of %d, want a negative one (off)", r)
	}
}

// TestSplicedPollMovesTheMetrics: [system.partition] reaches the running server
// (splice_trust_writes and splice_reply_min set in the configuration, not
// through a test hook: a batch's first poll is spliced, which by default it is
// not) and a spliced poll moves the splice metrics.
func TestSplicedPollMovesTheMetrics(t *testing.T) {
	cfg := testConfig(t.TempDir(), 1)
	cfg.MetricsAddress = "127.0.0.1:0"
	cfg.Partition.SpliceReplyBytesMin = 4096
	cfg.Partition.SpliceTrustWrites = true
	s := startTestServer(t, cfg)
	c := dialRoot(t, s)
	ctx := testContext(t)
	_, err := c.CreateStream(ctx, "s")
	mustOK(t, "create stream", err)
	fsync, err := wire.AppendOption(nil, "enforce_fsync", wire.HeaderBool, []byte{1})
	mustOK(t, "options", err)
	_, err = c.CreateTopic(ctx, client.NameID("s"), "t", 1, fsync)
	mustOK(t, "create topic", err)

	scrape := func() string {
		_, text := httpGet(t, "http://"+s.MetricsAddr().String()+"/metrics")
		return text
	}
	before := scrape()
	for _, m := range []string{"iggy_shard_spliced_replies_total", "iggy_shard_spliced_bytes_total", "iggy_shard_pipes_created_total",
		"iggy_poll_plans_released_total"} {
		if v := metricSum(t, before, m); v != 0 {
			t.Fatalf("%s = %v before any poll", m, v)
		}
	}
	if v := metricSum(t, before, "iggy_poll_plans_total", `verdict="planned"`); v != 0 {
		t.Fatalf("%v polls planned before any poll", v)
	}

	sendSpliceBatches(t, ctx, c, 4, 10, 1000) // 4 batches of ~10 KB
	polled, err := c.PollMessagesCopy(ctx, pollFrom(0, 40), nil)
	mustOK(t, "poll", err)
	mustOK(t, "the spliced poll's checksums", polled.Verify())
	if polled.MessagesCount != 40 {
		t.Fatalf("polled %d messages, want 40", polled.MessagesCount)
	}
	mustOK(t, "ping", c.Ping(ctx)) // the reply was sent whole

	// The poll was planned before its reply was sent.
	if v := metricSum(t, scrape(), "iggy_poll_plans_total", `verdict="planned"`); v != 1 {
		t.Fatalf("%v polls planned, want the first poll's 1 (trust_writes and reply_min did not reach the store: %s)", v, planStats(t, s))
	}
	var after string
	waitUntil(t, "the spliced reply's plan is released", func() bool {
		after = scrape()
		return metricSum(t, after, "iggy_poll_plans_released_total") == 1
	})
	if v := metricSum(t, after, "iggy_shard_spliced_replies_total"); v != 1 {
		t.Fatalf("%v replies spliced, want 1", v)
	}
	if v := metricSum(t, after, "iggy_shard_spliced_bytes_total"); v < 40_000 || v > 45_000 {
		t.Fatalf("%v bytes spliced, want the 4 batches' ~41 KB", v)
	}
	if v := metricSum(t, after, "iggy_shard_pipes_created_total"); v != 1 {
		t.Fatalf("%v pipes made, want 1", v)
	}
	if v := metricSum(t, after, "iggy_shard_pipes_lent"); v != 0 {
		t.Fatalf("%v pipes lent after the reply went", v)
	}
	if v := metricSum(t, after, "iggy_poll_plans_held"); v != 0 {
		t.Fatalf("%v plans held after the reply went", v)
	}
	metricSum(t, after, "iggy_shard_pipe_waits_total")
	metricSum(t, after, "iggy_shard_pipes_closed_dirty_total")
	metricSum(t, after, "iggy_poll_plans_total", `verdict="plans_full"`)
}
