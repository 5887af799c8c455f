package ring

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Errors returned by the ring itself. Operation results travel in CQE.Res and
// are turned into unix.Errno values by CQE.Err.
var (
	// ErrSQFull: no free SQE, and the ring could not submit to make room
	// because the last queued SQE opens a link chain (submitting would cut
	// the chain in two). Check SQSpaceLeft before preparing a chain. The
	// SQEs already prepared stay queued; submitted as they are, the kernel
	// ends the chain at the last of them.
	ErrSQFull = errors.New("ring: submission queue full")
	// ErrCQOverflow: the kernel refused to submit (EBUSY/EAGAIN) because
	// completions it holds back on overflow could not be posted. Reap the
	// completion queue, then submit again. Nothing was lost.
	ErrCQOverflow = errors.New("ring: completion queue overflow, reap completions then retry")
	// ErrCQEsDropped: the kernel had to drop completions (EBADR). Operations
	// whose CQE was dropped will never complete; the caller must treat its
	// in-flight state as lost (in practice: stop the shard).
	ErrCQEsDropped = errors.New("ring: kernel dropped completions")
	// ErrWrongThread: a submission or registration came from an OS thread
	// other than the one that created a SetupSingleIssuer ring (EEXIST).
	// This is a bug of the caller: lock the goroutine to its thread.
	ErrWrongThread = errors.New("ring: used from a thread other than its single issuer; call runtime.LockOSThread before New")
	// ErrNoTimedWait: the kernel lacks IORING_FEAT_EXT_ARG (Linux 5.11), so
	// SubmitAndWaitTimeout cannot bound its wait; use a timeout SQE instead.
	ErrNoTimedWait = errors.New("ring: kernel cannot bound a wait (no IORING_FEAT_EXT_ARG)")
	// ErrClosed: the ring was closed.
	ErrClosed = errors.New("ring: closed")
)

// Options configure New. Use DefaultOptions for the shard's settings.
type Options struct {
	// SQEntries is the number of submission queue entries, 1..32768; the
	// kernel rounds it up to a power of two.
	SQEntries uint32
	// CQEntries, when non-zero, sizes the completion queue
	// (IORING_SETUP_CQSIZE); it must be at least SQEntries. Zero leaves the
	// kernel's default of twice SQEntries.
	CQEntries uint32
	// Flags are the Setup* flags to ask for. Of these, SetupDeferTaskrun,
	// SetupSingleIssuer, SetupCoopTaskrun, SetupTaskrunFlag and
	// SetupSubmitAll are dropped one by one, in that order, when an older
	// kernel refuses them with EINVAL; Ring.RefusedFlags reports which were
	// dropped. Any other flag the kernel refuses fails New.
	Flags uint32
}

// DefaultSetupFlags are the flags of a shard's ring: one thread submits
// (SINGLE_ISSUER), completion work runs only when that thread asks for
// completions (DEFER_TASKRUN), no inter-processor interrupts are sent to run
// task work (COOP_TASKRUN), and an SQE that fails at submission (its CQE
// says why) does not hold back the SQEs queued after it (SUBMIT_ALL).
const DefaultSetupFlags = SetupSingleIssuer | SetupDeferTaskrun | SetupCoopTaskrun | SetupSubmitAll

// supportedSetupFlags are the flags this package knows how to drive. The
// others change what it relies on: SQE128/CQE32 the entry sizes, SQPOLL and
// IOPOLL the submission and reaping protocol, R_DISABLED and ATTACH_WQ the
// setup sequence.
const supportedSetupFlags = SetupCQSize | SetupClamp | SetupSubmitAll | SetupCoopTaskrun |
	SetupTaskrunFlag | SetupSingleIssuer | SetupDeferTaskrun

// optionalSetupFlags lists, in the order they are given up, the flags New may
// drop on EINVAL. DEFER_TASKRUN goes first because it requires SINGLE_ISSUER.
var optionalSetupFlags = [...]uint32{SetupDeferTaskrun, SetupSingleIssuer, SetupCoopTaskrun, SetupTaskrunFlag, SetupSubmitAll}

// DefaultOptions returns Options with DefaultSetupFlags and a completion
// queue four times the submission queue, so that multishot operations have
// room to post several CQEs per SQE.
func DefaultOptions(sqEntries uint32) Options {
	return Options{SQEntries: sqEntries, CQEntries: min(4*sqEntries, cqEntriesMax), Flags: DefaultSetupFlags}
}

