package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/config"
	"github.com/iggy-shard/iggy-shard/server"
	"github.com/iggy-shard/iggy-shard/wire"
)

// startServer runs an in-process server on a random loopback port with its data in
// a temporary directory, as server's own tests do.
func startServer(t *testing.T) string {
	t.Helper()
	cfg := config.Default()
	cfg.TCPAddress = "127.0.0.1:0"
	cfg.HTTP.Address = "127.0.0.1:0"
	cfg.SystemPath = t.TempDir()
	// Two shards, so that actors' connections and partitions land on different
	// shards and replies cross between them, as on a real server.
	cfg.ShardCount = 2
	cfg.PinCPUs = false
	s, err := server.Start(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatalf("server.Start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return s.Addr().String()
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// smallConfig is a few thousand small messages per kind: enough to cross batch,
// partition and group boundaries, quick enough for go test.
func smallConfig(kind Kind, addr string) Config {
	cfg := Config{
		Kind: kind, ServerAddress: addr,
		MessagesPerBatch: 50, MessageSizeBytes: 64, Batches: 20,
		StallTimeout: 10 * time.Second,
	}
	switch kind {
	case PinnedProducer, BalancedProducer, EndToEndProducingConsumer:
		cfg.Producers = 3
	case PinnedConsumer:
		cfg.Consumers = 3
	case PinnedProducerAndConsumer:
		cfg.Producers, cfg.Consumers = 2, 3 // one stream read by two consumers
	case BalancedConsumerGroup:
		cfg.Consumers, cfg.ConsumerGroups, cfg.Partitions = 3, 2, 4
	case BalancedProducerAndConsumerGroup:
		cfg.Producers, cfg.Consumers, cfg.ConsumerGroups, cfg.Partitions = 3, 2, 1, 5
	case EndToEndProducingConsumerGroup:
		cfg.Producers, cfg.Consumers, cfg.ConsumerGroups, cfg.Partitions = 3, 4, 2, 3
	}
	if kind == BalancedProducer {
		cfg.Partitions = 4
	}
	return cfg
}

func TestRunEveryKind(t *testing.T) {
	addr := startServer(t)
	for _, k := range Kinds {
		t.Run(k.Alias, func(t *testing.T) {
			cfg := smallConfig(k.Kind, addr)
			report, err := Run(testContext(t), cfg, nil)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			cfg = cfg.WithDefaults()
			v := report.Verification
			if !v.OK() || !v.Enabled {
				t.Fatalf("verification: %+v", v)
			}
			perActor := uint64(cfg.Batches * cfg.MessagesPerBatch)
			wantProduced := perActor * uint64(cfg.Producers)
			switch k.Kind {
			case PinnedConsumer:
				wantProduced = perActor * uint64(cfg.Streams)
			case BalancedConsumerGroup:
				wantProduced = perActor * uint64(cfg.Consumers)
			}
			if v.MessagesProduced != wantProduced {
				t.Errorf("produced %d, want %d", v.MessagesProduced, wantProduced)
			}
			if k.Kind.consumers() || k.Kind == EndToEndProducingConsumer {
				if v.MessagesConsumed != v.MessagesExpected || v.MessagesExpected == 0 {
					t.Errorf("consumed %d of %d expected", v.MessagesConsumed, v.MessagesExpected)
				}
			}
			for _, f := range report.Totals {
				var want uint64
				switch f.Role {
				case RoleProducer, RoleProducingConsumer:
					want = perActor * uint64(cfg.Producers)
				case RoleConsumer:
					want = v.MessagesExpected // no warm-up: every message is measured
				}
				if f.Messages != want {
					t.Errorf("%s total: %d messages measured, want %d", f.Role, f.Messages, want)
				}
				if f.Latency.Samples != f.Batches || f.Latency.P50Ms <= 0 || f.Latency.MaxMs < f.Latency.P99Ms || f.MessagesPerSecond <= 0 {
					t.Errorf("%s figures: %+v", f.Role, f)
				}
				if f.PayloadBytes != f.Messages*uint64(cfg.MessageSizeBytes) || f.WireBytes <= f.PayloadBytes {
					t.Errorf("%s bytes: payload %d wire %d for %d messages", f.Role, f.PayloadBytes, f.WireBytes, f.Messages)
				}
			}
			var table, js bytes.Buffer
			wantLine := "verification OK"
			if !k.Kind.consumers() && k.Kind != EndToEndProducingConsumer {
				wantLine = "nothing consumed"
			}
			if err := report.WriteTable(&table); err != nil || !strings.Contains(table.String(), wantLine) {
				t.Errorf("table (%v):\n%s", err, table.String())
			}
			if err := report.WriteJSON(&js); err != nil || !json.Valid(js.Bytes()) {
				t.Errorf("json (%v): %s", err, js.String())
			}
			assertNoBenchStreams(t, addr)
		})
	}
}

func assertNoBenchStreams(t *testing.T, addr string) {
	t.Helper()
	c, err := client.Dial(testContext(t), addr, client.WithCredentials(DefaultUsername, DefaultPassword))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	streams, err := c.GetStreams(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range streams {
		if strings.HasPrefix(string(s.Name), StreamNamePrefix) {
			t.Errorf("stream %s left behind", s.Name)
		}
	}
}

// A duration run with warm-up and a rate limit stops on time, keeps its streams
// when asked, and measures only after the warm-up.
func TestRunDurationWarmupRateKeep(t *testing.T) {
	addr := startServer(t)
	cfg := Config{
		Kind: PinnedProducerAndConsumer, ServerAddress: addr, Producers: 1, Consumers: 1,
		MessagesPerBatch: 10, MessageSizeBytes: 100, Duration: 300 * time.Millisecond, Warmup: 100 * time.Millisecond,
		RateLimitBytesPerSecond: 200_000, KeepStreams: true,
	}
	report, err := Run(testContext(t), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	v := report.Verification
	if !v.OK() || v.MessagesConsumed != v.MessagesProduced {
		t.Fatalf("verification %+v", v)
	}
	producers := report.Totals[0]
	// Two actors share 200 kB/s: 100 kB/s, 1 kB per batch, over 0.4 s in all is
	// about 40 batches; the measured window is only the last 0.3 s of them.
	if producers.Batches == 0 || producers.Batches > 60 || v.MessagesProduced <= producers.Messages {
		t.Fatalf("producers measured %d batches of %d messages produced", producers.Batches, v.MessagesProduced)
	}
	c, err := client.Dial(testContext(t), addr, client.WithCredentials("iggy", "iggy"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.GetStream(testContext(t), client.NameID(StreamNamePrefix+"1")); err != nil {
		t.Fatalf("kept stream: %v", err)
	}
	// A second run replaces the kept stream rather than reading its old messages.
	cfg.KeepStreams = false
	if report, err = Run(testContext(t), cfg, nil); err != nil || !report.Verification.OK() {
		t.Fatalf("second run: %v %+v", err, report)
	}
}

func TestRunServerNotRunning(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens here now
	_, err = Run(testContext(t), Config{Kind: PinnedProducer, ServerAddress: addr, DialTimeout: 2 * time.Second}, nil)
	var connectErr *ConnectError
	if !errors.As(err, &connectErr) || connectErr.Address != addr {
		t.Fatalf("err = %v, want a ConnectError for %s", err, addr)
	}
}

func TestRunWrongPassword(t *testing.T) {
	addr := startServer(t)
	_, err := Run(testContext(t), Config{Kind: PinnedProducer, ServerAddress: addr, Password: "wrong"}, nil)
	if !errors.Is(err, wire.ErrInvalidCredentials) {
		t.Fatalf("err = %v, want invalid credentials", err)
	}
}

func TestRawLoopback(t *testing.T) {
	report, err := RawLoopback(testContext(t), Config{Producers: 2, MessagesPerBatch: 100, MessageSizeBytes: 100, Batches: 50})
	if err != nil {
		t.Fatal(err)
	}
	f := report.Totals[0]
	if f.Messages != 2*50*100 || f.Batches != 100 || f.PayloadBytes != 2*50*100*100 || f.WireMBPerSec <= 0 || f.Latency.Samples != 100 {
		t.Fatalf("figures %+v", f)
	}
}

// An interrupted run (Ctrl-C in the command) stops its running actors at once,
// returns the context's error and still deletes its streams.
func TestRunInterrupted(t *testing.T) {
	addr := startServer(t)
	ctx, cancel := context.WithCancel(testContext(t))
	defer cancel()
	cfg := Config{Kind: PinnedProducerAndConsumer, ServerAddress: addr, Producers: 2, Consumers: 2,
		MessagesPerBatch: 10, MessageSizeBytes: 10, Duration: time.Hour}
	done := make(chan error, 1)
	go func() {
		_, err := Run(ctx, cfg, nil)
		done <- err
	}()
	// Interrupt once the consumers are reading: the first stream has messages and
	// its consumer offset moved (observed by polling the server, bounded in time).
	watcher, err := client.Dial(testContext(t), addr, client.WithCredentials(DefaultUsername, DefaultPassword))
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Close()
	for deadline := time.Now().Add(20 * time.Second); ; {
		if time.Now().After(deadline) {
			t.Fatal("the run produced nothing within 20 s")
		}
		s, err := watcher.GetStream(testContext(t), client.NameID(StreamNamePrefix+"1"))
		if err == nil && s.MessagesCount > 0 {
			break
		}
	}
	cancel()
	start := time.Now()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("took %v to stop", d)
	}
	assertNoBenchStreams(t, addr)
}

// recordingWatcher keeps what a run told it.
type recordingWatcher struct {
	steps    []string
	progress []Progress
}

func (w *recordingWatcher) Step(line string)    { w.steps = append(w.steps, line) }
func (w *recordingWatcher) Progress(p Progress) { w.progress = append(w.progress, p) }

// A watcher hears every step, and last of all the paced role's whole count.
func TestRunTellsWatcher(t *testing.T) {
	addr := startServer(t)
	for _, tc := range []struct {
		kind Kind
		role Role
	}{{PinnedProducerAndConsumer, RoleProducer}, {PinnedConsumer, RoleConsumer}, {EndToEndProducingConsumer, RoleProducingConsumer}} {
		cfg := smallConfig(tc.kind, addr)
		var w recordingWatcher
		report, err := Run(testContext(t), cfg, &w)
		if err != nil || !report.Verification.OK() {
			t.Fatalf("%s: %v %+v", tc.kind, err, report)
		}
		if len(w.steps) < 2 || !strings.HasPrefix(w.steps[0], "creating") || !strings.HasPrefix(w.steps[len(w.steps)-1], "running") {
			t.Errorf("%s: steps %q", tc.kind, w.steps)
		}
		if len(w.progress) == 0 {
			t.Fatalf("%s: no progress", tc.kind)
		}
		last := w.progress[len(w.progress)-1]
		cfg = cfg.WithDefaults()
		actors := max(cfg.Producers, cfg.Consumers)
		if tc.kind == PinnedProducerAndConsumer {
			actors = cfg.Producers
		}
		want := uint64(actors * cfg.Batches * cfg.MessagesPerBatch)
		if last.Role != tc.role || last.Messages != want || last.MessagesTotal != want || last.PayloadBytes != want*uint64(cfg.MessageSizeBytes) || last.Elapsed <= 0 {
			t.Errorf("%s: last progress %+v, want %d %s messages", tc.kind, last, want, tc.role)
		}
	}
}
