package shard

import (
	"bytes"
	"runtime"
	"testing"

	"github.com/iggy-shard/iggy-shard/ring"
	"github.com/iggy-shard/iggy-shard/segment"
	"github.com/iggy-shard/iggy-shard/wire"
)

func diskTestBatch(t *testing.T, partitionID uint32, base, ts uint64, n int) []byte {
	t.Helper()
	var bb wire.BatchBuilder
	bb.Reset(nil)
	for i := range n {
		payload := bytes.Repeat([]byte{byte(base + uint64(i))}, 200+i)
		if err := bb.Append(wire.Uint128{Lo: base + uint64(i)}, ts, payload, nil); err != nil {
			t.Fatal(err)
		}
	}
	b, err := bb.Finish()
	if err != nil {
		t.Fatal(err)
	}
	wire.StampBatch(b, uint64(partitionID), base, ts)
	return b
}

// Several logs share one Disk (one ring, one table of 8 requests in flight, so most
// requests wait their turn): appends of both durability modes interleave across
// segment seals (link chains), each log's Poll hands the others their completions,
// and every batch reads back byte for byte, then again from the blocking storage.
func TestDiskSharedByLogs(t *testing.T) {
	for _, name := range []string{"big writes inline", "big writes async"} {
		t.Run(name, func(t *testing.T) {
			// t.Run's goroutine owns the SINGLE_ISSUER ring.
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			r, err := ring.New(ring.Options{SQEntries: 16, Flags: ring.SetupSingleIssuer})
			if err != nil {
				t.Skipf("io_uring unavailable: %v", err)
			}
			defer r.Close()
			disk := NewDisk(r, 8)
			if name == "big writes async" {
				disk.AsyncWriteBytesMin = 1024
			}
			const logCount = 3
			type logUnderTest struct {
				dir  string
				log  *segment.Log
				cfg  segment.Config
				sent []byte
			}
			logs := make([]*logUnderTest, logCount)
			for i := range logs {
				dir := t.TempDir()
				st, err := disk.Open(dir)
				if err != nil {
					t.Fatal(err)
				}
				cfg := segment.Config{PartitionID: uint64(i), SegmentSizeBytes: 16 << 10, EnforceFsync: i%2 == 0}
				l, _, err := segment.Open(st, cfg, segment.Hooks{})
				if err != nil {
					t.Fatal(err)
				}
				logs[i] = &logUnderTest{dir: dir, log: l, cfg: cfg}
			}
			for round := range 60 {
				for i, lt := range logs {
					b := diskTestBatch(t, uint32(i), lt.log.NextOffset(), uint64(1000+round), 1+round%4)
					if err := lt.log.Append(b); err != nil {
						t.Fatalf("log %d round %d: %v", i, round, err)
					}
					lt.sent = append(lt.sent, b...)
				}
				if round%5 == 0 {
					disk.Flush()
					disk.Reap()
				}
			}
			for _, lt := range logs {
				lt.log.Sync()
				lt.log.WaitIdle()
			}
			if disk.InFlight() != 0 || disk.Ready() {
				t.Fatalf("disk not quiet: %d in flight, ready %v", disk.InFlight(), disk.Ready())
			}
			for i, lt := range logs {
				if lt.log.SegmentCount() < 3 {
					t.Fatalf("log %d: %d segments, the test wants seals", i, lt.log.SegmentCount())
				}
				var p segment.Polled
				if err := lt.log.Read(segment.Query{Kind: segment.PollOffset, Count: 1 << 20}, &p); err != nil {
					t.Fatal(err)
				}
				if got := p.AppendTo(nil); !bytes.Equal(got, lt.sent) {
					t.Fatalf("log %d read %d bytes back, wrote %d (or different)", i, len(got), len(lt.sent))
				}
				if err := lt.log.Close(); err != nil {
					t.Fatal(err)
				}
				plain, err := segment.NewOSStorage(lt.dir)
				if err != nil {
					t.Fatal(err)
				}
				l, report, err := segment.Open(plain, lt.cfg, segment.Hooks{})
				if err != nil {
					t.Fatal(err)
				}
				if len(report.Truncations) != 0 || len(report.RebuiltIndexes) != 0 {
					t.Fatalf("log %d: reopening repaired something: %s", i, report)
				}
				if err := l.Read(segment.Query{Kind: segment.PollOffset, Count: 1 << 20}, &p); err != nil {
					t.Fatal(err)
				}
				if got := p.AppendTo(nil); !bytes.Equal(got, lt.sent) {
					t.Fatalf("log %d: the blocking storage reads other bytes than the ring wrote", i)
				}
				_ = l.Close()
			}
		})
	}
}

// A log's link chain stays its own while another log submits in the middle of it:
// the other request waits until the chain has gone to the kernel, and every request
// completes.
func TestDiskChainNotJoinedByAnotherLog(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	r, err := ring.New(ring.Options{SQEntries: 16, Flags: ring.SetupSingleIssuer})
	if err != nil {
		t.Skipf("io_uring unavailable: %v", err)
	}
	defer r.Close()
	disk := NewDisk(r, 8)
	a, err := disk.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	b, err := disk.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	fa, _, err := a.Open("a", true, 0)
	if err != nil {
		t.Fatal(err)
	}
	fb, _, err := b.Open("b", true, 0)
	if err != nil {
		t.Fatal(err)
	}
	done := 0
	hook := func(r *segment.Request) {
		if r.Err != nil {
			t.Errorf("%v: %v", r.Op, r.Err)
		}
		done++
	}
	chainWrite := &segment.Request{Op: segment.OpWrite, File: fa, Data: []byte("chained"), Link: true, Done: hook}
	chainSync := &segment.Request{Op: segment.OpSync, File: fa, Done: hook}
	other := &segment.Request{Op: segment.OpWrite, File: fb, Data: []byte("other"), Done: hook}
	a.Submit(chainWrite)
	b.Submit(other)
	if b.InFlight() != 1 || len(disk.waiting) != 1 {
		t.Fatalf("the other log's request did not wait for the open chain: %d waiting", len(disk.waiting))
	}
	a.Submit(chainSync)
	for a.InFlight() > 0 {
		a.Poll(true)
	}
	for b.InFlight() > 0 {
		b.Poll(true)
	}
	a.Close(fa)
	b.Close(fb)
	if done != 3 || disk.InFlight() != 0 || disk.Ready() {
		t.Fatalf("%d of 3 requests done; disk %d in flight, ready %v", done, disk.InFlight(), disk.Ready())
	}
}
