package partition

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

// Benchmarks run on OSStorage in a temporary directory, each against a baseline that
// does the same I/O with plain system calls in the same run. Run by hand, e.g.
//
//	go test -run '^$' -bench . -benchtime 400x -count 3 ./partition
//
// (a fixed iteration count keeps the data below one 1 GiB segment, so no seal's
// fdatasync lands in the middle of a run).

// noSaveConfig never syncs on the save thresholds: the append path alone.
func noSaveConfig() Config {
	return Config{PartitionsCount: 1, MessagesRequiredToSave: 16 << 20, SizeOfMessagesRequiredToSaveBytes: 1 << 30}
}

// BenchmarkSend: one SendMessages batch of 1000 messages of 1000 bytes per op,
// validated, stamped, appended and acknowledged, against writing the same bytes
// sequentially to a file.
func BenchmarkSend(b *testing.B) {
	batch := makeBatch(b, 0, 1000, 1000)
	b.Run("store", func(b *testing.B) {
		benchmarkSend(b, batch, noSaveConfig())
	})
	b.Run("store/save-thresholds", func(b *testing.B) {
		// The default save thresholds: an fdatasync once 1 MiB is written, so about
		// one per batch here.
		benchmarkSend(b, batch, Config{PartitionsCount: 1})
	})
	b.Run("baseline/write", func(b *testing.B) {
		f, err := os.Create(filepath.Join(b.TempDir(), "baseline.log"))
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		b.SetBytes(int64(len(batch)))
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := f.Write(batch); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func benchmarkSend(b *testing.B, batch []byte, cfg Config) {
	s := NewStore(b.TempDir(), OSStorages{})
	if err := s.Create(testKey, cfg, 1); err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	req := sendRequest(batch)
	done := &countingCompletion{}
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := s.Send(testKey, req, uint64(i), done, 0); err != nil {
			b.Fatal(err)
		}
		for done.acked+done.failed <= i {
			s.PollIO()
		}
	}
	b.StopTimer()
	if done.failed != 0 {
		b.Fatalf("%d sends failed", done.failed)
	}
}

// BenchmarkPoll: a poll of 1000 messages of 1000 bytes from a partition of 100-message
// batches (in the page cache), aligned on batches or not (then the first and last
// records are slices with recomputed headers), against reading the same bytes with
// pread.
func BenchmarkPoll(b *testing.B) {
	dir := b.TempDir()
	s := NewStore(dir, OSStorages{})
	if err := s.Create(testKey, noSaveConfig(), 1); err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for i := uint64(0); i < 20; i++ {
		mustSend(b, s, testKey, makeBatch(b, i*100, 100, 1000), i+1)
	}
	for _, start := range []uint64{0, 50} {
		b.Run(map[uint64]string{0: "store/aligned", 50: "store/sliced"}[start], func(b *testing.B) {
			var res PollResult
			var rec pollRecorder
			req := PollRequest{Consumer: Consumer{Kind: wire.ConsumerSingle, ID: 1}, Strategy: wire.PollingStrategy{Kind: wire.PollingOffset, Value: start}, Count: 1000}
			var buffers [][]byte
			poll := func() {
				calls := rec.calls
				if err := s.Poll(testKey, req, &res, &rec, 0); err != nil {
					b.Fatal(err)
				}
				for rec.calls == calls {
					s.PollIO()
				}
				if rec.err != nil || res.MessageCount() != 1000 {
					b.Fatalf("%d messages, %v", res.MessageCount(), rec.err)
				}
				buffers = res.AppendPollBuffers(buffers[:0])
			}
			poll()
			b.SetBytes(int64(res.ReplySizeBytes()))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				poll()
			}
		})
	}
	b.Run("baseline/pread", func(b *testing.B) {
		f, err := os.Open(filepath.Join(s.Dir(testKey), "00000000000000000000.log"))
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		buf := make([]byte, 10*len(makeBatch(b, 0, 100, 1000)))
		b.SetBytes(int64(len(buf)))
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := f.ReadAt(buf, 0); err != nil {
				b.Fatal(err)
			}
		}
	})
}
