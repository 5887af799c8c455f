package bench

import (
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

func TestTemplateBatchRestampValidates(t *testing.T) {
	batch, err := templateBatch(3, 50, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(batch) != batchLength(50, 100) {
		t.Fatalf("batch is %d bytes, want %d", len(batch), batchLength(50, 100))
	}
	for _, ts := range []uint64{1_700_000_000_000_000, 1_800_000_000_000_000} {
		restamp(batch, ts)
		if err := wire.ValidateBatch(batch); err != nil {
			t.Fatalf("restamped batch does not validate: %v", err)
		}
		h, _ := wire.ViewBatchHeader(batch)
		if h.OriginTimestamp() != ts || h.MessageCount() != 50 {
			t.Fatalf("origin %d count %d, want %d 50", h.OriginTimestamp(), h.MessageCount(), ts)
		}
	}
	i := 0
	for it := wire.Frames(batch); it.Next(); i++ {
		f := it.Frame()
		if f.ID() != (wire.Uint128{Hi: idMagic ^ 3, Lo: uint64(i)}) || len(f.Payload()) != 100 {
			t.Fatalf("frame %d: id %v payload %d bytes", i, f.ID(), len(f.Payload()))
		}
	}
}

// The send loop's per-batch work on the batch itself allocates nothing, even for
// batches larger than the wire's buffered checksum path.
func TestRestampDoesNotAllocate(t *testing.T) {
	batch, err := templateBatch(0, 1000, 10)
	if err != nil {
		t.Fatal(err)
	}
	ts := uint64(1)
	if n := testing.AllocsPerRun(100, func() { ts++; restamp(batch, ts) }); n != 0 {
		t.Fatalf("restamp allocates %v times", n)
	}
}
