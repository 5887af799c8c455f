package shard

import (
	"math/rand/v2"
	"runtime"
	"testing"
)

func TestQueueFillAndDrain(t *testing.T) {
	q := NewQueue[int](4)
	if _, ok := q.Pop(); ok {
		t.Fatal("Pop on an empty queue reported an item")
	}
	for i := range 4 {
		if !q.Push(i) {
			t.Fatalf("Push %d refused below capacity", i)
		}
	}
	if q.Push(99) {
		t.Fatal("Push on a full queue succeeded")
	}
	if q.Len() != 4 {
		t.Fatalf("Len = %d, want 4", q.Len())
	}
	for i := range 4 {
		v, ok := q.Pop()
		if !ok || v != i {
			t.Fatalf("Pop = %d, %v; want %d, true", v, ok, i)
		}
	}
	if _, ok := q.Pop(); ok {
		t.Fatal("Pop after draining reported an item")
	}
	// Wrap around the ring many times.
	for i := range 1000 {
		if !q.Push(i) {
			t.Fatalf("Push %d refused on an empty queue", i)
		}
		if v, ok := q.Pop(); !ok || v != i {
			t.Fatalf("Pop = %d, %v; want %d", v, ok, i)
		}
	}
}

func TestQueueRejectsCapacityThatIsNotAPowerOfTwo(t *testing.T) {
	for _, capacity := range []int{0, -1, 3, 1000} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("NewQueue(%d) did not panic", capacity)
				}
			}()
			NewQueue[int](capacity)
		}()
	}
}

func TestQueuePopReleasesPointers(t *testing.T) {
	q := NewQueue[*int](2)
	v := 7
	q.Push(&v)
	q.Pop()
	for i, slot := range q.slots {
		if slot != nil {
			t.Fatalf("slot %d still references a popped item", i)
		}
	}
}

// TestQueueTwoGoroutines is the property test: with one producer and one consumer on
// different goroutines, every pushed item arrives exactly once and in order, whatever the
// interleaving (run it under -race to check the publication ordering too).
func TestQueueTwoGoroutines(t *testing.T) {
	seed := rand.Uint64()
	rng := rand.New(rand.NewPCG(seed, 0))
	for _, capacity := range []int{1, 2, 8, 1024} {
		// A full or empty queue yields the processor, so that on a loaded machine the
		// other side runs; the small capacities hand over at almost every item.
		itemCount := uint64(5_000 * capacity)
		itemCount = min(itemCount, 100_000)
		q := NewQueue[uint64](capacity)
		burstMax := 1 + rng.IntN(2*capacity)
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := uint64(0); i < itemCount; {
				for burst := 0; burst < burstMax && i < itemCount; burst++ {
					if !q.Push(i) {
						break
					}
					i++
				}
				runtime.Gosched()
			}
		}()
		next := uint64(0)
		for next < itemCount {
			v, ok := q.Pop()
			if !ok {
				runtime.Gosched()
				continue
			}
			if v != next {
				t.Fatalf("seed=%d capacity=%d: popped %d, want %d", seed, capacity, v, next)
			}
			next++
		}
		<-done
		if q.Len() != 0 {
			t.Fatalf("seed=%d capacity=%d: %d items left", seed, capacity, q.Len())
		}
	}
}

func BenchmarkQueuePushPop(b *testing.B) {
	q := NewQueue[uint64](1024)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		q.Push(uint64(i))
		q.Pop()
	}
}
