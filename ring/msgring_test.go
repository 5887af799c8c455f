package ring

import (
	"bytes"
	"errors"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

func TestMsgRingData(t *testing.T) {
	source := newTestRing(t, 8)
	requireOp(t, source, OpMsgRing)
	target := newTestRing(t, 8)
	sqe := getSQE(t, source)
	sqe.PrepareMsgRing(target.Fd(), 0xbeef, UserDataUntracked|42, 0)
	sqe.UserData = 1
	submit(t, source)
	if cqe := nextCQE(t, source); cqe.UserData != 1 || cqe.Res != 0 {
		t.Fatalf("sender cqe %+v (%v)", cqe, cqe.Err())
	}
	cqe := nextCQE(t, target)
	if cqe.UserData != UserDataUntracked|42 || cqe.Res != 0xbeef {
		t.Fatalf("target cqe %+v", cqe)
	}
}

// TestMsgRingWakesBlockedRing: the shard-to-shard wake-up. The target ring
// lives on another locked thread, blocked in SubmitAndWait; a message from
// this ring wakes it.
func TestMsgRingWakesBlockedRing(t *testing.T) {
	source := newTestRing(t, 8)
	requireOp(t, source, OpMsgRing)
	targetFd := make(chan int)
	got := make(chan CQE, 1)
	errs := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		target, err := New(DefaultOptions(8))
		if err != nil {
			errs <- err
			close(targetFd)
			return
		}
		defer target.Close()
		targetFd <- target.Fd()
		cqe, err := target.WaitCQETimeout(completionTimeout)
		if err != nil {
			errs <- err
			return
		}
		got <- *cqe
		target.CQESeen()
	}()
	fd, ok := <-targetFd
	if !ok {
		t.Fatal(<-errs)
	}
	sqe := getSQE(t, source)
	sqe.PrepareMsgRing(fd, 7, UserDataUntracked|1, 0)
	sqe.UserData = 1
	submit(t, source)
	if cqe := nextCQE(t, source); cqe.Res != 0 {
		t.Fatalf("sender cqe %+v (%v)", cqe, cqe.Err())
	}
	select {
	case cqe := <-got:
		if cqe.UserData != UserDataUntracked|1 || cqe.Res != 7 {
			t.Fatalf("target cqe %+v", cqe)
		}
	case err := <-errs:
		t.Fatalf("target: %v", err)
	}
}

