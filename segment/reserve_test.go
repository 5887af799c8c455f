package segment

import (
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

const (
	fsBlockBytes = 4096
	// extentSlackBytes: an ext4 file whose extents (written, unwritten) outgrow the
	// four its inode holds takes a block of extent tree, counted in st_blocks.
	extentSlackBytes = 2 * fsBlockBytes
)

func roundUpBlock(n int64) int64 { return (n + fsBlockBytes - 1) / fsBlockBytes * fsBlockBytes }

// checkReservedBound checks every .log file of the log against what reservations
// may hold: at most one chunk past the open segment's size, nothing past a sealed
// segment's. allocated reports the space a file takes on the disk, and slack what a
// filesystem adds of its own (ext4 counts an extent tree's blocks in st_blocks). It
// returns how far past its size the open segment is reserved.
func checkReservedBound(t *testing.T, l *Log, chunk, slack int64, allocated func(name string) int64) int64 {
	t.Helper()
	var ahead int64
	for _, seg := range l.segments {
		name := segmentLogName(seg.baseOffset)
		got := allocated(name) - slack
		limit := roundUpBlock(seg.sizeBytes)
		if seg.state == segmentActive {
			limit = roundUpBlock(seg.sizeBytes + chunk)
			ahead = max(ahead, got-roundUpBlock(seg.sizeBytes))
		}
		if got > limit {
			t.Fatalf("%s (%v) takes %d bytes on the disk, size %d: more than the bound %d (chunk %d)",
				name, seg.state, got, seg.sizeBytes, limit, chunk)
		}
	}
	return ahead
}

// A log that crosses many chunks and many segment rolls on the real filesystem
// never holds more than one chunk reserved past its open segment's size, and no
// sealed segment keeps space past its own (st_blocks of the files).
func TestReservedSpaceBoundedOnDisk(t *testing.T) {
	dir := t.TempDir()
	st, err := NewOSStorage(dir)
	if err != nil {
		t.Fatal(err)
	}
	const chunk = 64 << 10
	l := openLog(t, st, Config{PartitionID: testPartition, SegmentSizeBytes: 1 << 20, ReserveChunkBytes: chunk})
	allocated := func(name string) int64 {
		var stat unix.Stat_t
		if err := unix.Stat(filepath.Join(dir, name), &stat); err != nil {
			t.Fatal(err)
		}
		return stat.Blocks * 512
	}
	a := newAppender(t, l, 3, 2000)
	var aheadMax int64
	for i := 0; l.SegmentCount() < 12; i++ {
		a.append(4) // some 12 KiB: a chunk is crossed every few appends
		if st.Poll(false); i%4 == 0 {
			l.WaitIdle()
		}
		aheadMax = max(aheadMax, checkReservedBound(t, l, chunk, extentSlackBytes, allocated))
	}
	l.WaitIdle()
	checkReservedBound(t, l, chunk, extentSlackBytes, allocated)
	if stats := l.Stats(); stats.ReserveFailures > 0 {
		t.Skipf("the filesystem under %s did not reserve (%d failures)", dir, stats.ReserveFailures)
	}
	if aheadMax < chunk/2 {
		t.Fatalf("the open segment was never reserved ahead of its writes (at most %d bytes)", aheadMax)
	}
	if n := l.Stats().Reservations; n < 12*(1<<20)/chunk {
		t.Fatalf("%d reservations over %d segments of 1 MiB, chunk %d", n, l.SegmentCount(), chunk)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// Reopened, the log goes on reserving from where its writes are.
	l = openLog(t, st, Config{PartitionID: testPartition, SegmentSizeBytes: 1 << 20, ReserveChunkBytes: chunk})
	a.l = l
	for l.SegmentCount() < 14 {
		a.append(4)
		st.Poll(false)
		checkReservedBound(t, l, chunk, extentSlackBytes, allocated)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// The same bound on the simulated disk, with the reserved space counted against
// its capacity, over many more rolls, reads included.
func TestReservedSpaceBoundedSim(t *testing.T) {
	for _, chunk := range []int64{512, 4096, DefaultReserveChunkBytes} {
		disk := NewSimDisk(uint64(chunk))
		cfg := Config{PartitionID: testPartition, SegmentSizeBytes: 16 << 10, ReserveChunkBytes: chunk}
		l := openLog(t, disk, cfg)
		a := newAppender(t, l, 5, 300)
		for i := 0; l.SegmentCount() < 60; i++ {
			a.append(1 + a.rng.IntN(4))
			if disk.Poll(false); i%8 == 0 {
				l.WaitIdle()
			}
			checkReservedBound(t, l, chunk, 0, disk.AllocatedBytes)
		}
		l.WaitIdle()
		checkReservedBound(t, l, chunk, 0, disk.AllocatedBytes)
		if stats := l.Stats(); stats.Reservations < 60 || stats.ReserveFailures != 0 {
			t.Fatalf("chunk %d: %d reservations over %d segments, %d failures", chunk, stats.Reservations, l.SegmentCount(), stats.ReserveFailures)
		}
		a.sent.check(t, readAll(t, l, 0, 50))
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// A storage that cannot reserve says so once; the log asks it no more and works
// as before.
func TestReserveUnsupported(t *testing.T) {
	disk := NewSimDisk(2)
	disk.NoReserve = true
	l := openLog(t, disk, Config{PartitionID: testPartition, SegmentSizeBytes: 4 << 10, ReserveChunkBytes: 512})
	a := newAppender(t, l, 2, 200)
	for l.SegmentCount() < 10 {
		a.append(2)
		disk.Poll(false)
	}
	l.WaitIdle()
	if stats := l.Stats(); stats.Reservations != 1 || stats.ReserveFailures != 1 {
		t.Fatalf("%d reservations, %d failed: want the first only", stats.Reservations, stats.ReserveFailures)
	}
	a.sent.check(t, readAll(t, l, 0, 50))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// A failed reservation (a full disk) is not an append's failure: the appends that
// fit go on, and the log reserves again once there is room.
func TestReserveOnFullDisk(t *testing.T) {
	disk := NewSimDisk(4)
	l := openLog(t, disk, Config{PartitionID: testPartition, SegmentSizeBytes: 64 << 10, ReserveChunkBytes: 16 << 10})
	a := newAppender(t, l, 4, 200)
	a.append(2)
	l.WaitIdle()
	// The next reservation finds no room, the appends before it do (they write into
	// the first chunk's reserved space).
	disk.CapacityBytes = disk.totalBytes()
	for i := 0; l.Stats().ReserveFailures == 0; i++ {
		if i == 100 {
			t.Fatalf("no reservation failed on a full disk: %+v", l.Stats())
		}
		a.append(2)
		l.WaitIdle()
		if l.Err() != nil || l.failure.active {
			t.Fatalf("a reservation's failure failed the log: %v", l.Err())
		}
	}
	disk.CapacityBytes = 0
	reserved := l.Stats().Reservations
	for i := 0; l.Stats().Reservations == reserved; i++ {
		if i == 100 {
			t.Fatalf("no reservation after the disk had room again: %+v", l.Stats())
		}
		a.append(2)
		l.WaitIdle()
	}
	a.sent.check(t, readAll(t, l, 0, 50))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// A crash with a reservation in place: recovery scans each segment to its size,
// which the reservation did not change, so it finds the durable log whole and cuts
// nothing; the reserved space stays with the file (as on ext4) and the log goes on
// within its bound.
func TestCrashWithReservationInPlace(t *testing.T) {
	const chunk = 8 << 10
	cfg := Config{PartitionID: testPartition, SegmentSizeBytes: 64 << 10, ReserveChunkBytes: chunk}
	for seed := uint64(1); seed <= 20; seed++ {
		disk := NewSimDisk(seed)
		l := openLog(t, disk, cfg)
		a := newAppender(t, l, seed, 300)
		for l.SegmentCount() < 3 || l.segments[len(l.segments)-1].sizeBytes < 20<<10 {
			a.append(1 + a.rng.IntN(3))
			disk.Poll(false)
		}
		l.WaitIdle()
		l.Sync()
		l.WaitIdle()
		open := l.segments[len(l.segments)-1]
		name := segmentLogName(open.baseOffset)
		size, _ := disk.SizeOf(name)
		if disk.AllocatedBytes(name) <= size {
			t.Fatalf("seed %d: no reservation past %s's %d bytes", seed, name, size)
		}
		next := l.NextOffset()

		after := disk.Crash(seed)
		if got, _ := after.SizeOf(name); got != size {
			t.Fatalf("seed %d: %s is %d bytes after the crash, was %d", seed, name, got, size)
		}
		l2, report, err := Open(after, cfg, Hooks{})
		if err != nil {
			t.Fatalf("seed %d: recovery: %v", seed, err)
		}
		if len(report.Truncations) != 0 || len(report.RemovedSegments) != 0 || l2.NextOffset() != next {
			t.Fatalf("seed %d: recovery of a synced log cut something: next %d, was %d: %s", seed, l2.NextOffset(), next, report)
		}
		a.sent.check(t, readAll(t, l2, 0, 40))
		a.l = l2
		for l2.SegmentCount() < 6 {
			a.append(2)
			after.Poll(false)
			checkReservedBound(t, l2, chunk, 0, after.AllocatedBytes)
		}
		if err := l2.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// Reservations go through a CachedStorage like any request on a file: the file is
// opened again for one when the cache closed it.
func TestReserveThroughFileCache(t *testing.T) {
	dir := t.TempDir()
	inner, err := NewOSStorage(dir)
	if err != nil {
		t.Fatal(err)
	}
	cache := NewFileCache(2) // fewer than a segment's two files and the offsets'
	st := cache.Storage(inner)
	const chunk = 32 << 10
	l := openLog(t, st, Config{PartitionID: testPartition, SegmentSizeBytes: 256 << 10, ReserveChunkBytes: chunk})
	a := newAppender(t, l, 6, 1000)
	for l.SegmentCount() < 4 {
		a.append(3)
		st.Poll(false)
	}
	l.WaitIdle()
	if stats := l.Stats(); stats.Reservations < 4*(256<<10)/chunk || stats.ReserveFailures != 0 {
		t.Fatalf("through the cache: %+v", stats)
	}
	var blocks int64
	names, _ := inner.List("")
	for _, name := range names {
		if !strings.HasSuffix(name, ".log") {
			continue
		}
		var stat unix.Stat_t
		if err := unix.Stat(filepath.Join(dir, name), &stat); err != nil {
			t.Fatal(err)
		}
		blocks += stat.Blocks * 512
	}
	if limit := l.SizeBytes() + int64(l.SegmentCount())*(fsBlockBytes+extentSlackBytes) + chunk; blocks > limit {
		t.Fatalf(".log files take %d bytes on the disk for %d bytes of log (bound %d)", blocks, l.SizeBytes(), limit)
	}
	a.sent.check(t, readAll(t, l, 0, 50))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}
