package bench

import (
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

// The per-batch work a producer does on its batch, 1000 messages of 1000 bytes:
// restamp (what the engine does) against rebuilding the batch with wire.BatchBuilder
// (the baseline: what a producer building every batch afresh pays).
//
//	go test ./bench -run '^$' -bench 'ProducerBatch|PollCheck' -count 3
func BenchmarkProducerBatch(b *testing.B) {
	const n, size = 1000, 1000
	batch, err := templateBatch(0, n, size)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("restamp", func(b *testing.B) {
		b.SetBytes(int64(len(batch)))
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			restamp(batch, uint64(i))
		}
	})
	b.Run("baseline=rebuild", func(b *testing.B) {
		payload := make([]byte, size)
		buf := make([]byte, 0, len(batch))
		var bb wire.BatchBuilder
		b.SetBytes(int64(len(batch)))
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			bb.Reset(buf[:0])
			for j := range n {
				if err := bb.Append(wire.Uint128{Lo: uint64(j)}, uint64(i+1), payload, nil); err != nil {
					b.Fatal(err)
				}
			}
			if _, err := bb.Finish(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// A consumer's verification of one polled batch of 1000 messages of 1000 bytes:
// the full check (checksums, ids, offsets) against the baseline of walking the
// messages, which any consumer does.
func BenchmarkPollCheck(b *testing.B) {
	const n, size = 1000, 1000
	batch, err := templateBatch(0, n, size)
	if err != nil {
		b.Fatal(err)
	}
	restamp(batch, 1)
	wire.StampBatch(batch, 0, 0, 1)
	body := (&wire.PolledMessages{PartitionID: 0, MessagesCount: n, Records: batch}).Append(nil)
	var polled wire.PolledMessages
	if err := polled.Decode(body); err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		verify bool
	}{{"check", true}, {"baseline=walk", false}} {
		b.Run(tc.name, func(b *testing.B) {
			pc := pollCheck{messagesPerBatch: n, messageSizeBytes: size}
			b.SetBytes(int64(len(batch)))
			b.ReportAllocs()
			for b.Loop() {
				if _, count, _ := pc.check("bench", &polled, tc.verify); count != n {
					b.Fatalf("%d messages", count)
				}
			}
			if !pc.OK() {
				b.Fatalf("check failed: %+v", pc.Verification)
			}
		})
	}
}
