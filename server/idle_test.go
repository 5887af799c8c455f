package server

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/shard"
)

// idleWork is what a node did over a stretch of simulated time.
type idleWork struct {
	timersFired uint64 // the runtime's timers that expired (WakeAt, deadlines)
	dueTurns    uint64 // turns in which a consensus tick had work (ticks.go)
	framesSent  uint64 // replica frames
	timersArmed int    // timers pending at the end
}

func (w idleWork) String() string {
	return fmt.Sprintf("%d timers fired, %d turns with tick work, %d frames sent, %d timers armed",
		w.timersFired, w.dueTurns, w.framesSent, w.timersArmed)
}

// idleWorkOf copies a node's counters.
func idleWorkOf(t *testing.T, s *Server) idleWork {
	t.Helper()
	var mu sync.Mutex
	var w idleWork
	err := s.rt.Inspect(testContext(t), func(sh *shard.Shard) {
		st := sh.Stats()
		g := s.handlers[sh.Index()].consensus.grid.counts
		mu.Lock()
		w.timersFired += st.TimersFired
		w.dueTurns += g.dueTurns
		w.timersArmed += st.TimersPending
		mu.Unlock()
	})
	mustOK(t, "Inspect", err)
	w.framesSent = s.replicaStats().FramesSent
	return w
}

// simulatedCluster is a three-node cluster at the production timings on one test
// clock, which runs ten times faster than real time, or stands still while a test
// steps it.
type simulatedCluster struct {
	clock   *testClock
	servers []*Server
	// started are the servers the clock's goroutine wakes, as they start.
	mu      sync.Mutex
	started []*Server
	stop    chan struct{}
	done    chan struct{}
}

func startSimulatedCluster(t *testing.T) *simulatedCluster {
	t.Helper()
	c := &simulatedCluster{clock: newTestClock()}
	cfgs := clusterConfigs(t, 3, testClusterSecret)
	for i := range cfgs {
		cfgs[i].clusterTiming = nil
		cfgs[i].clock = c.clock.now
		cfgs[i].Cluster.MessageBus.ReconnectPeriod = 500 * time.Millisecond
	}
	c.servers = make([]*Server, len(cfgs))
	c.run()
	for i := range cfgs {
		c.servers[i] = startTestServer(t, cfgs[i])
		c.mu.Lock()
		c.started = append(c.started, c.servers[i])
		c.mu.Unlock()
	}
	t.Cleanup(c.pause)
	waitUntil(t, "the cluster forms", func() bool { l, ok := agreedLeader(c.servers); return ok && l == 0 })
	return c
}

// run moves the clock on at ten times real time until pause.
func (c *simulatedCluster) run() {
	c.stop, c.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(c.done)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-c.stop:
				return
			case <-tick.C:
				c.advance(10 * time.Millisecond)
			}
		}
	}()
}

func (c *simulatedCluster) pause() {
	if c.stop != nil {
		close(c.stop)
		<-c.done
		c.stop = nil
	}
}

func (c *simulatedCluster) advance(d time.Duration) {
	c.clock.unixNs.Add(int64(d))
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.started {
		s.rt.WakeAll()
	}
}

// settle runs the clock for d of simulated time.
func (c *simulatedCluster) settle(d time.Duration) {
	start := c.clock.now()
	for c.clock.now().Sub(start) < d {
		time.Sleep(5 * time.Millisecond)
	}
}

// measure stops the clock, then steps it by ticks of 10 ms for d, each node
// taking a turn at every step, and returns what each node did meanwhile.
func (c *simulatedCluster) measure(t *testing.T, d time.Duration) []idleWork {
	t.Helper()
	c.pause()
	before := make([]idleWork, len(c.servers))
	for i, s := range c.servers {
		before[i] = idleWorkOf(t, s)
	}
	for step := time.Duration(0); step < d; step += 10 * time.Millisecond {
		c.advance(10 * time.Millisecond)
		for _, s := range c.servers {
			mustOK(t, "Inspect", s.rt.Inspect(context.Background(), func(*shard.Shard) {}))
		}
	}
	did := make([]idleWork, len(c.servers))
	for i, s := range c.servers {
		after := idleWorkOf(t, s)
		did[i] = idleWork{timersFired: after.timersFired - before[i].timersFired, dueTurns: after.dueTurns - before[i].dueTurns,
			framesSent: after.framesSent - before[i].framesSent, timersArmed: after.timersArmed}
	}
	c.run()
	return did
}

// An idle node of a cluster does little per simulated second, and no more with
// 1,000 partitions than with 100: it wakes for its consensus at the ticks that have
// work (the metadata primary's commit broadcast, the keep-alive of the partition
// groups a shard leads, a deadline), not at every 10 ms tick, and the frames it
// sends do not depend on its partitions. Counted on a simulated clock at the
// production timings, at 10, 100 and 1,000 partitions. From 10 to 100 a backup's
// shard wakes twice a second more: the keep-alive's Commit wakes the group it is
// for at each backup, which parks again a heartbeat timeout later, unless the
// keep-alive came back to it first, as it does among fewer than ten groups.
func TestIdleClusterWorkDoesNotGrowWithPartitions(t *testing.T) {
	if testing.Short() {
		t.Skip("a three-node cluster through 45 simulated seconds")
	}
	const window = 5 * time.Second
	c := startSimulatedCluster(t)
	admin := dialCluster(t, c.servers[0])
	ctx := testContext(t)
	st, err := admin.CreateStream(ctx, "s")
	mustOK(t, "CreateStream", err)
	var work [][]idleWork
	for i, count := range []uint32{10, 90, 900} {
		_, err = admin.CreateTopic(ctx, client.ID(st.ID), fmt.Sprintf("t%d", i), count, nil)
		mustOK(t, "CreateTopic", err)
		c.settle(10 * time.Second) // groups park once their heartbeat timeouts pass quietly
		work = append(work, c.measure(t, window))
	}
	perSecond := func(n uint64) float64 { return float64(n) / window.Seconds() }
	shards := float64(c.servers[0].shardCount)
	for i := range c.servers {
		few, some, many := work[0][i], work[1][i], work[2][i]
		t.Logf("node %d, 10 partitions: %v", i, few)
		t.Logf("node %d, 100 partitions: %v", i, some)
		t.Logf("node %d, 1,000 partitions: %v", i, many)
		grows := func(what string, at10, at100, at1000 uint64) {
			if perSecond(at1000) > 1.25*perSecond(at100)+1 || perSecond(at1000) > perSecond(at10)+2*shards+1 {
				t.Errorf("node %d: %s grow with the partitions: %.1f, %.1f and %.1f a second with 10, 100 and 1,000", i, what,
					perSecond(at10), perSecond(at100), perSecond(at1000))
			}
		}
		grows("timers fired", few.timersFired, some.timersFired, many.timersFired)
		grows("turns with tick work", few.dueTurns, some.dueTurns, many.dueTurns)
		grows("frames sent", few.framesSent, some.framesSent, many.framesSent)
		if many.timersArmed > few.timersArmed+4 {
			t.Errorf("node %d: %d timers armed with 1,000 partitions, %d with 10", i, many.timersArmed, few.timersArmed)
		}
		// A 10 ms grid fired 100 timers a second on each shard, at two phases on
		// shard 0.
		for _, w := range []idleWork{few, some, many} {
			if f := perSecond(w.timersFired); f > 10*shards {
				t.Errorf("node %d: %.1f timers fired a second while idle, want at most %.0f", i, f, 10*shards)
			}
		}
	}
}
