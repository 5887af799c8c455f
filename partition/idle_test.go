package partition

import (
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/vsr"
	"github.com/iggy-shard/iggy-shard/wire"
)

// idleCluster is three stores holding n partitions (stream 1, topic 1), created
// in view 0 as the metadata plane creates them, led by replica 0.
func idleCluster(t testing.TB, n int) *testCluster {
	c := &testCluster{t: t, cfg: Config{PartitionsCount: uint32(n)}}
	for i := 0; i < 3; i++ {
		st := newSimStorages(uint64(i))
		s := NewReplicatedStore("local_data", st, Replication{Cluster: testCluster3, ReplicaID: uint8(i), ReplicaCount: 3, Outbox: clusterOutbox{c: c, from: uint8(i)}})
		c.stores = append(c.stores, s)
		c.storages = append(c.storages, st)
	}
	for p := 0; p < n; p++ {
		for _, s := range c.stores {
			if err := s.CreateInView(Key{StreamID: 1, TopicID: 1, PartitionID: uint32(p)}, c.cfg, Incarnation{CreatedAtMicros: 1}, 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	return c
}

// runTicks runs n shard ticks on every store, each followed by what a shard's loop
// does: every frame queued is delivered (its sender's node counted alive), the
// storages polled.
func (c *testCluster) runTicks(n int) {
	for range n {
		for _, s := range c.stores {
			s.Tick()
			s.PollIO()
		}
		for len(c.queue) > 0 {
			f := c.queue[0]
			c.stores[f.to].NoteLiveness(f.from)
			if !c.deliverOneTo() {
				break
			}
		}
		for _, s := range c.stores {
			s.PollIO()
		}
	}
}

// deliverOneTo is deliverOne for a frame of any partition of the idle cluster.
func (c *testCluster) deliverOneTo() bool {
	f := c.queue[0]
	c.queue = c.queue[1:]
	h := f.header()
	group, _ := wire.FrameGroup(h)
	stream, topic, id, ok := wire.SplitPartitionGroup(group)
	if !ok {
		c.t.Fatalf("frame of group %d", group)
	}
	k := Key{StreamID: stream, TopicID: topic, PartitionID: id}
	if err := c.stores[f.to].Step(k, h, f.buf[256:]); err != nil {
		c.stepErrs = append(c.stepErrs, err)
	}
	return true
}

// An idle cluster does the same work per second whatever the partitions it holds:
// after creation and a heartbeat timeout, 10, 1,000 and 3,000 idle partitions cost
// each store the same timer firings, group visits, partition polls and frames
// (its keep-alive), per simulated second.
func TestIdleStoreWorkDoesNotGrowWithPartitions(t *testing.T) {
	timing := partitionTiming
	warmup := int(timing.HeartbeatTimeoutTicks + 4*timing.CommitBroadcastIntervalTicks)
	const measured = 1000 // 10 s
	sizes := []int{10, 1000, 3000}
	if testing.Short() {
		sizes = []int{10, 1000}
	}
	var base []activityCounts
	for _, n := range sizes {
		start := time.Now()
		c := idleCluster(t, n)
		c.runTicks(warmup)
		before := make([]activityCounts, 3)
		for i, s := range c.stores {
			before[i] = s.counts
		}
		c.runTicks(measured)
		per := make([]activityCounts, 3)
		for i, s := range c.stores {
			per[i] = s.counts.minus(before[i])
		}
		t.Logf("%d partitions (%v): per %d ticks: %+v", n, time.Since(start).Round(time.Millisecond), measured, per)
		if len(c.stepErrs) > 0 {
			t.Fatalf("%d partitions: frames refused: %v", n, c.stepErrs[0])
		}
		if base == nil {
			base = per
			continue
		}
		for i := range per {
			if per[i].work() > base[i].work()+2 {
				t.Fatalf("store %d does more when idle with %d partitions than with %d: %+v, against %+v", i, n, sizes[0], per[i], base[i])
			}
		}
	}
}

func (a activityCounts) minus(b activityCounts) activityCounts {
	return activityCounts{
		ticks:          a.ticks - b.ticks,
		timerFirings:   a.timerFirings - b.timerFirings,
		groupsDriven:   a.groupsDriven - b.groupsDriven,
		partitionPolls: a.partitionPolls - b.partitionPolls,
		framesSent:     a.framesSent - b.framesSent,
		parks:          a.parks - b.parks,
	}
}

// work is everything an idle store should not do more of with more partitions.
func (a activityCounts) work() uint64 {
	return a.timerFirings + a.groupsDriven + a.partitionPolls + a.framesSent + a.parks
}

// Idle groups parked off the timers still notice their primary's node falling
// silent: once it has sent nothing for a heartbeat timeout, the backups elect a
// new primary in every group it led, as they would had they stayed on the timers;
// while it speaks, no group leaves its view.
func TestParkedBackupsElectWhenTheirPrimaryGoesSilent(t *testing.T) {
	const n = 200
	c := idleCluster(t, n)
	timing := partitionTiming
	c.runTicks(int(2*timing.HeartbeatTimeoutTicks + timing.CommitBroadcastIntervalTicks))
	parked := 0
	for i, s := range c.stores {
		for _, p := range s.partitions {
			if p.group.core.View() != 0 {
				t.Fatalf("replica %d: partition %v left view 0 while its primary's node spoke", i, p.key)
			}
			if p.activity.parked {
				parked++
			}
		}
	}
	if parked < 2*n {
		t.Fatalf("%d groups parked of %d", parked, 3*n)
	}
	// Node 0 falls silent: its frames are lost.
	c.intercept = func(f *netFrame) bool { return f.from != 0 }
	c.runTicksIntercepted(int(timing.HeartbeatTimeoutTicks + 4*timing.CommitBroadcastIntervalTicks))
	for i := 1; i < 3; i++ {
		for _, p := range c.stores[i].partitions {
			if p.group.core.View() == 0 || p.group.core.Status() != vsr.StatusNormal || p.group.core.Primary() == 0 {
				t.Fatalf("replica %d: partition %v in view %d (%v) after its primary's node fell silent", i, p.key, p.group.core.View(), p.group.core.Status())
			}
		}
	}
}

// runTicksIntercepted is runTicks with c.intercept applied to every frame.
func (c *testCluster) runTicksIntercepted(n int) {
	for range n {
		for _, s := range c.stores {
			s.Tick()
			s.PollIO()
		}
		for len(c.queue) > 0 {
			f := c.queue[0]
			if !c.intercept(&f) {
				c.queue = c.queue[1:]
				continue
			}
			c.stores[f.to].NoteLiveness(f.from)
			c.deliverOneTo()
		}
		for _, s := range c.stores {
			s.PollIO()
		}
	}
}

// TicksUntilDue lets an idle shard sleep between its store's keep-alives: over ten
// simulated seconds an idle store of 1,000 partitions is due on a few dozen ticks
// of the thousand, and a tick it did not announce does nothing (no timer firing,
// no group driven, no frame).
func TestTicksUntilDueAnnouncesEveryTickWithWork(t *testing.T) {
	c := idleCluster(t, 1000)
	timing := partitionTiming
	c.runTicks(int(timing.HeartbeatTimeoutTicks + 4*timing.CommitBroadcastIntervalTicks))
	dueAt := make([]uint64, len(c.stores))
	wakes := make([]int, len(c.stores))
	for i, s := range c.stores {
		in, ok := s.TicksUntilDue()
		if !ok {
			t.Fatalf("replica %d: a cluster store is never due (its keep-alive, its watch)", i)
		}
		dueAt[i] = s.timers.Now() + in
	}
	for range 1000 {
		for i, s := range c.stores {
			before := s.counts
			s.Tick()
			s.PollIO()
			did := s.counts.minus(before)
			if s.timers.Now() >= dueAt[i] {
				wakes[i]++
			} else if did.timerFirings+did.groupsDriven+did.framesSent > 0 {
				t.Fatalf("replica %d: tick %d did %+v, not announced (due at %d)", i, s.timers.Now(), did, dueAt[i])
			}
		}
		for len(c.queue) > 0 {
			f := c.queue[0]
			c.stores[f.to].NoteLiveness(f.from)
			c.deliverOneTo()
		}
		for i, s := range c.stores {
			s.PollIO()
			in, _ := s.TicksUntilDue() // after the frames: a frame wakes a shard, which asks again
			dueAt[i] = s.timers.Now() + in
		}
	}
	for i, n := range wakes {
		if n > 100 {
			t.Fatalf("replica %d: due on %d of 1,000 idle ticks", i, n)
		}
	}
	t.Logf("ticks due per 1,000 idle ticks: %v", wakes)
}

// A parked backup stays parked through its primary's keep-alives: a Commit of the
// view it follows with nothing it has not applied only carries the node's
// liveness, so an idle backup fires no timer and drives no group, and every
// keep-alive is counted as taken (IngressParkedKeepAlive). Stepping them unparked
// the group each one named until its next deadline.
func TestKeepAliveLeavesParkedBackupsParked(t *testing.T) {
	const n = 20
	c := idleCluster(t, n)
	timing := partitionTiming
	// Every group parks within a heartbeat timeout of its last input, the
	// keep-alives of the first timeout among them.
	c.runTicks(int(2*timing.HeartbeatTimeoutTicks + 4*timing.CommitBroadcastIntervalTicks))
	before := make([]activityCounts, 3)
	keepAlives := make([]uint64, 3)
	for i, s := range c.stores {
		before[i] = s.counts
		keepAlives[i] = s.IngressDrops()[IngressParkedKeepAlive]
	}
	const measured = 1000 // 10 s
	c.runTicks(measured)
	for i := 1; i < 3; i++ {
		s := c.stores[i]
		did := s.counts.minus(before[i])
		if did.timerFirings+did.groupsDriven+did.parks > 0 {
			t.Fatalf("backup %d woke groups over %d idle ticks: %+v", i, measured, did)
		}
		taken := s.IngressDrops()[IngressParkedKeepAlive] - keepAlives[i]
		if want := uint64(measured/timing.CommitBroadcastIntervalTicks) - 1; taken < want {
			t.Fatalf("backup %d took %d keep-alives as such, want at least %d", i, taken, want)
		}
		for _, p := range s.partitions {
			if !p.activity.parked {
				t.Fatalf("backup %d: partition %v is not parked", i, p.key)
			}
		}
	}
	if len(c.stepErrs) > 0 {
		t.Fatalf("frames refused: %v", c.stepErrs[0])
	}
}

// An idle backup whose groups are all parked asks its shard for one wake-up per
// heartbeat timeout, for the watch of its primary's node, however often that
// node's frames come: each distinct tick TicksUntilDue announces becomes a timer
// of the shard, pending until it falls due. The watch followed every frame heard
// (due a heartbeat timeout after it), a new tick per keep-alive: 20 pending per
// backup shard, and the shard's set of wake-ups asked for, which holds 8, then
// took every turn's request for a new timer (the server's idle test saw 683
// timers pending on a backup of 100 partitions).
func TestParkedBackupAsksForAWakeUpPerHeartbeatTimeout(t *testing.T) {
	const n = 20
	c := idleCluster(t, n)
	timing := partitionTiming
	c.runTicks(int(2*timing.HeartbeatTimeoutTicks + 4*timing.CommitBroadcastIntervalTicks))
	for i := 1; i < 3; i++ {
		for _, p := range c.stores[i].partitions {
			if !p.activity.parked {
				t.Fatalf("backup %d: partition %v is not parked", i, p.key)
			}
		}
	}
	const measured = 1000 // 10 s
	asked := make([]map[uint64]bool, 3)
	for i := range asked {
		asked[i] = map[uint64]bool{}
	}
	for range measured {
		c.runTicks(1)
		for i, s := range c.stores {
			if in, ok := s.TicksUntilDue(); ok {
				asked[i][s.timers.Now()+in] = true
			}
		}
	}
	want := measured/int(timing.HeartbeatTimeoutTicks) + 1
	for i := 1; i < 3; i++ {
		if len(asked[i]) > want {
			t.Errorf("backup %d asked for a wake-up at %d ticks over %d idle ticks, want at most %d", i, len(asked[i]), measured, want)
		}
	}
	if len(c.stepErrs) > 0 {
		t.Fatalf("frames refused: %v", c.stepErrs[0])
	}
}
