package arena

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// BufferAlignBytes is the alignment of every buffer's first byte. Headers are decoded in
// place, so a 16-byte alignment lets the decoder read u128 fields from aligned memory.
const BufferAlignBytes = 16

// ClassCountMax bounds the number of size classes (a Buffer stores its class in a byte).
const ClassCountMax = math.MaxUint8

// classRegionBytesMax bounds one class's mapping (1 TiB) so that size*count cannot
// overflow and a typo in a configuration cannot ask the kernel for an absurd range.
const classRegionBytesMax = 1 << 40

var (
	// ErrExhausted is returned by Acquire when every buffer of the class that fits the
	// request is in use. The arena never blocks and never grows.
	ErrExhausted = errors.New("arena: size class exhausted")
	// ErrTooLarge is returned by Acquire for a size above the largest class.
	ErrTooLarge = errors.New("arena: size above the largest class")
	// ErrNegativeSize is returned by Acquire for a negative size.
	ErrNegativeSize = errors.New("arena: negative size")
	// ErrClassInUse is returned by LendClass when some buffer of the class is acquired
	// or the class is already lent.
	ErrClassInUse = errors.New("arena: class has buffers in use")
)

// ClassConfig describes one size class.
type ClassConfig struct {
	// BufferSizeBytes is the capacity of each buffer; a positive multiple of 16.
	BufferSizeBytes int
	// BufferCount is how many buffers the class holds; positive.
	BufferCount int
	// Populate pre-faults the class's pages at New (MAP_POPULATE). Worth it for the small
	// classes used on every receive; wasteful for large classes that are rarely all used.
	Populate bool
	// IdlePages says what becomes of the pages of the class's buffers that lie free
	// and unused: kept resident, or given back to the kernel by TrimIdle. The zero
	// value is the default (IdlePagesDefault).
	IdlePages IdlePages
}

// IdlePages says what TrimIdle does with the pages of a class's idle buffers: the
// free buffers that no Acquire or Release has used since the previous TrimIdle.
type IdlePages uint8

const (
	// IdlePagesDefault gives back the idle pages of a class that is not populated
	// (IdlePagesReturn) and keeps those of a populated one (IdlePagesKeep): pages
	// touched once stay in use only while they are used, and a class populated at
	// New is one asked to stay resident.
	IdlePagesDefault IdlePages = iota
	// IdlePagesKeep leaves a class's pages resident once touched, until Close.
	IdlePagesKeep
	// IdlePagesReturn has TrimIdle give an idle buffer's pages back at once
	// (madvise MADV_DONTNEED): the process's resident set falls by them, and the
	// next use of the buffer faults in zeroed pages. Not for a class registered
	// with a ring as fixed buffers (the kernel would go on using the pages it
	// pinned): RegionBytes, RegionIovec and AppendIovecs turn it off for their
	// class, as locking (Config.Lock) does.
	IdlePagesReturn
)

// TrimIdleInterval is how often an arena's owner should call TrimIdle: a buffer's
// pages then go back between one and two intervals after its last use, long
// enough that a class in steady use is never trimmed (and a burst's buffers that
// are not needed again are, soon after it). See doc.go for what was measured.
const TrimIdleInterval = 10 * time.Second

// Config describes an arena: its classes in strictly ascending BufferSizeBytes.
type Config struct {
	Classes []ClassConfig
	// Lock asks New to mlock the populated classes if RLIMIT_MEMLOCK leaves room for
	// them; a class that does not fit is left unlocked and reported by Stats. Locking is
	// never required for correctness.
	Lock bool
}

