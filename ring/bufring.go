package ring

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// BufferRingOptions configure NewBufferRing.
type BufferRingOptions struct {
	// GroupID names the buffer group in SQEs (PrepareRecvMultishot,
	// PrepareRecvBufferSelect). Unique per ring.
	GroupID uint16
	// Entries is the number of buffers, a power of two, 1..32768.
	Entries uint32
	// BufferSize is the size of each buffer in bytes.
	BufferSize int
	// Memory, when not nil, backs the buffers: exactly Entries*BufferSize
	// bytes, buffer i at offset i*BufferSize, which the caller keeps mapped
	// until Close (an arena slab). When nil, NewBufferRing maps its own.
	Memory []byte
}

// BufferRing is a provided buffer ring (IORING_REGISTER_PBUF_RING, Linux
// 5.19): a ring of buffer descriptors, shared with the kernel, from which a
// recv with buffer select takes a buffer when data arrives, so that idle
// connections pin no memory. The kernel consumes descriptors from the head;
// we append recycled buffers at the tail:
//
//	ring memory (Entries x 16 bytes, page aligned, shared with the kernel)
//	+--------------------------+--------------------------+-----
//	| addr u64 | len u32 | bid u16 | tail u16 | addr | len | bid | resv | ...
//	+--------------------------+--------------------------+-----
//	  entry 0 (its last 2 bytes are the ring's tail)    entry 1
//
// The completion names the buffer by id (CQE.BufferID); Buffer returns its
// bytes and Recycle gives it back once the caller is done with them. A
// BufferRing belongs to its Ring's thread, like the Ring.
type BufferRing struct {
	ring       *Ring
	groupID    uint16
	ringMem    []byte
	entries    []bufRingEntry
	mask       uint16
	tail       uint16 // local tail: descriptors added, maybe not yet published
	buffers    []byte
	bufferSize int
	ownBuffers bool
	closed     bool
}

// NewBufferRing maps and registers a buffer ring on r and hands all its
// buffers to the kernel.
func NewBufferRing(r *Ring, opts BufferRingOptions) (*BufferRing, error) {
	if opts.Entries == 0 || opts.Entries > 32768 || opts.Entries&(opts.Entries-1) != 0 {
		return nil, fmt.Errorf("ring: buffer ring entries %d not a power of two in 1..32768", opts.Entries)
	}
	if opts.BufferSize <= 0 || opts.BufferSize > 1<<31-1 {
		return nil, fmt.Errorf("ring: buffer size %d out of range", opts.BufferSize)
	}
	buffersSize := int(opts.Entries) * opts.BufferSize
	if opts.Memory != nil && len(opts.Memory) != buffersSize {
		return nil, fmt.Errorf("ring: buffer ring memory is %d bytes, want entries*bufferSize = %d", len(opts.Memory), buffersSize)
	}
	ringSize := int(opts.Entries) * int(unsafe.Sizeof(bufRingEntry{}))
	ringMem, err := unix.Mmap(-1, 0, ringSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANONYMOUS|unix.MAP_PRIVATE|unix.MAP_POPULATE)
	if err != nil {
		return nil, fmt.Errorf("ring: mmap buffer ring (%d bytes): %w", ringSize, err)
	}
	b := &BufferRing{
		ring:       r,
		groupID:    opts.GroupID,
		ringMem:    ringMem,
		entries:    unsafe.Slice((*bufRingEntry)(unsafe.Pointer(&ringMem[0])), opts.Entries),
		mask:       uint16(opts.Entries - 1),
		buffers:    opts.Memory,
		bufferSize: opts.BufferSize,
	}
	if b.buffers == nil {
		b.buffers, err = unix.Mmap(-1, 0, buffersSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANONYMOUS|unix.MAP_PRIVATE)
		if err != nil {
			unix.Munmap(ringMem)
			return nil, fmt.Errorf("ring: mmap %d buffers of %d bytes: %w", opts.Entries, opts.BufferSize, err)
		}
		b.ownBuffers = true
	}
	reg := bufReg{ringAddr: uint64(uintptr(unsafe.Pointer(&ringMem[0]))), ringEntries: opts.Entries, bgid: opts.GroupID}
	if _, err := r.register(registerPbufRing, unsafe.Pointer(&reg), 1); err != nil {
		b.unmap()
		return nil, fmt.Errorf("ring: register buffer ring group %d (%d entries): %w", opts.GroupID, opts.Entries, err)
	}
	for bid := range opts.Entries {
		b.Add(uint16(bid))
	}
	b.Publish()
	return b, nil
}

