package server

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/wire"
)

// The benchmark: one producer sending batches of 1000 messages of 1000
// bytes through client/ over loopback, one consumer polling them, against two
// baselines measured in the same run: the machine's raw loopback TCP bandwidth and
// its raw sequential write bandwidth (page cache, and with an fdatasync per MiB,
// which is what a topic's default save threshold asks of the server).
//
//	go test ./server -run '^$' -bench . -benchtime 2s -count 3

const (
	benchMessagesPerBatch = 1000
	benchPayloadBytes     = 1000
	benchBatchBytes       = benchMessagesPerBatch * benchPayloadBytes
)

func BenchmarkBaselineLoopbackTCP(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		io.Copy(io.Discard, conn)
	}()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	buf := make([]byte, benchBatchBytes)
	b.SetBytes(benchBatchBytes)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := conn.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkBaselineSequentialWrite(b *testing.B) {
	for _, tc := range []struct {
		name          string
		syncEveryByte int
	}{{"page_cache", 0}, {"fdatasync_per_MiB", 1 << 20}} {
		b.Run(tc.name, func(b *testing.B) {
			f, err := os.Create(filepath.Join(b.TempDir(), "seq"))
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			buf := make([]byte, benchBatchBytes)
			b.SetBytes(benchBatchBytes)
			b.ReportAllocs()
			b.ResetTimer()
			unsynced := 0
			for i := 0; i < b.N; i++ {
				if _, err := f.Write(buf); err != nil {
					b.Fatal(err)
				}
				unsynced += len(buf)
				if tc.syncEveryByte > 0 && unsynced >= tc.syncEveryByte {
					if err := f.Sync(); err != nil {
						b.Fatal(err)
					}
					unsynced = 0
				}
			}
		})
	}
}

// benchServer starts a 2-shard server with a stream "bench" and its topic "t" of
// one partition, and a client logged in as root.
func benchServer(b *testing.B) (*Server, *client.Client) {
	s, c := benchServerWith(b, nil)
	ctx := context.Background()
	if _, err := c.CreateStream(ctx, "bench"); err != nil {
		b.Fatal(err)
	}
	if _, err := c.CreateTopic(ctx, client.NameID("bench"), "t", 1, nil); err != nil {
		b.Fatal(err)
	}
	return s, c
}

// benchServerWith starts a 2-shard server (adjust changes its configuration) and
// logs a client in as root; both stop at the benchmark's end.
func benchServerWith(b *testing.B, adjust func(*setup)) (*Server, *client.Client) {
	cfg := defaultSetup()
	cfg.TCPAddress, cfg.SystemPath, cfg.ShardCount, cfg.PinCPUs = "127.0.0.1:0", b.TempDir(), 2, false
	if adjust != nil {
		adjust(&cfg)
	}
	s, err := start(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	})
	ctx := context.Background()
	c, err := client.Dial(ctx, s.Addr().String(), client.WithCredentials("iggy", "iggy"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return s, c
}

func benchBatch(b *testing.B) []byte {
	var bb wire.BatchBuilder
	bb.Reset(nil)
	payload := make([]byte, benchPayloadBytes)
	for i := 0; i < benchMessagesPerBatch; i++ {
		if err := bb.Append(wire.Uint128{Lo: uint64(i + 1)}, 1, payload, nil); err != nil {
			b.Fatal(err)
		}
	}
	batch, err := bb.Finish()
	if err != nil {
		b.Fatal(err)
	}
	return batch
}

// timePings pings b.N times through c, in the benchmark's timer, and returns each
// round trip.
func timePings(b *testing.B, c *client.Client) []time.Duration {
	ctx := context.Background()
	latencies := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		if err := c.Ping(ctx); err != nil {
			b.Fatal(err)
		}
		latencies = append(latencies, time.Since(start))
	}
	b.StopTimer()
	return latencies
}

