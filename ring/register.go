package ring

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// probe asks the kernel which opcodes it supports (IORING_REGISTER_PROBE,
// Linux 5.6) and records them for Supports.
func (r *Ring) probe() error {
	var buf struct {
		header probeHeader
		ops    [probeOpsCount]probeOp
	}
	if _, err := r.register(registerProbe, unsafe.Pointer(&buf), probeOpsCount); err != nil {
		return fmt.Errorf("ring: probe opcodes: %w", err)
	}
	for i := 0; i < int(buf.header.opsLen) && i < probeOpsCount; i++ {
		op := buf.ops[i]
		if op.flags&ioUringOpSupported != 0 {
			r.supportedOps[op.op/64] |= 1 << (op.op % 64)
		}
	}
	return nil
}

// Supports reports whether the running kernel implements op, as probed when
// the ring was created.
func (r *Ring) Supports(op Opcode) bool {
	return r.supportedOps[op/64]&(1<<(op%64)) != 0
}

// RegisterRingFd registers the ring's own file descriptor with the calling
// thread (IORING_REGISTER_RING_FDS, Linux 5.18), so that each
// io_uring_enter skips looking the descriptor up. The registration belongs
// to that thread: call it from the ring's owner thread, and Close the ring
// from the same thread, which unregisters it.
func (r *Ring) RegisterRingFd() error {
	if r.enterFlags&enterRegRing != 0 {
		return nil
	}
	up := rsrcUpdate{offset: ^uint32(0), data: uint64(r.fd)} // offset -1: any free index
	n, err := r.register(registerRingFds, unsafe.Pointer(&up), 1)
	if err != nil {
		return fmt.Errorf("ring: register ring fd: %w", err)
	}
	if n != 1 {
		return fmt.Errorf("ring: register ring fd: kernel registered %d of 1", n)
	}
	r.enterFd = int(up.offset)
	r.enterFlags = enterRegRing
	r.enterFdTid = unix.Gettid()
	return nil
}

// RegisterFiles installs fds as the ring's registered (direct) file table:
// slot i refers to fds[i]; -1 leaves a slot empty. SQEs then name a file by
// slot with SQEFixedFile, which saves the kernel a file table look-up and
// reference count per operation. The kernel takes its own references: the
// caller may close its fds afterwards.
func (r *Ring) RegisterFiles(fds []int32) error {
	if len(fds) == 0 {
		return fmt.Errorf("ring: RegisterFiles: empty table")
	}
	_, err := r.register(registerFiles, unsafe.Pointer(&fds[0]), uint32(len(fds)))
	if err != nil {
		return fmt.Errorf("ring: register %d files: %w", len(fds), err)
	}
	return nil
}

// RegisterFilesSparse creates a registered file table of slotCount empty
// slots (IORING_REGISTER_FILES2 with IORING_RSRC_REGISTER_SPARSE, Linux
// 5.19), to be filled by UpdateFiles, by accept or msg_ring with a direct
// descriptor, or by FileIndexAlloc.
func (r *Ring) RegisterFilesSparse(slotCount uint32) error {
	reg := rsrcRegister{nr: slotCount, flags: rsrcRegisterSparse}
	_, err := r.register(registerFiles2, unsafe.Pointer(&reg), uint32(unsafe.Sizeof(reg)))
	if err != nil {
		return fmt.Errorf("ring: register %d sparse file slots: %w", slotCount, err)
	}
	return nil
}

// UpdateFiles replaces slots offset..offset+len(fds)-1 of the registered file
// table: -1 empties a slot, FilesSkip leaves it. It returns how many slots
// were updated.
func (r *Ring) UpdateFiles(offset uint32, fds []int32) (int, error) {
	if len(fds) == 0 {
		return 0, nil
	}
	up := rsrcUpdate2{offset: offset, data: uint64(uintptr(unsafe.Pointer(&fds[0]))), nr: uint32(len(fds))}
	n, err := r.register(registerFilesUpdate2, unsafe.Pointer(&up), uint32(unsafe.Sizeof(up)))
	runtime.KeepAlive(fds) // up.data holds its address as an integer only
	if err != nil {
		return n, fmt.Errorf("ring: update %d file slots at %d: %w", len(fds), offset, err)
	}
	return n, nil
}

// UnregisterFiles drops the registered file table.
func (r *Ring) UnregisterFiles() error {
	if _, err := r.register(unregisterFiles, nil, 0); err != nil {
		return fmt.Errorf("ring: unregister files: %w", err)
	}
	return nil
}

// SetFileAllocRange limits the slots FileIndexAlloc may pick to
// [offset, offset+count) (Linux 6.0), e.g. to keep low slots for files the
// caller places itself.
func (r *Ring) SetFileAllocRange(offset, count uint32) error {
	rng := fileIndexRange{off: offset, len: count}
	if _, err := r.register(registerFileAllocRange, unsafe.Pointer(&rng), 0); err != nil {
		return fmt.Errorf("ring: file alloc range [%d, %d): %w", offset, offset+count, err)
	}
	return nil
}

// RegisterBuffers pins buffers and registers them for OpReadFixed and
// OpWriteFixed; buffer i is addressed by bufIndex i. The memory must stay
// mapped until UnregisterBuffers or Close, and should not be Go heap memory
// the program may free: mmap'ed arenas are the intended source. Pinned pages
// count against RLIMIT_MEMLOCK.
func (r *Ring) RegisterBuffers(buffers [][]byte) error {
	if len(buffers) == 0 {
		return fmt.Errorf("ring: RegisterBuffers: no buffers")
	}
	iovecs := make([]unix.Iovec, len(buffers))
	for i, b := range buffers {
		if len(b) == 0 {
			return fmt.Errorf("ring: RegisterBuffers: buffer %d is empty", i)
		}
		iovecs[i].Base = &b[0]
		iovecs[i].SetLen(len(b))
	}
	if _, err := r.register(registerBuffers, unsafe.Pointer(&iovecs[0]), uint32(len(iovecs))); err != nil {
		return fmt.Errorf("ring: register %d buffers: %w", len(buffers), err)
	}
	return nil
}

// UnregisterBuffers drops the registered buffers.
func (r *Ring) UnregisterBuffers() error {
	if _, err := r.register(unregisterBuffers, nil, 0); err != nil {
		return fmt.Errorf("ring: unregister buffers: %w", err)
	}
	return nil
}
