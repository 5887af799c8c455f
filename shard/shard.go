package shard

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"runtime"
	"runtime/pprof"
	"strconv"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/iggy-shard/iggy-shard/arena"
	"github.com/iggy-shard/iggy-shard/fdpass"
	"github.com/iggy-shard/iggy-shard/linux"
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
	kindEventFd   // the eventfd read through which non-shard goroutines wake the shard
	kindDiskEvent // the read of the disk ring's eventfd: disk completions were posted
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

// acceptBackoffMin and acceptBackoffMax bound the pause before accepting again after the
// process or system ran out of descriptors or memory: short enough to recover quickly
// once a connection closes, long enough not to spin on a listener that keeps failing.
const (
	acceptBackoffMin = 10 * time.Millisecond
	acceptBackoffMax = time.Second
)

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
	handler Handler

	recvRing  *ring.BufferRing // provided buffers every connection's multishot recv draws from
	recvClass int              // the arena class lent to recvRing
	// backlogBytesMax bounds a throttled connection's receive backlog: the bytes
	// the receive ring holds (Conn.stash).
	backlogBytesMax int

	counters  counters
	logLimits logLimiter
	// inspect is a pending Runtime.Inspect, served at the next turn.
	inspect atomic.Pointer[inspection]

	inbox []*Queue[Message] // inbox[from]: messages shard from posted to this shard
	// controlInbox[from]: the messages shard from posted with PostControl.
	controlInbox []*Queue[Message]
	wakeNeeded   []bool // wakeNeeded[to]: pushed to shard to since the last wake

	eventFd    int
	eventBuf   *[8]byte // the eventfd read's target; heap memory the kernel writes
	eventArmed bool

	// The disk ring carries the shard's file I/O (see Disk); its completions signal
	// diskEventFd, whose read is kept armed on the connection ring.
	diskRing       *ring.Ring
	disk           *Disk
	diskEventFd    int
	diskEventBuf   *[8]byte
	diskEventArmed bool

	// peerInbox carries the peer addresses of connections shard 0 hands over, by
	// handoff cookie; peers holds the ones received, until their connection arrives.
	peerInbox  *Queue[peerNote]
	peers      [peerTableSize]peerNote
	nextCookie uint32 // shard 0: the cookie of the next handoff

	ticker  Ticker  // the handler, if it implements Ticker
	stopper Stopper // the handler, if it implements Stopper
	busy    bool    // the ticker asked for another turn without blocking

	clients clientTable // the client connections (clients.go)

	timers timerHeap
	wakes  wakeSet // the WakeAt deadlines armed, not fired yet
	epoch  time.Time
	nowNs  int64
	// lastReaped is how many completions the last wait brought, the eventfd's
	// not counted: none means a timer (or a goroutine's Wake) ended it, and the
	// shard sleeps again without busy polling.
	lastReaped int
	spin       spinGuard

	cqes [completionBatchMax]ring.CQE

	listener listener       // shard 0 only
	sender   *fdpass.Sender // shard 0 only: hands accepted connections to the others
	// connSlotCount is the size of the registered-file table's connection range, into
	// which other shards' handoffs land (msg_ring send-fd); 0 in queue mode.
	connSlotCount uint32

	// replica is the shard's part of the replica plane; nil without Config.Replica.
	replica         *replicaShard
	replicaCounters replicaCounters

	stopping       bool
	stopDeadlineNs int64
	err            error
}

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
func (s *Shard) NowNs() int64 { return s.nowNs }

// Disk returns the shard's disk I/O (nil unless Config.DiskIO): the storages it opens carry partition logs' reads,
// writes and fdatasyncs through the shard's disk ring. Use it from the shard's
// goroutine only; the handler reaps it from Ticker.Tick.
func (s *Shard) Disk() *Disk { return s.disk }

// WakeAt makes the loop take a turn (and so call Ticker.Tick) no later than deadlineNs
// on the shard's clock (NowNs), even when nothing else happens. A handler's periodic
// work (heartbeat checks, retention) asks for its next turn this way. Asking again
// for a deadline already asked for costs nothing: a handler may ask on every turn.
func (s *Shard) WakeAt(deadlineNs int64) {
	if s.wakes.has(deadlineNs) {
		return
	}
	s.wakes.add(deadlineNs)
	s.timers.Push(timer{deadlineNs: deadlineNs, kind: timerWake})
}

// Post queues m for shard target, which receives it in Handler.ServeMessage. It reports
// false when the queue to that shard is full: the caller decides (answer with a
// retryable status, or drop). Posting to the shard itself is allowed; the message is
// served on the next loop iteration.
func (s *Shard) Post(target int, m Message) bool {
	return s.post(s.rt.shards[target].inbox[s.index], target, m)
}

