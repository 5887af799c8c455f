package shard

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/segment"
)

// spinHandler asks for turns without doing anything: each way a handler can.
type spinHandler struct {
	testHandler
	how   string // "busy", "self post", "past timer", "disk work"
	ticks *atomic.Int64
	left  int // "disk work": busy turns still to take
	done  chan struct{}

	dir     string
	storage *DiskStorage
	file    segment.File
}

func (h *spinHandler) ServeMessage(*Shard, Message) {}

func (h *spinHandler) Tick(s *Shard) bool {
	if s.Index() != 0 {
		return false
	}
	h.ticks.Add(1)
	switch h.how {
	case "busy":
		return true
	case "self post":
		s.Post(0, Message{})
	case "past timer":
		s.WakeAt(s.NowNs())
	case "disk work":
		// Busy with work that moves: a disk request (a truncation, which completes
		// at once) submitted and its hook run on each turn.
		if h.left == 0 {
			if h.done != nil {
				close(h.done)
				h.done = nil
			}
			return false
		}
		if h.storage == nil {
			st, err := s.Disk().Open(h.dir)
			if err != nil {
				panic(err)
			}
			if h.file, _, err = st.Open("f", true, 0); err != nil {
				panic(err)
			}
			h.storage = st
		}
		h.left--
		h.storage.Submit(&segment.Request{Op: segment.OpTruncate, File: h.file, Done: func(*segment.Request) {}})
		h.storage.Poll(false)
		return true
	}
	return false
}

func (h *spinHandler) Stop(*Shard) {
	if h.storage != nil {
		h.storage.Close(h.file)
	}
}

// A handler that asks for turns for ever without progress gets a bounded number of
// them: its shard sleeps between them instead of spinning a core at 100%, and still
// serves whatever comes (here an Inspect, which ends the sleep early).
func TestTurnsWithoutProgressSleep(t *testing.T) {
	const warmUp, window = 200 * time.Millisecond, 320 * time.Millisecond
	for _, how := range []string{"busy", "self post", "past timer"} {
		t.Run(how, func(t *testing.T) {
			var ticks atomic.Int64
			rt := startTestRuntime(t, Config{ShardCount: 2, NewHandler: func(s *Shard) Handler {
				return &spinHandler{testHandler: testHandler{shard: s}, how: how, ticks: &ticks}
			}})
			time.Sleep(warmUp) // spinTurnsMax turns, then the backoff's climb (15 ms)
			start := ticks.Load()
			time.Sleep(window)
			n := ticks.Load() - start
			var st Stats
			began := time.Now()
			if err := rt.Inspect(context.Background(), func(s *Shard) {
				if s.Index() == 0 {
					st = s.Stats()
				}
			}); err != nil {
				t.Fatal(err)
			}
			t.Logf("%d turns in %v once throttled; %d throttled waits; Inspect answered in %v", n, window, st.ThrottledWaits,
				time.Since(began))
			// Throttled, a spinning handler gets ~1/spinBackoffMax turns a second:
			// ~20 in the window; unthrottled it got ~500,000.
			if limit := int64(4 * window / spinBackoffMax); n > limit {
				t.Fatalf("%d turns in %v, want at most %d", n, window, limit)
			}
			if st.ThrottledWaits == 0 {
				t.Fatal("no throttled wait counted")
			}
		})
	}
}

// Turns asked for while work moves (here a disk request on each) are never
// throttled.
func TestTurnsWithProgressAreNotThrottled(t *testing.T) {
	var ticks atomic.Int64
	done := make(chan struct{})
	dir := t.TempDir()
	rt := startTestRuntime(t, Config{ShardCount: 2, DiskIO: true, NewHandler: func(s *Shard) Handler {
		return &spinHandler{testHandler: testHandler{shard: s}, how: "disk work", ticks: &ticks, left: 5000, done: done, dir: dir}
	}})
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%d busy turns taken of 5,000", ticks.Load())
	}
	var st Stats
	if err := rt.Inspect(context.Background(), func(s *Shard) {
		if s.Index() == 0 {
			st = s.Stats()
		}
	}); err != nil {
		t.Fatal(err)
	}
	if st.ThrottledWaits != 0 {
		t.Fatalf("%d throttled waits for turns that moved work", st.ThrottledWaits)
	}
}
