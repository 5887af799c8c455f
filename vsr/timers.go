package vsr

// Timers drives the clocks of every consensus group of a shard from one tick, so that
// an idle group costs nothing per tick: the groups with a deadline wait in a min-heap
// keyed by the shard tick at which Core.NextDeadline falls due, and a tick looks at
// the heap's top only. A group with no deadline (a group of one replica, whose
// primary has no timer) is not in the heap at all.
//
// A Core counts its own ticks. A group that is not ticked on every shard tick keeps
// its clock still, and Timers catches it up (Catch) before anything is fed to it:
// a Step, a Propose, or the firing of its deadline. The catch-up costs one Core.Tick
// per deadline it passes (advance), however many ticks it covers.
//
// Liveness: a backup counts any frame from the node that is its group's primary as a
// sign of life (Core.NoteLiveness). The server calls NoteLiveness(replica) for every
// replica-plane frame it reads from that node, whatever its group: that records the
// shard tick and costs O(1), however many groups the shard holds. Each group applies
// it lazily, when it is caught up (at its next frame, proposal or deadline): the
// group's clock is first moved to the tick the node was last heard from, the
// heartbeat timer reset there, then moved on to now. So a heartbeat timeout fires
// only when the primary's node sent nothing for HeartbeatTimeoutTicks.
//
// The contract of Core holds: the caller must not Catch a group between its Ready
// and its Advance (Catch ticks it). A group whose Ready is out when its deadline
// fires stays out of the heap until the caller, after Advance, calls Catch and then
// Rearm.
//
// Timers belongs to one goroutine, the shard's.
type Timers struct {
	now    uint64 // shard ticks
	groups []timerGroup
	free   []GroupHandle
	heap   []GroupHandle
	due    []GroupHandle
	// seenAt[replica] is the last shard tick a frame came from that replica's node.
	seenAt [ReplicasMax]uint64
	// examined counts heap entries a Tick looked at: the test of "O(due groups)".
	examined uint64
}

// GroupHandle names a group in Timers.
type GroupHandle int32

type timerGroup struct {
	core *Core
	// syncedAt is the shard tick at which the core's clock was last caught up.
	syncedAt uint64
	// dueAt is the shard tick of the group's heap entry; heapAt its index there, -1
	// when it is not in the heap.
	dueAt  uint64
	heapAt int32
}

// NewTimers returns a Timers at shard tick 0 with no group.
func NewTimers() *Timers { return &Timers{} }

// Now is the shard tick.
func (t *Timers) Now() uint64 { return t.now }

// Add registers a core (fresh or recovered, its Ready drained) and arms its deadline.
func (t *Timers) Add(c *Core) GroupHandle {
	g := timerGroup{core: c, syncedAt: t.now, heapAt: -1}
	var h GroupHandle
	if n := len(t.free); n > 0 {
		h = t.free[n-1]
		t.free = t.free[:n-1]
		t.groups[h] = g
	} else {
		h = GroupHandle(len(t.groups))
		t.groups = append(t.groups, g)
	}
	t.Rearm(h)
	return h
}

// Remove forgets a group; its handle may be reused by a later Add.
func (t *Timers) Remove(h GroupHandle) {
	t.unheap(h)
	t.groups[h] = timerGroup{heapAt: -1}
	t.free = append(t.free, h)
}

// NoteLiveness records that the node of replica sent a frame now (any group).
func (t *Timers) NoteLiveness(replica uint8) {
	if int(replica) < len(t.seenAt) {
		t.seenAt[replica] = t.now
	}
}

// Tick advances the shard's clock by one tick and returns the groups whose deadline
// is due now, taken out of the heap. For each, the caller (outside a Ready of the
// group) calls Catch, which ticks the core to now and so fires its timers, then does
// the group's Ready and calls Rearm. The slice is reused by the next Tick.
func (t *Timers) Tick() []GroupHandle {
	t.now++
	t.due = t.due[:0]
	for len(t.heap) > 0 {
		top := t.heap[0]
		t.examined++
		if t.groups[top].dueAt > t.now {
			break
		}
		t.unheap(top)
		t.due = append(t.due, top)
	}
	return t.due
}

