package shard

import "time"

// loopClock is a shard's time: the clock it reads once a turn (Shard.NowNs), the
// timers due on it, and which of them are turns a handler asked for (WakeAt).
type loopClock struct {
	nowNs  int64        // read at the start of each turn, and again after each wait
	epoch  time.Time    // time zero of every shard of the runtime (Runtime.epoch)
	source func() int64 // Config.Clock, when a test sets one
	timers timerHeap
	wakes  wakeSet // the WakeAt deadlines armed, not fired yet
}

// start sets the clock going from the runtime's epoch, on source (Config.Clock) when
// it is set.
func (c *loopClock) start(epoch time.Time, source func() int64) {
	c.epoch, c.source = epoch, source
	c.advance()
}

// advance reads the clock into nowNs.
func (c *loopClock) advance() { c.nowNs = c.read() }

// read returns the time now, without updating nowNs.
func (c *loopClock) read() int64 {
	if c.source != nil {
		return c.source()
	}
	return c.realNs()
}

// realNs is the real time since the epoch, even when a test's source stands still.
func (c *loopClock) realNs() int64 { return int64(time.Since(c.epoch)) }

// wakeAt pushes a timer for a turn at deadlineNs, unless one is armed for it already.
func (c *loopClock) wakeAt(deadlineNs int64) {
	if c.wakes.has(deadlineNs) {
		return
	}
	c.wakes.add(deadlineNs)
	c.timers.Push(timer{deadlineNs: deadlineNs, kind: timerWake})
}

// timerKind says what a timer is for.
type timerKind uint8

const (
	// timerConn re-checks one connection's deadlines (frame, idle, send stall).
	timerConn timerKind = iota + 1
	// timerAccept re-arms the listener's accept after a backoff.
	timerAccept
	// timerShutdown ends the shutdown grace period.
	timerShutdown
	// timerWake is a turn the handler asked for (Shard.WakeAt).
	timerWake
	// timerMaintenance is the shard's own turn every Config.MaintenanceInterval.
	timerMaintenance
)

type timer struct {
	deadlineNs int64 // on the shard's monotonic clock
	conn       ConnID
	kind       timerKind
}

// timerHeap is a min-heap of deadlines driven by an explicit clock: the shard passes
// now to Expired, so tests (and a simulation) decide what time it is.
//
// Timers are never cancelled or moved. A connection keeps one timer in the heap; when
// it fires, the shard compares the connection's real deadline (last byte received plus
// the timeout) with now and either acts or pushes one new timer. Receiving a byte thus
// costs a store of a timestamp, not a heap fix-up, and a closed connection's stale
// timer is recognised by its ConnID generation and dropped.
type timerHeap struct {
	items []timer
}

// Push adds a timer. It allocates only when the heap grows past its high-water mark.
func (h *timerHeap) Push(t timer) {
	h.items = append(h.items, t)
	i := len(h.items) - 1
	for i > 0 {
		parent := (i - 1) / 2
		if h.items[parent].deadlineNs <= h.items[i].deadlineNs {
			break
		}
		h.items[parent], h.items[i] = h.items[i], h.items[parent]
		i = parent
	}
}

// Next returns the earliest deadline and whether there is any timer.
func (h *timerHeap) Next() (int64, bool) {
	if len(h.items) == 0 {
		return 0, false
	}
	return h.items[0].deadlineNs, true
}

// Expired removes and returns the earliest timer if its deadline is at or before nowNs.
func (h *timerHeap) Expired(nowNs int64) (timer, bool) {
	if len(h.items) == 0 || h.items[0].deadlineNs > nowNs {
		return timer{}, false
	}
	top := h.items[0]
	last := len(h.items) - 1
	h.items[0] = h.items[last]
	h.items = h.items[:last]
	i := 0
	for {
		left, right, smallest := 2*i+1, 2*i+2, i
		if left < last && h.items[left].deadlineNs < h.items[smallest].deadlineNs {
			smallest = left
		}
		if right < last && h.items[right].deadlineNs < h.items[smallest].deadlineNs {
			smallest = right
		}
		if smallest == i {
			break
		}
		h.items[i], h.items[smallest] = h.items[smallest], h.items[i]
		i = smallest
	}
	return top, true
}

// Len returns the number of timers.
func (h *timerHeap) Len() int { return len(h.items) }

// wakeSet remembers the deadlines of the WakeAt timers in the heap, so that a handler
// asking for the same turn on every turn (the server asks on each one for its next
// consensus tick) pushes one timer, not one per turn: under load the heap would hold
// thousands of copies of one deadline, all firing together. When every slot holds a
// deadline, a new one takes the slot of the furthest: the deadline asked for last is
// the one a handler asks for again on the next turns, and the one forgotten is still
// in the heap and fires (a handler that asks for it again gets at worst one
// duplicate). Before, a full set remembered nothing new, and a backup whose parked
// groups asked for eight far deadlines then pushed a timer for the same ninth one on
// every turn (683 pending on an idle shard).
type wakeSet struct {
	deadlinesNs [8]int64 // 0: free
}

func (w *wakeSet) has(deadlineNs int64) bool {
	for _, d := range w.deadlinesNs {
		if d == deadlineNs && d != 0 {
			return true
		}
	}
	return false
}

func (w *wakeSet) add(deadlineNs int64) {
	furthest := 0
	for i, d := range w.deadlinesNs {
		if d == 0 {
			w.deadlinesNs[i] = deadlineNs
			return
		}
		if d > w.deadlinesNs[furthest] {
			furthest = i
		}
	}
	w.deadlinesNs[furthest] = deadlineNs
}

func (w *wakeSet) remove(deadlineNs int64) {
	for i, d := range w.deadlinesNs {
		if d == deadlineNs {
			w.deadlinesNs[i] = 0
			return
		}
	}
}
