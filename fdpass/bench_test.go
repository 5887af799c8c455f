package fdpass

import (
	"testing"

	"github.com/iggy-shard/iggy-shard/ring"
	"golang.org/x/sys/unix"
)

// BenchmarkHandoff measures one connection's trip from sender to receiver, both shards'
// rings driven by this goroutine: in ModeMsgRing the send, its two sender CQEs, the
// target's CQE and the target closing its slot; in ModeQueue (the baseline) the dup,
// the enqueue and the receiver's close. Each iteration first dups a socket to stand
// in for an accepted connection (the same cost in both).
func BenchmarkHandoff(b *testing.B) {
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Close(pair[0])
	defer unix.Close(pair[1])
	accepted := func() int {
		fd, err := unix.FcntlInt(uintptr(pair[0]), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			b.Fatal(err)
		}
		return fd
	}

	b.Run("mode=msgring", func(b *testing.B) {
		sender := newRing(b, 16)
		target := newRing(b, 8)
		s := newMsgRingSender(b, sender, 4, target.Fd())
		b.ReportAllocs()
		for b.Loop() {
			if err := s.SendFd(accepted(), 0, ring.FileIndexAlloc, 1); err != nil {
				b.Fatal(err)
			}
			if out := benchOutcome(b, sender, s); out.Err != nil {
				b.Fatal(out.Err)
			}
			cqe, err := target.WaitCQE()
			if err != nil {
				b.Fatal(err)
			}
			h, ok := Incoming(cqe)
			target.CQESeen()
			if !ok {
				b.Fatal("not an incoming file")
			}
			if err := CloseHandoff(target, h); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("mode=queue", func(b *testing.B) {
		var slot Handoff
		s, err := NewSender(Config{Mode: ModeQueue, ShardCount: 1, Enqueue: func(_ int, h Handoff) bool { slot = h; return true }})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if err := s.SendFd(accepted(), 0, ring.FileIndexAlloc, 1); err != nil {
				b.Fatal(err)
			}
			if err := CloseHandoff(nil, slot); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func benchOutcome(b *testing.B, r *ring.Ring, s *Sender) Outcome {
	if _, err := r.Submit(); err != nil {
		b.Fatal(err)
	}
	for range 4 {
		cqe, err := r.WaitCQE()
		if err != nil {
			b.Fatal(err)
		}
		c := *cqe
		r.CQESeen()
		if out, done := s.Complete(&c); done {
			return out
		}
	}
	b.Fatal("no outcome")
	return Outcome{}
}
