package shard

import (
	"sync/atomic"
	"testing"
	"time"
)

// tickCounter counts its Tick calls, from any goroutine's point of view.
type tickCounter struct {
	testHandler
	ticks *atomic.Int64
}

func (h *tickCounter) Tick(*Shard) bool {
	h.ticks.Add(1)
	return false
}

// An idle shard, with no connection, timer or message, still takes its maintenance
// turn every MaintenanceInterval: its handler's Tick runs (retention, idle poll
// memory), and its arena gives back the pages of a buffer a burst left idle. Without
// that turn an idle shard slept for good, and a buffer's pages stayed resident.
func TestIdleShardTakesItsMaintenanceTurns(t *testing.T) {
	const interval = 20 * time.Millisecond
	var ticks atomic.Int64
	cfg := Config{ShardCount: 1, MaintenanceInterval: interval, Arena: ArenaConfigDefault(),
		NewHandler: func(s *Shard) Handler { return &tickCounter{testHandler: testHandler{shard: s}, ticks: &ticks} }}
	rt := startTestRuntime(t, cfg)
	largest := len(cfg.Arena.Classes) - 1
	if err := rt.Inspect(t.Context(), func(s *Shard) {
		b, err := s.arena.AcquireClass(largest)
		if err != nil {
			t.Error(err)
			return
		}
		clear(b.Bytes()) // touched: its pages resident
		s.arena.Release(b)
	}); err != nil {
		t.Fatal(err)
	}
	before := shardStats(t, rt)
	ticksBefore := ticks.Load()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var trimmed uint64
		if err := rt.Inspect(t.Context(), func(s *Shard) { trimmed = s.arena.ClassStats(largest).TrimmedCount }); err != nil {
			t.Fatal(err)
		}
		st := shardStats(t, rt)
		turns := st.MaintenanceTurns - before.MaintenanceTurns
		if trimmed > 0 && turns >= 3 && ticks.Load()-ticksBefore >= 3 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 10 s: %d maintenance turns, %d ticks, the idle buffer trimmed %d times", turns, ticks.Load()-ticksBefore, trimmed)
		}
		time.Sleep(interval)
	}
}

// The interval defaults to the arena's trim interval, and a negative one is refused.
func TestMaintenanceIntervalConfig(t *testing.T) {
	handler := func(s *Shard) Handler { return &testHandler{shard: s} }
	c, err := Config{NewHandler: handler}.withDefaults([]int{0})
	if err != nil {
		t.Fatal(err)
	}
	if c.MaintenanceInterval != 10*time.Second {
		t.Fatalf("default maintenance interval %v, want 10s", c.MaintenanceInterval)
	}
	if _, err := (Config{NewHandler: handler, MaintenanceInterval: -time.Second}).withDefaults([]int{0}); err == nil {
		t.Fatal("a negative maintenance interval was taken")
	}
}
