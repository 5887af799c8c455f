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
	// BytesReceived and BytesSent count socket bytes, requests and replies;
	// BytesReceivedIntoFrames those of BytesReceived that a recv put straight into
	// a large frame's buffer (armRecvDirect), not through the receive ring.
	BytesReceived, BytesSent uint64
	BytesReceivedIntoFrames  uint64
	// RequestsServed counts the valid requests handed to the handler.
	RequestsServed uint64
	// SQEsPrepared and CQEsReaped count the connection ring's submission and
	// completion queue entries.
	SQEsPrepared, CQEsReaped uint64
	// ArenaBuffersInUse counts the buffers taken from the arena (the receive ring's
	// class, lent to the kernel, not among them); FramesWaitingForBuffer the
	// connections whose next frame waits for one, and FramesWaitedForBuffer how many
	// times a connection began such a wait, over the shard's life.
	ArenaBuffersInUse      int
	FramesWaitingForBuffer int
	FramesWaitedForBuffer  uint64
	// InboxDepth is the number of messages other shards posted and this one has not
	// served yet.
	InboxDepth int

	// What the loop itself does, the cost of a shard that has nothing to do: Turns
	// counts its iterations; RingEnters its io_uring_enter calls on the connection
	// ring, busy polling's included; Sleeps the waits that blocked, of which
	// TimerWakeups were ended by a timer, not a completion; TimersFired the timers
	// that expired (a connection's deadlines, WakeAt); BusyPolls the busy-poll rounds
	// begun; TimersPending the timers armed now. DiskRingEnters counts the disk
	// ring's io_uring_enter calls (Config.DiskIO). ThrottledWaits counts the sleeps
	// taken between turns asked for without progress (wait.go): a handler that
	// spins. MaintenanceTurns counts the shard's own turns every
	// Config.MaintenanceInterval.
	Turns, RingEnters, Sleeps, TimerWakeups, TimersFired, BusyPolls, DiskRingEnters uint64
	ThrottledWaits, MaintenanceTurns                                                uint64
	TimersPending                                                                   int

	// Spliced replies (Conn.SendFileRuns): SplicedReplies counts those sent whole,
	// SplicedBytes their file bytes (in BytesSent too); PipesLent the pipes lent
	// now, PipesCreated those made and PipesClosedDirty those closed holding bytes
	// of a reply cut short, over the shard's life; PipeWaits the replies that found
	// every pipe lent and waited in line; SpliceRingWakes the completions of the
	// splice ring's eventfd read (splicering.go), each a wake-up of the shard
	// by the splice ring's completions.
	SplicedReplies, SplicedBytes, PipesCreated, PipesClosedDirty, PipeWaits uint64
	SpliceRingWakes                                                         uint64
	PipesLent                                                               int
}

// counters are a shard's own, written only on its goroutine.
type counters struct {
	bytesReceived, bytesSent, requestsServed, sqesPrepared, cqesReaped uint64
	bytesReceivedIntoFrames                                            uint64
	turns, ringEnters, sleeps, timerWakeups, timersFired, busyPolls    uint64
	throttledWaits, messagesFromOthers, framesWaitedForBuffer          uint64
	maintenanceTurns                                                   uint64
	splicedReplies, splicedBytes, pipeWaits, spliceRingWakes           uint64
	// replica counts the replica plane's traffic; atomics, which Runtime.ReplicaStats
	// sums from any goroutine.
	replica replicaCounters
}

// Stats copies the shard's figures. Call it on the shard's goroutine (from a
// handler, or through Runtime.Inspect).
func (s *Shard) Stats() Stats {
	st := Stats{
		Shard:                   s.index,
		Connections:             s.clients.conns.live,
		BytesReceived:           s.counters.bytesReceived,
		BytesSent:               s.counters.bytesSent,
		BytesReceivedIntoFrames: s.counters.bytesReceivedIntoFrames,
		RequestsServed:          s.counters.requestsServed,
		SQEsPrepared:            s.counters.sqesPrepared,
		CQEsReaped:              s.counters.cqesReaped,
		ArenaBuffersInUse:       s.arena.InUseCount(),
		FramesWaitingForBuffer:  len(s.clients.bufferWaiters),
		FramesWaitedForBuffer:   s.counters.framesWaitedForBuffer,
		Turns:                   s.counters.turns,
		RingEnters:              s.counters.ringEnters,
		Sleeps:                  s.counters.sleeps,
		TimerWakeups:            s.counters.timerWakeups,
		TimersFired:             s.counters.timersFired,
		BusyPolls:               s.counters.busyPolls,
		ThrottledWaits:          s.counters.throttledWaits,
		MaintenanceTurns:        s.counters.maintenanceTurns,
		TimersPending:           s.clock.timers.Len(),
		SplicedReplies:          s.counters.splicedReplies,
		SplicedBytes:            s.counters.splicedBytes,
		PipesLent:               s.splice.pipes.Lent(),
		PipesCreated:            s.splice.pipes.Created(),
		PipesClosedDirty:        s.splice.pipes.ClosedDirty(),
		PipeWaits:               s.counters.pipeWaits,
		SpliceRingWakes:         s.counters.spliceRingWakes,
	}
	if s.disk.io != nil {
		st.DiskRingEnters = s.disk.io.enters
	}
	for i := range s.mail.inbox {
		if s.mail.inbox[i] != nil {
			st.InboxDepth += s.mail.inbox[i].Len() + s.mail.control[i].Len()
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
		s.mail.inspect.Store(pending[i])
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
	if in := s.mail.inspect.Swap(nil); in != nil {
		in.fn(s)
		close(in.done)
	}
}
