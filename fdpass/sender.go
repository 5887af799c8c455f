package fdpass

import (
	"errors"
	"fmt"

	"github.com/iggy-shard/iggy-shard/ring"
	"golang.org/x/sys/unix"
)

// Config configures a Sender.
type Config struct {
	Mode Mode

	// Ring is the sending shard's ring (ModeMsgRing). Its registered-file table must
	// cover the staging slots, which must lie outside its FileIndexAlloc range
	// (ring.SetFileAllocRange) so that an accept never lands in one.
	Ring *ring.Ring
	// TargetRingFds are the rings of the shards, by shard index (ModeMsgRing). A ring
	// must stay open while a send to it may be in flight: a closed ring's descriptor
	// number can be reused by another file.
	TargetRingFds []int
	// InFlightMax bounds ModeMsgRing handoffs whose completions have not arrived; at most
	// 1<<20.
	InFlightMax int
	// StagingSlotFirst: slots [StagingSlotFirst, StagingSlotFirst+InFlightMax) of Ring's
	// registered-file table belong to the Sender, which parks a plain fd there for the
	// duration of its send (msg_ring sends only registered files).
	StagingSlotFirst uint32

	// ShardCount and Enqueue are for ModeQueue.
	ShardCount int
	Enqueue    EnqueueFunc
}

// inFlight is one ModeMsgRing handoff between its submission and its two CQEs.
type inFlight struct {
	generation uint32 // midBits wide, never 0 for a live entry
	live       bool
	sendDone   bool
	closeDone  bool
	sendRes    int32
	plainFd    int // the sender's plain copy, closed at the end; -1 for SendSlot
	shard      int
	cookie     uint32
}

// Sender hands connections from its shard to others. It belongs to its ring's thread
// and allocates nothing per handoff (a failure allocates its error).
type Sender struct {
	cfg      Config
	entries  []inFlight
	free     []uint32 // stack of free entry indexes
	scratch  [1]int32 // UpdateFiles argument, kept here so a handoff does not allocate
	closed   bool
	shardMax int
}

// NewSender checks cfg and returns a Sender.
func NewSender(cfg Config) (*Sender, error) {
	s := &Sender{cfg: cfg}
	switch cfg.Mode {
	case ModeMsgRing:
		if cfg.Ring == nil || len(cfg.TargetRingFds) == 0 {
			return nil, errors.New("fdpass: ModeMsgRing needs Ring and TargetRingFds")
		}
		if cfg.InFlightMax <= 0 || cfg.InFlightMax > 1<<20 {
			return nil, fmt.Errorf("fdpass: InFlightMax %d not in [1, %d]", cfg.InFlightMax, 1<<20)
		}
		if uint64(cfg.StagingSlotFirst)+uint64(cfg.InFlightMax) > 1<<31 {
			return nil, fmt.Errorf("fdpass: staging slots [%d, +%d) out of range", cfg.StagingSlotFirst, cfg.InFlightMax)
		}
		s.shardMax = len(cfg.TargetRingFds)
		s.entries = make([]inFlight, cfg.InFlightMax)
		s.free = make([]uint32, cfg.InFlightMax)
		for i := range s.free {
			s.free[i] = uint32(cfg.InFlightMax - 1 - i)
		}
	case ModeQueue:
		if cfg.Enqueue == nil || cfg.ShardCount <= 0 {
			return nil, errors.New("fdpass: ModeQueue needs Enqueue and ShardCount")
		}
		s.shardMax = cfg.ShardCount
	default:
		return nil, fmt.Errorf("fdpass: unknown mode %d", int(cfg.Mode))
	}
	return s, nil
}

// Mode is the Sender's mode.
func (s *Sender) Mode() Mode { return s.cfg.Mode }

// InFlightCount is the number of ModeMsgRing handoffs awaiting completions.
func (s *Sender) InFlightCount() int { return len(s.entries) - len(s.free) }

func (s *Sender) checkShard(shard int) {
	if shard < 0 || shard >= s.shardMax {
		panic(fmt.Sprintf("fdpass: shard %d out of range [0, %d)", shard, s.shardMax))
	}
	if s.closed {
		panic("fdpass: Sender used after Close")
	}
	if s.cfg.Mode == ModeMsgRing && s.cfg.TargetRingFds[shard] == s.cfg.Ring.Fd() {
		// The kernel refuses a send-fd to the sending ring itself (EINVAL); a shard
		// keeps its own connections.
		panic(fmt.Sprintf("fdpass: handoff to shard %d, whose ring is the sender's own", shard))
	}
}

