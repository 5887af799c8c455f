package shard

import (
	"context"
	"fmt"
	"runtime"
	"runtime/pprof"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/iggy-shard/iggy-shard/arena"
	"github.com/iggy-shard/iggy-shard/fdpass"
	"github.com/iggy-shard/iggy-shard/linux"
	"github.com/iggy-shard/iggy-shard/ring"
)

// run is the shard's goroutine: set up on the locked thread, report, then loop.
func (s *Shard) run(ready chan<- error, start <-chan struct{}) {
	runtime.LockOSThread()
	// A CPU profile tells the shards apart by this label (go tool pprof -tagfocus
	// shard=1), as perf does by the thread's name (shard-N).
	pprof.SetGoroutineLabels(pprof.WithLabels(context.Background(), pprof.Labels("shard", strconv.Itoa(s.index))))
	// The thread is never unlocked: with SINGLE_ISSUER the ring belongs to it, and a
	// thread whose affinity we changed must not go back to the Go scheduler's pool.
	if err := s.setUp(); err != nil {
		ready <- err
		return
	}
	ready <- nil
	<-start
	if s.rt.stopping.Load() {
		return
	}
	s.loop()
}

func (s *Shard) setUp() error {
	// Named, a shard's thread stands apart from the Go runtime's in top -H and perf.
	if err := linux.NameCurrentThread("shard-" + strconv.Itoa(s.index)); err != nil {
		s.log.Warn("shard thread keeps the process name", "err", err)
	}
	if s.cfg.PinCPUs {
		cpus := s.rt.allowedCPUs
		if err := linux.PinCurrentThread(cpus[s.index%len(cpus)]); err != nil {
			return fmt.Errorf("shard %d: %w", s.index, err)
		}
	}
	r, err := ring.New(ring.DefaultOptions(s.cfg.RingEntries))
	if err != nil {
		return fmt.Errorf("shard %d: io_uring setup: %w", s.index, err)
	}
	s.ring = r
	for _, op := range []ring.Opcode{ring.OpAccept, ring.OpRecv, ring.OpSend, ring.OpSendmsg, ring.OpMsgRing, ring.OpRead, ring.OpAsyncCancel} {
		if !r.Supports(op) {
			return fmt.Errorf("shard %d: the kernel's io_uring lacks opcode %d (Linux 6.0 or newer is needed)", s.index, op)
		}
	}
	if s.cfg.FdPass == fdpass.ModeMsgRing {
		if err := s.registerFileTable(); err != nil {
			return fmt.Errorf("shard %d: %w", s.index, err)
		}
	}
	a, err := arena.New(s.cfg.Arena)
	if err != nil {
		return fmt.Errorf("shard %d: %w", s.index, err)
	}
	s.arena = a
	if err := s.recv.setUp(r, a, s.cfg.Arena); err != nil {
		return fmt.Errorf("shard %d: %w", s.index, err)
	}
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return fmt.Errorf("shard %d: eventfd: %w", s.index, err)
	}
	s.mail.event = eventReader{fd: efd, buf: new([8]byte), kind: kindEventFd}
	if s.cfg.DiskIO {
		if err := s.setUpDisk(); err != nil {
			return fmt.Errorf("shard %d: %w", s.index, err)
		}
	}
	s.clock.start(s.rt.epoch, s.cfg.Clock)
	s.handler = newHandlerRoles(s.cfg.NewHandler(s))
	if s.rt.replica != nil {
		if !r.Supports(ring.OpConnect) {
			return fmt.Errorf("shard %d: the kernel's io_uring lacks connect", s.index)
		}
		if err := s.setUpReplica(); err != nil {
			return err
		}
	}
	return nil
}

func (s *Shard) loop() {
	s.log.Info("shard started", "cpu_pinned", s.cfg.PinCPUs)
	if s.index == 0 { // it places the connections, from its listener or Runtime.Adopt
		if err := s.newSender(); err != nil {
			s.rt.fatal(fmt.Errorf("shard %d: %w", s.index, err))
			return
		}
	}
	s.listener.arm(s)
	s.startReplica()
	s.clock.timers.Push(timer{deadlineNs: s.clock.nowNs + int64(s.cfg.MaintenanceInterval), kind: timerMaintenance})
	for {
		s.counters.turns++
		s.clock.advance()
		if !s.mail.event.armed {
			s.mail.event.arm(s)
		}
		if s.disk.io != nil && !s.disk.event.armed {
			s.disk.event.arm(s)
		}
		if !s.stopping && s.rt.stopping.Load() {
			s.beginStop()
		}
		if s.replica != nil {
			s.drainReplicaTransit()
		}
		s.drainInboxes()
		if s.replica != nil {
			s.replicaTurn()
		}
		s.serveInspection()
		s.adoptPending()
		s.resumeInputs()
		s.fireTimers()
		s.handler.tick(s)
		s.flushSends()
		if s.replica != nil {
			s.flushReplicaSends()
		}
		s.sendWakes()
		s.submitSplices()
		if s.err != nil {
			s.log.Error("shard stopping on a fatal error", "err", s.err)
			s.stop()
			s.rt.fatal(s.err)
			return
		}
		if s.stopping && s.stopped() {
			s.stop()
			s.log.Info("shard stopped")
			return
		}
		if !s.wait() {
			continue
		}
		s.reap()
	}
}

