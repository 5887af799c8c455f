package ring

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// Memory handed to a Prepare* method (buffers, iovecs, msghdrs, timespecs)
// is read or written by the kernel after the method returns, possibly after
// Submit returns: the caller must keep it alive, unmoved and untouched until
// the operation's final CQE. Go stacks move, so such memory must never be a
// stack variable: use arena (mmap) memory or heap objects the caller keeps a
// reference to (the Prepare* methods make the compiler put memory built with
// make or new on the heap; see heapAddr). Each method zeroes the fields the
// kernel must not see set.
//
// To address a registered (direct) file, pass its slot as fd and set
// SQEFixedFile in Flags after preparing. To link an SQE to the next one, set
// SQEIOLink. Set UserData to identify the completion (see Table).

// ioBytesMax is the kernel's MAX_RW_COUNT (INT_MAX rounded down to a page):
// no read or write moves more in one call, so a longer buffer is offered as
// its first ioBytesMax bytes and completes short, as POSIX allows, instead of
// having its length wrap in the 32-bit sqe.len.
const ioBytesMax = 0x7ffff000

func ioLen(b []byte) uint32 {
	return uint32(min(len(b), ioBytesMax))
}

func addrOf(b []byte) uint64 {
	return heapAddr(uintptr(unsafe.Pointer(unsafe.SliceData(b))))
}

// heapAddr returns p. Its directive makes the compiler treat the memory
// behind every pointer converted in its argument list as escaping, so a
// buffer a caller builds with make or new lands on the heap rather than on a
// goroutine stack, which moves when it grows while the kernel still holds
// the old address. It does not keep the memory alive: the caller does.
//
//go:uintptrescapes
//go:noinline
func heapAddr(p uintptr) uint64 { return uint64(p) }

// PrepareNop prepares an operation that does nothing and completes with 0.
func (s *SQE) PrepareNop() {
	*s = SQE{Opcode: OpNop}
}

// PrepareAccept prepares a one-shot accept(4) on listener fd; acceptFlags
// are SOCK_NONBLOCK/SOCK_CLOEXEC. Res is the new socket's fd.
func (s *SQE) PrepareAccept(fd int, acceptFlags int) {
	*s = SQE{Opcode: OpAccept, Fd: int32(fd), OpFlags: uint32(acceptFlags)}
}

// PrepareAcceptMultishot prepares an accept that keeps posting one CQE per
// connection (Res = fd, CQEFMore set) until it fails or is cancelled; a CQE
// without CQEFMore ends it and it must be prepared again (Linux 5.19).
func (s *SQE) PrepareAcceptMultishot(fd int, acceptFlags int) {
	*s = SQE{Opcode: OpAccept, Fd: int32(fd), IOPrio: acceptMultishot, OpFlags: uint32(acceptFlags)}
}

// PrepareAcceptMultishotDirect is PrepareAcceptMultishot installing each
// connection straight into a free slot of the registered file table: Res is
// the slot, not an fd. It fails with ENFILE when the table is full.
func (s *SQE) PrepareAcceptMultishotDirect(fd int, acceptFlags int) {
	*s = SQE{Opcode: OpAccept, Fd: int32(fd), IOPrio: acceptMultishot, OpFlags: uint32(acceptFlags), FileIndex: FileIndexAlloc}
}

// PrepareRecv prepares a recv(2) into buf. Res is the byte count, 0 at EOF.
func (s *SQE) PrepareRecv(fd int, buf []byte, msgFlags int) {
	*s = SQE{Opcode: OpRecv, Fd: int32(fd), Addr: addrOf(buf), Len: ioLen(buf), OpFlags: uint32(msgFlags)}
}

// PrepareRecvBufferSelect prepares a one-shot recv into a buffer the kernel
// takes from provided buffer group groupID (a BufferRing) when data arrives;
// the CQE carries CQEFBuffer and the buffer id (CQE.BufferID). Res is
// -ENOBUFS when the group is empty.
func (s *SQE) PrepareRecvBufferSelect(fd int, groupID uint16, msgFlags int) {
	*s = SQE{Opcode: OpRecv, Fd: int32(fd), Flags: SQEBufferSelect, OpFlags: uint32(msgFlags), BufIndex: groupID}
}

// PrepareRecvBufferSelectMax is PrepareRecvBufferSelect reading at most
// maxBytes (and at most the selected buffer's size): what follows them stays in the
// socket.
func (s *SQE) PrepareRecvBufferSelectMax(fd int, groupID uint16, maxBytes uint32, msgFlags int) {
	s.PrepareRecvBufferSelect(fd, groupID, msgFlags)
	s.Len = maxBytes
}