// Validate reports the first thing wrong with the configuration.
func (c Config) Validate() error {
	if len(c.Classes) == 0 {
		return errors.New("arena: config has no size classes")
	}
	if len(c.Classes) > ClassCountMax {
		return fmt.Errorf("arena: %d size classes > maximum %d", len(c.Classes), ClassCountMax)
	}
	for i, cl := range c.Classes {
		if cl.BufferSizeBytes <= 0 || cl.BufferSizeBytes%BufferAlignBytes != 0 {
			return fmt.Errorf("arena: class %d: buffer size %d bytes is not a positive multiple of %d",
				i, cl.BufferSizeBytes, BufferAlignBytes)
		}
		if cl.BufferCount <= 0 || cl.BufferCount > math.MaxUint32 {
			return fmt.Errorf("arena: class %d: buffer count %d is not in [1, %d]", i, cl.BufferCount, uint32(math.MaxUint32))
		}
		if cl.BufferCount > classRegionBytesMax/cl.BufferSizeBytes {
			return fmt.Errorf("arena: class %d: %d buffers of %d bytes exceed the %d-byte class maximum",
				i, cl.BufferCount, cl.BufferSizeBytes, int64(classRegionBytesMax))
		}
		if i > 0 && cl.BufferSizeBytes <= c.Classes[i-1].BufferSizeBytes {
			return fmt.Errorf("arena: class %d: buffer size %d bytes is not above class %d's %d bytes",
				i, cl.BufferSizeBytes, i-1, c.Classes[i-1].BufferSizeBytes)
		}
	}
	return nil
}

// Buffer is a handle to one acquired buffer. It is a small value (no heap allocation)
// carrying the slice and where it came from, so Release can check it.
type Buffer struct {
	buf   []byte
	index uint32
	class uint8
}

// Bytes returns the buffer: its length is the size asked of Acquire, its capacity the
// class's buffer size, capped so that an append can never spill into the next buffer.
func (b Buffer) Bytes() []byte { return b.buf }

// Full returns the buffer at its whole capacity (for a receive into all of it).
func (b Buffer) Full() []byte { return b.buf[:cap(b.buf)] }

// Class is the index of the buffer's size class in Config.Classes.
func (b Buffer) Class() int { return int(b.class) }

// Index is the buffer's index within its class: its buf_index when the class's iovecs
// are registered alone with a ring, and its buffer id in a provided-buffer ring.
func (b Buffer) Index() int { return int(b.index) }

// IsZero reports whether b is the zero Buffer (acquired from nowhere).
func (b Buffer) IsZero() bool { return b.buf == nil }

// class is one size class: a mapping, the stack of free buffer indices and the in-use
// bitmap. free[:freeCount] are the free indices; the top of the stack is at the end.
type class struct {
	mem             []byte // the whole mapping: bufferCount*bufferSizeBytes
	base            uintptr
	bufferSizeBytes int
	free            []uint32
	freeCount       int
	inUse           []uint64 // bit i set: buffer i is acquired
	highWaterCount  int
	acquireCount    uint64
	exhaustedCount  uint64
	locked          bool
	lent            bool // the whole class is lent to a provided-buffer ring
	// trimIdle: TrimIdle gives back the pages of the class's idle buffers
	// (IdlePagesReturn). Then resident marks the buffers used since their pages
	// were last given back, and recent those acquired or released since the
	// previous TrimIdle; both nil when the class keeps its pages.
	trimIdle     bool
	resident     []uint64
	recent       []uint64
	trimmedCount uint64
}

// Arena is a shard's set of size classes. It has one owner and no locks.
type Arena struct {
	classes []class
	closed  bool
}

