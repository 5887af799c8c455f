package shard

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	"github.com/iggy-shard/iggy-shard/ring"
)

// How a shard waits at the end of a turn: it blocks in io_uring_enter until a
// completion arrives or its next timer is due, polls first when a completion started
// the turn (busyPoll), and does not block at all when work is waiting for the next
// turn: the handler's Tick asked for one (Ticker), it posted to itself, or a timer is
// already due.
//
// Turns that do not block must make progress, or the thread spins at 100% with
// nothing to show: a Tick that reports busy for ever (a disk completion no storage
// polls keeps Disk.Ready true), a handler that re-posts a message to itself until
// another shard's full inbox has room, a WakeAt always in the past. So a turn that
// would not block and follows spinTurnsMax turns without progress sleeps instead,
// spinBackoffMin doubling to spinBackoffMax, until progress is seen again (or a
// completion ends the sleep early, as always). Progress is anything the loop can
// see move: a completion reaped, an SQE prepared (a send, a wake of another shard),
// a message or replica frame from another shard, a disk request submitted or
// completed. Such a handler gets at most ~1/spinBackoffMax turns a second plus the
// ones its events bring, and Stats.ThrottledWaits counts the sleeps.

// spinTurnsMax is how many turns in a row may ask for another at once without
// progress before the shard sleeps between them: enough for any chain of work that
// completes without I/O (a hook that queues a hook), few enough to be a blip.
const spinTurnsMax = 64

// spinBackoffMin and spinBackoffMax bound the sleep between turns asked for without
// progress.
const (
	spinBackoffMin = time.Millisecond
	spinBackoffMax = 16 * time.Millisecond
)

// spinLogInterval is how long a throttled shard stays quiet after it said so.
const spinLogInterval = time.Minute

// completionPoll is a turn's batch of completions and the loop's watch over how it
// waits for the next.
type completionPoll struct {
	cqes [completionBatchMax]ring.CQE
	// lastReaped is how many completions the last wait brought, the eventfd's
	// not counted: none means a timer (or a goroutine's Wake) ended it, and the
	// shard sleeps again without busy polling.
	lastReaped int
	spin       spinGuard
}

// spinGuard is the loop's watch over turns that do not block.
type spinGuard struct {
	lastProgress uint64        // the progress mark after the last turn
	turns        int           // turns in a row that would not block and made none
	backoff      time.Duration // the next throttled sleep; 0 until throttled
	loggedNs     int64         // when it was last logged; 0: never
}

// progressMark sums everything that moves when the loop or its handler does work.
func (s *Shard) progressMark() uint64 {
	m := s.counters.cqesReaped + s.counters.sqesPrepared + s.counters.messagesFromOthers
	if s.disk.io != nil {
		m += s.disk.io.progress
	}
	return m
}

// wait submits what is queued and blocks until a completion arrives or the next timer
// is due. It reports false when it returned without completions to reap.
func (s *Shard) wait() bool {
	progress := s.progressMark()
	moved := progress != s.poll.spin.lastProgress
	s.poll.spin.lastProgress = progress
	d := time.Duration(-1) // no timer: until a completion
	if next, ok := s.clock.timers.Next(); ok {
		d = max(time.Duration(next-s.clock.read()), 0)
	}
	d = s.wakeForSplices(d)
	var err error
	switch {
	case s.handler.busy || s.mail.inbox[s.index].Len() > 0 || s.mail.control[s.index].Len() > 0 || d == 0:
		// Work for the next turn already: collect what completed, block on nothing,
		// unless such turns have stopped making progress.
		if throttle, ok := s.spinThrottle(moved); ok {
			if d > 0 {
				throttle = min(throttle, d)
			}
			err = s.sleep(throttle)
			break
		}
		err = s.enter()
	case s.poll.lastReaped > 0 && s.busyPoll():
		s.poll.spin.turns, s.poll.spin.backoff = 0, 0
		return true
	default:
		s.poll.spin.turns, s.poll.spin.backoff = 0, 0
		err = s.sleep(d)
	}
	if err != nil && !errors.Is(err, ring.ErrCQOverflow) {
		s.fail(fmt.Errorf("shard %d: io_uring_enter: %w", s.index, err))
		return false
	}
	return true
}

