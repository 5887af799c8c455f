package segment

import "errors"

// DefaultReserveChunkBytes is how far ahead of its writes the open segment's disk
// space is reserved (Config.ReserveChunkBytes).
//
// Why reserve at all: a buffered write to a file on ext4 with delayed allocation
// only reserves blocks, and the fdatasync of a save then allocates them, holding the
// inode's i_data_sem and the pages' locks while it does; an append's write that comes
// meanwhile waits in D state for that (up to 17 ms traced in BenchmarkPinnedProduce,
// the dominant hop of the slowest batches). A write into space already allocated
// (unwritten extents, fallocate KEEP_SIZE) has nothing of that to wait for: the
// fdatasync only converts the extents it wrote back.
//
// Why a chunk and not the whole segment (PreallocateSegments): a segment holds up to
// 1 GiB, and a thousand partitions with a segment open each would hold a terabyte
// that no message fills yet. A chunk ahead bounds what is reserved but unwritten to
// one chunk per open segment. Nothing is reserved past the segment's size, which its
// writes reach before it seals, so a sealed segment holds no reserved space to give
// back (ext4 would keep it after the file is closed: only a truncation frees blocks
// past the end, FALLOC_FL_PUNCH_HOLE past the size does nothing there), and a deleted
// one's goes with its file. What a log closed or crashed with stays reserved for the
// same segment's next writes after recovery. The one case that leaves space past a
// sealed segment's end: a server restarted with a smaller segment size, whose open
// segment was reserved further under the old one (at most a chunk, once).
//
// Why 32 MiB: it measured best of 8, 32 and 128 MiB in BenchmarkPinnedProduce
// (internal/clustertest: 3 nodes with --shards 1, 1000 batches of 1000 x 1000 B, on a
// shared 2-core machine under load, rounds interleaved with a server without
// reservations): cluster p99 11.7 ms against 27.1 ms without (medians of 22 rounds),
// 14.4 ms with 8 MiB; 128 MiB was no better than none (51.6 against 26.8 ms, 12
// rounds). Its cost is disk space, at most a chunk per open segment (a thousand
// partitions: 32 GiB), and one fallocate per 16 MiB written, in the kernel's workers.
// Whole-segment preallocation, the bound's other end, is PreallocateSegments.
const DefaultReserveChunkBytes = 32 << 20

// reserveAhead reserves the next part of seg's space when its write position
// (sizeBytes, before the append about to be submitted) has come within half a chunk
// of what is reserved: up to one chunk past that position, never past the segment's
// size. One reservation per segment is in flight at a time. It is submitted on its
// own, not linked to any write: no append waits for it, a write may even run before
// it (then that write allocates its blocks itself, as without reservations), and it
// does not change the file's size, so neither what a read sees nor what recovery
// scans (up to the size) depends on it.
func (l *Log) reserveAhead(seg *segment) {
	chunk := l.cfg.ReserveChunkBytes
	if chunk <= 0 || l.reserveUnsupported || seg.reserving || seg.state != segmentActive {
		return
	}
	from := max(seg.reservedEnd, seg.sizeBytes)
	to := min(seg.sizeBytes+chunk, l.cfg.SegmentSizeBytes)
	if seg.reservedEnd > seg.sizeBytes+chunk/2 || to <= from {
		return
	}
	r := l.request(OpReserve, purposeReserve, seg)
	r.File = seg.logFile
	r.Offset = from
	r.Length = to - from
	seg.reserving = true
	// Counted as reserved whether or not it succeeds: a reservation that failed (a
	// full disk) is not tried again before the writes have gone another half chunk.
	seg.reservedEnd = to
	l.st.Submit(r)
	l.stats.Reservations++
}

// completeReserve handles a reservation's completion. A failure loses nothing: the
// writes there allocate their own blocks, as they would without reservations. A
// storage that cannot reserve at all is not asked again.
func (l *Log) completeReserve(r *Request) {
	seg := r.seg
	seg.reserving = false
	if r.Err != nil {
		l.stats.ReserveFailures++
		if errors.Is(r.Err, errors.ErrUnsupported) {
			l.reserveUnsupported = true
		}
	}
}
