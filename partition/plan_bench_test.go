package partition

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

// BenchmarkPollServe measures what the partition's shard spends to answer a
// poll of whole verified batches (1000-byte messages) of about N bytes, the
// pages in the page cache, by
//
//	copy  Poll: a read of the batches into the result's buffer (its steady
//	      state: the buffer kept), then the reply's parts
//	plan  PlanPoll, then Release: the runs and the plan's descriptors (a dup
//	      and a close per run), no byte read
//
// The send, which the shard does after either, is ring's BenchmarkPollReply.
func BenchmarkPollServe(b *testing.B) {
	for _, size := range []int64{64 << 10, 1 << 20, 4 << 20} {
		s := NewReplicatedStore(b.TempDir(), OSStorages{}, Replication{Plans: PlanConfig{ReplyBytesMin: 1}})
		if err := s.Create(testKey, Config{SegmentSizeBytes: 64 << 20, PartitionsCount: 1, EnforceFsync: true}, 1); err != nil {
			b.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(1, 2))
		var end uint64
		for end < uint64(2*size/1000) {
			count := 10 + rng.IntN(10)
			base := mustSend(b, s, testKey, makeBatch(b, end, count, 1000), 1000+end)
			end = base + uint64(count)
		}
		req := PollRequest{Strategy: wire.PollingStrategy{Kind: wire.PollingFirst}, Count: 1 << 20, MaxBytes: size}
		var res PollResult
		var rec pollRecorder
		for _, way := range []string{"copy", "plan"} {
			b.Run(fmt.Sprintf("bytes=%d/%s", size, way), func(b *testing.B) {
				var parts [][]byte
				var plan PollPlan
				serve := func() int {
					if way == "copy" {
						if err := s.Poll(testKey, req, &res, &rec, 1); err != nil {
							b.Fatal(err)
						}
						s.WaitIdle()
						parts = res.AppendPollBuffers(parts[:0])
						return res.ReplySizeBytes()
					}
					planned, err := s.PlanPoll(testKey, req, &plan, 0)
					if err != nil || !planned {
						b.Fatalf("planned %v, %v", planned, err)
					}
					n := plan.ReplySizeBytes()
					if err := plan.Release(); err != nil {
						b.Fatal(err)
					}
					return n
				}
				if way == "copy" {
					serve() // verifies, and grows the buffer
				}
				b.SetBytes(int64(serve()))
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					serve()
				}
			})
		}
		_ = s.Close()
	}
}
