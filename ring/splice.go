package ring

// The two zero-copy ways out of a shard: splice moves file pages through a
// pipe into a socket without a copy through user space, and send_zc sends
// from memory the kernel pins instead of copying. See io_uring_prep_splice(3)
// and io_uring_prep_send_zc(3) of liburing, and the kernel's UAPI header
// (include/uapi/linux/io_uring.h: splice_off_in, splice_fd_in, splice_flags).

// SpliceFdInFixed, in PrepareSplice's flags, makes fdIn a slot of the
// registered file table (SPLICE_F_FD_IN_FIXED). For fdOut, set SQEFixedFile
// on the SQE as for any other operation.
const SpliceFdInFixed uint32 = 1 << 31

// SpliceNoOffset, as an offset of PrepareSplice, means "no offset": it is
// required for the pipe end (a pipe cannot seek), and for a file it means
// the file position, which then moves.
const SpliceNoOffset = ^uint64(0)

// PrepareSplice prepares a splice(2) of up to n bytes from fdIn at offIn to
// fdOut at offOut (Linux 5.7). One end must be a pipe, whose offset is
// SpliceNoOffset. spliceFlags are unix.SPLICE_F_MOVE, unix.SPLICE_F_MORE
// (more data follows: a socket may hold back a partial segment), and
// SpliceFdInFixed. Res is the byte count moved, which can be short (the
// pipe is full, the file ends, the socket's buffer is full); 0 means the
// input ended. io_uring runs a splice that would block in its worker
// threads, so the flag unix.SPLICE_F_NONBLOCK is not needed and makes a
// full socket or pipe fail with EAGAIN instead.
func (s *SQE) PrepareSplice(fdIn int, offIn uint64, fdOut int, offOut uint64, n uint32, spliceFlags uint32) {
	*s = SQE{Opcode: OpSplice, Fd: int32(fdOut), Off: offOut, Addr: offIn, Len: n, OpFlags: spliceFlags, FileIndex: uint32(int32(fdIn))}
}

// PrepareSendZCFixed is PrepareSendZC from a registered buffer: buf must
// lie inside buffer bufIndex of Ring.RegisterBuffers, whose pages the
// kernel pinned once, so it skips pinning them per send. Its two CQEs are
// those of PrepareSendZC: buf may be written again only after the
// notification (CQEFNotif).
func (s *SQE) PrepareSendZCFixed(fd int, buf []byte, msgFlags int, bufIndex uint16) {
	*s = SQE{Opcode: OpSendZC, Fd: int32(fd), Addr: addrOf(buf), Len: ioLen(buf), OpFlags: uint32(msgFlags), IOPrio: recvsendFixedBuf, BufIndex: bufIndex}
}

// ZeroCopyBufferFree reports whether this CQE of a send_zc hands its buffer
// back: the notification does (CQEFNotif), and so does a result that
// announces no notification (no CQEFMore: the send failed before the kernel
// took the pages). A result with CQEFMore leaves the buffer with the kernel,
// which may still read it, however many bytes Res says were sent.
func (c CQE) ZeroCopyBufferFree() bool {
	return c.Notif() || !c.More()
}
