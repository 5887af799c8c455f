package pollmemory

import (
	"math/rand/v2"
	"testing"
	"unsafe"
)

// checkHeld verifies the byte counts against the buffers held, and the budget.
func checkHeld[P any](t *testing.T, m *Memory[P], step int) {
	t.Helper()
	var free int64
	for class, f := range m.free {
		if f.untaken < 0 || f.untaken > len(f.bufs) {
			t.Fatalf("step %d: class %d: %d untaken of %d free", step, class, f.untaken, len(f.bufs))
		}
		for _, b := range f.bufs {
			if len(b) != class {
				t.Fatalf("step %d: a %d-byte buffer in class %d", step, len(b), class)
			}
		}
		free += int64(class) * int64(len(f.bufs))
	}
	var lent int64
	for _, class := range m.lent {
		lent += int64(class)
	}
	if free != m.freeBytes || lent != m.lentBytes || lent+free > m.budgetBytes {
		t.Fatalf("step %d: %d free and %d lent held, counted %d and %d, budget %d", step, free, lent, m.freeBytes, m.lentBytes, m.budgetBytes)
	}
}

// A shard that served one burst of large polls keeps their buffers (up to the
// budget) until they have lain idle a whole interval, then lets them go; a
// buffer lent in every interval stays.
func TestDropIdleAfterABurst(t *testing.T) {
	const mib = 1 << 20
	m := New[int](0, 32*mib+64*mib)
	var lent [][]byte
	for _, n := range []int{90 * mib, 20 * mib, 20 * mib, 3 * mib, 100 << 10, 100 << 10} {
		if !m.admit(false) {
			t.Fatalf("a poll of %d bytes refused", n)
		}
		lent = append(lent, m.Lend(n))
	}
	for _, b := range lent {
		m.GiveBack(unsafe.SliceData(b))
	}
	burst := m.freeBytes
	if burst < 130*mib {
		t.Fatalf("%d bytes free after the burst", burst)
	}
	if got := m.DropIdle(); got != 0 {
		t.Fatalf("DropIdle right after the burst dropped %d bytes, want 0", got)
	}
	// The next interval, one small poll at a time: its class keeps one buffer.
	steady := func() {
		m.admit(false)
		b := m.Lend(100 << 10)
		m.GiveBack(unsafe.SliceData(b))
	}
	steady()
	small := bufferClassBytes(100 << 10)
	if got := m.DropIdle(); got != burst-int64(small) {
		t.Fatalf("DropIdle an interval after the burst dropped %d bytes, want all %d but the small poll's %d", got, burst, small)
	}
	for interval := range 50 {
		steady()
		if got := m.DropIdle(); got != 0 || m.freeBytes != int64(small) {
			t.Fatalf("interval %d: dropped %d bytes, %d free; want the steady poll's buffer kept", interval, got, m.freeBytes)
		}
	}
	if got := m.DropIdle(); got != int64(small) || m.freeBytes != 0 || len(m.free) != 0 {
		t.Fatalf("the interval with no poll: dropped %d, %d free in %d classes; want all dropped", got, m.freeBytes, len(m.free))
	}
	checkHeld(t, m, 0)
}

// A long life of random polls, with DropIdle now and then: the counts stay
// those of the buffers held, within the budget, and idle buffers are dropped
// many times over.
func TestDropIdleLongLife(t *testing.T) {
	const mib = 1 << 20
	m := New[int](64*mib, 4*mib+mib)
	rng := rand.New(rand.NewPCG(3, 4))
	var lent [][]byte
	var dropped int64
	drops := 0
	for step := range 20_000 {
		switch op := rng.IntN(100); {
		case op < 45:
			if m.admit(false) {
				n := 1 + rng.IntN(1<<(10+rng.IntN(13))) // 1 byte to 4 MiB, most small
				lent = append(lent, m.Lend(n))
			}
		case op < 90 && len(lent) > 0:
			i := rng.IntN(len(lent))
			m.GiveBack(unsafe.SliceData(lent[i]))
			lent = append(lent[:i], lent[i+1:]...)
		default:
			if d := m.DropIdle(); d > 0 {
				dropped += d
				drops++
			}
		}
		checkHeld(t, m, step)
	}
	if drops < 100 {
		t.Fatalf("idle buffers dropped %d times (%d bytes) over the run, want the bound crossed many times", drops, dropped)
	}
}
