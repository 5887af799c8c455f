package vsr

import (
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

// budgetStorage is a memStorage with a CopyBudget that counts what its core holds.
type budgetStorage struct {
	*memStorage
	heldBytes  int
	takes      int
	refuseFrom int // TakeCopy says no from this many takes on (0: never)
}

func (b *budgetStorage) TakeCopy(op uint64, n int) bool {
	if b.refuseFrom > 0 && b.takes >= b.refuseFrom {
		return false
	}
	b.takes++
	b.heldBytes += n
	return true
}

func (b *budgetStorage) GiveCopy(n int) {
	b.heldBytes -= n
	if b.heldBytes < 0 {
		panic("more copy bytes given back than taken")
	}
}

// A core counts the bodies it keeps as repair candidates against its storage's
// CopyBudget, and gives each back when it lets the candidate go: written once the
// chain reaches it, dropped when a new round starts or a state transfer begins;
// a candidate the budget refuses is dropped (DropRepairBufferFull). A shard of
// partition groups bounds them all with one budget: a group's candidates are up
// to RepairChunkMax batches, kept across Steps.
func TestRepairCandidatesCountAgainstTheCopyBudget(t *testing.T) {
	const head, commit = 30, 28
	chunk := uint64(testTiming.RepairChunkMax)
	first := func(b *repairingBackup) wire.RequestPreparesHeader {
		t.Helper()
		rs := b.drain()
		if len(rs) != 1 || rs[0].ToOp != commit-1 || rs[0].ToOp-rs[0].FromOp+1 != chunk {
			t.Fatalf("repair requests %+v, want one of the %d ops below %d", rs, chunk, commit)
		}
		return rs[0]
	}
	// held delivers the chunk but its top op: the chain cannot reach the others,
	// which stay candidates.
	held := func(b *repairingBackup, r wire.RequestPreparesHeader) {
		t.Helper()
		for op := r.FromOp; op < r.ToOp; op++ {
			b.repairPrepare(op)
		}
		if want := int(chunk-1) * repairBodyBytes; b.storage.heldBytes != want {
			t.Fatalf("candidates hold %d bytes of the budget, want %d", b.storage.heldBytes, want)
		}
	}

	t.Run("verified", func(t *testing.T) {
		b := newRepairingBackup(t, head, commit)
		r := first(b)
		held(b, r)
		b.repairPrepare(r.ToOp) // the chain reaches them all: written
		if b.storage.heldBytes != 0 {
			t.Fatalf("%d bytes still held once the candidates were written", b.storage.heldBytes)
		}
		b.drain()
		for op := r.FromOp; op <= r.ToOp; op++ {
			if _, ok := b.storage.Body(op, b.log[op-1].Checksum); !ok {
				t.Fatalf("op %d not written", op)
			}
		}
	})
	t.Run("new round", func(t *testing.T) {
		b := newRepairingBackup(t, head, commit)
		held(b, first(b))
		var again []wire.RequestPreparesHeader
		for range 2 * testTiming.RepairRetryIntervalTicks {
			b.c.Tick()
			if again = b.drain(); len(again) > 0 {
				break
			}
		}
		if len(again) == 0 {
			t.Fatal("no repair round after the retry interval")
		}
		if b.storage.heldBytes != 0 {
			t.Fatalf("a new round still holds %d bytes of the last one's candidates", b.storage.heldBytes)
		}
	})
	t.Run("transfer", func(t *testing.T) {
		b := newRepairingBackup(t, head, commit)
		held(b, first(b))
		b.c.startTransfer(1)
		if b.storage.heldBytes != 0 {
			t.Fatalf("a state transfer began with %d bytes of candidates held", b.storage.heldBytes)
		}
	})
	t.Run("refused", func(t *testing.T) {
		b := newRepairingBackup(t, head, commit)
		b.storage.refuseFrom = 2
		r := first(b)
		before := b.c.Drops()[DropRepairBufferFull]
		for op := r.FromOp; op < r.ToOp; op++ {
			b.repairPrepare(op)
		}
		if b.storage.heldBytes != 2*repairBodyBytes {
			t.Fatalf("candidates hold %d bytes, the budget allowed %d", b.storage.heldBytes, 2*repairBodyBytes)
		}
		if n := b.c.Drops()[DropRepairBufferFull] - before; n != chunk-3 {
			t.Fatalf("%d candidates dropped for the budget, want %d", n, chunk-3)
		}
	})
}