// PrepareRecvMultishot prepares a recv that posts one CQE per arrival, each
// into a buffer from group groupID, with CQEFMore while it stays armed
// (Linux 6.0). It ends with a CQE without CQEFMore: at EOF (Res 0), on error,
// or with Res -ENOBUFS when the group ran dry; recycle buffers and prepare it
// again. The kernel takes a buffer before it learns whether the socket has
// more data, so taking the last buffer can end the recv with ENOBUFS with no
// new data at all: recycle promptly, and treat ENOBUFS as "re-arm".
func (s *SQE) PrepareRecvMultishot(fd int, groupID uint16, msgFlags int) {
	*s = SQE{Opcode: OpRecv, Fd: int32(fd), Flags: SQEBufferSelect, IOPrio: recvMultishot, OpFlags: uint32(msgFlags), BufIndex: groupID}
}

// PrepareSend prepares a send(2) of buf. Res is the byte count, which can
// be short for a stream socket.
func (s *SQE) PrepareSend(fd int, buf []byte, msgFlags int) {
	*s = SQE{Opcode: OpSend, Fd: int32(fd), Addr: addrOf(buf), Len: ioLen(buf), OpFlags: uint32(msgFlags)}
}

// PrepareSendZC prepares a zero-copy send of buf (Linux 6.0). It posts two
// CQEs with the same UserData: first the result (Res = bytes, CQEFMore set),
// then a notification (CQEFNotif, no CQEFMore) once the kernel no longer
// reads buf; only then may buf be reused. If the first CQE fails, no
// notification follows unless CQEFMore was set on it. reportUsage asks for
// NotifUsageZCCopied in the notification's Res when the data was copied.
func (s *SQE) PrepareSendZC(fd int, buf []byte, msgFlags int, reportUsage bool) {
	*s = SQE{Opcode: OpSendZC, Fd: int32(fd), Addr: addrOf(buf), Len: ioLen(buf), OpFlags: uint32(msgFlags)}
	if reportUsage {
		s.IOPrio = sendZCReportUsage
	}
}

// PrepareSendmsg prepares a sendmsg(2) of msg, whose iovecs, name and
// control buffers must outlive the operation.
func (s *SQE) PrepareSendmsg(fd int, msg *unix.Msghdr, msgFlags int) {
	*s = SQE{Opcode: OpSendmsg, Fd: int32(fd), Addr: heapAddr(uintptr(unsafe.Pointer(msg))), Len: 1, OpFlags: uint32(msgFlags)}
}

// PrepareWritev prepares a pwritev(2) of iovecs at offset; offset
// ^uint64(0) means the file position (and is required for sockets and pipes
// that cannot seek).
func (s *SQE) PrepareWritev(fd int, iovecs []unix.Iovec, offset uint64) {
	*s = SQE{Opcode: OpWritev, Fd: int32(fd), Addr: heapAddr(uintptr(unsafe.Pointer(unsafe.SliceData(iovecs)))), Len: uint32(len(iovecs)), Off: offset}
}

// PrepareReadv prepares a preadv(2) into iovecs at offset.
func (s *SQE) PrepareReadv(fd int, iovecs []unix.Iovec, offset uint64) {
	*s = SQE{Opcode: OpReadv, Fd: int32(fd), Addr: heapAddr(uintptr(unsafe.Pointer(unsafe.SliceData(iovecs)))), Len: uint32(len(iovecs)), Off: offset}
}

// PrepareRead prepares a pread(2) into buf at offset.
func (s *SQE) PrepareRead(fd int, buf []byte, offset uint64) {
	*s = SQE{Opcode: OpRead, Fd: int32(fd), Addr: addrOf(buf), Len: ioLen(buf), Off: offset}
}

// PrepareWrite prepares a pwrite(2) of buf at offset.
func (s *SQE) PrepareWrite(fd int, buf []byte, offset uint64) {
	*s = SQE{Opcode: OpWrite, Fd: int32(fd), Addr: addrOf(buf), Len: ioLen(buf), Off: offset}
}

// PrepareReadFixed prepares a read at offset into buf, which must lie
// inside registered buffer bufIndex (Ring.RegisterBuffers): the kernel skips
// pinning the pages per operation.
func (s *SQE) PrepareReadFixed(fd int, buf []byte, offset uint64, bufIndex uint16) {
	*s = SQE{Opcode: OpReadFixed, Fd: int32(fd), Addr: addrOf(buf), Len: ioLen(buf), Off: offset, BufIndex: bufIndex}
}

// PrepareWriteFixed prepares a write at offset of buf, which must lie inside
// registered buffer bufIndex.
func (s *SQE) PrepareWriteFixed(fd int, buf []byte, offset uint64, bufIndex uint16) {
	*s = SQE{Opcode: OpWriteFixed, Fd: int32(fd), Addr: addrOf(buf), Len: ioLen(buf), Off: offset, BufIndex: bufIndex}
}

// PrepareFsync prepares fsync(2), or fdatasync(2) with FsyncDatasync.
func (s *SQE) PrepareFsync(fd int, fsyncFlags uint32) {
	*s = SQE{Opcode: OpFsync, Fd: int32(fd), OpFlags: fsyncFlags}
}