// New maps every class of cfg. It fails if the configuration is invalid or the kernel
// refuses a mapping; nothing stays mapped on failure.
func New(cfg Config) (*Arena, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	a := &Arena{classes: make([]class, len(cfg.Classes))}
	memlockBudgetBytes := memlockBudget(cfg.Lock)
	for i, cc := range cfg.Classes {
		regionBytes := cc.BufferSizeBytes * cc.BufferCount
		flags := unix.MAP_PRIVATE | unix.MAP_ANONYMOUS
		if cc.Populate {
			flags |= unix.MAP_POPULATE
		} else {
			// Unpopulated classes are address space until touched; do not let the
			// overcommit heuristic refuse them for memory that may never be used.
			flags |= unix.MAP_NORESERVE
		}
		mem, err := unix.Mmap(-1, 0, regionBytes, unix.PROT_READ|unix.PROT_WRITE, flags)
		if err != nil {
			a.unmapAll()
			return nil, fmt.Errorf("arena: mmap class %d (%d x %d bytes): %w", i, cc.BufferCount, cc.BufferSizeBytes, err)
		}
		c := &a.classes[i]
		c.mem = mem
		c.base = uintptr(unsafe.Pointer(unsafe.SliceData(mem)))
		c.bufferSizeBytes = cc.BufferSizeBytes
		if c.base%BufferAlignBytes != 0 {
			panic(fmt.Sprintf("arena: mmap returned base %#x not %d-byte aligned", c.base, BufferAlignBytes))
		}
		c.free = make([]uint32, cc.BufferCount)
		// Push in reverse so the first Acquire returns buffer 0: tests and registered
		// iovec tables read in address order.
		for j := range c.free {
			c.free[j] = uint32(cc.BufferCount - 1 - j)
		}
		c.freeCount = cc.BufferCount
		c.inUse = make([]uint64, (cc.BufferCount+63)/64)
		if cfg.Lock && cc.Populate && uint64(regionBytes) <= memlockBudgetBytes {
			if unix.Mlock(mem) == nil {
				c.locked = true
				memlockBudgetBytes -= uint64(regionBytes)
			}
		}
		switch cc.IdlePages {
		case IdlePagesReturn:
			c.trimIdle = !c.locked
		case IdlePagesDefault:
			c.trimIdle = !cc.Populate
		}
		if c.trimIdle {
			c.resident = make([]uint64, len(c.inUse))
			c.recent = make([]uint64, len(c.inUse))
		}
	}
	return a, nil
}

// memlockBudget is how many bytes this process may still lock: the soft RLIMIT_MEMLOCK
// (the bytes already locked elsewhere in the process are not known, so this is an upper
// bound; an Mlock refused by the kernel is simply not counted).
func memlockBudget(want bool) uint64 {
	if !want {
		return 0
	}
	var lim unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_MEMLOCK, &lim) != nil {
		return 0
	}
	return lim.Cur
}

func (a *Arena) unmapAll() error {
	var first error
	for i := range a.classes {
		c := &a.classes[i]
		if c.mem == nil {
			continue
		}
		if err := unix.Munmap(c.mem); err != nil && first == nil {
			first = fmt.Errorf("arena: munmap class %d: %w", i, err)
		}
		c.mem = nil
	}
	return first
}

// Close unmaps every class. Buffers still acquired become invalid: touching one after
// Close is our bug (it faults). Close is idempotent.
func (a *Arena) Close() error {
	if a.closed {
		return nil
	}
	a.closed = true
	return a.unmapAll()
}

// ClassCount is the number of size classes.
func (a *Arena) ClassCount() int { return len(a.classes) }

// ClassFor returns the smallest class whose buffers hold sizeBytes, or -1 if none does.
// A class lent to a ring (LendClass) is not considered: it has nothing to hand out.
func (a *Arena) ClassFor(sizeBytes int) int {
	for i := range a.classes {
		if sizeBytes <= a.classes[i].bufferSizeBytes && !a.classes[i].lent {
			return i
		}
	}
	return -1
}

// Acquire returns a buffer of length sizeBytes from the smallest class that holds it.
// It does not fall back to a larger class when that class is exhausted: a burst of
// small receives must not eat the few large frames. The contents are whatever the last
// user left; callers overwrite before reading.
func (a *Arena) Acquire(sizeBytes int) (Buffer, error) {
	if sizeBytes < 0 {
		return Buffer{}, ErrNegativeSize
	}
	ci := a.ClassFor(sizeBytes)
	if ci < 0 {
		return Buffer{}, ErrTooLarge
	}
	return a.acquire(ci, sizeBytes)
}

// AcquireClass returns a buffer of class ci at full length (for receives and for
// provided-buffer rings, which want a whole class).
func (a *Arena) AcquireClass(ci int) (Buffer, error) {
	a.checkClass(ci)
	return a.acquire(ci, a.classes[ci].bufferSizeBytes)
}

