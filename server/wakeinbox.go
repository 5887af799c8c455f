package server

import (
	"sync"
	"sync/atomic"
)

// wakeInbox is work for one shard from other goroutines: pushed under a mutex,
// with the shard woken, and taken whole in the shard's turn. Shards' inboxes of
// calls (caller.go) and shard 0's tasks (httpserve.go) are two of them.
type wakeInbox[T any] struct {
	waiting atomic.Int32 // lets the shard skip the lock when there is nothing
	mu      sync.Mutex
	items   []T
	taken   []T    // the slice the shard serves from, swapped with items
	wake    func() // the shard's Shard.Wake; nil until the shard started
	closed  bool
}

// pushOutcome is what push did with an item.
type pushOutcome uint8

const (
	pushQueued pushOutcome = iota
	pushFull
	pushStopped
)

// attach gives the inbox its shard's wake (handler start).
func (b *wakeInbox[T]) attach(wake func()) {
	b.mu.Lock()
	b.wake = wake
	b.mu.Unlock()
}

// push queues v and wakes the shard, unless the shard has not started or has
// stopped.
func (b *wakeInbox[T]) push(v T) pushOutcome { return b.pushWithin(v, 0) }

// pushWithin is push refusing v (pushFull) when waitingMax items wait already
// (0: no bound).
func (b *wakeInbox[T]) pushWithin(v T, waitingMax int) pushOutcome {
	b.mu.Lock()
	switch {
	case b.closed || b.wake == nil:
		b.mu.Unlock()
		return pushStopped
	case waitingMax > 0 && len(b.items) >= waitingMax:
		b.mu.Unlock()
		return pushFull
	}
	b.items = append(b.items, v)
	b.waiting.Add(1)
	wake := b.wake
	b.mu.Unlock()
	wake()
	return pushQueued
}

// take hands the shard the items waiting, in order; the slice is the inbox's and
// valid until the next take.
func (b *wakeInbox[T]) take() []T {
	if b.waiting.Load() == 0 {
		return nil
	}
	b.mu.Lock()
	clear(b.taken)
	b.items, b.taken = b.taken[:0], b.items
	b.waiting.Store(0)
	b.mu.Unlock()
	return b.taken
}

// close refuses further items and returns those still waiting: the shard stops.
func (b *wakeInbox[T]) close() []T {
	b.mu.Lock()
	b.closed = true
	waiting := b.items
	b.items = nil
	b.waiting.Store(0)
	b.mu.Unlock()
	return waiting
}
