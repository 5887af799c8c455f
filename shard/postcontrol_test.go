package shard

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// laneTest: shard 1 holds still in its Tick while shard 0 fills the ordinary lane to
// it and posts one message on the control lane; then shard 1 serves them all.
type laneTest struct {
	start    atomic.Bool
	holding  chan struct{} // shard 1 is in its Tick and will drain nothing until posted
	done     bool          // shard 0's: it has posted
	posted   chan struct{} // shard 0 has posted everything
	ordinary int           // ordinary messages the lane took
	control  bool          // PostControl's answer

	mu       sync.Mutex
	served   []uint32
	finished chan struct{}
}

type laneHandler struct {
	testHandler
	lt *laneTest
}

const laneControlKind = 99

func (h *laneHandler) ServeMessage(s *Shard, m Message) {
	lt := h.lt
	lt.mu.Lock()
	defer lt.mu.Unlock()
	lt.served = append(lt.served, m.Kind)
	if len(lt.served) == lt.ordinary+1 {
		close(lt.finished)
	}
}

func (h *laneHandler) Tick(s *Shard) bool {
	lt := h.lt
	switch {
	case s.Index() == 1 && lt.start.CompareAndSwap(true, false):
		close(lt.holding)
		<-lt.posted
	case s.Index() == 0 && !lt.done:
		select {
		case <-lt.holding:
		default:
			return false
		}
		lt.done = true
		for s.Post(1, Message{Kind: 1}) {
			lt.ordinary++
		}
		lt.control = s.PostControl(1, Message{Kind: laneControlKind})
		close(lt.posted)
	}
	return false
}

// A message on the control lane has room of its own and is served before the
// ordinary ones already waiting, however many.
func TestPostControlHasItsOwnRoomAndGoesFirst(t *testing.T) {
	lt := &laneTest{holding: make(chan struct{}), posted: make(chan struct{}), finished: make(chan struct{})}
	rt := startTestRuntime(t, Config{ShardCount: 2, InboxCapacity: 64, BusyPoll: -1, NewHandler: func(s *Shard) Handler {
		return &laneHandler{testHandler: testHandler{shard: s}, lt: lt}
	}})
	lt.start.Store(true)
	rt.WakeAll()
	<-lt.holding
	rt.WakeAll() // shard 0 may have taken its turn before shard 1 held
	select {
	case <-lt.finished:
	case <-time.After(10 * time.Second):
		t.Fatal("the messages were not all served")
	}
	lt.mu.Lock()
	defer lt.mu.Unlock()
	if lt.ordinary != 64 || !lt.control {
		t.Fatalf("%d ordinary messages in a lane of 64, control posted %v: the control lane has room of its own",
			lt.ordinary, lt.control)
	}
	if lt.served[0] != laneControlKind {
		t.Fatalf("served %v first, want the control message", lt.served[:4])
	}
}
