package ring

import "unsafe"

// The constants and structs in this file mirror the kernel UAPI header
// <linux/io_uring.h>. They are part of the kernel ABI and must never be
// renumbered or reordered; the size checks at the bottom of the file fail the
// build if a struct drifts from its C layout.

// Opcode is an io_uring operation code (enum io_uring_op).
type Opcode uint8

const (
	OpNop Opcode = iota
	OpReadv
	OpWritev
	OpFsync
	OpReadFixed
	OpWriteFixed
	OpPollAdd
	OpPollRemove
	OpSyncFileRange
	OpSendmsg
	OpRecvmsg
	OpTimeout
	OpTimeoutRemove
	OpAccept
	OpAsyncCancel
	OpLinkTimeout
	OpConnect
	OpFallocate
	OpOpenat
	OpClose
	OpFilesUpdate
	OpStatx
	OpRead
	OpWrite
	OpFadvise
	OpMadvise
	OpSend
	OpRecv
	OpOpenat2
	OpEpollCtl
	OpSplice
	OpProvideBuffers
	OpRemoveBuffers
	OpTee
	OpShutdown
	OpRenameat
	OpUnlinkat
	OpMkdirat
	OpSymlinkat
	OpLinkat
	OpMsgRing
	OpFsetxattr
	OpSetxattr
	OpFgetxattr
	OpGetxattr
	OpSocket
	OpUringCmd
	OpSendZC
	OpSendmsgZC
)

var opcodeNames = [...]string{
	OpNop: "nop", OpReadv: "readv", OpWritev: "writev", OpFsync: "fsync",
	OpReadFixed: "read_fixed", OpWriteFixed: "write_fixed", OpPollAdd: "poll_add",
	OpPollRemove: "poll_remove", OpSyncFileRange: "sync_file_range",
	OpSendmsg: "sendmsg", OpRecvmsg: "recvmsg", OpTimeout: "timeout",
	OpTimeoutRemove: "timeout_remove", OpAccept: "accept",
	OpAsyncCancel: "async_cancel", OpLinkTimeout: "link_timeout",
	OpConnect: "connect", OpFallocate: "fallocate", OpOpenat: "openat",
	OpClose: "close", OpFilesUpdate: "files_update", OpStatx: "statx",
	OpRead: "read", OpWrite: "write", OpFadvise: "fadvise", OpMadvise: "madvise",
	OpSend: "send", OpRecv: "recv", OpOpenat2: "openat2", OpEpollCtl: "epoll_ctl",
	OpSplice: "splice", OpProvideBuffers: "provide_buffers",
	OpRemoveBuffers: "remove_buffers", OpTee: "tee", OpShutdown: "shutdown",
	OpRenameat: "renameat", OpUnlinkat: "unlinkat", OpMkdirat: "mkdirat",
	OpSymlinkat: "symlinkat", OpLinkat: "linkat", OpMsgRing: "msg_ring",
	OpFsetxattr: "fsetxattr", OpSetxattr: "setxattr", OpFgetxattr: "fgetxattr",
	OpGetxattr: "getxattr", OpSocket: "socket", OpUringCmd: "uring_cmd",
	OpSendZC: "send_zc", OpSendmsgZC: "sendmsg_zc",
}

// String returns the opcode's name as the UAPI header spells it, lower case.
func (op Opcode) String() string {
	if int(op) < len(opcodeNames) {
		return opcodeNames[op]
	}
	return "op(" + itoa(uint64(op)) + ")"
}

// SQE flags (sqe.flags).
const (
	SQEFixedFile      uint8 = 1 << 0 // Fd is an index into the registered file table
	SQEIODrain        uint8 = 1 << 1 // issue after all earlier SQEs completed
	SQEIOLink         uint8 = 1 << 2 // the next SQE starts only after this one succeeds
	SQEIOHardlink     uint8 = 1 << 3 // like SQEIOLink, but the chain survives a failure
	SQEAsync          uint8 = 1 << 4 // always punt to io-wq
	SQEBufferSelect   uint8 = 1 << 5 // pick a buffer from group BufIndex
	SQECQESkipSuccess uint8 = 1 << 6 // post no CQE if the request succeeds
	sqeLinkFlagsMask        = SQEIOLink | SQEIOHardlink
)

// FileIndexAlloc asks the kernel to pick a free slot of the registered file
// table (accept, msg_ring send-fd); the chosen slot comes back in cqe.Res.
const FileIndexAlloc = ^uint32(0)

// Setup flags (io_uring_params.flags).
const (
	SetupIOPoll       uint32 = 1 << 0
	SetupSQPoll       uint32 = 1 << 1
	SetupSQAff        uint32 = 1 << 2
	SetupCQSize       uint32 = 1 << 3
	SetupClamp        uint32 = 1 << 4
	SetupAttachWQ     uint32 = 1 << 5
	SetupRDisabled    uint32 = 1 << 6
	SetupSubmitAll    uint32 = 1 << 7
	SetupCoopTaskrun  uint32 = 1 << 8
	SetupTaskrunFlag  uint32 = 1 << 9
	SetupSQE128       uint32 = 1 << 10
	SetupCQE32        uint32 = 1 << 11
	SetupSingleIssuer uint32 = 1 << 12
	SetupDeferTaskrun uint32 = 1 << 13
)

