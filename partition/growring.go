package partition

// growRing is a FIFO in a ring that grows to the most ever held and is then
// reused, so that a steady state of pushes and pops allocates nothing: the
// proposals a group's Driver holds (propose.go) and a partition's pending sends
// (send.go) both queue in one.
type growRing[T any] struct {
	ring []T
	head int
	n    int
}

// push appends e, growing the ring (to at least minCap) when it is full.
func (q *growRing[T]) push(e T, minCap int) {
	if q.n == len(q.ring) {
		grown := make([]T, max(minCap, 2*len(q.ring)))
		for i := 0; i < q.n; i++ {
			grown[i] = q.ring[(q.head+i)%len(q.ring)]
		}
		q.ring, q.head = grown, 0
	}
	q.ring[(q.head+q.n)%len(q.ring)] = e
	q.n++
}

// at is the i-th entry from the front.
func (q *growRing[T]) at(i int) *T { return &q.ring[(q.head+i)%len(q.ring)] }

func (q *growRing[T]) front() *T { return q.at(0) }
func (q *growRing[T]) back() *T  { return q.at(q.n - 1) }

// popFront and popBack clear the slot they free, so that the ring keeps nothing
// reachable that left it.
func (q *growRing[T]) popFront() T {
	e := q.ring[q.head]
	var zero T
	q.ring[q.head] = zero
	q.head = (q.head + 1) % len(q.ring)
	q.n--
	return e
}

func (q *growRing[T]) popBack() T {
	i := (q.head + q.n - 1) % len(q.ring)
	e := q.ring[i]
	var zero T
	q.ring[i] = zero
	q.n--
	return e
}
