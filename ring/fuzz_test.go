package ring

import (
	"errors"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// FuzzRecvMultishot sends messages of fuzzed sizes through a multishot recv
// on a provided buffer ring, holding or recycling buffers as the input says,
// and checks that every message arrives intact and in order, that buffer ids
// stay in range and are never handed out twice while held, and that running
// the group dry ends the recv with ENOBUFS, after which a re-arm resumes it.
func FuzzRecvMultishot(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 63, 64, 65, 128, 129, 192, 255})
	f.Add([]byte{64, 64, 64, 64, 64, 64, 128, 0})
	f.Add([]byte{127, 127, 127, 127, 127, 127, 127, 127, 127})
	f.Fuzz(func(t *testing.T, program []byte) {
		if len(program) > 512 {
			program = program[:512]
		}
		requireKernel(t, 6, 0, "multishot recv")
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		r, err := New(DefaultOptions(8))
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		const entries, bufferSize = 4, 64
		br, err := NewBufferRing(r, BufferRingOptions{GroupID: 1, Entries: entries, BufferSize: bufferSize})
		if err != nil {
			t.Fatal(err)
		}
		defer br.Close()
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fds[0])
		defer unix.Close(fds[1])

		var held []uint16
		isHeld := make([]bool, entries)
		armed := false
		arm := func() {
			sqe, err := r.GetSQE()
			if err != nil {
				t.Fatal(err)
			}
			sqe.PrepareRecvMultishot(fds[1], 1, 0)
			sqe.UserData = 1
			armed = true
		}
		recycleHeld := func() {
			for _, bid := range held {
				isHeld[bid] = false
				br.Add(bid)
			}
			br.Publish()
			held = held[:0]
		}
		var msg [bufferSize]byte
		for i, op := range program {
			size := 1 + int(op)%bufferSize
			for j := range size {
				msg[j] = byte(i + j)
			}
			if _, err := unix.Write(fds[0], msg[:size]); err != nil {
				t.Fatal(err)
			}
			for attempt := 0; ; attempt++ {
				if attempt == 8 {
					t.Fatalf("message %d: not received after %d attempts", i, attempt)
				}
				if !armed {
					arm()
				}
				cqe := nextCQE(t, r)
				if !cqe.More() {
					armed = false
				}
				if errors.Is(cqe.Err(), unix.ENOBUFS) {
					if cqe.More() {
						t.Fatalf("ENOBUFS with MORE: %+v", cqe)
					}
					recycleHeld()
					continue
				}
				if cqe.Err() != nil || cqe.Res != int32(size) {
					t.Fatalf("message %d (%d bytes): cqe %+v (%v)", i, size, cqe, cqe.Err())
				}
				bid, ok := cqe.BufferID()
				if !ok || bid >= entries || isHeld[bid] {
					t.Fatalf("message %d: buffer id %d ok=%v held=%v", i, bid, ok, ok && bid < entries && isHeld[bid])
				}
				data := br.Buffer(bid, size)
				for j := range size {
					if data[j] != byte(i+j) {
						t.Fatalf("message %d: byte %d = %d, want %d", i, j, data[j], byte(i+j))
					}
				}
				switch action := op >> 6; {
				case action == 1 && len(held) < entries-1:
					held = append(held, bid)
					isHeld[bid] = true
				case action == 2:
					br.Recycle(bid)
					recycleHeld()
				default:
					br.Recycle(bid)
				}
				break
			}
		}
	})
}