func (a *Arena) checkClass(ci int) {
	if ci < 0 || ci >= len(a.classes) {
		panic(fmt.Sprintf("arena: class %d out of range [0, %d)", ci, len(a.classes)))
	}
}

func (a *Arena) acquire(ci, sizeBytes int) (Buffer, error) {
	if a.closed {
		panic("arena: Acquire after Close")
	}
	c := &a.classes[ci]
	if c.freeCount == 0 {
		c.exhaustedCount++
		return Buffer{}, ErrExhausted
	}
	c.freeCount--
	index := c.free[c.freeCount]
	word, bit := index/64, uint64(1)<<(index%64)
	if c.inUse[word]&bit != 0 {
		panic(fmt.Sprintf("arena: class %d buffer %d on the free list while in use", ci, index))
	}
	c.inUse[word] |= bit
	if c.trimIdle {
		c.resident[word] |= bit
		c.recent[word] |= bit
	}
	c.acquireCount++
	if n := len(c.free) - c.freeCount; n > c.highWaterCount {
		c.highWaterCount = n
	}
	return Buffer{buf: c.slice(index, sizeBytes), index: index, class: uint8(ci)}, nil
}

// slice returns buffer index of c with length sizeBytes, capped at the class size.
func (c *class) slice(index uint32, sizeBytes int) []byte {
	start := int(index) * c.bufferSizeBytes
	return c.mem[start : start+sizeBytes : start+c.bufferSizeBytes]
}

// Release returns b to its class. Releasing a buffer twice, the zero Buffer, or a
// buffer of another arena is our bug and panics with what was wrong.
func (a *Arena) Release(b Buffer) {
	if a.closed {
		panic("arena: Release after Close")
	}
	c, word, bit := a.owned(b, "Release")
	if c.lent {
		panic(fmt.Sprintf("arena: Release of class %d buffer %d, lent to a ring: recycle it to the ring", b.class, b.index))
	}
	c.inUse[word] &^= bit
	c.free[c.freeCount] = b.index
	c.freeCount++
	if c.trimIdle {
		c.recent[word] |= bit
	}
}

// owned checks that b was acquired from a and is still in use, and returns its class
// and its in-use bit.
func (a *Arena) owned(b Buffer, op string) (c *class, word uint32, bit uint64) {
	if b.buf == nil {
		panic("arena: " + op + " of the zero Buffer")
	}
	if int(b.class) >= len(a.classes) {
		panic(fmt.Sprintf("arena: %s of a foreign buffer: class %d, arena has %d", op, b.class, len(a.classes)))
	}
	c = &a.classes[b.class]
	if int(b.index) >= len(c.free) {
		panic(fmt.Sprintf("arena: %s of a foreign buffer: class %d index %d, class has %d", op, b.class, b.index, len(c.free)))
	}
	want := c.base + uintptr(b.index)*uintptr(c.bufferSizeBytes)
	if got := uintptr(unsafe.Pointer(unsafe.SliceData(b.buf))); got != want || cap(b.buf) != c.bufferSizeBytes {
		panic(fmt.Sprintf("arena: %s of a foreign buffer: class %d index %d at %#x cap %d, want %#x cap %d",
			op, b.class, b.index, got, cap(b.buf), want, c.bufferSizeBytes))
	}
	word, bit = b.index/64, uint64(1)<<(b.index%64)
	if c.inUse[word]&bit == 0 {
		panic(fmt.Sprintf("arena: %s of class %d buffer %d, which is not acquired (double release?)", op, b.class, b.index))
	}
	return c, word, bit
}

