package shard

import (
	"bytes"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/iggy-shard/iggy-shard/ring"
	"github.com/iggy-shard/iggy-shard/segment"
)

var _ segment.Descriptors = (*DiskStorage)(nil)

// TestDiskStoragePlansReads: a log on the shard's disk ring answers a read of
// verified durable batches with a plan (segment.PlanRead declines every read
// of a storage without descriptors), whose own descriptors name the bytes
// written, and outlive the log's close.
func TestDiskStoragePlansReads(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	r, err := ring.New(ring.Options{SQEntries: 16, Flags: ring.SetupSingleIssuer})
	if err != nil {
		t.Skipf("io_uring unavailable: %v", err)
	}
	defer r.Close()
	disk := NewDisk(r, 8)
	st, err := disk.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	l, _, err := segment.Open(st, segment.Config{PartitionID: 1, SegmentSizeBytes: 16 << 10, EnforceFsync: true}, segment.Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	var sent []byte
	for round := range 40 {
		b := diskTestBatch(t, 1, l.NextOffset(), uint64(1000+round), 1+round%4)
		if err := l.Append(b); err != nil {
			t.Fatal(err)
		}
		sent = append(sent, b...)
	}
	l.Sync()
	l.WaitIdle()
	all := segment.Query{Kind: segment.PollOffset, Count: 1 << 20}
	var p segment.Polled
	if err := l.Read(all, &p); err != nil { // the copy verifies the batches
		t.Fatal(err)
	}
	var plan segment.Plan
	if v := l.PlanRead(all, 0, &plan); v != segment.Planned {
		t.Fatalf("PlanRead: %v, want planned", v)
	}
	if len(plan.Runs) < 2 {
		t.Fatalf("%d runs, the test wants a read across segments", len(plan.Runs))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	var got []byte
	for _, run := range plan.Runs {
		buf := make([]byte, run.Length)
		if n, err := unix.Pread(run.FD, buf, run.Offset); err != nil || int64(n) != run.Length {
			t.Fatalf("pread %+v: %d, %v", run, n, err)
		}
		got = append(got, buf...)
	}
	if !bytes.Equal(got, sent) {
		t.Fatal("the plan's runs are not the bytes written")
	}
	if err := plan.Release(); err != nil {
		t.Fatal(err)
	}
}
