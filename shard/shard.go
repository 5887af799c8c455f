package shard

import (
	"fmt"
	"log/slog"

	"golang.org/x/sys/unix"

	"github.com/iggy-shard/iggy-shard/arena"
	"github.com/iggy-shard/iggy-shard/ring"
)

// completionKind is the top byte of every SQE's user data: which state machine the
// completion belongs to. The rest identifies the connection (slot and generation) or,
// for a wake-up, the sending shard.
//
//	63     56 55          24 23              0
//	+--------+--------------+----------------+
//	|  kind  |     slot     |   generation   |
//	+--------+--------------+----------------+
type completionKind uint8

const (
	kindAccept completionKind = iota + 1
	kindRecv
	kindSend
	kindCancel
	kindWake // a MSG_RING from another shard: its inbox has messages
	kindWakeSent
	kindEventFd     // the eventfd read through which non-shard goroutines wake the shard
	kindDiskEvent   // the read of the disk ring's eventfd: disk completions were posted
	kindSpliceHead  // the bytes queued before a spliced reply, leading its chain (splice.go)
	kindSpliceIn    // a spliced reply's file -> pipe step
	kindSpliceOut   // a spliced reply's pipe -> socket step
	kindSpliceFile  // the msg_ring that copies a socket into the splice ring's table (splicering.go)
	kindSpliceEvent // the read of the splice ring's eventfd: splice completions were posted
)

// submitCancel asks the kernel to cancel the request whose user data is target;
// the cancellation's own completion comes back as completion.
func (s *Shard) submitCancel(target, completion uint64) {
	sqe := s.getSQE()
	sqe.PrepareCancel(target, 0)
	sqe.UserData = completion
}

func userData(kind completionKind, id ConnID) uint64 {
	return uint64(kind)<<56 | uint64(id)&(1<<48-1)
}

func splitUserData(ud uint64) (completionKind, uint64) {
	return completionKind(ud >> 56), ud & (1<<48 - 1)
}

// completionBatchMax is how many CQEs a shard copies out of the ring before acting on
// any: completions never run inside the reap (an action may submit, and submitting may
// post more completions).
const completionBatchMax = 256

// Shard is one event loop: a goroutine locked to its OS thread (pinned to a CPU when
// configured), with its own ring, arena, connections and timers. Every method must be
// called from the shard's own goroutine (from a Handler callback), except where noted.
type Shard struct {
	index   int
	rt      *Runtime
	cfg     *Config
	log     *slog.Logger
	ring    *ring.Ring
	arena   *arena.Arena
	clock   loopClock      // now, the timers and the WakeAt turns among them (timer.go)
	poll    completionPoll // the completions of a turn, and how the loop waits for them (wait.go)
	handler handlerRoles   // the handler, and which of the optional interfaces it implements (handler.go)

	recv     recvPool      // the receive buffers of the client connections (recv.go)
	clients  clientTable   // the client connections (clients.go)
	listener listener      // shard 0 only: the client listener (listener.go)
	handoff  handoffs      // connections on their way between shards (handoff.go)
	mail     mailbox       // messages from the other shards, and the eventfd goroutines knock on (mail.go)
	disk     diskPort      // the disk ring; nil Disk unless Config.DiskIO (disk_port.go)
	splice   splicer       // the pipes replies are spliced through, and who waits for one (splice.go)
	replica  *replicaShard // the shard's part of the replica plane; nil without Config.Replica

	counters  counters
	logLimits logLimiter

	stopping bool
	err      error
}

// Pipes returns the shard's pipe pool, for replies spliced from files.
func (s *Shard) Pipes() *PipePool { return &s.splice.pipes }

// Index returns the shard's index, 0..Count()-1.
func (s *Shard) Index() int { return s.index }

// Count returns the number of shards of the runtime.
func (s *Shard) Count() int { return len(s.rt.shards) }

// Logger returns the shard's logger (it carries the shard index).
func (s *Shard) Logger() *slog.Logger { return s.log }

// Arena returns the shard's buffer arena, for handlers that build replies in it.
func (s *Shard) Arena() *arena.Arena { return s.arena }

// NowNs returns the shard's monotonic clock, read once per loop iteration. Every shard
// of a runtime counts from the same epoch, so one shard may compare a reading another
// published with its own.
func (s *Shard) NowNs() int64 { return s.clock.nowNs }

// Disk returns the shard's disk I/O (nil unless Config.DiskIO): the storages it opens carry partition logs' reads,
// writes and fdatasyncs through the shard's disk ring. Use it from the shard's
// goroutine only; the handler reaps it from Ticker.Tick.
func (s *Shard) Disk() *Disk { return s.disk.io }

// WakeAt makes the loop take a turn (and so call Ticker.Tick) no later than deadlineNs
// on the shard's clock (NowNs), even when nothing else happens. A handler's periodic
// work (heartbeat checks, retention) asks for its next turn this way. Asking again
// for a deadline already asked for costs nothing: a handler may ask on every turn.
func (s *Shard) WakeAt(deadlineNs int64) {
	s.clock.wakeAt(deadlineNs)
}

// getSQE returns a free SQE. On a ring failure the shard records a fatal error and gets
// a scratch SQE, so callers need no error path: the loop stops at the end of the
// iteration.
func (s *Shard) getSQE() *ring.SQE {
	s.counters.sqesPrepared++
	sqe, err := s.ring.GetSQE()
	if err != nil {
		s.fail(fmt.Errorf("shard %d: get SQE: %w", s.index, err))
		return new(ring.SQE)
	}
	return sqe
}

func (s *Shard) fail(err error) {
	if s.err == nil {
		s.err = err
	}
}

// closeSocket closes a connection's socket: a plain descriptor, or a slot of the
// registered-file table (asynchronously; the slot is free once the close ran, and the
// kernel hands out no slot before that).
func (s *Shard) closeSocket(fd int, direct bool) {
	if !direct {
		unix.Close(fd)
		return
	}
	s.dropSpliceFile(fd)
	sqe := s.getSQE()
	sqe.PrepareCloseDirect(uint32(fd))
	sqe.UserData = userData(kindCancel, 0)
}
