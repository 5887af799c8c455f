package ring

import (
	"fmt"
	"testing"

	"golang.org/x/sys/unix"
)

// BenchmarkNop measures the ring's own overhead: prepare, submit and reap
// NOPs, batch per io_uring_enter. batch=1 (one enter per NOP) is the
// baseline for batching; getppid is the floor of one bare system call;
// regring=true enters through a registered ring fd (RegisterRingFd).
// ns/op is per NOP.
func BenchmarkNop(b *testing.B) {
	b.Run("syscall=getppid", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			unix.Getppid()
		}
	})
	for _, tc := range []struct {
		batch          int
		registerRingFd bool
	}{{1, false}, {1, true}, {32, false}, {32, true}} {
		batch := tc.batch
		b.Run(fmt.Sprintf("batch=%d/regring=%v", batch, tc.registerRingFd), func(b *testing.B) {
			r := newTestRing(b, 64)
			if tc.registerRingFd {
				if err := r.RegisterRingFd(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			done := 0
			for done < b.N {
				n := min(batch, b.N-done)
				for range n {
					sqe, err := r.GetSQE()
					if err != nil {
						b.Fatal(err)
					}
					sqe.PrepareNop()
					sqe.UserData = 1
				}
				if _, err := r.SubmitAndWait(uint32(n)); err != nil {
					b.Fatal(err)
				}
				for range n {
					cqe, ok := r.PeekCQE()
					if !ok || cqe.Res != 0 {
						b.Fatalf("nop cqe missing or failed: %v", ok)
					}
					r.CQESeen()
				}
				done += n
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "SQEs/s")
		})
	}
}

// BenchmarkRecvSendRoundTrip moves one message across a socketpair and back
// into user space: via the ring, a send and a one-shot recv submitted
// together and reaped with one io_uring_enter; the baseline, a blocking
// unix.Write then unix.Read on the same kind of socketpair, in the same run.
func BenchmarkRecvSendRoundTrip(b *testing.B) {
	for _, size := range []int{64, 4096} {
		b.Run(fmt.Sprintf("size=%d/baseline=syscalls", size), func(b *testing.B) {
			a, c := socketpair(b, unix.SOCK_STREAM)
			out, in := make([]byte, size), make([]byte, size)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				if n, err := unix.Write(a, out); err != nil || n != size {
					b.Fatalf("write %d, %v", n, err)
				}
				for got := 0; got < size; {
					n, err := unix.Read(c, in[got:])
					if err != nil || n == 0 {
						b.Fatalf("read %d, %v", n, err)
					}
					got += n
				}
			}
		})
		b.Run(fmt.Sprintf("size=%d/ring", size), func(b *testing.B) {
			r := newTestRing(b, 8)
			a, c := socketpair(b, unix.SOCK_STREAM)
			out, in := make([]byte, size), make([]byte, size)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				sqe, _ := r.GetSQE()
				sqe.PrepareSend(a, out, 0)
				sqe.UserData = 1
				sqe, _ = r.GetSQE()
				sqe.PrepareRecv(c, in, unix.MSG_WAITALL)
				sqe.UserData = 2
				if _, err := r.SubmitAndWait(2); err != nil {
					b.Fatal(err)
				}
				for range 2 {
					cqe, ok := r.PeekCQE()
					for !ok {
						if _, err := r.SubmitAndWait(1); err != nil {
							b.Fatal(err)
						}
						cqe, ok = r.PeekCQE()
					}
					if cqe.Res != int32(size) {
						b.Fatalf("cqe %+v (%v)", *cqe, cqe.Err())
					}
					r.CQESeen()
				}
			}
		})
	}
}

// BenchmarkTable is the per-operation bookkeeping: Add, then Complete.
func BenchmarkTable(b *testing.B) {
	table := NewTable[testOp](1024)
	cqe := CQE{}
	b.ReportAllocs()
	for b.Loop() {
		ud, _ := table.Add(testOp{fd: 1})
		cqe.UserData = ud
		table.Complete(&cqe)
	}
}

// BenchmarkRecvMultishot receives bursts of 32 small messages written to a
// SOCK_SEQPACKET socketpair with plain writes: through one armed multishot
// recv on a provided buffer ring (recycling each buffer), against the
// baseline of 32 one-shot recvs prepared per burst into fixed buffers, in
// the same run. ns/op is per message and includes the write(2).
func BenchmarkRecvMultishot(b *testing.B) {
	const burst, size = 32, 64
	msg := make([]byte, size)
	write := func(b *testing.B, fd int) {
		for range burst {
			if _, err := unix.Write(fd, msg); err != nil {
				b.Fatal(err)
			}
		}
	}
	reap := func(b *testing.B, r *Ring, cqes []CQE) []CQE {
		got := 0
		for got < burst {
			if r.CQReady() == 0 {
				if _, err := r.SubmitAndWait(uint32(burst - got)); err != nil {
					b.Fatal(err)
				}
			}
			got += r.ReapCQEs(cqes[got:burst])
		}
		return cqes[:burst]
	}
	b.Run("baseline=oneshot", func(b *testing.B) {
		r := newTestRing(b, 64)
		a, c := socketpair(b, unix.SOCK_SEQPACKET)
		buffers := make([]byte, burst*size)
		cqes := make([]CQE, burst)
		b.SetBytes(size)
		b.ReportAllocs()
		b.ResetTimer()
		for done := 0; done < b.N; done += burst {
			for i := range burst {
				sqe, _ := r.GetSQE()
				sqe.PrepareRecv(c, buffers[i*size:(i+1)*size], 0)
				sqe.UserData = uint64(i)
			}
			write(b, a)
			for _, cqe := range reap(b, r, cqes) {
				if cqe.Res != size {
					b.Fatalf("cqe %+v (%v)", cqe, cqe.Err())
				}
			}
		}
	})
	b.Run("multishot", func(b *testing.B) {
		r := newTestRing(b, 64)
		br, err := NewBufferRing(r, BufferRingOptions{GroupID: 1, Entries: 2 * burst, BufferSize: size})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { br.Close() })
		a, c := socketpair(b, unix.SOCK_SEQPACKET)
		cqes := make([]CQE, burst)
		arm := func() {
			sqe, _ := r.GetSQE()
			sqe.PrepareRecvMultishot(c, br.GroupID(), 0)
			sqe.UserData = 1
		}
		arm()
		b.SetBytes(size)
		b.ReportAllocs()
		b.ResetTimer()
		for done := 0; done < b.N; done += burst {
			write(b, a)
			for got := 0; got < burst; {
				if r.CQReady() == 0 {
					if _, err := r.SubmitAndWait(1); err != nil {
						b.Fatal(err)
					}
				}
				n := r.ReapCQEs(cqes[:burst-got])
				for _, cqe := range cqes[:n] {
					if !cqe.More() {
						arm() // ENOBUFS or an ended multishot: re-arm
					}
					if cqe.Res <= 0 {
						continue
					}
					bid, _ := cqe.BufferID()
					br.Add(bid)
					got++
				}
				br.Publish()
			}
		}
	})
}
