package server

import (
	"context"
	"fmt"
	"testing"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/wire"
)

// BenchmarkPipelinedProducer: client.PipelinedProducer against the real server (one
// partition, 1000 messages of 1000 bytes per batch) with 1, 4 and 8 batches in
// flight: what pipelining buys end to end, and what the ordered replies cost it.
func BenchmarkPipelinedProducer(b *testing.B) {
	payload := make([]byte, benchPayloadBytes)
	msgs := make([]client.Message, benchMessagesPerBatch)
	for i := range msgs {
		msgs[i] = client.Message{ID: wire.Uint128{Lo: uint64(i + 1)}, Payload: payload}
	}
	for _, inFlight := range []int{1, 4, 8} {
		b.Run(fmt.Sprintf("in-flight=%d", inFlight), func(b *testing.B) {
			s, _ := benchServer(b)
			ctx := context.Background()
			p, err := client.DialPipelinedProducer(ctx, s.Addr().String(), client.NameID("bench"), client.NameID("t"),
				wire.Partitioning{Kind: wire.PartitioningPartitionID}, client.PipelineOptions{InFlightMax: inFlight},
				client.WithCredentials("iggy", "iggy"))
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			window := make([]client.Pending, inFlight)
			b.SetBytes(benchBatchBytes)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				slot := &window[i%inFlight]
				if i >= inFlight {
					if _, err := slot.Wait(ctx); err != nil {
						b.Fatal(err)
					}
				}
				if *slot, err = p.Send(ctx, msgs); err != nil {
					b.Fatal(err)
				}
			}
			if err := p.Flush(ctx); err != nil {
				b.Fatal(err)
			}
		})
	}
}
