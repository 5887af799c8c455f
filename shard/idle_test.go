package shard

import (
	"context"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/replica"
	"github.com/iggy-shard/iggy-shard/wire"
)

// idleHandler serves nothing and, with tickEveryNs, asks for a turn that often, on
// every turn, as the server's consensus tick does (server/cluster.go clusterTick).
type idleHandler struct {
	testHandler
	tickEveryNs int64
	nextNs      int64
}

func (h *idleHandler) ServeReplica(*Shard, *ReplicaFrame) {}

func (h *idleHandler) Tick(s *Shard) bool {
	if h.tickEveryNs > 0 {
		if now := s.NowNs(); now >= h.nextNs {
			h.nextNs = now + h.tickEveryNs
		}
		s.WakeAt(h.nextNs)
	}
	return false
}

// startIdleMesh starts count runtimes of one shard each, at the production defaults
// (busy polling, reconnect period, timeouts), connected to each other.
func startIdleMesh(t *testing.T, count int, tickEvery time.Duration) []*Runtime {
	t.Helper()
	rts := make([]*Runtime, count)
	addrs := make([]string, count)
	for id := count - 1; id >= 0; id-- {
		rts[id] = startTestRuntime(t, Config{
			ShardCount: 1,
			Arena:      replicaTestArena(),
			NewHandler: func(s *Shard) Handler {
				return &idleHandler{testHandler: testHandler{shard: s}, tickEveryNs: int64(tickEvery)}
			},
			Replica: &ReplicaConfig{ListenAddress: "127.0.0.1:0", PeerAddresses: append([]string(nil), addrs...),
				Handshake: replica.HandshakeConfig{Cluster: wire.ClusterID("idle"), Self: uint8(id), ReplicaCount: uint8(count)}},
		})
		addrs[id] = rts[id].ReplicaAddr().String()
	}
	deadline := time.Now().Add(10 * time.Second)
	for id, rt := range rts {
		for peer := range count {
			for peer != id && !rt.ReplicaConnected(uint8(peer)) {
				if time.Now().After(deadline) {
					t.Fatalf("replica %d: no connection to %d", id, peer)
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
	}
	return rts
}

func shardStats(t testing.TB, rt *Runtime) Stats {
	t.Helper()
	var st Stats
	if err := rt.Inspect(context.Background(), func(s *Shard) { st = s.Stats() }); err != nil {
		t.Fatal(err)
	}
	return st
}

// An idle shard sleeps: with idle replica links and nothing to do it takes a turn
// only for its timers (seconds apart), and a handler that asks for a turn every
// 10 ms gets one turn, one io_uring_enter and no busy polling per tick. (Busy
// polling after each timer's turn cost ~30 io_uring_enter and sched_yield calls a
// tick, 0.5% of a core for a 10 ms tick.) Counted over a second of real time;
// Inspect's own wake-up is in the counts, and polls for nothing either.
func TestIdleShardSleeps(t *testing.T) {
	const window = time.Second
	for _, tc := range []struct {
		name       string
		tickEvery  time.Duration
		turnsMax   float64 // per second
		pollsMax   uint64  // busy polls in the window
		entersTurn float64 // io_uring_enter calls per turn
	}{
		{"no ticker", 0, 8, 2, 1.5},
		{"10 ms ticker", 10 * time.Millisecond, 130, 2, 1.2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rts := startIdleMesh(t, 3, tc.tickEvery)
			before := shardStats(t, rts[0])
			start := time.Now()
			time.Sleep(window)
			after := shardStats(t, rts[0])
			seconds := time.Since(start).Seconds()
			turns := after.Turns - before.Turns
			enters := after.RingEnters - before.RingEnters
			polls := after.BusyPolls - before.BusyPolls
			t.Logf("in %.2fs: %d turns, %d io_uring_enter, %d sleeps (%d ended by a timer), %d busy polls, %d timers pending",
				seconds, turns, enters, after.Sleeps-before.Sleeps, after.TimerWakeups-before.TimerWakeups, polls, after.TimersPending)
			if rate := float64(turns) / seconds; rate > tc.turnsMax {
				t.Errorf("%.0f turns a second, want at most %.0f", rate, tc.turnsMax)
			}
			if polls > tc.pollsMax {
				t.Errorf("%d busy polls, want at most %d: a turn a timer started polls for nothing", polls, tc.pollsMax)
			}
			if float64(enters) > tc.entersTurn*float64(max(turns, 1)) {
				t.Errorf("%d io_uring_enter calls for %d turns", enters, turns)
			}
			if after.TimersPending > 8 {
				t.Errorf("%d timers pending: the ticker's repeated WakeAt piles up", after.TimersPending)
			}
		})
	}
}

// turnsHandler on shard 0 asks on every turn for the same far turn (as the server's
// ticks ask on every turn for the next one) and once for a near one, while it plays
// ping-pong with shard 1, which gives it a turn per message.
type turnsHandler struct {
	testHandler
	left    *int  // pings still to send (shard 0's)
	farNs   int64 // asked for on every turn
	nearNs  int64 // asked for once
	pending *int  // Stats.TimersPending once the pings ended
	done    chan struct{}
	near    chan struct{} // closed on the first turn at or past nearNs
}

func (h *turnsHandler) ServeMessage(s *Shard, m Message) {
	if s.Index() == 1 {
		s.Post(0, Message{})
		return
	}
	if *h.left > 0 {
		*h.left--
		s.Post(1, Message{})
		return
	}
	*h.pending = s.Stats().TimersPending
	close(h.done)
}

func (h *turnsHandler) Tick(s *Shard) bool {
	if s.Index() != 0 {
		return false
	}
	if h.farNs == 0 {
		h.farNs, h.nearNs = s.NowNs()+int64(time.Hour), s.NowNs()+int64(50*time.Millisecond)
		s.WakeAt(h.nearNs)
		s.Post(1, Message{})
	}
	s.WakeAt(h.farNs)
	if h.near != nil && s.NowNs() >= h.nearNs {
		close(h.near)
		h.near = nil
	}
	return false
}

// A deadline asked for on every turn arms one timer, not one per turn, and a turn
// asked for beside it still comes (nothing else wakes the shard).
func TestWakeAtSameDeadlineArmsOneTimer(t *testing.T) {
	near, done := make(chan struct{}), make(chan struct{})
	left, pending := 1000, 0
	startTestRuntime(t, Config{ShardCount: 2, BusyPoll: -1, NewHandler: func(s *Shard) Handler {
		return &turnsHandler{testHandler: testHandler{shard: s}, left: &left, pending: &pending, done: done, near: near}
	}})
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the pings did not end")
	}
	if pending > 4 {
		t.Fatalf("%d timers pending after 1,000 turns asking for the same one", pending)
	}
	select {
	case <-near:
	case <-time.After(10 * time.Second):
		t.Fatal("the near turn asked for never came")
	}
}
