package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/config"
	"github.com/iggy-shard/iggy-shard/server"
)

// The end-to-end suites: a server started in this process on a random loopback
// port, driven by the engine's actors (one connection and goroutine each, every
// polled message verified) with batches of 1000 messages of 1000 bytes.
//
//	go test ./bench -run '^$' -bench EndToEnd -benchtime 200x -count 5 | tee new.txt
//	benchstat old.txt new.txt
//
// One op is one batch from every producer (produce, produce+consume) or to every
// consumer (consume), so MB/s is the payload all of them moved together. With
// partitions=1 one producer and/or one consumer use one partition; with
// partitions=4 four producers send balanced over a topic of four partitions and/or
// four consumers read it as one consumer group. Beside MB/s each reports:
//
//	x-loopback  MB/s over raw loopback TCP with as many connections (same process)
//	x-seqwrite  MB/s over a raw sequential write with an fdatasync every MiB, the
//	            server's default save threshold
//	p50-ms, p99-ms  batch latency (a send's or a poll's round trip), merged over actors
//
// Both baselines are measured once per process, in the same run. allocs/op and
// B/op count the whole process, the clients and the server (both live here), from
// the moment every actor is connected and logged in, per op of 1000 messages per
// actor: what is left are per-run costs (goroutines, the report) spread over the
// ops, since the send and poll loops allocate nothing; with IGGY_BENCH_SERVER_ADDRESS=host:port the
// suites drive that server instead, and count the clients alone.

// suiteServerEnv names a running server for the suites to drive instead of their
// own (the credentials are iggy/iggy): allocs/op and B/op then count the clients
// alone.
const suiteServerEnv = "IGGY_BENCH_SERVER_ADDRESS"

const (
	suiteMessagesPerBatch = 1000
	suiteMessageSizeBytes = 1000
	suiteBatchPayload     = suiteMessagesPerBatch * suiteMessageSizeBytes
	// Baseline volumes: long enough to be past TCP's and the page cache's warm-up,
	// short enough not to dominate a -benchtime 200x run.
	suiteLoopbackBatches = 500
	suiteSeqWriteBytes   = 256 << 20
)

var suiteBaselines struct {
	sync.Mutex
	loopbackMBps map[int]float64 // by connection count
	seqWriteMBps float64
}

// loopbackMBps measures (once per connection count) what plain loopback TCP moves
// in this process: RawLoopback writing batch-sized frames.
func loopbackMBps(b *testing.B, connections int) float64 {
	suiteBaselines.Lock()
	defer suiteBaselines.Unlock()
	if v, ok := suiteBaselines.loopbackMBps[connections]; ok {
		return v
	}
	r, err := RawLoopback(context.Background(), Config{Producers: connections, MessagesPerBatch: suiteMessagesPerBatch,
		MessageSizeBytes: suiteMessageSizeBytes, Batches: suiteLoopbackBatches})
	if err != nil {
		b.Fatal(err)
	}
	if suiteBaselines.loopbackMBps == nil {
		suiteBaselines.loopbackMBps = map[int]float64{}
	}
	v := r.Totals[0].PayloadMBPerSec
	suiteBaselines.loopbackMBps[connections] = v
	return v
}

// seqWriteMBps measures (once) a sequential write of batch-sized frames with an
// fdatasync every MiB, in a directory on the same file system as the server's data.
func seqWriteMBps(b *testing.B, dir string) float64 {
	suiteBaselines.Lock()
	defer suiteBaselines.Unlock()
	if suiteBaselines.seqWriteMBps == 0 {
		d, err := SequentialWrite(context.Background(), dir, suiteBatchPayload, suiteSeqWriteBytes, SyncEveryBytes)
		if err != nil {
			b.Fatal(err)
		}
		suiteBaselines.seqWriteMBps = d.MBPerSec
	}
	return suiteBaselines.seqWriteMBps
}

// startBenchServer runs a server with the default configuration, except that it
// listens on a random loopback port, keeps its data in a temporary directory and
// does not pin its shards (other benchmarks and tests share the machine's CPUs).
func startBenchServer(b *testing.B) (addr, dataDir string) {
	b.Helper()
	cfg := config.Default()
	cfg.TCPAddress = "127.0.0.1:0"
	cfg.HTTP.Address = "127.0.0.1:0"
	cfg.SystemPath = b.TempDir()
	cfg.PinCPUs = false
	s, err := server.Start(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		b.Fatalf("server.Start: %v", err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			b.Errorf("Shutdown: %v", err)
		}
	})
	return s.Addr().String(), cfg.SystemPath
}

func BenchmarkEndToEnd(b *testing.B) {
	var addr, dataDir string
	if addr = os.Getenv(suiteServerEnv); addr == "" {
		addr, dataDir = startBenchServer(b)
	} else {
		dataDir = b.TempDir()
	}
	for _, mode := range []struct {
		name                string
		onePartition, group Kind // the kind for partitions=1 and for partitions=4
		producers           bool
		consumers           bool
	}{
		{"produce", PinnedProducer, BalancedProducer, true, false},
		{"consume", PinnedConsumer, BalancedConsumerGroup, false, true},
		{"produce+consume", PinnedProducerAndConsumer, BalancedProducerAndConsumerGroup, true, true},
	} {
		for _, partitions := range []int{1, 4} {
			b.Run(fmt.Sprintf("%s/partitions=%d", mode.name, partitions), func(b *testing.B) {
				cfg := Config{Kind: mode.onePartition, ServerAddress: addr, Partitions: partitions,
					MessagesPerBatch: suiteMessagesPerBatch, MessageSizeBytes: suiteMessageSizeBytes, Batches: b.N}
				if partitions > 1 {
					cfg.Kind = mode.group
					if mode.consumers {
						cfg.ConsumerGroups = 1
					}
				}
				if mode.producers {
					cfg.Producers = partitions
				}
				if mode.consumers {
					cfg.Consumers = partitions
				}
				runSuite(b, cfg, dataDir)
			})
		}
	}
}

// runSuite sets up cfg's streams (and seeds them for a kind that only consumes)
// and connects the actors outside the timer, then times the actors' work alone.
func runSuite(b *testing.B, cfg Config, dataDir string) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		b.Fatal(err)
	}
	actors := max(cfg.Producers, cfg.Consumers)
	loopback := loopbackMBps(b, actors)
	seqWrite := seqWriteMBps(b, dataDir)
	ctx := context.Background()
	admin, err := dial(ctx, &cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer admin.Close()
	streams, err := setupStreams(ctx, admin, &cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer deleteStreams(ctx, admin, streams)
	if cfg.Kind.seeded() {
		if err := seed(ctx, &cfg, streams); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(actors * suiteBatchPayload))
	b.ReportAllocs()
	b.StopTimer() // connecting and logging in is not what is measured
	report, err := runActors(ctx, &cfg, streams, nil, func() {
		b.ResetTimer()
		b.StartTimer()
	})
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	if v := report.Verification; !v.OK() {
		b.Fatalf("verification failed: %+v", v)
	}
	mbps := float64(actors*suiteBatchPayload) * float64(b.N) / b.Elapsed().Seconds() / 1e6
	b.ReportMetric(mbps/loopback, "x-loopback")
	b.ReportMetric(mbps/seqWrite, "x-seqwrite")
	// The latency of the role that paces the run: the producers where there are
	// any, else the consumers.
	paced := report.Totals[0]
	b.ReportMetric(paced.Latency.P50Ms, "p50-ms")
	b.ReportMetric(paced.Latency.P99Ms, "p99-ms")
}