// reap copies a batch of completions out of the ring, hands their slots back to the
// kernel, then acts on each.
func (s *Shard) reap() {
	n := 0
	for n < len(s.poll.cqes) {
		cqe, ok := s.ring.PeekCQE()
		if !ok {
			break
		}
		s.poll.cqes[n] = *cqe
		s.ring.CQESeen()
		n++
	}
	s.counters.cqesReaped += uint64(n)
	s.poll.lastReaped = n
	for i := range n {
		if kind, _ := splitUserData(s.poll.cqes[i].UserData); kind == kindEventFd && !fdpass.Owns(s.poll.cqes[i].UserData) {
			// A goroutine's knock (Runtime.Inspect, Wake) is no socket's traffic.
			s.poll.lastReaped--
		}
	}
	s.clock.advance()
	// Spliced replies that ended give their pipes back before the requests that
	// came in are served: those may splice through them (CanSplice).
	s.reapSplices()
	for i := range n {
		s.complete(&s.poll.cqes[i])
	}
}

func (s *Shard) complete(cqe *ring.CQE) {
	if fdpass.Owns(cqe.UserData) {
		s.completeHandoff(cqe)
		return
	}
	kind, rest := splitUserData(cqe.UserData)
	switch kind {
	case kindAccept:
		s.listener.onCompletion(s, cqe)
	case kindRecv, kindSend:
		id := s.linkOf(rest)
		c := s.Conn(id)
		if c == nil {
			panic(s.goneLink(id))
		}
		if kind == kindRecv {
			c.onRecv(cqe)
		} else {
			c.onSend(cqe.Res)
		}
	case kindSpliceHead, kindSpliceIn, kindSpliceOut:
		id := s.linkOf(rest)
		c := s.Conn(id)
		if c == nil {
			panic(s.goneLink(id))
		}
		c.onSplice(kind, cqe.Res)
	case kindCancel, kindWakeSent:
		// Cancellation outcomes arrive on the cancelled operation itself; a failed
		// wake-up means the target's ring is gone, which only happens at shutdown.
	case kindWake:
		// The inboxes are drained on every iteration.
	case kindEventFd:
		s.mail.event.armed = false
	case kindDiskEvent:
		// The handler's Tick, next turn, reaps the disk ring.
		s.disk.event.armed = false
	case kindSpliceEvent:
		// This turn's reap takes the splice ring's completions.
		s.splice.event.armed = false
		s.counters.spliceRingWakes++
	case kindSpliceFile:
		id := s.linkOf(rest)
		c := s.Conn(id)
		if c == nil {
			panic(s.goneLink(id))
		}
		c.onSpliceFileInstalled(cqe.Res)
	case kindReplicaAccept, kindReplicaConnect, kindReplicaRecv, kindReplicaSend, kindReplicaCancel:
		s.completeReplica(kind, rest, cqe)
	default:
		panic(fmt.Sprintf("shard %d: completion with unknown kind %d", s.index, kind))
	}
}

// stop tells the handler the loop ends, on the shard's thread: the last moment it can
// use the rings (its disk I/O must finish here, the disk ring belongs to this thread).
func (s *Shard) stop() {
	s.handler.stop(s)
}

func (s *Shard) fireTimers() {
	for {
		t, ok := s.clock.timers.Expired(s.clock.nowNs)
		if !ok {
			return
		}
		s.counters.timersFired++
		switch t.kind {
		case timerConn:
			if c := s.Conn(t.conn); c != nil {
				c.checkDeadlines()
			}
		case timerAccept:
			s.listener.onRetry(s)
		case timerWake:
			// Only to end the wait: Tick runs every turn.
			s.clock.wakes.remove(t.deadlineNs)
		case timerMaintenance:
			// The turn's Tick follows: the handler's work that is due with time.
			s.arena.TrimIdle()
			s.counters.maintenanceTurns++
			s.clock.timers.Push(timer{deadlineNs: s.clock.nowNs + int64(s.cfg.MaintenanceInterval), kind: timerMaintenance})
		case timerShutdown:
			for _, c := range s.clients.conns.items {
				if c != nil && c.state != linkFree {
					c.abort("shutdown timeout")
				}
			}
		case timerReplicaConn, timerReplicaDial, timerReplicaAccept:
			s.fireReplicaTimer(t)
		}
	}
}

// beginStop starts a graceful stop: no new connections, each connection finishes
// sending what it owes and closes, and after ShutdownTimeout the rest are cut.
func (s *Shard) beginStop() {
	s.stopping = true
	s.log.Info("shard shutting down", "connections", s.clients.conns.live)
	s.clock.timers.Push(timer{deadlineNs: s.clock.nowNs + int64(s.cfg.ShutdownTimeout), kind: timerShutdown})
	s.listener.stop(s)
	s.stopReplica()
	for _, c := range s.clients.conns.items {
		if c != nil && c.state == linkOpen {
			c.closeAfterFlush("shutdown")
		}
	}
}

func (s *Shard) stopped() bool {
	return s.clients.conns.live == 0 && s.listener.closed() && (s.handoff.sender == nil || s.handoff.sender.InFlightCount() == 0) && s.replicaStopped()
}