// SendFd hands plain descriptor fd to shard, to be installed at targetSlot of its
// ring's table (ring.FileIndexAlloc: any free slot; ModeQueue ignores it). An explicit
// targetSlot must be one the target reserved and keeps empty: the kernel replaces, and
// so closes, a file already there. The Sender owns fd from this call on, whatever the
// result.
//
// ModeQueue: on nil the duplicate is in the target's queue and fd is closed; on error
// everything is closed. ModeMsgRing: on nil the send is queued on the sender's ring
// (submitted with its next Submit) and fd stays open until Complete reports the
// Outcome; on error fd is already closed.
func (s *Sender) SendFd(fd, shard int, targetSlot uint32, cookie uint32) error {
	s.checkShard(shard)
	if fd < 0 {
		panic(fmt.Sprintf("fdpass: SendFd of fd %d", fd))
	}
	if s.cfg.Mode == ModeQueue {
		return s.sendQueue(fd, shard, cookie)
	}
	if err := s.checkTargetSlot(targetSlot); err != nil {
		closeFd(fd)
		return &SendError{Shard: shard, Cookie: cookie, Err: err}
	}
	index, err := s.reserve()
	if err != nil {
		closeFd(fd)
		return &SendError{Shard: shard, Cookie: cookie, Err: err}
	}
	staging := s.cfg.StagingSlotFirst + index
	s.scratch[0] = int32(fd)
	if _, err := s.cfg.Ring.UpdateFiles(staging, s.scratch[:]); err != nil {
		s.release(index)
		closeFd(fd)
		var errno unix.Errno
		errors.As(err, &errno)
		return &SendError{Shard: shard, Cookie: cookie, Err: fmt.Errorf("park fd %d in sender slot %d: %w", fd, staging, err), Errno: errno}
	}
	s.submit(index, staging, fd, shard, targetSlot, cookie)
	return nil
}

// SendSlot hands the file in slot of the sender ring's registered-file table (e.g. from
// a multishot accept with direct descriptors) to shard, at targetSlot. The Sender owns
// the slot from this call on and empties it; Complete reports the Outcome. ModeMsgRing
// only: a slot cannot travel over the queue.
func (s *Sender) SendSlot(slot uint32, shard int, targetSlot uint32, cookie uint32) error {
	s.checkShard(shard)
	if s.cfg.Mode != ModeMsgRing {
		panic("fdpass: SendSlot needs ModeMsgRing: accept plain descriptors in ModeQueue")
	}
	err := s.checkTargetSlot(targetSlot)
	index := uint32(0)
	if err == nil {
		index, err = s.reserve()
	}
	if err != nil {
		s.scratch[0] = -1
		if _, cerr := s.cfg.Ring.UpdateFiles(slot, s.scratch[:]); cerr != nil {
			panic(fmt.Sprintf("fdpass: emptying sender slot %d: %v", slot, cerr))
		}
		return &SendError{Shard: shard, Cookie: cookie, Err: err}
	}
	s.submit(index, slot, -1, shard, targetSlot, cookie)
	return nil
}

func (s *Sender) checkTargetSlot(targetSlot uint32) error {
	if targetSlot != ring.FileIndexAlloc && targetSlot > slotMax {
		return ErrTargetSlotInvalid
	}
	return nil
}

// reserve takes an in-flight entry and makes sure the ring has room for its two SQEs,
// so that the link between them can never be cut by a flush in between.
func (s *Sender) reserve() (uint32, error) {
	if len(s.free) == 0 {
		return 0, ErrBusy
	}
	r := s.cfg.Ring
	if r.SQSpaceLeft() < 2 {
		if _, err := r.Submit(); err != nil {
			return 0, fmt.Errorf("%w: submit to make room: %w", ErrBusy, err)
		}
		if r.SQSpaceLeft() < 2 {
			return 0, ErrBusy
		}
	}
	index := s.free[len(s.free)-1]
	s.free = s.free[:len(s.free)-1]
	e := &s.entries[index]
	e.generation = e.generation%(1<<midBits-1) + 1
	e.live = true
	return index, nil
}

func (s *Sender) release(index uint32) {
	e := &s.entries[index]
	*e = inFlight{generation: e.generation}
	s.free = append(s.free, index)
}

