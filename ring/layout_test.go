package ring

import (
	"testing"
	"unsafe"
)

// TestLayoutOffsets pins each field of the shared structs to its offset in
// <linux/io_uring.h>; the sizes are checked at compile time in uapi.go.
func TestLayoutOffsets(t *testing.T) {
	var s SQE
	var c CQE
	var p params
	var b bufRingEntry
	var g geteventsArg
	checks := []struct {
		name      string
		got, want uintptr
	}{
		{"sqe.opcode", unsafe.Offsetof(s.Opcode), 0},
		{"sqe.flags", unsafe.Offsetof(s.Flags), 1},
		{"sqe.ioprio", unsafe.Offsetof(s.IOPrio), 2},
		{"sqe.fd", unsafe.Offsetof(s.Fd), 4},
		{"sqe.off", unsafe.Offsetof(s.Off), 8},
		{"sqe.addr", unsafe.Offsetof(s.Addr), 16},
		{"sqe.len", unsafe.Offsetof(s.Len), 24},
		{"sqe.rw_flags", unsafe.Offsetof(s.OpFlags), 28},
		{"sqe.user_data", unsafe.Offsetof(s.UserData), 32},
		{"sqe.buf_index", unsafe.Offsetof(s.BufIndex), 40},
		{"sqe.personality", unsafe.Offsetof(s.Personality), 42},
		{"sqe.file_index", unsafe.Offsetof(s.FileIndex), 44},
		{"sqe.addr3", unsafe.Offsetof(s.Addr3), 48},
		{"cqe.user_data", unsafe.Offsetof(c.UserData), 0},
		{"cqe.res", unsafe.Offsetof(c.Res), 8},
		{"cqe.flags", unsafe.Offsetof(c.Flags), 12},
		{"params.features", unsafe.Offsetof(p.features), 20},
		{"params.sq_off", unsafe.Offsetof(p.sqOff), 40},
		{"params.cq_off", unsafe.Offsetof(p.cqOff), 80},
		{"io_uring_buf.bid", unsafe.Offsetof(b.bid), 12},
		{"io_uring_buf_ring.tail", unsafe.Offsetof(b.resv), 14},
		{"getevents_arg.ts", unsafe.Offsetof(g.ts), 16},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s at offset %d, want %d", c.name, c.got, c.want)
		}
	}
}

// TestPrepareClearsStaleFields: SQE slots are reused, and the kernel rejects
// requests with stray bits in fields an opcode does not use, so every
// Prepare method must overwrite the whole entry.
func TestPrepareClearsStaleFields(t *testing.T) {
	buf := make([]byte, 8)
	ts := &Timespec{}
	preps := map[string]func(*SQE){
		"nop":          func(s *SQE) { s.PrepareNop() },
		"recv":         func(s *SQE) { s.PrepareRecv(3, buf, 0) },
		"recvMulti":    func(s *SQE) { s.PrepareRecvMultishot(3, 1, 0) },
		"send":         func(s *SQE) { s.PrepareSend(3, buf, 0) },
		"fsync":        func(s *SQE) { s.PrepareFsync(3, 0) },
		"timeout":      func(s *SQE) { s.PrepareTimeout(ts, 0, 0) },
		"cancel":       func(s *SQE) { s.PrepareCancel(1, 0) },
		"closeDirect":  func(s *SQE) { s.PrepareCloseDirect(0) },
		"msgRing":      func(s *SQE) { s.PrepareMsgRing(3, 0, 0, 0) },
		"msgRingFd":    func(s *SQE) { s.PrepareMsgRingFd(3, 0, 0, 0, 0) },
		"acceptMulti":  func(s *SQE) { s.PrepareAcceptMultishot(3, 0) },
		"writeFixed":   func(s *SQE) { s.PrepareWriteFixed(3, buf, 0, 0) },
		"timeoutRemov": func(s *SQE) { s.PrepareTimeoutRemove(1, 0) },
		"linkTimeout":  func(s *SQE) { s.PrepareLinkTimeout(ts, 0) },
		"sendZC":       func(s *SQE) { s.PrepareSendZC(3, buf, 0, true) },
		"closePlain":   func(s *SQE) { s.PrepareClose(3) },
		"cancelFd":     func(s *SQE) { s.PrepareCancelFd(3, CancelAll) },
		"readFixed":    func(s *SQE) { s.PrepareReadFixed(3, buf, 0, 1) },
		"acceptDirect": func(s *SQE) { s.PrepareAcceptMultishotDirect(3, 0) },
		"splice":       func(s *SQE) { s.PrepareSplice(3, 0, 4, SpliceNoOffset, 8, 0) },
		"sendZCFixed":  func(s *SQE) { s.PrepareSendZCFixed(3, buf, 0, 1) },
	}
	for name, prep := range preps {
		var clean, dirty SQE
		prep(&clean)
		raw := (*[64]byte)(unsafe.Pointer(&dirty))
		for i := range raw {
			raw[i] = 0xA5
		}
		prep(&dirty)
		if clean != dirty {
			t.Errorf("%s leaves stale bytes: %+v vs %+v", name, dirty, clean)
		}
	}
}

func TestFileIndexEncoding(t *testing.T) {
	for _, tc := range []struct{ slot, want uint32 }{{0, 1}, {5, 6}, {FileIndexAlloc, FileIndexAlloc}} {
		if got := encodeFileIndex(tc.slot); got != tc.want {
			t.Errorf("encodeFileIndex(%d) = %d, want %d", tc.slot, got, tc.want)
		}
	}
}

func TestCQEAccessors(t *testing.T) {
	c := CQE{Res: 12, Flags: CQEFBuffer | CQEFMore | 513<<cqeBufferShift}
	if bid, ok := c.BufferID(); !ok || bid != 513 || !c.More() || c.Notif() || c.Err() != nil {
		t.Fatalf("accessors of %+v: bid %d ok %v", c, bid, ok)
	}
	c = CQE{Res: -105, Flags: CQEFNotif}
	if _, ok := c.BufferID(); ok || c.Err() == nil || c.Err().Error() != "no buffer space available" || !c.Notif() {
		t.Fatalf("accessors of %+v", c)
	}
}
