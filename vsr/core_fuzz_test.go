package vsr

import (
	"errors"
	"testing"
	"unsafe"

	"github.com/iggy-shard/iggy-shard/wire"
)

// recordFrames runs a small scenario (normal case, a view change, a rejoin) and
// returns every frame the replicas sent: the fuzzer's seed corpus of real traffic.
func recordFrames(t testing.TB) [][]byte {
	tc := newTestCluster(t, 3)
	var frames [][]byte
	tc.onFrame = func(frame []byte) { frames = append(frames, append([]byte(nil), frame...)) }
	for r := uint64(1); r <= 3; r++ {
		tc.propose(0, r, 1)
		tc.deliver(1000)
	}
	for _, to := range []int{1, 2} {
		tc.cut[[2]int{0, to}] = true
		tc.cut[[2]int{to, 0}] = true
	}
	for k := 0; k < int(testTiming.HeartbeatTimeoutTicks)+10; k++ {
		for i := range tc.cores {
			tc.cores[i].Tick()
			tc.drain(i)
		}
		tc.deliver(1000)
	}
	clear(tc.cut)
	for k := 0; k < 30; k++ {
		for i := range tc.cores {
			tc.cores[i].Tick()
			tc.drain(i)
		}
		tc.deliver(1000)
	}
	return frames
}

// FuzzCoreStep: whatever a peer sends, Step returns (an error for what it refuses)
// and never panics or hangs; the decoder's refusals are its own business.
func FuzzCoreStep(f *testing.F) {
	for _, frame := range recordFrames(f) {
		f.Add(uint8(0), false, frame)
		f.Add(uint8(1), true, frame)
	}
	f.Fuzz(func(t *testing.T, target uint8, reseal bool, data []byte) {
		if len(data) > 1<<16 {
			return
		}
		tc := newTestCluster(t, 3)
		tc.propose(0, 1, 1)
		tc.deliver(100)
		buf := make([]byte, len(data)+wire.HeaderAlignment)
		off := (wire.HeaderAlignment - int(uintptr(unsafe.Pointer(&buf[0]))%wire.HeaderAlignment)) % wire.HeaderAlignment
		frame := buf[off : off+len(data)]
		copy(frame, data)
		if reseal && len(frame) >= wire.HeaderSize {
			// Past the seals, so that the core sees frames a buggy or hostile peer
			// could really send.
			g, _ := wire.ViewHeader[wire.GenericHeader](frame)
			switch g.Command {
			case wire.CommandPrepare, wire.CommandRepairPrepare:
				p := g.Prepare()
				p.ChecksumBody = wire.BodyChecksum(frame[wire.HeaderSize:])
				command := p.Command
				p.Command = wire.CommandPrepare
				p.SetIdentity()
				p.Command = command
			case wire.CommandDoViewChange, wire.CommandStartView:
				g.SealBody(frame[wire.HeaderSize:])
			}
			if g.Command.FrameSealed() {
				wire.SealFrame(g.Bytes())
			}
		}
		h, err := wire.DecodeReplicaHeader(frame, 1<<16)
		if err != nil || int(h.Size) != len(frame) {
			return // the framer's and the decoder's refusals, not the core's
		}
		c := tc.cores[int(target)%3]
		if err := c.Step(h, frame[wire.HeaderSize:h.Size]); err != nil && !errors.Is(err, ErrBadMessage) {
			t.Fatalf("Step error %v is not an ErrBadMessage", err)
		}
		tc.drain(int(target) % 3)
		for k := 0; k < 3; k++ {
			c.Tick()
			tc.drain(int(target) % 3)
		}
	})
}