// Feature flags (io_uring_params.features), reported by the kernel.
const (
	FeatSingleMmap     uint32 = 1 << 0
	FeatNoDrop         uint32 = 1 << 1
	FeatSubmitStable   uint32 = 1 << 2
	FeatRWCurPos       uint32 = 1 << 3
	FeatCurPersonality uint32 = 1 << 4
	FeatFastPoll       uint32 = 1 << 5
	FeatPoll32Bits     uint32 = 1 << 6
	FeatSQPollNonfixed uint32 = 1 << 7
	FeatExtArg         uint32 = 1 << 8
	FeatNativeWorkers  uint32 = 1 << 9
	FeatRsrcTags       uint32 = 1 << 10
	FeatCQESkip        uint32 = 1 << 11
	FeatLinkedFile     uint32 = 1 << 12
)

// Per-opcode flags.
const (
	FsyncDatasync uint32 = 1 << 0 // fsync_flags: fdatasync(2) instead of fsync(2)

	TimeoutAbs          uint32 = 1 << 0 // timeout_flags
	TimeoutUpdate       uint32 = 1 << 1
	TimeoutBoottime     uint32 = 1 << 2
	TimeoutRealtime     uint32 = 1 << 3
	TimeoutETimeSuccess uint32 = 1 << 5

	CancelAll      uint32 = 1 << 0 // cancel_flags
	CancelFd       uint32 = 1 << 1
	CancelAny      uint32 = 1 << 2
	CancelFdFixed  uint32 = 1 << 3
	CancelUserData uint32 = 1 << 4
	CancelOp       uint32 = 1 << 5

	// send/recv flags live in sqe.ioprio.
	recvsendPollFirst uint16 = 1 << 0
	recvMultishot     uint16 = 1 << 1
	recvsendFixedBuf  uint16 = 1 << 2
	sendZCReportUsage uint16 = 1 << 3

	// NotifUsageZCCopied is set in a send_zc notification's Res when
	// SendZCReportUsage was asked for and the kernel copied the data anyway.
	NotifUsageZCCopied uint32 = 1 << 31

	acceptMultishot uint16 = 1 << 0 // accept flags live in sqe.ioprio

	msgRingData   = 0 // sqe.addr of a msg_ring: pass len as res and off as user_data
	msgRingSendFd = 1 // sqe.addr of a msg_ring: install a registered file in the target

	// MsgRingCQESkip posts no CQE to the target ring (send-fd only).
	MsgRingCQESkip uint32 = 1 << 0
)

// CQE flags (cqe.flags).
const (
	CQEFBuffer       uint32 = 1 << 0 // the upper 16 bits carry a buffer id
	CQEFMore         uint32 = 1 << 1 // the SQE will post more CQEs (multishot, send_zc)
	CQEFSockNonempty uint32 = 1 << 2 // more data is waiting on the socket
	CQEFNotif        uint32 = 1 << 3 // the send_zc notification: buffers may be reused
	cqeBufferShift          = 16
)

// mmap offsets.
const (
	offSQRing = 0
	offCQRing = 0x8000000
	offSQEs   = 0x10000000
)

// SQ ring flags (*sq.flags), written by the kernel.
const (
	sqNeedWakeup = 1 << 0
	sqCQOverflow = 1 << 1
	sqTaskrun    = 1 << 2
)

// io_uring_enter flags.
const (
	enterGetEvents = 1 << 0
	enterSQWakeup  = 1 << 1
	enterSQWait    = 1 << 2
	enterExtArg    = 1 << 3
	enterRegRing   = 1 << 4
)

// io_uring_register opcodes.
const (
	registerBuffers        = 0
	unregisterBuffers      = 1
	registerFiles          = 2
	unregisterFiles        = 3
	registerFilesUpdate    = 6
	registerProbe          = 8
	registerFiles2         = 13
	registerFilesUpdate2   = 14
	registerPbufRing       = 22
	unregisterPbufRing     = 23
	registerFileAllocRange = 25
	registerRingFds        = 20
	unregisterRingFds      = 21

	rsrcRegisterSparse = 1 << 0
	// FilesSkip in an UpdateFiles slice leaves that slot as it is.
	FilesSkip int32 = -2

	ioUringOpSupported = 1 << 0
	probeOpsCount      = 256
)

