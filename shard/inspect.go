package shard

import (
	"context"
	"errors"
)

// ErrStopped: the runtime has stopped.
var ErrStopped = errors.New("shard: runtime stopped")

// A shard's figures are plain counters that only its goroutine writes: nothing on
// the request path is shared with another shard or made atomic. A reader outside
// (a metrics scrape) asks every shard to copy them at its next turn
// (Runtime.Inspect) and waits for the copies; a shard that is not asked pays one
// atomic load per turn.

// Stats are one shard's runtime figures, as Shard.Stats copies them.
type Stats struct {
	Shard       int
	Connections int
	// BytesReceived and BytesSent count socket bytes, requests and replies.
	BytesReceived, BytesSent uint64
	// RequestsServed counts the valid requests handed to the handler.
	RequestsServed uint64
	// SQEsPrepared and CQEsReaped count the connection ring's submission and
	// completion queue entries.
	SQEsPrepared, CQEsReaped uint64
	// ArenaBuffersInUse counts the buffers taken from the arena (the receive ring's
	// class, lent to the kernel, not among them); FramesWaitingForBuffer the
	// connections whose next frame waits for one.
	ArenaBuffersInUse      int
	FramesWaitingForBuffer int
	// InboxDepth is the number of messages other shards posted and this one has not
	// served yet.
	InboxDepth int
}

// counters are a shard's own, written only on its goroutine.
type counters struct {
	bytesReceived, bytesSent, requestsServed, sqesPrepared, cqesReaped uint64
}

// Stats copies the shard's figures. Call it on the shard's goroutine (from a
// handler, or through Runtime.Inspect).
func (s *Shard) Stats() Stats {
	st := Stats{
		Shard:                  s.index,
		Connections:            s.connCount,
		BytesReceived:          s.counters.bytesReceived,
		BytesSent:              s.counters.bytesSent,
		RequestsServed:         s.counters.requestsServed,
		SQEsPrepared:           s.counters.sqesPrepared,
		CQEsReaped:             s.counters.cqesReaped,
		ArenaBuffersInUse:      s.arena.InUseCount(),
		FramesWaitingForBuffer: len(s.bufferWaiters),
	}
	for i := range s.inbox {
		if s.inbox[i] != nil {
			st.InboxDepth += s.inbox[i].Len()
		}
	}
	return st
}

// inspection is one Runtime.Inspect's request to one shard.
type inspection struct {
	fn   func(s *Shard)
	done chan struct{}
}

// Inspect runs fn on every shard's goroutine, each at its next turn, and returns
// once all have run it, or with ctx's error when that ends first (a stopped or
// stuck shard; fn may then still run on it later). One Inspect runs at a time.
func (rt *Runtime) Inspect(ctx context.Context, fn func(s *Shard)) error {
	rt.inspectMu.Lock()
	defer rt.inspectMu.Unlock()
	pending := make([]*inspection, len(rt.shards))
	for i, s := range rt.shards {
		pending[i] = &inspection{fn: fn, done: make(chan struct{})}
		s.inspect.Store(pending[i])
		s.Wake()
	}
	for _, in := range pending {
		select {
		case <-in.done:
		case <-ctx.Done():
			return ctx.Err()
		case <-rt.done:
			return ErrStopped
		}
	}
	return nil
}

// serveInspection runs a pending Inspect's fn, once per turn at most.
func (s *Shard) serveInspection() {
	if in := s.inspect.Swap(nil); in != nil {
		in.fn(s)
		close(in.done)
	}
}