// cqEntriesMax is the kernel's IORING_MAX_CQ_ENTRIES.
const cqEntriesMax = 2 * 32768

// Ring is one io_uring instance. It is not safe for concurrent use: see the
// package documentation for the threading rule.
type Ring struct {
	fd           int
	enterFd      int     // fd, or the registered ring index with enterRegRing
	enterFlags   uintptr // enterRegRing once the ring fd is registered
	enterFdTid   int     // the thread whose table holds the registered ring fd
	flags        uint32  // setup flags in effect
	refusedFlags uint32
	features     uint32

	sq submissionQueue
	cq completionQueue

	sqRingMem []byte
	cqRingMem []byte // aliases sqRingMem with FeatSingleMmap
	sqesMem   []byte

	supportedOps [probeOpsCount / 64]uint64

	// waitArg and waitTimespec live in the Ring, not on the stack of
	// SubmitAndWaitTimeout, so that passing their addresses to the kernel
	// does not allocate.
	waitArg      geteventsArg
	waitTimespec Timespec

	closed bool
}

type submissionQueue struct {
	head    *uint32 // written by the kernel as it consumes SQEs
	tail    *uint32 // written by us to publish SQEs
	flags   *uint32 // written by the kernel
	dropped *uint32
	mask    uint32
	entries uint32
	sqes    []SQE
	// sqeHead..sqeTail are SQEs handed out by GetSQE but not yet published
	// through tail.
	sqeHead uint32
	sqeTail uint32
}

type completionQueue struct {
	head     *uint32 // written by us once CQEs are consumed
	tail     *uint32 // written by the kernel as it posts CQEs
	overflow *uint32
	mask     uint32
	entries  uint32
	cqes     []CQE
	// localHead mirrors *head; only we write it.
	localHead uint32
}

// setupSyscall is io_uring_setup(2); tests replace it to simulate kernels
// that refuse flags.
var setupSyscall = func(entries uint32, p *params) (int, unix.Errno) {
	fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, uintptr(entries), uintptr(unsafe.Pointer(p)), 0)
	return int(fd), errno
}