// spinThrottle counts a turn that would not block and reports how long to sleep
// instead, once spinTurnsMax such turns in a row made no progress.
func (s *Shard) spinThrottle(moved bool) (time.Duration, bool) {
	g := &s.poll.spin
	if moved {
		g.turns, g.backoff = 0, 0
		return 0, false
	}
	if g.turns++; g.turns <= spinTurnsMax {
		return 0, false
	}
	if g.backoff == 0 {
		g.backoff = spinBackoffMin
		if g.loggedNs == 0 || s.clock.nowNs-g.loggedNs >= int64(spinLogInterval) {
			g.loggedNs = max(s.clock.nowNs, 1)
			args := []any{"turns", g.turns, "ticker_busy", s.handler.busy, "self_messages", s.mail.inbox[s.index].Len()}
			if s.disk.io != nil {
				args = append(args, "disk_ready", s.disk.io.ready, "disk_waiting", len(s.disk.io.waiting), "disk_in_ring", s.disk.io.inRing)
			}
			s.log.Warn("turns asked for without progress; sleeping between them", args...)
		}
	} else {
		g.backoff = min(2*g.backoff, spinBackoffMax)
	}
	s.counters.throttledWaits++
	return g.backoff, true
}

// enter submits what is queued and collects what completed, without blocking.
func (s *Shard) enter() error {
	s.counters.ringEnters++
	_, err := s.ring.Submit()
	return err
}

// sleep submits what is queued and blocks until a completion arrives, or for at
// most d when d >= 0.
func (s *Shard) sleep(d time.Duration) error {
	s.counters.ringEnters++
	s.counters.sleeps++
	if d < 0 {
		_, err := s.ring.SubmitAndWait(1)
		return err
	}
	_, err := s.ring.SubmitAndWaitTimeout(1, d)
	if err == nil && s.ring.CQReady() == 0 {
		s.counters.timerWakeups++
	}
	return err
}

// busyPoll polls the ring without sleeping for up to Config.BusyPoll, and reports
// whether a completion arrived (false: sleep in io_uring_enter). A shard has just
// worked when it gets here, and the next request of a busy connection usually follows
// within microseconds; waking a sleeping thread costs tens of microseconds of latency
// (BenchmarkPingRoundTrip, one connection: p50 ~70 µs sleeping at once, ~30 µs with
// 50 µs of polling) and, under load, the wake-ups themselves cost the CPU that
// busy polling spends. A shard polls only after a turn that a completion started
// (wait asks), never after a timer's: an idle shard whose handler ticks every 10 ms
// would otherwise poll 100 times a second for nothing (~30 io_uring_enter and
// sched_yield calls each, 0.5% of a core: TestIdleShardSleeps).
func (s *Shard) busyPoll() bool {
	if s.cfg.BusyPoll <= 0 {
		return false
	}
	s.counters.busyPolls++
	// The budget is real time even under a test's Config.Clock, which may stand still.
	startNs := s.clock.realNs()
	deadlineNs := startNs + int64(s.cfg.BusyPoll)
	if next, ok := s.clock.timers.Next(); ok {
		deadlineNs = min(deadlineNs, startNs+next-s.clock.read())
	}
	for {
		if err := s.enter(); err != nil {
			return false // the blocking enter that follows reports it
		}
		if s.ring.CQReady() > 0 {
			return true
		}
		if s.clock.realNs() >= deadlineNs {
			return false
		}
		// Give the CPU to whatever else is runnable on it: the thread that will
		// produce the next completion (a client on the same machine, an io-wq
		// worker) is often waiting behind this one. Alone on its core, the shard
		// gets the CPU straight back.
		unix.Syscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
	}
}
