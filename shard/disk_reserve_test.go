package shard

import (
	"errors"
	"path/filepath"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/iggy-shard/iggy-shard/ring"
	"github.com/iggy-shard/iggy-shard/segment"
)

// A reservation goes to the ring as IORING_OP_FALLOCATE with KEEP_SIZE: the file's
// blocks past its end are allocated, its size stays. Then a log on the ring keeps
// its open segment reserved ahead of its writes.
func TestDiskReserve(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	r, err := ring.New(ring.Options{SQEntries: 8, Flags: ring.SetupSingleIssuer})
	if err != nil {
		t.Skipf("io_uring unavailable: %v", err)
	}
	defer r.Close()
	disk := NewDisk(r, 8)
	dir := t.TempDir()
	st, err := disk.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	f, _, err := st.Open("f", true, 0)
	if err != nil {
		t.Fatal(err)
	}
	var done *segment.Request
	req := &segment.Request{Op: segment.OpReserve, File: f, Offset: 4096, Length: 1 << 20, Done: func(r *segment.Request) { done = r }}
	st.Submit(req)
	for done == nil {
		st.Poll(true)
	}
	if done.Err != nil {
		t.Skipf("the filesystem under %s cannot reserve: %v", dir, done.Err)
	}
	var stat unix.Stat_t
	if err := unix.Stat(filepath.Join(dir, "f"), &stat); err != nil {
		t.Fatal(err)
	}
	if stat.Size != 0 || stat.Blocks*512 < 1<<20 {
		t.Fatalf("after a reservation of 1 MiB at 4 KiB: size %d, %d bytes allocated", stat.Size, stat.Blocks*512)
	}
	if err := st.Close(f); err != nil {
		t.Fatal(err)
	}

	const chunk = 256 << 10
	logDir := t.TempDir()
	logStorage, err := disk.Open(logDir)
	if err != nil {
		t.Fatal(err)
	}
	cfg := segment.Config{PartitionID: 1, SegmentSizeBytes: 4 << 20, ReserveChunkBytes: chunk}
	l, _, err := segment.Open(logStorage, cfg, segment.Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	ts := uint64(1_000_000)
	for l.SegmentCount() < 3 {
		if err := l.Append(diskTestBatch(t, 1, l.NextOffset(), ts, 50)); err != nil {
			t.Fatal(err)
		}
		l.WaitIdle()
	}
	if stats := l.Stats(); stats.Reservations < 2*(4<<20)/chunk || stats.ReserveFailures != 0 {
		t.Fatalf("a log on the ring: %d reservations, %d failed", stats.Reservations, stats.ReserveFailures)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// The ring reports a filesystem that cannot reserve as EOPNOTSUPP, which the log
// reads as errors.ErrUnsupported and stops asking.
func TestDiskReserveUnsupportedIsErrUnsupported(t *testing.T) {
	st := &DiskStorage{disk: &Disk{}}
	r := &segment.Request{Op: segment.OpReserve}
	st.finish(r, &ring.CQE{Res: -int32(unix.EOPNOTSUPP)})
	if !errors.Is(r.Err, errors.ErrUnsupported) {
		t.Fatalf("a reservation the filesystem refused: %v, not errors.ErrUnsupported", r.Err)
	}
}