// GroupID is the buffer group id to put in SQEs.
func (b *BufferRing) GroupID() uint16 { return b.groupID }

// BufferSize is the size of each buffer in bytes.
func (b *BufferRing) BufferSize() int { return b.bufferSize }

// Buffer returns the first n bytes of buffer bid, as named by a CQE
// (CQE.BufferID, n = CQE.Res). The slice's capacity is capped at n so an
// append cannot spill into the neighbouring buffer. It panics if bid or n
// are out of range: the kernel hands out only ids we gave it.
func (b *BufferRing) Buffer(bid uint16, n int) []byte {
	if int(bid) >= len(b.entries) || n < 0 || n > b.bufferSize {
		panic(fmt.Sprintf("ring: buffer id %d / length %d out of range (%d buffers of %d bytes)", bid, n, len(b.entries), b.bufferSize))
	}
	offset := int(bid) * b.bufferSize
	return b.buffers[offset : offset+n : offset+n]
}

// Add queues buffer bid for the kernel; Publish makes queued buffers
// visible. Adding more buffers than Entries without the kernel consuming any
// overwrites descriptors: give back each id once, after its CQE.
func (b *BufferRing) Add(bid uint16) {
	if int(bid) >= len(b.entries) {
		panic(fmt.Sprintf("ring: buffer id %d out of range (%d buffers)", bid, len(b.entries)))
	}
	entry := &b.entries[b.tail&b.mask]
	entry.addr = uint64(uintptr(unsafe.Pointer(&b.buffers[int(bid)*b.bufferSize])))
	entry.len = uint32(b.bufferSize)
	entry.bid = bid
	b.tail++
}

// Publish makes the buffers added since the last Publish available to the
// kernel. The tail is a uint16 in the last two bytes of entry 0, and Go has
// no 16-bit atomic store, so Publish stores the aligned 32 bits that hold
// entry 0's bid (which only we write) and the tail together, with release
// ordering: the descriptors' bytes become visible before the tail.
func (b *BufferRing) Publish() {
	word := (*uint32)(unsafe.Pointer(&b.ringMem[12]))
	atomic.StoreUint32(word, uint32(b.entries[0].bid)|uint32(b.tail)<<16)
}

// Recycle gives buffer bid back to the kernel at once (Add and Publish).
func (b *BufferRing) Recycle(bid uint16) {
	b.Add(bid)
	b.Publish()
}

// Close unregisters the group and unmaps the ring (and the buffers, when
// NewBufferRing mapped them). Operations still armed on the group fail;
// cancel them first. Close the BufferRing before its Ring.
func (b *BufferRing) Close() error {
	if b.closed {
		return ErrClosed
	}
	b.closed = true
	var err error
	if !b.ring.closed {
		reg := bufReg{bgid: b.groupID}
		if _, uerr := b.ring.register(unregisterPbufRing, unsafe.Pointer(&reg), 1); uerr != nil {
			err = fmt.Errorf("ring: unregister buffer ring group %d: %w", b.groupID, uerr)
		}
	}
	b.unmap()
	return err
}

func (b *BufferRing) unmap() {
	unix.Munmap(b.ringMem)
	b.ringMem, b.entries = nil, nil
	if b.ownBuffers {
		unix.Munmap(b.buffers)
	}
	b.buffers = nil
}