// BufferAt returns the handle of buffer index of class ci, which must be acquired, at
// full length. A provided-buffer ring completion names only a buffer id; this turns it
// back into the Buffer that was lent to the ring.
func (a *Arena) BufferAt(ci, index int) Buffer {
	a.checkClass(ci)
	c := &a.classes[ci]
	if index < 0 || index >= len(c.free) {
		panic(fmt.Sprintf("arena: BufferAt class %d index %d out of range [0, %d)", ci, index, len(c.free)))
	}
	if c.lent {
		panic(fmt.Sprintf("arena: BufferAt class %d, lent to a ring: the ring names its buffers", ci))
	}
	if c.inUse[index/64]&(uint64(1)<<(index%64)) == 0 {
		panic(fmt.Sprintf("arena: BufferAt class %d index %d, which is not acquired", ci, index))
	}
	return Buffer{buf: c.slice(uint32(index), c.bufferSizeBytes), index: uint32(index), class: uint8(ci)}
}

// ClassInfo describes where a class lives, for registering it with a ring.
type ClassInfo struct {
	Base            uintptr // address of buffer 0; buffer i is at Base + i*BufferSizeBytes
	BufferSizeBytes int
	BufferCount     int
}

// Class describes class ci.
func (a *Arena) Class(ci int) ClassInfo {
	a.checkClass(ci)
	c := &a.classes[ci]
	return ClassInfo{Base: c.base, BufferSizeBytes: c.bufferSizeBytes, BufferCount: len(c.free)}
}

// AppendIovecs appends one iovec per buffer of class ci, in index order, to dst, for
// IORING_REGISTER_BUFFERS: registered alone, buffer i of the class is then fixed buffer
// i (the SQE's buf_index is Buffer.Index). Registering pins the pages and counts them
// against RLIMIT_MEMLOCK unless the process has CAP_IPC_LOCK; the class's idle pages
// are no longer given back (IdlePagesReturn).
func (a *Arena) AppendIovecs(dst []unix.Iovec, ci int) []unix.Iovec {
	a.checkClass(ci)
	c := &a.classes[ci]
	c.pin()
	for i := range len(c.free) {
		var iov unix.Iovec
		iov.Base = unsafe.SliceData(c.mem[i*c.bufferSizeBytes:])
		iov.SetLen(c.bufferSizeBytes)
		dst = append(dst, iov)
	}
	return dst
}

// LendClass hands the whole of class ci to a provided-buffer ring and returns its
// memory: buffer i at offset i*BufferSizeBytes, the layout ring.BufferRingOptions.Memory
// wants (the ring also wants the count to be a power of two up to 32768). Until
// ReturnClass, the class counts as fully in use, Acquire skips it and its buffers are
// the ring's to name by buffer id. Every buffer must be free.
func (a *Arena) LendClass(ci int) ([]byte, error) {
	a.checkClass(ci)
	if a.closed {
		panic("arena: LendClass after Close")
	}
	c := &a.classes[ci]
	if c.lent || c.freeCount != len(c.free) {
		return nil, ErrClassInUse
	}
	c.lent = true
	c.freeCount = 0
	for w := range c.inUse {
		c.inUse[w] = ^uint64(0)
	}
	if tail := len(c.free) % 64; tail != 0 {
		c.inUse[len(c.inUse)-1] = 1<<tail - 1
	}
	c.highWaterCount = len(c.free)
	return c.mem, nil
}

// ReturnClass takes class ci back from the ring it was lent to, after the ring has
// stopped using it (its BufferRing is closed). Returning a class that is not lent is
// our bug and panics.
func (a *Arena) ReturnClass(ci int) {
	a.checkClass(ci)
	c := &a.classes[ci]
	if !c.lent {
		panic(fmt.Sprintf("arena: ReturnClass of class %d, which is not lent", ci))
	}
	c.lent = false
	if c.trimIdle {
		// The ring received into any of them: all used, all of late.
		copy(c.resident, c.inUse)
		copy(c.recent, c.inUse)
	}
	clear(c.inUse)
	for j := range c.free {
		c.free[j] = uint32(len(c.free) - 1 - j)
	}
	c.freeCount = len(c.free)
}

