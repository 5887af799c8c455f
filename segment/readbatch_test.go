package segment

import (
	"bytes"
	"errors"
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

// ReadBatch returns every written batch byte for byte, from the open segment and
// from sealed ones whose index left the cache, and refuses an offset inside a
// batch, one not written yet and one retention deleted.
func TestReadBatchServesWrittenBatchesExactly(t *testing.T) {
	storages(t, func(t *testing.T, st Storage) {
		cfg := Config{PartitionID: testPartition, SegmentSizeBytes: 2048, IndexCacheSegments: 1}
		l := openLog(t, st, cfg)
		a := newAppender(t, l, 9, 40)
		var batches [][]byte
		for range 60 {
			batches = append(batches, append([]byte(nil), a.append(1+a.rng.IntN(4))...))
		}
		l.WaitIdle()
		if l.SegmentCount() < 4 {
			t.Fatalf("%d segments: the test needs sealed ones out of the index cache", l.SegmentCount())
		}
		var buf []byte
		for i, b := range batches {
			base := baseOf(b)
			got, err := l.ReadBatch(base, buf)
			if err != nil {
				t.Fatalf("batch %d at %d: %v", i, base, err)
			}
			if !bytes.Equal(got, b) {
				t.Fatalf("batch %d at %d: read %d bytes, not the %d appended", i, base, len(got), len(b))
			}
			buf = got
			if count := messageCount(b); count > 1 {
				if _, err := l.ReadBatch(base+1, buf); !errors.Is(err, ErrBatchNotStored) {
					t.Fatalf("offset %d inside a batch: %v, want ErrBatchNotStored", base+1, err)
				}
			}
		}
		if _, err := l.ReadBatch(l.NextOffset(), buf); !errors.Is(err, ErrBatchNotStored) {
			t.Fatalf("the next offset: %v, want ErrBatchNotStored", err)
		}
		// Appended, not written yet (nothing polled the storage since).
		pending := a.append(2)
		if _, err := l.ReadBatch(baseOf(pending), buf); !errors.Is(err, ErrBatchNotStored) {
			t.Fatalf("a batch not written yet: %v, want ErrBatchNotStored", err)
		}
		l.WaitIdle()
		if _, err := l.DeleteOldestSegments(2); err != nil {
			t.Fatal(err)
		}
		if _, err := l.ReadBatch(baseOf(batches[0]), buf); !errors.Is(err, ErrBatchNotStored) {
			t.Fatalf("a deleted batch: %v, want ErrBatchNotStored", err)
		}
		if got, err := l.ReadBatch(baseOf(pending), buf); err != nil || !bytes.Equal(got, pending) {
			t.Fatalf("the last batch, written: %v", err)
		}
	})
}

func baseOf(b []byte) uint64 {
	h, _ := wire.ViewBatchHeader(b)
	return h.BaseOffset()
}

func messageCount(b []byte) uint32 {
	h, _ := wire.ViewBatchHeader(b)
	return h.MessageCount()
}
