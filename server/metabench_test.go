package server

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/wire"
)

// BenchmarkMetadataWrites is metadata write throughput on one node: clients
// concurrent clients, each its own connection, logged in, renaming a stream of its
// own (UpdateStream, a journaled write each) as fast as its replies come. It
// reports writes/s, the latency's p50 and p99, and the journal's fdatasyncs per
// write, which group commit brings below 1. Run it against a build of the
// previous main (one write at a time) in the same run for the baseline:
//
//	go test ./server -run '^$' -bench BenchmarkMetadataWrites -benchtime 2000x -count 3
func BenchmarkMetadataWrites(b *testing.B) {
	for _, clients := range []int{1, 8, 32} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			s, root := benchServerWith(b, nil)
			ctx := context.Background()
			conns := make([]*client.Client, clients)
			streams := make([]uint32, clients)
			for i := range conns {
				c, err := client.Dial(ctx, s.Addr().String(), client.WithCredentials("iggy", "iggy"))
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { c.Close() })
				conns[i] = c
				st, err := root.CreateStream(ctx, fmt.Sprintf("bench-%d", i))
				if err != nil {
					b.Fatal(err)
				}
				streams[i] = st.ID
			}
			latencies := make([][]time.Duration, clients)
			var next atomic.Int64
			var failed atomic.Pointer[error]
			fsyncsBefore := s.journalFsyncs.snapshot().count
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for i := range conns {
				wg.Go(func() {
					id := wire.NumericIdentifier(streams[i])
					for k := next.Add(1); k <= int64(b.N); k = next.Add(1) {
						t0 := time.Now()
						if err := conns[i].UpdateStream(ctx, id, fmt.Sprintf("bench-%d-%d", i, k)); err != nil {
							failed.Store(&err)
							return
						}
						latencies[i] = append(latencies[i], time.Since(t0))
					}
				})
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			if err := failed.Load(); err != nil {
				b.Fatal(*err)
			}
			all := slices.Concat(latencies...)
			slices.Sort(all)
			fsyncs := s.journalFsyncs.snapshot().count - fsyncsBefore
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "writes/s")
			b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
			b.ReportMetric(float64(fsyncs)/float64(b.N), "fsyncs/write")
		})
	}
}