// PostControl is Post on a lane of its own between each pair of shards, served before
// every other message of the target's turn: for the few messages that must not wait
// behind a flood of ordinary ones (the metadata group's replica frames, handed from
// the shard that read them to the one that runs the group, behind thousands of
// partition groups' frames). The lane holds controlInboxCapacity messages; false
// when it is full. No order holds between a shard's messages on the two lanes.
func (s *Shard) PostControl(target int, m Message) bool {
	return s.post(s.rt.shards[target].controlInbox[s.index], target, m)
}

func (s *Shard) post(q *Queue[Message], target int, m Message) bool {
	m.From = s.index
	if !q.Push(m) {
		return false
	}
	if target != s.index {
		s.wakeNeeded[target] = true
	}
	return true
}

// controlInboxCapacity is each PostControl lane's: a few turns of the metadata
// group's frames (one Commit a peer every commit broadcast interval, and a
// pipeline's Prepares and PrepareOks).
const controlInboxCapacity = 256

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

func (s *Shard) clock() int64 {
	if s.cfg.Clock != nil {
		return s.cfg.Clock()
	}
	return int64(time.Since(s.epoch))
}

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
	if s.recvClass, err = recvClass(s.cfg.Arena); err != nil {
		return err
	}
	mem, err := a.LendClass(s.recvClass)
	if err != nil {
		return fmt.Errorf("shard %d: lend the receive class: %w", s.index, err)
	}
	s.backlogBytesMax = s.cfg.Arena.Classes[s.recvClass].BufferCount * recvBufferBytes
	s.recvRing, err = ring.NewBufferRing(r, ring.BufferRingOptions{
		GroupID:    recvBufferGroup,
		Entries:    uint32(s.cfg.Arena.Classes[s.recvClass].BufferCount),
		BufferSize: recvBufferBytes,
		Memory:     mem,
	})
	if err != nil {
		a.ReturnClass(s.recvClass)
		return fmt.Errorf("shard %d: %w", s.index, err)
	}
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return fmt.Errorf("shard %d: eventfd: %w", s.index, err)
	}
	s.eventFd = efd
	s.eventBuf = new([8]byte)
	if s.cfg.DiskIO {
		if err := s.setUpDisk(); err != nil {
			return fmt.Errorf("shard %d: %w", s.index, err)
		}
	}
	s.epoch = s.rt.epoch
	s.nowNs = s.clock()
	s.handler = s.cfg.NewHandler(s)
	s.ticker, _ = s.handler.(Ticker)
	s.stopper, _ = s.handler.(Stopper)
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

// diskRingEntries sizes the disk ring: a shard's logs rarely have more than a few
// requests each in flight (an append, its sync, a read per poll), and requests beyond
// this wait in submission order rather than fail.
const diskRingEntries = 256

// setUpDisk creates the disk ring. It is SINGLE_ISSUER but not DEFER_TASKRUN: its
// completions must be posted (and signal the eventfd) while the thread sleeps in the
// connection ring, not only when it enters the disk ring.
func (s *Shard) setUpDisk() error {
	r, err := ring.New(ring.Options{SQEntries: diskRingEntries, CQEntries: 2 * diskRingEntries, Flags: ring.SetupSingleIssuer})
	if err != nil {
		return fmt.Errorf("disk ring setup: %w", err)
	}
	for _, op := range []ring.Opcode{ring.OpRead, ring.OpWrite, ring.OpFsync} {
		if !r.Supports(op) {
			r.Close()
			return fmt.Errorf("the kernel's io_uring lacks opcode %d for file I/O", op)
		}
	}
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		r.Close()
		return fmt.Errorf("disk eventfd: %w", err)
	}
	if err := r.RegisterEventFd(efd); err != nil {
		r.Close()
		unix.Close(efd)
		return err
	}
	s.diskRing, s.diskEventFd, s.diskEventBuf = r, efd, new([8]byte)
	s.disk = NewDisk(r, diskRingEntries)
	s.disk.AsyncWriteBytesMin = s.cfg.DiskAsyncWriteBytesMin
	return nil
}

// registerFileTable gives the ring a sparse registered-file table: slots
// [0, connSlotCount) receive connections handed over by shard 0 (the kernel picks a free
// one), and on shard 0 the next handoffsInFlightMax slots park files being handed over.
// The kernel caps a table at RLIMIT_NOFILE entries.
func (s *Shard) registerFileTable() error {
	limit, err := linux.OpenFilesLimit()
	if err != nil {
		return err
	}
	want := uint64(s.cfg.ConnectionsPerShardMax) + handoffsInFlightMax
	size := min(want, limit.Soft, 1<<20)
	if size <= 2*handoffsInFlightMax {
		return fmt.Errorf("RLIMIT_NOFILE %d too low for a registered-file table (run with FdPass: fdpass.ModeQueue)", limit.Soft)
	}
	if err := s.ring.RegisterFilesSparse(uint32(size)); err != nil {
		return err
	}
	s.connSlotCount = uint32(size) - handoffsInFlightMax
	return s.ring.SetFileAllocRange(0, s.connSlotCount)
}