// New creates a ring. With SetupSingleIssuer (in DefaultSetupFlags) the
// calling goroutine must already be locked to its OS thread
// (runtime.LockOSThread) and every later submission and registration must
// come from that same thread.
func New(opts Options) (*Ring, error) {
	if opts.SQEntries == 0 || opts.SQEntries > 32768 {
		return nil, fmt.Errorf("ring: SQEntries %d out of range 1..32768", opts.SQEntries)
	}
	if opts.CQEntries != 0 && opts.CQEntries < opts.SQEntries {
		return nil, fmt.Errorf("ring: CQEntries %d < SQEntries %d", opts.CQEntries, opts.SQEntries)
	}
	if unsupported := opts.Flags &^ supportedSetupFlags; unsupported != 0 {
		return nil, fmt.Errorf("ring: setup flags %#x not supported by this package", unsupported)
	}
	flags := opts.Flags
	if opts.CQEntries != 0 {
		flags |= SetupCQSize
	}
	fd, p, refused, err := setupWithFallback(opts.SQEntries, opts.CQEntries, flags)
	if err != nil {
		return nil, err
	}
	r := &Ring{fd: fd, enterFd: fd, flags: p.flags, refusedFlags: refused, features: p.features}
	if err := r.mapRings(&p); err != nil {
		unix.Close(fd)
		return nil, err
	}
	if err := r.probe(); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// setupWithFallback calls io_uring_setup, and on EINVAL retries without the
// next optional flag the request still carries, until the kernel accepts or
// no optional flag is left.
func setupWithFallback(sqEntries, cqEntries, flags uint32) (fd int, p params, refused uint32, err error) {
	for {
		p = params{flags: flags, cqEntries: cqEntries}
		fd, errno := setupSyscall(sqEntries, &p)
		if errno == 0 {
			return fd, p, refused, nil
		}
		if errno == unix.EINTR {
			continue
		}
		next, dropped := dropOptionalFlag(flags)
		if errno != unix.EINVAL || dropped == 0 {
			return -1, p, refused, fmt.Errorf("ring: io_uring_setup(entries=%d, flags=%#x, refused=%#x): %w", sqEntries, flags, refused, errno)
		}
		flags = next
		refused |= dropped
	}
}

// dropOptionalFlag returns flags without the first optional flag it carries,
// and that flag; dropped is 0 when none is left.
func dropOptionalFlag(flags uint32) (next, dropped uint32) {
	for _, f := range optionalSetupFlags {
		if flags&f != 0 {
			return flags &^ f, f
		}
	}
	return flags, 0
}

func (r *Ring) mapRings(p *params) error {
	sqRingSize := int(p.sqOff.array) + int(p.sqEntries)*4
	cqRingSize := int(p.cqOff.cqes) + int(p.cqEntries)*int(unsafe.Sizeof(CQE{}))
	if r.features&FeatSingleMmap != 0 {
		sqRingSize = max(sqRingSize, cqRingSize)
		cqRingSize = sqRingSize
	}
	const prot = unix.PROT_READ | unix.PROT_WRITE
	const mapFlags = unix.MAP_SHARED | unix.MAP_POPULATE
	var err error
	r.sqRingMem, err = unix.Mmap(r.fd, offSQRing, sqRingSize, prot, mapFlags)
	if err != nil {
		return fmt.Errorf("ring: mmap SQ ring (%d bytes): %w", sqRingSize, err)
	}
	if r.features&FeatSingleMmap != 0 {
		r.cqRingMem = r.sqRingMem
	} else {
		r.cqRingMem, err = unix.Mmap(r.fd, offCQRing, cqRingSize, prot, mapFlags)
		if err != nil {
			r.unmap()
			return fmt.Errorf("ring: mmap CQ ring (%d bytes): %w", cqRingSize, err)
		}
	}
	sqesSize := int(p.sqEntries) * int(unsafe.Sizeof(SQE{}))
	r.sqesMem, err = unix.Mmap(r.fd, offSQEs, sqesSize, prot, mapFlags)
	if err != nil {
		r.unmap()
		return fmt.Errorf("ring: mmap SQEs (%d bytes): %w", sqesSize, err)
	}

	sqBase := unsafe.Pointer(&r.sqRingMem[0])
	r.sq.head = (*uint32)(unsafe.Add(sqBase, p.sqOff.head))
	r.sq.tail = (*uint32)(unsafe.Add(sqBase, p.sqOff.tail))
	r.sq.flags = (*uint32)(unsafe.Add(sqBase, p.sqOff.flags))
	r.sq.dropped = (*uint32)(unsafe.Add(sqBase, p.sqOff.dropped))
	r.sq.mask = *(*uint32)(unsafe.Add(sqBase, p.sqOff.ringMask))
	r.sq.entries = *(*uint32)(unsafe.Add(sqBase, p.sqOff.ringEntries))
	r.sq.sqes = unsafe.Slice((*SQE)(unsafe.Pointer(&r.sqesMem[0])), p.sqEntries)
	// The indirection array maps ring positions to SQE indexes. We always
	// use SQE i for position i, so it is filled once here and never again.
	array := unsafe.Slice((*uint32)(unsafe.Add(sqBase, p.sqOff.array)), p.sqEntries)
	for i := range array {
		array[i] = uint32(i)
	}
	r.sq.sqeHead = atomic.LoadUint32(r.sq.head)
	r.sq.sqeTail = r.sq.sqeHead

	cqBase := unsafe.Pointer(&r.cqRingMem[0])
	r.cq.head = (*uint32)(unsafe.Add(cqBase, p.cqOff.head))
	r.cq.tail = (*uint32)(unsafe.Add(cqBase, p.cqOff.tail))
	r.cq.overflow = (*uint32)(unsafe.Add(cqBase, p.cqOff.overflow))
	r.cq.mask = *(*uint32)(unsafe.Add(cqBase, p.cqOff.ringMask))
	r.cq.entries = *(*uint32)(unsafe.Add(cqBase, p.cqOff.ringEntries))
	r.cq.cqes = unsafe.Slice((*CQE)(unsafe.Add(cqBase, p.cqOff.cqes)), p.cqEntries)
	r.cq.localHead = atomic.LoadUint32(r.cq.head)
	return nil
}

func (r *Ring) unmap() {
	if r.sqesMem != nil {
		unix.Munmap(r.sqesMem)
		r.sqesMem = nil
	}
	if r.cqRingMem != nil && unsafe.SliceData(r.cqRingMem) != unsafe.SliceData(r.sqRingMem) {
		unix.Munmap(r.cqRingMem)
	}
	r.cqRingMem = nil
	if r.sqRingMem != nil {
		unix.Munmap(r.sqRingMem)
		r.sqRingMem = nil
	}
	r.sq = submissionQueue{}
	r.cq = completionQueue{}
}

// Close unmaps the rings and closes the ring's file descriptor. The kernel
// cancels operations still in flight. Buffers registered with the ring, and
// BufferRings, must not be used after Close; close BufferRings first so their
// memory is released. Close is not safe to call while another goroutine uses
// the ring.
func (r *Ring) Close() error {
	if r.closed {
		return ErrClosed
	}
	var err error
	if r.enterFlags&enterRegRing != 0 {
		// The registration lives in the registering thread's table and
		// holds a reference to the ring: unregistered, the ring outlives
		// Close until that thread exits. Only that thread may unregister;
		// from another, the same index could name a different ring.
		if tid := unix.Gettid(); tid != r.enterFdTid {
			err = fmt.Errorf("ring: Close on thread %d, ring fd registered on thread %d: the ring stays alive until that thread exits", tid, r.enterFdTid)
		} else {
			up := rsrcUpdate{offset: uint32(r.enterFd)}
			if _, uerr := r.register(unregisterRingFds, unsafe.Pointer(&up), 1); uerr != nil {
				err = fmt.Errorf("ring: unregister ring fd: %w", uerr)
			}
		}
	}
	r.closed = true
	r.unmap()
	if cerr := unix.Close(r.fd); cerr != nil && err == nil {
		err = fmt.Errorf("ring: close: %w", cerr)
	}
	return err
}

// Fd is the ring's file descriptor: the target of a msg_ring from another ring.
func (r *Ring) Fd() int { return r.fd }

// Flags returns the setup flags in effect (after any fallback).
func (r *Ring) Flags() uint32 { return r.flags }

// RefusedFlags returns the optional setup flags the kernel refused and New
// dropped; zero when every flag asked for is in effect.
func (r *Ring) RefusedFlags() uint32 { return r.refusedFlags }

// Features returns the Feat* flags the kernel reported.
func (r *Ring) Features() uint32 { return r.features }

// SQEntries and CQEntries are the queue sizes the kernel chose.
func (r *Ring) SQEntries() uint32 { return r.sq.entries }
func (r *Ring) CQEntries() uint32 { return r.cq.entries }

// Memory ordering. The rings are shared with the kernel, which runs on other
// CPUs (io-wq workers, interrupts). Each index has exactly one writer:
//
//	SQ tail, CQ head: written by us, read by the kernel
//	SQ head, CQ tail: written by the kernel, read by us
//
// Publishing needs release semantics (the SQE bytes, or our reads of CQE
// bytes, must be ordered before the index store), and observing needs
// acquire semantics (the CQE bytes must be read after the tail load that made
// them visible). Go's sync/atomic Load and Store are sequentially consistent,
// which is stronger than acquire/release, and the compiler does not move
// ordinary memory accesses across them; on amd64 they are plain MOVs (the
// store an XCHG) and on arm64 LDAR/STLR, the same instructions liburing's
// smp_load_acquire/smp_store_release compile to. Plain loads are fine for the
// index we write ourselves.

// SQSpaceLeft returns how many SQEs GetSQE can hand out before the queue is full.
func (r *Ring) SQSpaceLeft() uint32 {
	return r.sq.entries - (r.sq.sqeTail - atomic.LoadUint32(r.sq.head))
}

// SQPending returns the number of SQEs prepared but not yet submitted.
func (r *Ring) SQPending() uint32 {
	return r.sq.sqeTail - atomic.LoadUint32(r.sq.head)
}

// GetSQE hands out the next free SQE, to be filled by one Prepare* method
// and then submitted. When the queue is full it submits what is queued to
// make room; if that is impossible without cutting an open link chain it
// returns ErrSQFull and queues nothing, so an SQE is never silently dropped.
// Because a full queue is flushed, prepare each SQE (and set its Flags)
// before asking for the next one: an SQE handed out but not yet prepared
// would be submitted with stale contents. The SQE points into memory shared
// with the kernel: do not keep it after the next Submit.
func (r *Ring) GetSQE() (*SQE, error) {
	if r.closed {
		return nil, ErrClosed
	}
	if r.sq.sqeTail-atomic.LoadUint32(r.sq.head) >= r.sq.entries {
		if r.linkChainOpen() {
			return nil, ErrSQFull
		}
		if _, err := r.Submit(); err != nil {
			return nil, err
		}
		if r.sq.sqeTail-atomic.LoadUint32(r.sq.head) >= r.sq.entries {
			return nil, ErrSQFull
		}
	}
	sqe := &r.sq.sqes[r.sq.sqeTail&r.sq.mask]
	r.sq.sqeTail++
	return sqe, nil
}

// linkChainOpen reports whether the last SQE not yet published asks to be
// linked to the next one.
func (r *Ring) linkChainOpen() bool {
	if r.sq.sqeTail == r.sq.sqeHead {
		return false
	}
	return r.sq.sqes[(r.sq.sqeTail-1)&r.sq.mask].Flags&sqeLinkFlagsMask != 0
}

// flushSQ publishes the SQEs handed out since the last flush and returns how
// many SQEs the kernel has yet to consume.
func (r *Ring) flushSQ() uint32 {
	if r.sq.sqeHead != r.sq.sqeTail {
		r.sq.sqeHead = r.sq.sqeTail
		atomic.StoreUint32(r.sq.tail, r.sq.sqeTail) // release: SQE bytes before tail
	}
	return r.sq.sqeTail - atomic.LoadUint32(r.sq.head)
}

// Submit hands the queued SQEs to the kernel without waiting and returns how
// many it consumed. On a SetupDeferTaskrun ring it always enters the kernel,
// even with nothing to submit, because that is when finished operations post
// their CQEs: call it to poll for completions.
func (r *Ring) Submit() (int, error) {
	return r.enter(0, false)
}

// SubmitAndWait submits the queued SQEs and blocks until at least waitNr
// CQEs are ready to be peeked.
func (r *Ring) SubmitAndWait(waitNr uint32) (int, error) {
	return r.enter(waitNr, false)
}

// SubmitAndWaitTimeout is SubmitAndWait bounded by timeout. Running out of
// time is not an error: it returns with fewer than waitNr CQEs ready, which
// CQReady tells. It needs FeatExtArg (Linux 5.11).
func (r *Ring) SubmitAndWaitTimeout(waitNr uint32, timeout time.Duration) (int, error) {
	if r.features&FeatExtArg == 0 {
		return 0, ErrNoTimedWait
	}
	if timeout < 0 {
		timeout = 0
	}
	r.waitTimespec = Timespec{Sec: int64(timeout / time.Second), Nsec: int64(timeout % time.Second)}
	return r.enter(waitNr, true)
}

func (r *Ring) enter(waitNr uint32, withTimeout bool) (int, error) {
	if r.closed {
		return 0, ErrClosed
	}
	for {
		toSubmit := r.flushSQ()
		var flags uintptr
		if waitNr > 0 || withTimeout || r.flags&SetupDeferTaskrun != 0 ||
			atomic.LoadUint32(r.sq.flags)&(sqCQOverflow|sqTaskrun) != 0 {
			// Also flushes CQEs held back on overflow and, with
			// DEFER_TASKRUN, runs the task work that posts completions.
			flags |= enterGetEvents
		}
		if toSubmit == 0 && flags == 0 {
			return 0, nil
		}
		var arg, argSize uintptr
		if withTimeout {
			r.waitArg = geteventsArg{ts: uint64(uintptr(unsafe.Pointer(&r.waitTimespec)))}
			arg, argSize = uintptr(unsafe.Pointer(&r.waitArg)), unsafe.Sizeof(r.waitArg)
			flags |= enterExtArg
		}
		n, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.enterFd), uintptr(toSubmit), uintptr(waitNr), flags|r.enterFlags, arg, argSize)
		switch errno {
		case 0:
			return int(n), nil
		case unix.EINTR:
			// Nothing was consumed (with SQEs consumed the kernel returns
			// their count instead); a timed wait starts over, so a signal
			// can stretch it by at most one timeout each.
			continue
		case unix.ETIME:
			return 0, nil
		default:
			return 0, enterError(errno)
		}
	}
}

