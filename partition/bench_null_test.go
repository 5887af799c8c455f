package partition

import (
	"testing"

	"github.com/iggy-shard/iggy-shard/segment"
)

// nullStorages give every partition a storage whose requests complete at the next
// Poll without touching a disk: what is left of a send is the CPU work around it.
type nullStorages struct{}

func (nullStorages) Open(string) (segment.Storage, error) { return &nullStorage{}, nil }
func (nullStorages) Remove(string) error                  { return nil }

type nullStorage struct {
	files   segment.File
	queue   []*segment.Request
	running []*segment.Request
}

func (s *nullStorage) Open(string, bool, int64) (segment.File, int64, error) {
	s.files++
	return s.files, 0, nil
}
func (s *nullStorage) Close(segment.File) error      { return nil }
func (s *nullStorage) List(string) ([]string, error) { return nil, nil }
func (s *nullStorage) Submit(r *segment.Request)     { s.queue = append(s.queue, r) }
func (s *nullStorage) Poll(bool) int {
	s.running, s.queue = s.queue, s.running[:0]
	for _, r := range s.running {
		if r.Op == segment.OpWrite || r.Op == segment.OpRead {
			r.Result = int64(len(r.Data))
		}
		r.Done(r)
	}
	n := len(s.running)
	clear(s.running)
	return n
}

// BenchmarkSendNoDisk: a send of one 100-byte message on a storage that does no
// I/O, so that the ns per op is the CPU cost of a send: validation, stamp, the
// partition group's prepare, journal and commit (with the group), the log's
// bookkeeping and the acknowledgement.
func BenchmarkSendNoDisk(b *testing.B) {
	batch := makeBatch(b, 0, 1, 100)
	s := NewStore("local_data", nullStorages{})
	if err := s.Create(testKey, noSaveConfig(), 1); err != nil {
		b.Fatal(err)
	}
	req := sendRequest(batch)
	done := &countingCompletion{}
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
}
