package partition

import (
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

// BenchmarkBackupPrepare is the step of one prepare of 1,000 messages of 1 KB
// (the SDKs' default batch, 1 MB) on the last backup of a chain of three: the
// ingress checks, the journal, the PrepareOk. lend: the caller lends the frame
// (StepLending), which the journal keeps; copy: the journal copies the body out of
// it (Step), into a buffer reused from its pool when the pool has one. Only that
// step is timed.
func BenchmarkBackupPrepare(b *testing.B) {
	for _, mode := range []string{"copy", "lend"} {
		b.Run(mode, func(b *testing.B) {
			c := newTestCluster(b, 71, 3, Config{PartitionsCount: 1})
			const last = 2
			if mode == "lend" {
				c.lenders[last] = newFrameLender()
			} else {
				c.lenders[last] = nil
			}
			rec := newSendRecorder()
			var bodyBytes int
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				token := uint64(i + 1)
				c.send(makeBatch(b, uint64(i)*1000, 1000, 1000), 10_000+token, rec, token)
				for round := 0; ; round++ {
					if round == 10_000 {
						b.Fatal("the prepare never reaches the last backup")
					}
					if len(c.queue) > 0 && c.queue[0].to == last && c.queue[0].header().Command == wire.CommandPrepare {
						break
					}
					if !c.deliverOne() {
						b.Fatal("the prepare never reaches the last backup")
					}
				}
				f := c.queue[0]
				c.queue = c.queue[1:]
				h, err := wire.DecodeReplicaHeader(f.buf, 64<<20)
				if err != nil {
					b.Fatal(err)
				}
				s, body := c.stores[last], f.buf[wire.HeaderSize:]
				bodyBytes = len(body)
				if l := c.lenders[last]; l != nil {
					l.frame = f.buf
					b.StartTimer()
					err = s.StepLending(testKey, h, body, l)
					b.StopTimer()
					l.frame = nil
				} else {
					b.StartTimer()
					err = s.Step(testKey, h, body)
					b.StopTimer()
				}
				if err != nil {
					b.Fatal(err)
				}
				c.settle()
				for _, s := range c.stores {
					s.WaitIdle()
				}
				c.settle()
				if _, ok := rec.acked[token]; !ok {
					b.Fatalf("send %d not acknowledged (failed: %v)", token, rec.failed[token])
				}
			}
			b.SetBytes(int64(bodyBytes))
			// The copies' buffers the pool did not have (the collector empties it):
			// each is a fresh megabyte, zeroed and faulted in.
			b.ReportMetric(float64(c.stores[last].bodies.buffers.made)/float64(b.N), "buffers-made/op")
			if mode == "lend" {
				if _, taken := c.stores[last].LentBodies(); taken < uint64(b.N) {
					b.Fatalf("the backup was lent %d frames of %d", taken, b.N)
				}
			}
		})
	}
}
