package partition

import "testing"

// BenchmarkSendFsyncJournalFile: BenchmarkSendFsync with the journal file written in
// a group of one replica too (JournalFileAlways), as every replica of a cluster does:
// the journal's write and fdatasync come before the log's.
func BenchmarkSendFsyncJournalFile(b *testing.B) {
	batch := makeBatch(b, 0, 1000, 1000)
	s := NewReplicatedStore(b.TempDir(), OSStorages{}, Replication{JournalFile: JournalFileAlways})
	if err := s.Create(testKey, Config{PartitionsCount: 1, EnforceFsync: true}, 1); err != nil {
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