// PrepareTimeout prepares a timeout that completes with -ETIME when ts
// elapses (relative, unless TimeoutAbs), or with 0 once completionCount
// other CQEs were posted if completionCount > 0.
func (s *SQE) PrepareTimeout(ts *Timespec, completionCount uint32, timeoutFlags uint32) {
	*s = SQE{Opcode: OpTimeout, Fd: -1, Addr: heapAddr(uintptr(unsafe.Pointer(ts))), Len: 1, Off: uint64(completionCount), OpFlags: timeoutFlags}
}

// PrepareLinkTimeout prepares a timeout for the SQE before it, which must
// carry SQEIOLink: if that operation is still running when ts elapses it is
// cancelled (-ECANCELED) and this one completes with -ETIME; if it finishes
// first, this one completes with -ECANCELED.
func (s *SQE) PrepareLinkTimeout(ts *Timespec, timeoutFlags uint32) {
	*s = SQE{Opcode: OpLinkTimeout, Fd: -1, Addr: heapAddr(uintptr(unsafe.Pointer(ts))), Len: 1, OpFlags: timeoutFlags}
}

// PrepareTimeoutRemove prepares the removal of the timeout whose UserData is
// targetUserData: the timeout completes with -ECANCELED and this operation
// with 0, or -ENOENT if it had already fired.
func (s *SQE) PrepareTimeoutRemove(targetUserData uint64, timeoutFlags uint32) {
	*s = SQE{Opcode: OpTimeoutRemove, Fd: -1, Addr: targetUserData, OpFlags: timeoutFlags}
}

// PrepareMsgRing prepares a message to another ring (Linux 5.18): the target
// ring gets a CQE with UserData targetUserData and Res res, without having
// submitted anything; this ring gets the usual CQE for the send itself. It
// wakes a target blocked in SubmitAndWait.
func (s *SQE) PrepareMsgRing(targetRingFd int, res uint32, targetUserData uint64, msgRingFlags uint32) {
	*s = SQE{Opcode: OpMsgRing, Fd: int32(targetRingFd), Addr: msgRingData, Len: res, Off: targetUserData, OpFlags: msgRingFlags}
}

// PrepareMsgRingFd prepares the transfer of this ring's registered file in
// slot sourceSlot into the target ring's registered file table at targetSlot
// (or FileIndexAlloc for any free slot) (Linux 6.0). The target gets a CQE
// with UserData targetUserData, unless MsgRingCQESkip. Res, in the target's
// CQE and in this ring's, is the slot chosen with FileIndexAlloc, else 0.
// The source slot keeps its file: close it with PrepareCloseDirect when done.
func (s *SQE) PrepareMsgRingFd(targetRingFd int, sourceSlot, targetSlot uint32, targetUserData uint64, msgRingFlags uint32) {
	*s = SQE{Opcode: OpMsgRing, Fd: int32(targetRingFd), Addr: msgRingSendFd, Off: targetUserData, Addr3: uint64(sourceSlot), OpFlags: msgRingFlags}
	s.FileIndex = encodeFileIndex(targetSlot)
}

// encodeFileIndex stores a registered file slot the way the kernel reads
// sqe.file_index: 0 means "not direct", so slots travel as slot+1, and
// FileIndexAlloc travels as itself.
func encodeFileIndex(slot uint32) uint32 {
	if slot == FileIndexAlloc {
		return FileIndexAlloc
	}
	return slot + 1
}

// PrepareClose prepares close(2) of a plain file descriptor.
func (s *SQE) PrepareClose(fd int) {
	*s = SQE{Opcode: OpClose, Fd: int32(fd)}
}

// PrepareCloseDirect prepares the closing of registered file table slot
// slot (Linux 5.15), leaving the slot empty.
func (s *SQE) PrepareCloseDirect(slot uint32) {
	*s = SQE{Opcode: OpClose, FileIndex: slot + 1}
}

// PrepareCancel prepares the cancellation of the in-flight operation whose
// UserData is targetUserData (CancelAll: of every such operation). The
// cancelled operation completes with -ECANCELED (or its result, if it won
// the race); this one with 0, -ENOENT (nothing found) or -EALREADY (running,
// cannot be stopped).
func (s *SQE) PrepareCancel(targetUserData uint64, cancelFlags uint32) {
	*s = SQE{Opcode: OpAsyncCancel, Fd: -1, Addr: targetUserData, OpFlags: cancelFlags}
}

// PrepareCancelFd prepares the cancellation of operations on fd (one, or
// all with CancelAll; add CancelFdFixed when fd is a registered slot)
// (Linux 5.19). Res is the number cancelled with CancelAll.
func (s *SQE) PrepareCancelFd(fd int, cancelFlags uint32) {
	*s = SQE{Opcode: OpAsyncCancel, Fd: int32(fd), OpFlags: cancelFlags | CancelFd}
}