func reportLatencies(b *testing.B, latencies []time.Duration) {
	if len(latencies) == 0 {
		return
	}
	slices.Sort(latencies)
	at := func(q float64) float64 {
		return float64(latencies[min(len(latencies)-1, int(q*float64(len(latencies))))].Microseconds())
	}
	b.ReportMetric(at(0.50), "p50-µs")
	b.ReportMetric(at(0.99), "p99-µs")
	b.ReportMetric(at(0.999), "p999-µs")
}

// BenchmarkProducer: one producer, batches of 1000 messages of 1000 bytes, each
// acknowledged (stored per the default policy) before the next.
func BenchmarkProducer(b *testing.B) {
	_, c := benchServer(b)
	batch := benchBatch(b)
	ctx := context.Background()
	partitioning := wire.Partitioning{Kind: wire.PartitioningPartitionID}
	latencies := make([]time.Duration, 0, b.N)
	b.SetBytes(benchBatchBytes)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		if _, err := c.SendBatch(ctx, client.NameID("bench"), client.NameID("t"), partitioning, batch); err != nil {
			b.Fatal(err)
		}
		latencies = append(latencies, time.Since(start))
	}
	b.StopTimer()
	reportLatencies(b, latencies)
}

// BenchmarkConsumer: one consumer polling 1000 messages of 1000 bytes per request
// from a partition that holds them.
func BenchmarkConsumer(b *testing.B) {
	_, c := benchServer(b)
	batch := benchBatch(b)
	ctx := context.Background()
	const stored = 64
	for i := 0; i < stored; i++ {
		if _, err := c.SendBatch(ctx, client.NameID("bench"), client.NameID("t"), wire.Partitioning{Kind: wire.PartitioningPartitionID}, batch); err != nil {
			b.Fatal(err)
		}
	}
	req := wire.PollMessages{Consumer: client.SingleConsumer(client.ID(1)), StreamID: client.NameID("bench"), TopicID: client.NameID("t"),
		Partition: wire.SomePartition(0), Count: benchMessagesPerBatch}
	latencies := make([]time.Duration, 0, b.N)
	b.SetBytes(benchBatchBytes)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		req.Strategy = wire.PollingStrategy{Kind: wire.PollingOffset, Value: uint64(i%stored) * benchMessagesPerBatch}
		start := time.Now()
		polled, err := c.PollMessages(ctx, &req)
		if err != nil {
			b.Fatal(err)
		}
		if polled.MessagesCount != benchMessagesPerBatch {
			b.Fatalf("polled %d messages", polled.MessagesCount)
		}
		latencies = append(latencies, time.Since(start))
	}
	b.StopTimer()
	reportLatencies(b, latencies)
}

// BenchmarkProducers: four producers at once, each on its own connection sending to
// its own partition of one topic, each batch acknowledged before its next. With two
// shards, connections and partitions share shards: a shard blocked in one
// partition's write stalls the others' requests, which is what moving the writes to
// the disk ring is for.
func BenchmarkProducers(b *testing.B) {
	const producerCount = 4
	s, admin := benchServer(b)
	ctx := context.Background()
	if _, err := admin.CreateTopic(ctx, client.NameID("bench"), "t4", producerCount, nil); err != nil {
		b.Fatal(err)
	}
	producers := make([]*client.Client, producerCount)
	for i := range producers {
		c, err := client.Dial(ctx, s.Addr().String(), client.WithCredentials("iggy", "iggy"))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { c.Close() })
		producers[i] = c
	}
	batch := benchBatch(b)
	var next atomic.Int64
	errs := make(chan error, producerCount)
	b.SetBytes(benchBatchBytes)
	b.ReportAllocs()
	b.ResetTimer()
	for i, c := range producers {
		go func() {
			partitioning := wire.Partitioning{Kind: wire.PartitioningPartitionID, PartitionID: uint32(i)}
			for next.Add(1) <= int64(b.N) {
				if _, err := c.SendBatch(ctx, client.NameID("bench"), client.NameID("t4"), partitioning, batch); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range producerCount {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
}