// enterError names the io_uring_enter failures a caller can act on. The
// others (EFAULT, EBADF, EINVAL, EOPNOTSUPP, EBADFD) mean we passed the
// kernel something broken: they are bugs of this package or of memory
// corruption, returned wrapped so the shard can stop.
func enterError(errno unix.Errno) error {
	switch errno {
	case unix.EBUSY, unix.EAGAIN:
		return fmt.Errorf("%w (%w)", ErrCQOverflow, errno)
	case unix.EBADR:
		return fmt.Errorf("%w (%w)", ErrCQEsDropped, errno)
	case unix.EEXIST:
		return fmt.Errorf("%w (%w)", ErrWrongThread, errno)
	default:
		return fmt.Errorf("ring: io_uring_enter: %w", errno)
	}
}

// PeekCQE and the other CQ methods below must not be called after Close.

// PeekCQE returns the oldest completion not yet marked seen, or false when
// the completion queue is empty. The CQE points into the shared ring: copy
// what you need before CQESeen. PeekCQE never enters the kernel; with
// SetupDeferTaskrun, completions appear only after Submit or SubmitAndWait.
func (r *Ring) PeekCQE() (*CQE, bool) {
	head := r.cq.localHead
	if head == atomic.LoadUint32(r.cq.tail) { // acquire: tail before CQE bytes
		return nil, false
	}
	return &r.cq.cqes[head&r.cq.mask], true
}

