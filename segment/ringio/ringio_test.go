package ringio

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/iggy-shard/iggy-shard/ring"
	"github.com/iggy-shard/iggy-shard/segment"
	"github.com/iggy-shard/iggy-shard/wire"
)

const partition = 3

func newRing(t *testing.T) *ring.Ring {
	t.Helper()
	runtime.LockOSThread()
	r, err := ring.New(ring.DefaultOptions(64))
	if err != nil {
		runtime.UnlockOSThread()
		t.Skipf("io_uring unavailable: %v", err)
	}
	for _, op := range []ring.Opcode{ring.OpRead, ring.OpWrite, ring.OpFsync} {
		if !r.Supports(op) {
			r.Close()
			runtime.UnlockOSThread()
			t.Skipf("kernel does not support %v", op)
		}
	}
	t.Cleanup(func() {
		r.Close()
		runtime.UnlockOSThread()
	})
	return r
}

func batch(t *testing.T, base, ts uint64, n int) []byte {
	t.Helper()
	var bb wire.BatchBuilder
	bb.Reset(nil)
	for i := 0; i < n; i++ {
		payload := bytes.Repeat([]byte{byte(base + uint64(i))}, 100+i)
		if err := bb.Append(wire.Uint128{Lo: base + uint64(i)}, ts, payload, nil); err != nil {
			t.Fatal(err)
		}
	}
	b, err := bb.Finish()
	if err != nil {
		t.Fatal(err)
	}
	wire.StampBatch(b, partition, base, ts)
	return b
}

// The log runs on the ring: appends (both durability modes, across segment seals),
// reads, consumer offsets, Close; then the files reopen on the blocking storage
// with nothing to repair and every batch byte for byte, and back on the ring.
func TestLogOnRing(t *testing.T) {
	r := newRing(t)
	for _, fsync := range []bool{false, true} {
		dir := t.TempDir()
		st, err := New(dir, r, 32)
		if err != nil {
			t.Fatal(err)
		}
		cfg := segment.Config{PartitionID: partition, SegmentSizeBytes: 8192, EnforceFsync: fsync}
		durable := uint64(0)
		l, _, err := segment.Open(st, cfg, segment.Hooks{Durable: func(end uint64) { durable = end }})
		if err != nil {
			t.Fatal(err)
		}
		var sent [][]byte
		for i := 0; i < 100; i++ {
			b := batch(t, l.NextOffset(), uint64(1000+i), 1+i%5)
			if err := l.Append(b); err != nil {
				t.Fatal(err)
			}
			sent = append(sent, b)
			if i%3 == 0 {
				st.Poll(false)
			}
		}
		l.Sync()
		l.WaitIdle()
		if durable != l.NextOffset() || l.SegmentCount() < 5 {
			t.Fatalf("fsync=%v: durable %d of %d, %d segments", fsync, durable, l.NextOffset(), l.SegmentCount())
		}
		if err := l.StoreConsumerOffset(segment.Consumer, 1, 17); err != nil {
			t.Fatal(err)
		}
		var want []byte
		for _, b := range sent {
			want = append(want, b...)
		}
		var p segment.Polled
		if err := l.Read(segment.Query{Kind: segment.PollOffset, Value: 0, Count: 1 << 20}, &p); err != nil {
			t.Fatal(err)
		}
		if got := p.AppendTo(nil); !bytes.Equal(got, want) {
			t.Fatalf("fsync=%v: read %d bytes back, sent %d (or different)", fsync, len(got), len(want))
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}

		plain, err := segment.NewOSStorage(dir)
		if err != nil {
			t.Fatal(err)
		}
		l, report, err := segment.Open(plain, cfg, segment.Hooks{})
		if err != nil {
			t.Fatal(err)
		}
		if len(report.Truncations) != 0 || len(report.RebuiltIndexes) != 0 || report.Offsets.Loaded != 1 {
			t.Fatalf("reopen after a ring close repaired something: %s %+v", report, report.Offsets)
		}
		if err := l.Read(segment.Query{Kind: segment.PollOffset, Value: 0, Count: 1 << 20}, &p); err != nil {
			t.Fatal(err)
		}
		if got := p.AppendTo(nil); !bytes.Equal(got, want) {
			t.Fatal("the blocking storage reads other bytes than the ring wrote")
		}
		_ = l.Close()

		// Recovery itself on the ring, with a torn tail.
		st, err = New(dir, r, 32)
		if err != nil {
			t.Fatal(err)
		}
		names, _ := st.List("")
		last := names[len(names)-1]
		torn, err := os.OpenFile(filepath.Join(dir, last), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := torn.Write(sent[len(sent)-1][:300]); err != nil {
			t.Fatal(err)
		}
		torn.Close()
		l, report, err = segment.Open(st, cfg, segment.Hooks{})
		if err != nil {
			t.Fatal(err)
		}
		if len(report.Truncations) != 1 || report.Truncations[0].DroppedBytes != 300 {
			t.Fatalf("recovery on the ring: %s", report)
		}
		if err := l.Read(segment.Query{Kind: segment.PollOffset, Value: 0, Count: 1 << 20}, &p); err != nil {
			t.Fatal(err)
		}
		if got := p.AppendTo(nil); !bytes.Equal(got, want) {
			t.Fatal("recovery on the ring changed the stored batches")
		}
		if o, ok := l.ConsumerOffset(segment.Consumer, 1); !ok || o != 17 {
			t.Fatalf("consumer offset %d %v after reopening on the ring", o, ok)
		}
		_ = l.Close()
	}
}
