package pollmemory

import (
	"testing"
	"unsafe"
)

func TestPollBufferClassBytes(t *testing.T) {
	const kib, mib = 1 << 10, 1 << 20
	for _, tc := range []struct{ n, want int }{
		{1, 64 * kib}, {64 * kib, 64 * kib}, {64*kib + 1, 80 * kib}, {100 * kib, 112 * kib},
		{7 * mib, 7 * mib}, {33 * mib, 40 * mib}, {96 * mib, 96 * mib}, {97 * mib, 112 * mib},
	} {
		if got := bufferClassBytes(tc.n); got != tc.want || got < tc.n {
			t.Errorf("bufferClassBytes(%d) = %d, want %d", tc.n, got, tc.want)
		}
	}
}

// TestPollMemory walks one shard's poll memory through admissions, lends and
// returns, checking after each step that what it holds stays within its budget
// and that room for every admitted poll's read is left.
func TestPollMemory(t *testing.T) {
	const mib = 1 << 20
	m := New[*int](100*mib, 32*mib+8*mib) // reservation: 32 + 8 = 40 MiB
	if m.reservationBytes != 40*mib || m.budgetBytes != 100*mib {
		t.Fatalf("reservation %d, budget %d", m.reservationBytes, m.budgetBytes)
	}
	check := func(step string) {
		t.Helper()
		if m.lentBytes+m.freeBytes > m.budgetBytes {
			t.Fatalf("%s: %d lent + %d free > budget %d", step, m.lentBytes, m.freeBytes, m.budgetBytes)
		}
		if m.lentBytes+m.unplannedPolls*m.reservationBytes > m.budgetBytes {
			t.Fatalf("%s: no room left for the %d unplanned polls", step, m.unplannedPolls)
		}
	}
	if !m.admit(false) || !m.admit(false) {
		t.Fatal("two reservations of 40 MiB refused within 100 MiB")
	}
	if m.admit(false) {
		t.Fatal("a third reservation of 40 MiB admitted within 100 MiB")
	}
	check("two admitted")
	a := m.Lend(7 * mib)
	check("one lent")
	if !m.admit(false) {
		t.Fatal("a poll refused with 7 MiB lent and one reservation")
	}
	b := m.Lend(7 * mib)
	m.GiveBack(unsafe.SliceData(a))
	check("one given back")
	c := m.Lend(7 * mib)
	if unsafe.SliceData(c) != unsafe.SliceData(a) {
		t.Fatal("a read of the same class did not reuse the buffer given back")
	}
	if !m.admit(false) {
		t.Fatal("a poll refused with 14 MiB lent")
	}
	m.Unplanned() // its read had nothing to read
	check("one unplanned")
	m.GiveBack(unsafe.SliceData(b))
	m.GiveBack(unsafe.SliceData(c))
	// 14 MiB free; a read of 90 MiB needs room: the free buffers are dropped.
	m.reservationBytes = 96 * mib // as for 64 MiB frames
	if !m.admit(false) {
		t.Fatal("a poll refused with nothing lent")
	}
	m.Lend(90 * mib)
	check("a large read")
	if m.freeBytes != 0 {
		t.Fatalf("%d bytes still free after a read that needed their room", m.freeBytes)
	}
	// A poll waiting keeps its place: a later one does not pass it.
	m.waiting = append(m.waiting, nil)
	if m.admit(false) {
		t.Fatal("a new poll admitted ahead of a waiting one")
	}
}
