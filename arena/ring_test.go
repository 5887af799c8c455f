package arena_test

import (
	"bytes"
	"runtime"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/arena"
	"github.com/iggy-shard/iggy-shard/ring"
	"golang.org/x/sys/unix"
)

// TestLentClassBacksRingBuffers lends an arena class to a provided-buffer ring and
// receives into it, and registers another class as one fixed buffer and writes from
// it: the two ways the shard hands arena memory to the kernel.
func TestLentClassBacksRingBuffers(t *testing.T) {
	runtime.LockOSThread() // the ring is SINGLE_ISSUER
	defer runtime.UnlockOSThread()
	a, err := arena.New(arena.Config{Classes: []arena.ClassConfig{
		{BufferSizeBytes: 256, BufferCount: 8, Populate: true},
		{BufferSizeBytes: 4096, BufferCount: 4},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	r, err := ring.New(ring.DefaultOptions(8))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var pair [2]int
	if pair, err = unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pair[0])
	defer unix.Close(pair[1])

	mem, err := a.LendClass(0)
	if err != nil {
		t.Fatal(err)
	}
	br, err := ring.NewBufferRing(r, ring.BufferRingOptions{GroupID: 3, Entries: 8, BufferSize: 256, Memory: mem})
	if err != nil {
		t.Fatal(err)
	}
	msg := []byte("into an arena buffer chosen by the kernel")
	if _, err := unix.Write(pair[1], msg); err != nil {
		t.Fatal(err)
	}
	sqe, err := r.GetSQE()
	if err != nil {
		t.Fatal(err)
	}
	sqe.PrepareRecvBufferSelect(pair[0], br.GroupID(), 0)
	sqe.UserData = 1
	cqe := submitAndWait(t, r)
	bid, ok := cqe.BufferID()
	if cqe.Res != int32(len(msg)) || !ok {
		t.Fatalf("recv cqe %+v (%v)", cqe, cqe.Err())
	}
	got := br.Buffer(bid, int(cqe.Res))
	if !bytes.Equal(got, msg) {
		t.Fatalf("received %q", got)
	}
	if &got[0] != &mem[int(bid)*256] {
		t.Fatalf("buffer %d is not the arena's", bid)
	}
	br.Recycle(bid)
	if err := br.Close(); err != nil {
		t.Fatal(err)
	}
	a.ReturnClass(0)

	// Class 1 as one fixed buffer: any arena buffer of it can be written with WriteFixed.
	if err := r.RegisterBuffers([][]byte{a.RegionBytes(1)}); err != nil {
		t.Fatal(err)
	}
	// Class 1 buffer 1, not the region's first: the kernel takes any range inside it.
	first, err := a.AcquireClass(1)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Release(first)
	b, err := a.AcquireClass(1)
	if err != nil || b.Index() != 1 {
		t.Fatalf("AcquireClass(1) = buffer %d, %v", b.Index(), err)
	}
	payload := b.Bytes()[:100]
	copy(payload, bytes.Repeat([]byte{'x'}, 100))
	sqe, _ = r.GetSQE()
	sqe.PrepareWriteFixed(pair[0], payload, 0, 0)
	sqe.UserData = 2
	if cqe := submitAndWait(t, r); cqe.Res != 100 {
		t.Fatalf("write fixed from buffer %d: %+v (%v)", b.Index(), cqe, cqe.Err())
	}
	out := make([]byte, 100)
	if n, err := unix.Read(pair[1], out); err != nil || n != 100 || out[99] != 'x' {
		t.Fatalf("peer read %d, %v", n, err)
	}
	a.Release(b)
	if err := r.UnregisterBuffers(); err != nil {
		t.Fatal(err)
	}
}

// submitAndWait submits and returns the next completion, waiting at most a bounded time.
func submitAndWait(t *testing.T, r *ring.Ring) ring.CQE {
	t.Helper()
	if _, err := r.Submit(); err != nil {
		t.Fatal(err)
	}
	cqe, err := r.WaitCQETimeout(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c := *cqe
	r.CQESeen()
	return c
}