// Catch brings a group's clock up to the shard tick, applying the liveness its
// primary's node showed since it was last caught up. Call it before Step and Propose,
// and for a group Tick returned, outside the group's Ready.
func (t *Timers) Catch(h GroupHandle) {
	g := &t.groups[h]
	c := g.core
	elapsed := t.now - g.syncedAt
	if elapsed == 0 {
		return
	}
	if seen := t.seenAt[c.Primary()]; seen > g.syncedAt && c.NextDeadline() != 0 {
		// The frame came at seen: move the clock there first, so that the heartbeat
		// timer restarts from when the primary was last heard.
		t.advance(c, seen-g.syncedAt)
		elapsed = t.now - seen
		c.NoteLiveness(c.Primary())
	}
	t.advance(c, elapsed)
	g.syncedAt = t.now
}

// advance moves c's clock on by n ticks, firing what falls due on the way exactly
// as n calls of Core.Tick would. A Tick that fires nothing only counts (Core.Tick
// returns at once while now is below NextDeadline), so those ticks are counted in
// one step: the cost is one Tick per deadline passed, not one per tick. This is why
// Timers lives in package vsr: Core has no method to skip its clock ahead.
func (t *Timers) advance(c *Core, n uint64) {
	for n > 0 {
		d := c.NextDeadline()
		if d == 0 {
			c.now += n // nothing is armed: no tick would fire anything
			return
		}
		skip := uint64(1)
		if d > c.now+1 {
			skip = min(n, d-c.now)
		}
		c.now += skip - 1
		c.Tick()
		n -= skip
	}
}

// Rearm files the group under its core's next deadline (or takes it out of the heap
// when it has none). Call it after each Step, Propose or Tick of the group once its
// Ready is drained, and after Catch.
func (t *Timers) Rearm(h GroupHandle) {
	g := &t.groups[h]
	c := g.core
	t.unheap(h)
	d := c.NextDeadline()
	if d == 0 {
		return
	}
	// The core's clock reads c.Now() at shard tick syncedAt.
	dueAt := g.syncedAt + 1
	if d > c.Now() {
		dueAt = g.syncedAt + (d - c.Now())
	}
	g.dueAt = max(dueAt, t.now+1)
	g.heapAt = int32(len(t.heap))
	t.heap = append(t.heap, h)
	t.up(int(g.heapAt))
}

// Armed reports whether a group waits in the heap, and for which shard tick.
func (t *Timers) Armed(h GroupHandle) (dueAt uint64, ok bool) {
	g := &t.groups[h]
	return g.dueAt, g.heapAt >= 0
}

// Examined is how many heap entries the ticks so far looked at.
func (t *Timers) Examined() uint64 { return t.examined }

// Len is how many groups wait in the heap.
func (t *Timers) Len() int { return len(t.heap) }

// --- the heap ---

func (t *Timers) less(i, j int) bool {
	return t.groups[t.heap[i]].dueAt < t.groups[t.heap[j]].dueAt
}

func (t *Timers) swap(i, j int) {
	t.heap[i], t.heap[j] = t.heap[j], t.heap[i]
	t.groups[t.heap[i]].heapAt = int32(i)
	t.groups[t.heap[j]].heapAt = int32(j)
}

func (t *Timers) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !t.less(i, parent) {
			return
		}
		t.swap(i, parent)
		i = parent
	}
}

func (t *Timers) down(i int) {
	n := len(t.heap)
	for {
		left := 2*i + 1
		if left >= n {
			return
		}
		child := left
		if right := left + 1; right < n && t.less(right, left) {
			child = right
		}
		if !t.less(child, i) {
			return
		}
		t.swap(i, child)
		i = child
	}
}

func (t *Timers) unheap(h GroupHandle) {
	g := &t.groups[h]
	i := int(g.heapAt)
	if i < 0 {
		return
	}
	last := len(t.heap) - 1
	if i != last {
		t.swap(i, last)
	}
	t.heap = t.heap[:last]
	g.heapAt = -1
	if i != last {
		t.down(i)
		t.up(i)
	}
}