func TestMsgRingSendFd(t *testing.T) {
	source := newTestRing(t, 8)
	requireOp(t, source, OpMsgRing)
	requireKernel(t, 6, 0, "msg_ring send-fd")
	target := newTestRing(t, 8)
	a, b := socketpair(t, unix.SOCK_STREAM)
	if err := source.RegisterFiles([]int32{int32(a)}); err != nil {
		t.Fatal(err)
	}
	if err := target.RegisterFilesSparse(8); err != nil {
		t.Fatal(err)
	}

	// Not subtests: t.Run runs its function on another goroutine, hence
	// maybe another thread, which a SINGLE_ISSUER ring refuses.
	for _, tc := range []struct {
		name       string
		targetSlot uint32
	}{{"fixed slot", 5}, {"allocated slot", FileIndexAlloc}} {
		func() {
			sqe := getSQE(t, source)
			sqe.PrepareMsgRingFd(target.Fd(), 0, tc.targetSlot, 77, 0)
			sqe.UserData = 1
			submit(t, source)
			sent := nextCQE(t, source)
			if sent.Err() != nil {
				t.Fatalf("%s: sender cqe %+v (%v)", tc.name, sent, sent.Err())
			}
			cqe := nextCQE(t, target)
			if cqe.UserData != 77 || cqe.Err() != nil || cqe.Res != sent.Res {
				t.Fatalf("%s: target cqe %+v (%v), sender res %d", tc.name, cqe, cqe.Err(), sent.Res)
			}
			slot := uint32(cqe.Res)
			if tc.targetSlot != FileIndexAlloc && slot != 0 {
				t.Fatalf("fixed-slot install reported %d, want 0", cqe.Res)
			}
			if tc.targetSlot != FileIndexAlloc {
				slot = tc.targetSlot
			}
			t.Logf("file arrived in target slot %d", slot)

			// The file works from the target's table.
			msg := heapBytes("sent from the target ring")
			sqe = getSQE(t, target)
			sqe.PrepareSend(int(slot), msg, 0)
			sqe.Flags |= SQEFixedFile
			sqe.UserData = 2
			submit(t, target)
			if cqe := nextCQE(t, target); cqe.Res != int32(len(msg)) {
				t.Fatalf("send via target slot: %+v (%v)", cqe, cqe.Err())
			}
			if got := readFull(t, b, len(msg)); !bytes.Equal(got, msg) {
				t.Fatalf("%s: peer read %q", tc.name, got)
			}
		}()
	}

	// Sending from an empty source slot fails cleanly.
	sqe := getSQE(t, source)
	sqe.PrepareMsgRingFd(target.Fd(), 0, FileIndexAlloc, 78, 0)
	sqe.UserData = 3
	sqe2 := getSQE(t, source)
	sqe2.PrepareCloseDirect(0)
	sqe2.UserData = 4
	sqe.Flags |= SQEIOLink // close only after the send
	submit(t, source)
	for _, cqe := range collectCQEs(t, source, 2) {
		if cqe.Err() != nil {
			t.Fatalf("send then close: %+v (%v)", cqe, cqe.Err())
		}
	}
	if cqe := nextCQE(t, target); cqe.UserData != 78 || cqe.Err() != nil {
		t.Fatalf("target cqe %+v", cqe)
	}
	sqe = getSQE(t, source)
	sqe.PrepareMsgRingFd(target.Fd(), 0, FileIndexAlloc, 79, 0)
	sqe.UserData = 5
	submit(t, source)
	if cqe := nextCQE(t, source); cqe.Err() == nil {
		t.Fatalf("send-fd from an empty slot succeeded: %+v", cqe)
	} else {
		t.Logf("send-fd from an empty slot: %v", cqe.Err())
	}
}

func TestFileAllocRange(t *testing.T) {
	source := newTestRing(t, 8)
	requireOp(t, source, OpMsgRing)
	requireKernel(t, 6, 0, "msg_ring send-fd and file alloc ranges")
	target := newTestRing(t, 8)
	a, _ := socketpair(t, unix.SOCK_STREAM)
	if err := source.RegisterFiles([]int32{int32(a)}); err != nil {
		t.Fatal(err)
	}
	if err := target.RegisterFilesSparse(16); err != nil {
		t.Fatal(err)
	}
	if err := target.SetFileAllocRange(10, 2); err != nil {
		t.Fatal(err)
	}
	var slots []int32
	for i := range 3 {
		sqe := getSQE(t, source)
		sqe.PrepareMsgRingFd(target.Fd(), 0, FileIndexAlloc, uint64(i), 0)
		sqe.UserData = uint64(i)
		submit(t, source)
		sent := nextCQE(t, source)
		if i == 2 {
			// The range [10, 12) is full.
			if !errors.Is(sent.Err(), unix.ENFILE) {
				t.Fatalf("third alloc: %+v (%v), want ENFILE", sent, sent.Err())
			}
			break
		}
		if sent.Err() != nil {
			t.Fatalf("alloc %d: %v", i, sent.Err())
		}
		cqe := nextCQE(t, target)
		slots = append(slots, cqe.Res)
	}
	if len(slots) != 2 || slots[0] < 10 || slots[0] > 11 || slots[1] < 10 || slots[1] > 11 || slots[0] == slots[1] {
		t.Fatalf("allocated slots %v, want 10 and 11", slots)
	}
}