// newSender makes shard 0's connection sender, once every shard's ring exists.
func (s *Shard) newSender() error {
	cfg := fdpass.Config{Mode: s.cfg.FdPass}
	switch s.cfg.FdPass {
	case fdpass.ModeMsgRing:
		cfg.Ring = s.ring
		cfg.InFlightMax = handoffsInFlightMax
		cfg.StagingSlotFirst = s.connSlotCount
		for _, other := range s.rt.shards {
			cfg.TargetRingFds = append(cfg.TargetRingFds, other.ring.Fd())
		}
	case fdpass.ModeQueue:
		cfg.ShardCount = len(s.rt.shards)
		cfg.Enqueue = func(target int, h fdpass.Handoff) bool {
			return s.Post(target, Message{internal: internalAdoptConn, fd: h.Fd, Value: uint64(h.Cookie)})
		}
	}
	sender, err := fdpass.NewSender(cfg)
	if err != nil {
		return err
	}
	s.sender = sender
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
	for {
		s.counters.turns++
		s.nowNs = s.clock()
		if !s.eventArmed {
			s.armEventFd()
		}
		if s.disk != nil && !s.diskEventArmed {
			s.armDiskEventFd()
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
		s.busy = s.ticker != nil && s.ticker.Tick(s)
		s.flushSends()
		if s.replica != nil {
			s.flushReplicaSends()
		}
		s.sendWakes()
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
	for n < len(s.cqes) {
		cqe, ok := s.ring.PeekCQE()
		if !ok {
			break
		}
		s.cqes[n] = *cqe
		s.ring.CQESeen()
		n++
	}
	s.counters.cqesReaped += uint64(n)
	s.lastReaped = n
	for i := range n {
		if kind, _ := splitUserData(s.cqes[i].UserData); kind == kindEventFd && !fdpass.Owns(s.cqes[i].UserData) {
			// A goroutine's knock (Runtime.Inspect, Wake) is no socket's traffic.
			s.lastReaped--
		}
	}
	s.nowNs = s.clock()
	for i := range n {
		s.complete(&s.cqes[i])
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
	case kindCancel, kindWakeSent:
		// Cancellation outcomes arrive on the cancelled operation itself; a failed
		// wake-up means the target's ring is gone, which only happens at shutdown.
	case kindWake:
		// The inboxes are drained on every iteration.
	case kindEventFd:
		s.eventArmed = false
	case kindDiskEvent:
		// The handler's Tick, next turn, reaps the disk ring.
		s.diskEventArmed = false
	case kindReplicaAccept, kindReplicaConnect, kindReplicaRecv, kindReplicaSend, kindReplicaCancel:
		s.completeReplica(kind, rest, cqe)
	default:
		panic(fmt.Sprintf("shard %d: completion with unknown kind %d", s.index, kind))
	}
}

func (s *Shard) armEventFd() {
	sqe := s.getSQE()
	sqe.PrepareRead(s.eventFd, s.eventBuf[:], 0)
	sqe.UserData = userData(kindEventFd, 0)
	s.eventArmed = true
}

func (s *Shard) armDiskEventFd() {
	sqe := s.getSQE()
	sqe.PrepareRead(s.diskEventFd, s.diskEventBuf[:], 0)
	sqe.UserData = userData(kindDiskEvent, 0)
	s.diskEventArmed = true
}

// stop tells the handler the loop ends, on the shard's thread: the last moment it can
// use the rings (its disk I/O must finish here, the disk ring belongs to this thread).
func (s *Shard) stop() {
	if s.stopper != nil {
		s.stopper.Stop(s)
	}
}

// Wake makes the shard take a loop turn soon (its Ticker runs), from any goroutine and
// at any time: it is how work done off the shards (a password hashed on a goroutine of
// its own) gets back to one. The eventfd is the one door a goroutine without a ring
// can knock on (MSG_RING needs a ring to send from). Once the runtime has closed the
// shard it does nothing.
func (s *Shard) Wake() {
	s.rt.wakeMu.RLock()
	defer s.rt.wakeMu.RUnlock()
	if s.rt.eventFdsClosed || s.eventFd < 0 {
		return
	}
	var one = [8]byte{1}
	unix.Write(s.eventFd, one[:])
}

// drainInboxes serves every message posted to this shard, the control lanes' first
// (PostControl), at most one queue's capacity per inbox per iteration so that a busy
// sender cannot starve the connections.
func (s *Shard) drainInboxes() {
	for _, q := range s.controlInbox {
		s.drainInbox(q)
	}
	for _, q := range s.inbox {
		s.drainInbox(q)
	}
}

func (s *Shard) drainInbox(q *Queue[Message]) {
	for range q.Cap() {
		m, ok := q.Pop()
		if !ok {
			return
		}
		if m.From != s.index {
			s.counters.messagesFromOthers++
		}
		switch m.internal {
		case internalAdoptConn:
			s.rt.handoffsArrived[s.index].Add(1)
			s.adoptHandoff(m.fd, false, uint32(m.Value))
		case internalReplicaRelease:
			s.serveReplicaMessage(m)
		default:
			s.handler.ServeMessage(s, m)
		}
	}
}

// sendWakes rings every shard this one posted to since the last wake. One MSG_RING per
// target per iteration however many messages went: the target drains its whole inbox.
func (s *Shard) sendWakes() {
	for target, needed := range s.wakeNeeded {
		if !needed {
			continue
		}
		s.wakeNeeded[target] = false
		sqe := s.getSQE()
		sqe.PrepareMsgRing(s.rt.shards[target].ring.Fd(), 0, userData(kindWake, ConnID(s.index)), 0)
		sqe.UserData = userData(kindWakeSent, 0)
		sqe.Flags |= ring.SQECQESkipSuccess
	}
}

func (s *Shard) fireTimers() {
	for {
		t, ok := s.timers.Expired(s.nowNs)
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
			s.wakes.remove(t.deadlineNs)
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
	s.timers.Push(timer{deadlineNs: s.nowNs + int64(s.cfg.ShutdownTimeout), kind: timerShutdown})
	s.listener.stop(s)
	s.stopReplica()
	for _, c := range s.clients.conns.items {
		if c != nil && c.state == linkOpen {
			c.closeAfterFlush("shutdown")
		}
	}
}

func (s *Shard) stopped() bool {
	return s.clients.conns.live == 0 && s.listener.closed() && (s.sender == nil || s.sender.InFlightCount() == 0) && s.replicaStopped()
}

// completeHandoff handles the completions of connection handoffs: on a target, a
// connection arriving in its registered-file table; on shard 0, the end of a handoff.
func (s *Shard) completeHandoff(cqe *ring.CQE) {
	if h, ok := fdpass.Incoming(cqe); ok {
		s.rt.handoffsArrived[s.index].Add(1)
		s.adoptHandoff(h.Fd, true, h.Cookie)
		return
	}
	if s.sender == nil {
		panic(fmt.Sprintf("shard %d: handoff completion without a sender", s.index))
	}
	if out, done := s.sender.Complete(cqe); done && out.Err != nil {
		s.log.Warn("connection lost in handoff", "to_shard", out.Shard, "err", out.Err)
		s.listener.handedOff[out.Shard]-- // it will not arrive
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
	sqe := s.getSQE()
	sqe.PrepareCloseDirect(uint32(fd))
	sqe.UserData = userData(kindCancel, 0)
}

// peerTableSize bounds the peer addresses a shard holds for connections on their way
// to it: more handoffs than this in flight at once only cost the oldest their address.
const peerTableSize = 1024

// peerNote is a handed-over connection's peer address, keyed by its handoff cookie,
// and for a replica connection over TLS the session's exporter value (the handshake
// binds its MACs to it).
type peerNote struct {
	cookie   uint32
	addr     netip.AddrPort
	exporter *[32]byte
}

// peerOf returns the peer address shard 0 noted for the handoff cookie, or the zero
// AddrPort when it was lost (the note queue was full). Shard 0 pushes the note before
// it submits the handoff, so the note is in the queue by the time the connection is.
func (s *Shard) peerOf(cookie uint32) netip.AddrPort {
	return s.noteOf(cookie).addr
}

// noteOf returns the whole note shard 0 left for the handoff cookie, or the zero note.
func (s *Shard) noteOf(cookie uint32) peerNote {
	for {
		n, ok := s.peerInbox.Pop()
		if !ok {
			break
		}
		s.peers[n.cookie%peerTableSize] = n
	}
	if n := s.peers[cookie%peerTableSize]; n.cookie == cookie && cookie != 0 {
		s.peers[cookie%peerTableSize] = peerNote{} // taken: do not keep its exporter alive
		return n
	}
	return peerNote{}
}

// peerAddress asks the kernel for a socket's peer (getpeername): once per accepted
// connection, on shard 0, which still holds a plain descriptor.
func peerAddress(fd int) netip.AddrPort {
	sa, err := unix.Getpeername(fd)
	if err != nil {
		return netip.AddrPort{}
	}
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return netip.AddrPortFrom(netip.AddrFrom4(a.Addr), uint16(a.Port))
	case *unix.SockaddrInet6:
		return netip.AddrPortFrom(netip.AddrFrom16(a.Addr).Unmap(), uint16(a.Port))
	}
	return netip.AddrPort{}
}