// RegionBytes returns the whole mapping of class ci, for registering it as one fixed
// buffer (ring.RegisterBuffers); see RegionIovec. It is not a buffer: do not write to it.
// The class's idle pages are no longer given back (IdlePagesReturn).
func (a *Arena) RegionBytes(ci int) []byte {
	a.checkClass(ci)
	c := &a.classes[ci]
	c.pin()
	return c.mem[:len(c.mem):len(c.mem)]
}

// RegionIovec returns one iovec covering all of class ci. The kernel accepts any
// address range inside a registered buffer for a fixed read or write, so registering
// this single iovec makes every buffer of the class usable as a fixed buffer with one
// table slot (buf_index = the slot of this iovec) instead of one slot per buffer.
// The class's idle pages are no longer given back (IdlePagesReturn).
func (a *Arena) RegionIovec(ci int) unix.Iovec {
	a.checkClass(ci)
	c := &a.classes[ci]
	c.pin()
	var iov unix.Iovec
	iov.Base = unsafe.SliceData(c.mem)
	iov.SetLen(len(c.mem))
	return iov
}

// ClassStats is the accounting of one class.
type ClassStats struct {
	BufferSizeBytes int
	BufferCount     int
	InUseCount      int
	InUseBytes      int // InUseCount * BufferSizeBytes: capacity held, not bytes asked for
	HighWaterCount  int // most buffers in use at once since New
	AcquireCount    uint64
	ExhaustedCount  uint64 // Acquire calls refused with ErrExhausted
	Locked          bool   // the class is mlocked
	Lent            bool   // the class is lent to a provided-buffer ring (all in use)
	// ReturnsIdlePages: TrimIdle gives back the pages of the class's idle buffers.
	ReturnsIdlePages bool
	// TrimmedCount is how many times TrimIdle gave an idle buffer's pages back.
	TrimmedCount uint64
}

// ClassStats returns the accounting of class ci without allocating.
func (a *Arena) ClassStats(ci int) ClassStats {
	a.checkClass(ci)
	c := &a.classes[ci]
	inUse := len(c.free) - c.freeCount
	return ClassStats{
		BufferSizeBytes:  c.bufferSizeBytes,
		BufferCount:      len(c.free),
		InUseCount:       inUse,
		InUseBytes:       inUse * c.bufferSizeBytes,
		HighWaterCount:   c.highWaterCount,
		AcquireCount:     c.acquireCount,
		ExhaustedCount:   c.exhaustedCount,
		Locked:           c.locked,
		Lent:             c.lent,
		ReturnsIdlePages: c.trimIdle,
		TrimmedCount:     c.trimmedCount,
	}
}

// Stats returns the accounting of every class (it allocates the slice; for logs and
// tests, not hot paths).
func (a *Arena) Stats() []ClassStats {
	stats := make([]ClassStats, len(a.classes))
	for i := range a.classes {
		stats[i] = a.ClassStats(i)
	}
	return stats
}

// InUseCount is the number of buffers acquired and not released, over all classes.
func (a *Arena) InUseCount() int {
	n := 0
	for i := range a.classes {
		n += len(a.classes[i].free) - a.classes[i].freeCount
	}
	return n
}

// CheckNoLeaks returns an error naming each class that still has buffers acquired, and
// the first few of their indices; nil if every buffer is free. For tests and shutdown.
func (a *Arena) CheckNoLeaks() error {
	var errs []error
	for ci := range a.classes {
		c := &a.classes[ci]
		if c.lent {
			errs = append(errs, fmt.Errorf("arena: class %d (%d bytes): lent to a ring and not returned", ci, c.bufferSizeBytes))
			continue
		}
		inUse := len(c.free) - c.freeCount
		if inUse == 0 {
			continue
		}
		const shownMax = 8
		shown := make([]int, 0, shownMax)
		for w, word := range c.inUse {
			for word != 0 && len(shown) < shownMax {
				shown = append(shown, w*64+bits.TrailingZeros64(word))
				word &= word - 1
			}
		}
		errs = append(errs, fmt.Errorf("arena: class %d (%d bytes): %d buffers leaked, first indices %v",
			ci, c.bufferSizeBytes, inUse, shown))
	}
	return errors.Join(errs...)
}