// submit queues msg_ring(send-fd from sourceSlot) hard-linked to close(sourceSlot): the
// close runs after the send whether it succeeded or not, so the sender's slot is
// emptied on every path, by the kernel, in order.
func (s *Sender) submit(index, sourceSlot uint32, plainFd, shard int, targetSlot uint32, cookie uint32) {
	e := &s.entries[index]
	e.plainFd, e.shard, e.cookie = plainFd, shard, cookie
	r := s.cfg.Ring
	explicit := uint32(0)
	if targetSlot != ring.FileIndexAlloc {
		explicit = targetSlot + 1
	}
	send, err := r.GetSQE()
	if err != nil {
		panic(fmt.Sprintf("fdpass: no SQE after reserving room: %v", err))
	}
	send.PrepareMsgRingFd(s.cfg.TargetRingFds[shard], sourceSlot, targetSlot, packUserData(kindIncoming, explicit, cookie), 0)
	send.Flags |= ring.SQEIOHardlink
	send.UserData = packUserData(kindSend, e.generation, index)
	closeSlot, err := r.GetSQE()
	if err != nil {
		panic(fmt.Sprintf("fdpass: no SQE after reserving room: %v", err))
	}
	closeSlot.PrepareCloseDirect(sourceSlot)
	closeSlot.UserData = packUserData(kindClose, e.generation, index)
}

// Complete consumes a CQE of the sender's ring for which Owns is true and Incoming is
// false. It returns the handoff's Outcome, and true, once both of its CQEs (the send
// and the close of the sender's slot) have arrived; at that point the sender's plain
// fd is closed too.
func (s *Sender) Complete(cqe *ring.CQE) (Outcome, bool) {
	k, generation, index, ok := unpackUserData(cqe.UserData)
	if !ok || (k != kindSend && k != kindClose) {
		panic(fmt.Sprintf("fdpass: Complete of a CQE that is not a sender's (user_data %#x)", cqe.UserData))
	}
	if s.closed {
		panic("fdpass: Complete after Close")
	}
	if int(index) >= len(s.entries) || !s.entries[index].live || s.entries[index].generation != generation {
		panic(fmt.Sprintf("fdpass: CQE for handoff %d generation %d, which is not in flight", index, generation))
	}
	e := &s.entries[index]
	if k == kindSend {
		if e.sendDone {
			panic(fmt.Sprintf("fdpass: second send CQE for handoff %d", index))
		}
		e.sendDone, e.sendRes = true, cqe.Res
	} else {
		if e.closeDone {
			panic(fmt.Sprintf("fdpass: second close CQE for handoff %d", index))
		}
		if cqe.Res < 0 {
			// The slot was ours and full when the chain was queued; nothing else empties it.
			panic(fmt.Sprintf("fdpass: closing sender slot of handoff %d failed: %v", index, cqe.Err()))
		}
		e.closeDone = true
	}
	if !e.sendDone || !e.closeDone {
		return Outcome{}, false
	}
	out := Outcome{Shard: e.shard, Cookie: e.cookie}
	if e.sendRes < 0 {
		errno := unix.Errno(-e.sendRes)
		out.Err = &SendError{Shard: e.shard, Cookie: e.cookie, Err: sendErr(errno), Errno: errno}
	}
	if e.plainFd >= 0 {
		closeFd(e.plainFd)
	}
	s.release(index)
	return out, true
}

// Close ends the Sender after its ring has been closed or has delivered every
// completion: it closes the plain fds of handoffs still in flight (safe on any path:
// an installed file is held by the target's table, a failed one is closed by the
// kernel with the sender's table) and reports how many there were.
func (s *Sender) Close() int {
	if s.closed {
		return 0
	}
	s.closed = true
	n := 0
	for i := range s.entries {
		e := &s.entries[i]
		if e.live {
			n++
			if e.plainFd >= 0 {
				closeFd(e.plainFd)
			}
			*e = inFlight{}
		}
	}
	return n
}

func (s *Sender) sendQueue(fd, shard int, cookie uint32) error {
	dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	closeFd(fd)
	if err != nil {
		var errno unix.Errno
		errors.As(err, &errno)
		return &SendError{Shard: shard, Cookie: cookie, Err: fmt.Errorf("dup fd %d: %w", fd, err), Errno: errno}
	}
	if !s.cfg.Enqueue(shard, Handoff{Fd: dup, Cookie: cookie}) {
		closeFd(dup)
		return &SendError{Shard: shard, Cookie: cookie, Err: ErrQueueRefused}
	}
	return nil
}

// closeFd closes a descriptor the Sender owns. Linux releases the descriptor even when
// close reports an error (EINTR, or EIO from a lazy file system), and retrying could
// close a number already reused, so an error is dropped: there is nothing to redo.
func closeFd(fd int) { _ = unix.Close(fd) }