// SQE is a submission queue entry (struct io_uring_sqe), 64 bytes. The
// Prepare* methods fill one completely, zeroing every field they do not use,
// as the kernel rejects stray bits. Unions of the C struct carry the name of
// their most common member; the Prepare* methods document the others.
type SQE struct {
	Opcode      Opcode
	Flags       uint8
	IOPrio      uint16 // also send/recv/accept flags
	Fd          int32
	Off         uint64 // also addr2, cmd_op
	Addr        uint64 // also splice_off_in
	Len         uint32
	OpFlags     uint32 // rw_flags, fsync_flags, msg_flags, timeout_flags, accept_flags, cancel_flags, msg_ring_flags, ...
	UserData    uint64
	BufIndex    uint16 // also buf_group
	Personality uint16
	FileIndex   uint32 // also splice_fd_in, addr_len
	Addr3       uint64
	pad2        uint64
}

// CQE is a completion queue entry (struct io_uring_cqe), 16 bytes.
type CQE struct {
	UserData uint64
	Res      int32
	Flags    uint32
}

type sqringOffsets struct {
	head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
	userAddr                                                        uint64
}

type cqringOffsets struct {
	head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1 uint32
	userAddr                                                        uint64
}

type params struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFd uint32
	resv                                                                   [3]uint32
	sqOff                                                                  sqringOffsets
	cqOff                                                                  cqringOffsets
}

type probeHeader struct {
	lastOp uint8
	opsLen uint8
	resv   uint16
	resv2  [3]uint32
}

type probeOp struct {
	op    uint8
	resv  uint8
	flags uint16
	resv2 uint32
}

type rsrcRegister struct {
	nr    uint32
	flags uint32
	resv2 uint64
	data  uint64
	tags  uint64
}

type rsrcUpdate2 struct {
	offset uint32
	resv   uint32
	data   uint64
	tags   uint64
	nr     uint32
	resv2  uint32
}

// bufRingEntry is struct io_uring_buf. Entry 0's last two bytes double as
// the ring's tail (struct io_uring_buf_ring).
type bufRingEntry struct {
	addr uint64
	len  uint32
	bid  uint16
	resv uint16
}

type bufReg struct {
	ringAddr    uint64
	ringEntries uint32
	bgid        uint16
	flags       uint16
	resv        [3]uint64
}

type geteventsArg struct {
	sigmask   uint64
	sigmaskSz uint32
	pad       uint32
	ts        uint64
}

// rsrcUpdate is struct io_uring_rsrc_update.
type rsrcUpdate struct {
	offset uint32
	resv   uint32
	data   uint64
}

type fileIndexRange struct {
	off  uint32
	len  uint32
	resv uint64
}

// Timespec is struct __kernel_timespec, used by timeouts. It must stay
// alive and unmoved until the timeout's CQE arrives.
type Timespec struct {
	Sec  int64
	Nsec int64
}

// Compile-time layout checks: each line fails to build ("overflows") when a
// struct's Go size differs from its C size.
var (
	_ [unsafe.Sizeof(SQE{}) - 64]struct{}
	_ [64 - unsafe.Sizeof(SQE{})]struct{}
	_ [unsafe.Sizeof(CQE{}) - 16]struct{}
	_ [16 - unsafe.Sizeof(CQE{})]struct{}
	_ [unsafe.Sizeof(params{}) - 120]struct{}
	_ [120 - unsafe.Sizeof(params{})]struct{}
	_ [unsafe.Sizeof(probeHeader{}) - 16]struct{}
	_ [16 - unsafe.Sizeof(probeHeader{})]struct{}
	_ [unsafe.Sizeof(probeOp{}) - 8]struct{}
	_ [8 - unsafe.Sizeof(probeOp{})]struct{}
	_ [unsafe.Sizeof(rsrcRegister{}) - 32]struct{}
	_ [32 - unsafe.Sizeof(rsrcRegister{})]struct{}
	_ [unsafe.Sizeof(rsrcUpdate2{}) - 32]struct{}
	_ [32 - unsafe.Sizeof(rsrcUpdate2{})]struct{}
	_ [unsafe.Sizeof(bufRingEntry{}) - 16]struct{}
	_ [16 - unsafe.Sizeof(bufRingEntry{})]struct{}
	_ [unsafe.Sizeof(bufReg{}) - 40]struct{}
	_ [40 - unsafe.Sizeof(bufReg{})]struct{}
	_ [unsafe.Sizeof(geteventsArg{}) - 24]struct{}
	_ [24 - unsafe.Sizeof(geteventsArg{})]struct{}
	_ [unsafe.Sizeof(rsrcUpdate{}) - 16]struct{}
	_ [16 - unsafe.Sizeof(rsrcUpdate{})]struct{}
	_ [unsafe.Sizeof(fileIndexRange{}) - 16]struct{}
	_ [16 - unsafe.Sizeof(fileIndexRange{})]struct{}
	_ [unsafe.Sizeof(Timespec{}) - 16]struct{}
	_ [16 - unsafe.Sizeof(Timespec{})]struct{}
)

func itoa(v uint64) string {
	var buf [20]byte
	i := len(buf)
	for {
		i--
		buf[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			return string(buf[i:])
		}
	}
}
