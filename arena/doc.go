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
// so that the first receives into a small hot class take no page faults). A class can
// also mark a buffer's pages reclaimable at
// Release (MADV_FREE, ClassConfig.FreePagesOnRelease): under memory pressure the
// kernel takes back the pages of released frames instead of swapping, so one burst of
// 64 MiB frames need not stay resident for good. mlock is attempted only when
// Config.Lock asks for it and RLIMIT_MEMLOCK leaves room; it is never required.
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
