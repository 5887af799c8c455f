package shard

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func TestTimerHeapFiresInDeadlineOrder(t *testing.T) {
	seed := rand.Uint64()
	rng := rand.New(rand.NewPCG(seed, 1))
	var h timerHeap
	var deadlines []int64
	for i := range 500 {
		d := rng.Int64N(1000)
		deadlines = append(deadlines, d)
		h.Push(timer{deadlineNs: d, conn: ConnID(i), kind: timerConn})
	}
	slices.Sort(deadlines)
	var fired []int64
	for now := int64(0); ; now = min(now+1+rng.Int64N(50), 1000) {
		for {
			tm, ok := h.Expired(now)
			if !ok {
				break
			}
			if tm.deadlineNs > now {
				t.Fatalf("seed=%d: timer %d fired at %d", seed, tm.deadlineNs, now)
			}
			fired = append(fired, tm.deadlineNs)
		}
		if next, ok := h.Next(); ok && next <= now {
			t.Fatalf("seed=%d: due timer %d left at %d", seed, next, now)
		}
		if now == 1000 {
			break
		}
	}
	if !slices.Equal(fired, deadlines) {
		t.Fatalf("seed=%d: fired out of order or lost timers", seed)
	}
	if h.Len() != 0 {
		t.Fatalf("seed=%d: %d timers left", seed, h.Len())
	}
}

func TestTimerHeapEmpty(t *testing.T) {
	var h timerHeap
	if _, ok := h.Next(); ok {
		t.Fatal("empty heap has a next deadline")
	}
	if _, ok := h.Expired(1 << 62); ok {
		t.Fatal("empty heap expired a timer")
	}
}

// A handler that asked for more far deadlines than the set remembers, then asks for
// one more on every turn, gets one timer for it, not one a turn.
func TestWakeAtPushesOneTimerForADeadlineAskedEveryTurn(t *testing.T) {
	var s Shard
	for i := range int64(len(s.clock.wakes.deadlinesNs)) {
		s.WakeAt(5_000_000_000 + i)
	}
	for range 100 {
		s.WakeAt(1_000_000)
	}
	if n, want := s.clock.timers.Len(), len(s.clock.wakes.deadlinesNs)+1; n != want {
		t.Fatalf("%d timers pending, want %d", n, want)
	}
	// The first one comes; the set forgot none of the others' timers.
	if next, ok := s.clock.timers.Next(); !ok || next != 1_000_000 {
		t.Fatalf("next deadline %d (%v), want 1000000", next, ok)
	}
}