// CQESeen consumes the CQE returned by the last PeekCQE, handing its slot
// back to the kernel.
func (r *Ring) CQESeen() {
	r.cq.localHead++
	atomic.StoreUint32(r.cq.head, r.cq.localHead) // release: CQE reads before head
}

// CQAdvance consumes n CQEs at once; n must not exceed CQReady.
func (r *Ring) CQAdvance(n uint32) {
	if n > r.CQReady() {
		panic("ring: CQAdvance beyond the completion queue tail")
	}
	r.cq.localHead += n
	atomic.StoreUint32(r.cq.head, r.cq.localHead)
}

// ReapCQEs copies up to len(dst) ready completions into dst, consumes them
// with one head update, and returns how many it copied. It never enters the
// kernel. Handling completions from the copy, after reaping, lets a handler
// submit new work (even wait) without re-entering the reaping loop.
func (r *Ring) ReapCQEs(dst []CQE) int {
	n := min(uint32(len(dst)), r.CQReady()) // CQReady's tail load is the acquire
	head := r.cq.localHead
	for i := range n {
		dst[i] = r.cq.cqes[(head+i)&r.cq.mask]
	}
	if n > 0 {
		r.cq.localHead = head + n
		atomic.StoreUint32(r.cq.head, r.cq.localHead)
	}
	return int(n)
}

