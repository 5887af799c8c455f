// Package arena hands out a shard's I/O buffers: fixed-size, 16-byte-aligned slices of
// memory mapped outside the Go heap, in a few size classes, with explicit Acquire and
// Release and no locks.
//
// Why outside the Go heap: a buffer handed to io_uring is referenced only by the kernel
// until its completion arrives, which the garbage collector cannot see; hundreds of MiB
// of frames would also be scanned and counted against GOGC for nothing. Anonymous
// MAP_PRIVATE mappings give page-aligned memory the GC never touches, that can be
// registered with a ring (IORING_REGISTER_BUFFERS, provided-buffer rings) and, for
// classes whose size is a multiple of 4096, used for O_DIRECT.
//
// Why size classes and not a general allocator: a shard needs many small receive
// buffers (one per connection with a receive in flight, and small replies), some
// medium ones for typical batches and poll replies, and a few frames up to the maximum
// frame size (64 MiB). Fixed classes make Acquire and Release O(1) and make exhaustion
// visible per class. Which classes, and how many buffers of each, is the caller's
// choice: a shard's default (shard.ArenaConfigDefault, shard/config.go) writes its
// sum out.
//
// Large classes are "lazy" without any bookkeeping of ours: an anonymous mapping costs
// only address space until a page is touched, so a class is mapped unpopulated with
// MAP_NORESERVE unless ClassConfig.Populate asks for its pages up front (MAP_POPULATE,
// so that the first receives into a small hot class take no page faults). mlock is
// attempted only when Config.Lock asks for it and RLIMIT_MEMLOCK leaves room; it is
// never required.
//
// Giving pages back (trim.go). A page once touched stays resident until something
// gives it back, so without that a node that took one burst of 64 MiB frames, or of
// thousands of connections, would hold the burst's pages for good. The owner calls
// TrimIdle every TrimIdleInterval; it gives back (MADV_DONTNEED) the pages of the free
// buffers that no Acquire or Release used since the previous call, in the classes
// whose ClassConfig.IdlePages says so: by default every class not populated at New.
// For a shard's classes (shard.ArenaConfigDefault, shard/config.go) that means:
//
//   - 4 KiB (standing frame and send buffers): a connection's standing buffer is in
//     use while it lives and is never taken; the send buffers and the standing
//     buffers of connections that closed go back an interval after their last use.
//   - 8 KiB (the receive ring's): lent whole to the ring for the shard's life, so
//     never taken (a lent class is in use).
//   - 64 KiB and 1.25 MiB (medium frames, batches): in steady use the LIFO free
//     stack hands out the same few buffers again and again, and they stay; the ones a
//     burst needed beyond those go back after it.
//   - 16 MiB and 64 MiB (the largest frames, rare): go back an interval after their
//     last use, as every class does once it is idle.
//
// Why at TrimIdle and not at each Release (as ClassConfig.FreePagesOnRelease did,
// with MADV_FREE, for the 16 and 64 MiB classes of an earlier default): advice at
// every Release taxes the steady use it does not help. BenchmarkReleasePages
// (trim_test.go), a buffer written whole and released, 3 runs on 2 cores shared with other builds
// (load ~10): a 64 MiB frame 22-25 ms kept, 36-45 ms with MADV_FREE, 50-75 ms with
// MADV_DONTNEED (the madvise, then a fault per page at the next write); 16 MiB 4-7,
// 11-15 and 10-34 ms; 1.25 MiB 0.22-0.37, 0.57-0.68 and 1.9-2.7 ms. TrimIdle pays
// that once per buffer and idle interval, and nothing in steady use. Why MADV_DONTNEED and not MADV_FREE: pages marked MADV_FREE
// stay counted in the resident set (and in a cgroup's memory.current, and in
// GET_STATS's memory_usage) until memory runs short, so a node that is done with a
// burst still looks as large as at its peak (TestTrimIdleGivesABurstsPagesBack: 2 x
// 64 MiB written, then MADV_FREE: 128 MiB still resident, 127 MiB of it LazyFree);
// Go's own runtime chose MADV_DONTNEED for the same reason
// (https://go.dev/doc/go1.16#runtime). A class registered with a ring as fixed
// buffers (RegionBytes, RegionIovec, AppendIovecs) or locked is never trimmed: the
// kernel pins the pages it registered, and a trimmed buffer would be new pages the
// ring does not see.
//
// Memory layout of one class (one mapping per class):
//
//	base (page aligned)
//	+-----------+-----------+-----------+-- ... --+-------------+
//	| buffer 0  | buffer 1  | buffer 2  |         | buffer n-1  |
//	+-----------+-----------+-----------+-- ... --+-------------+
//	 <- size ->  buffer i starts at base + i*size (size % 16 == 0)
//
// The free list of a class is a stack of buffer indices (uint32), not pointers: it
// lives in one slice allocated at New, so Acquire and Release never allocate, and LIFO
// order hands out the buffer released last, whose lines are most likely still in cache.
// An in-use bitmap per class catches a double release and a buffer from another arena;
// both are our bugs and panic.
//
// Handing memory to the kernel, two ways:
//
//   - provided-buffer ring (multishot recv): LendClass gives a whole class to
//     ring.NewBufferRing as BufferRingOptions.Memory; the ring names buffers by id (the
//     buffer's index) and recycles them itself, and Acquire skips the class until
//     ReturnClass. A whole class, because the ring wants one contiguous run of
//     equal buffers and the kernel, not the arena, decides which one is used next.
//   - fixed buffers (IORING_REGISTER_BUFFERS): register RegionBytes(class) as one
//     entry, and any buffer acquired from that class is usable with
//     PrepareReadFixed/PrepareWriteFixed at that entry's index (the kernel accepts any
//     range inside a registered buffer); or register AppendIovecs(class), one entry
//     per buffer, so that Buffer.Index is the buf_index. One entry per class is
//     the better default: the table is small (16 Ki entries at most) and every
//     registered byte is pinned.
//
// An Arena has a single owner (its shard) and no locks; it must not be used from two
// goroutines. Close unmaps everything; touching a Buffer after Close is our bug and
// faults.
package arena
