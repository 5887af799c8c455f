package partition

import (
	"os"
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

// openFDs counts this process's open descriptors.
func openFDs(t testing.TB) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	return len(entries) - 1 // ReadDir's own
}

func sendRequestTo(k Key, batch []byte) *wire.SendMessages {
	req := sendRequest(batch)
	req.StreamID, req.TopicID = wire.NumericIdentifier(k.StreamID), wire.NumericIdentifier(k.TopicID)
	req.Partitioning.PartitionID = k.PartitionID
	return req
}

// A store of many more partitions than its file budget serves sends, polls and
// offsets on all of them, before and after a restart, and never holds more
// descriptors than the budget: counted in /proc/self/fd after every call, not by
// the cache. Each written partition has segments sealed and open, consumer offset
// files and, enforcing fsync, its journal file: five files or more, where the
// budget leaves less than one per partition.
func TestStoreServesManyPartitionsWithinItsFileBudget(t *testing.T) {
	const partitions, budget = 40, 12
	root := t.TempDir()
	cfg := Config{SegmentSizeBytes: 1536, EnforceFsync: true, PartitionsCount: partitions}
	repl := Replication{OpenFilesMax: budget, JournalFile: JournalFileAlways}
	base := openFDs(t)
	peak := 0
	check := func() {
		t.Helper()
		if n := openFDs(t) - base; n > peak {
			peak = n
			if n > budget {
				t.Fatalf("%d descriptors open, budget %d", n, budget)
			}
		}
	}
	keys := make([]Key, partitions)
	for i := range keys {
		keys[i] = Key{StreamID: 1, TopicID: 1, PartitionID: uint32(i)}
	}
	s := NewReplicatedStore(root, OSStorages{}, repl)
	for _, k := range keys {
		if err := s.Create(k, cfg, 1); err != nil {
			t.Fatal(err)
		}
		check()
	}
	const rounds, perBatch = 4, 3
	for round := 0; round < rounds; round++ {
		for _, k := range keys {
			rec := newSendRecorder()
			first := uint64(round * perBatch)
			if err := s.Send(k, sendRequestTo(k, makeBatch(t, first, perBatch, 300)), 1_000+first, rec, 1); err != nil {
				t.Fatalf("%v round %d: send: %v", k, round, err)
			}
			s.WaitIdle()
			if _, ok := rec.acked[1]; !ok {
				t.Fatalf("%v round %d: send not acknowledged (%v)", k, round, rec.failed[1])
			}
			check()
			if err := s.StoreConsumerOffset(k, Consumer{Kind: wire.ConsumerSingle, ID: uint32(round % 2)}, first, wire.AckQuorum); err != nil {
				t.Fatalf("%v round %d: store offset: %v", k, round, err)
			}
			check()
		}
	}
	served := func(s *Store, when string) {
		t.Helper()
		for _, k := range keys {
			_, msgs := poll(t, s, k, PollRequest{Strategy: wire.PollingStrategy{Kind: wire.PollingFirst}, Count: 1000})
			if len(msgs) != rounds*perBatch || msgs[len(msgs)-1].seq != rounds*perBatch-1 {
				t.Fatalf("%s: %v serves %v", when, k, offsetsOf(msgs))
			}
			if o, ok, err := s.ConsumerOffset(k, Consumer{Kind: wire.ConsumerSingle, ID: 1}); err != nil || !ok || o.StoredOffset != (rounds-1)*perBatch {
				t.Fatalf("%s: %v: consumer offset %+v %v %v", when, k, o, ok, err)
			}
			check()
		}
	}
	served(s, "written")
	if info, _ := s.Info(keys[0]); info.SegmentsCount < 2 {
		t.Fatalf("%d segments a partition: the test wants sealed ones", info.SegmentsCount)
	}
	stats := s.OpenFiles()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	check()
	s = NewReplicatedStore(root, OSStorages{}, repl)
	for _, k := range keys {
		if _, err := s.Open(k, cfg, Incarnation{CreatedAtMicros: 1}); err != nil {
			t.Fatal(err)
		}
		check()
	}
	served(s, "restarted")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if stats.OpenPeak > budget || stats.OverBudget != 0 || stats.Evictions == 0 {
		t.Fatalf("file cache %+v, budget %d", stats, budget)
	}
	if n := openFDs(t) - base; n != 0 {
		t.Fatalf("%d descriptors left open by a closed store", n)
	}
	t.Logf("%d partitions, budget %d: peak %d descriptors; cache %+v", partitions, budget, peak, stats)
}