// CQReady returns how many completions PeekCQE can return without entering
// the kernel.
func (r *Ring) CQReady() uint32 {
	return atomic.LoadUint32(r.cq.tail) - r.cq.localHead
}

// CQOverflowCount is the kernel's count of CQEs it could not keep: with
// FeatNoDrop, only those it failed to allocate room for while holding them
// back (then Submit* reports ErrCQEsDropped). Non-zero means lost completions.
func (r *Ring) CQOverflowCount() uint32 { return atomic.LoadUint32(r.cq.overflow) }

// CQOverflowPending reports whether the kernel holds completions back
// because the CQ was full. They are flushed into the CQ by the next Submit*
// once the caller has made room by consuming CQEs.
func (r *Ring) CQOverflowPending() bool {
	return atomic.LoadUint32(r.sq.flags)&sqCQOverflow != 0
}

// SQDroppedCount is the kernel's count of invalid SQ indexes it skipped;
// since this package never writes an invalid index, non-zero is our bug.
func (r *Ring) SQDroppedCount() uint32 { return atomic.LoadUint32(r.sq.dropped) }

// WaitCQE returns the oldest completion, entering the kernel to wait for one
// when none is ready. Mark it seen with CQESeen.
func (r *Ring) WaitCQE() (*CQE, error) {
	if cqe, ok := r.PeekCQE(); ok {
		return cqe, nil
	}
	if _, err := r.SubmitAndWait(1); err != nil {
		return nil, err
	}
	if cqe, ok := r.PeekCQE(); ok {
		return cqe, nil
	}
	return nil, unix.EAGAIN
}

// WaitCQETimeout is WaitCQE bounded by timeout; it returns unix.ETIME when
// no completion arrived in time.
func (r *Ring) WaitCQETimeout(timeout time.Duration) (*CQE, error) {
	if cqe, ok := r.PeekCQE(); ok {
		return cqe, nil
	}
	if _, err := r.SubmitAndWaitTimeout(1, timeout); err != nil {
		return nil, err
	}
	if cqe, ok := r.PeekCQE(); ok {
		return cqe, nil
	}
	return nil, unix.ETIME
}

// register is io_uring_register(2). EEXIST is not mapped to ErrWrongThread
// here: several registrations use it for "already registered".
func (r *Ring) register(op uintptr, arg unsafe.Pointer, nrArgs uint32) (int, error) {
	if r.closed {
		return 0, ErrClosed
	}
	for {
		n, _, errno := unix.Syscall6(unix.SYS_IO_URING_REGISTER, uintptr(r.fd), op, uintptr(arg), uintptr(nrArgs), 0, 0)
		switch errno {
		case 0:
			return int(n), nil
		case unix.EINTR:
			continue
		default:
			return 0, errno
		}
	}
}
