package passwords

import (
	"net/netip"
	"slices"
	"testing"
)

func TestFailureBudgets(t *testing.T) {
	b := NewFailureBudgets()
	a, other := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	now := int64(1e12)
	for i := range FailuresBurst {
		if !b.Allow(a, now) {
			t.Fatalf("check %d refused within the burst of %d", i+1, FailuresBurst)
		}
		b.Failed(a, now)
	}
	if b.Allow(a, now) {
		t.Fatalf("a check allowed after %d failures at once", FailuresBurst)
	}
	if !b.Allow(other, now) {
		t.Fatal("another source refused")
	}
	now += failureIntervalNs - 1
	if b.Allow(a, now) {
		t.Fatal("a check allowed before an interval passed")
	}
	now++
	if !b.Allow(a, now) {
		t.Fatalf("no check allowed %d ns later (%d a second)", failureIntervalNs, FailuresPerSecond)
	}
	b.Failed(a, now)
	if b.Allow(a, now) {
		t.Fatal("a second check allowed in one interval")
	}
	now += failureBurstSpentNs
	if !b.Allow(a, now) {
		t.Fatal("the budget not whole again after the burst's time")
	}
	// Past failureSourcesMax sources, those whose due time has passed are forgotten.
	for i := range failureSourcesMax {
		b.Failed(netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}), now)
	}
	if len(b.due) > failureSourcesMax {
		t.Fatalf("%d sources tracked, want at most %d", len(b.due), failureSourcesMax)
	}
}

func TestSourceQueues(t *testing.T) {
	var q sourceQueues
	q.init(2, 6)
	a, b, c := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("10.0.0.3")
	check := func(source netip.Addr, password string) *Check {
		return &Check{Source: source, Password: []byte(password)}
	}
	for _, w := range []*Check{check(a, "a1"), check(a, "a2"), check(b, "b1")} {
		if !q.push(w) {
			t.Fatalf("push %s refused", w.Password)
		}
	}
	if q.push(check(a, "a3")) {
		t.Fatal("a third check of one source accepted past its bound of 2")
	}
	next := func() string {
		w, ok := q.pop()
		if !ok {
			return "(none)"
		}
		return string(w.(*Check).Password)
	}
	if got := next(); got != "a1" {
		t.Fatalf("first out %s, want a1", got)
	}
	// c arrives after b waited: b's turn, then a's, then c's.
	q.push(check(c, "c1"))
	q.push(check(b, "b2"))
	q.push(check(c, "c2"))
	if !q.push(check(a, "a4")) || q.push(check(b, "b3")) {
		t.Fatal("bounds: a4 fits (a has one waiting), b3 does not (b has two)")
	}
	if q.push(check(netip.MustParseAddr("10.0.0.4"), "d1")) {
		t.Fatal("a check accepted past the bound of 6 in all")
	}
	var got []string
	for q.len() > 0 {
		got = append(got, next())
	}
	want := []string{"b1", "a2", "c1", "b2", "a4", "c2"}
	if !slices.Equal(got, want) {
		t.Fatalf("served %v, want %v", got, want)
	}
	if _, ok := q.pop(); ok || len(q.bySource) != 0 || len(q.ring) != 0 {
		t.Fatalf("empty queue: pop ok %v, %d sources, ring %d", ok, len(q.bySource), len(q.ring))
	}
}
