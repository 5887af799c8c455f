package shard

import (
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/iggy-shard/iggy-shard/ring"
)

// mailbox is what the other shards, and goroutines off the shards, leave for one
// shard: a message queue from each shard (single producer, single consumer), a
// control lane from each beside it, a pending inspection, and the eventfd those
// goroutines knock on. A sender rings each shard it posted to once per turn
// (sendWakes); a goroutine knocks on the eventfd (Wake).
type mailbox struct {
	inbox []*Queue[Message] // inbox[from]: messages shard from posted to this shard
	// control[from]: the messages shard from posted with PostControl.
	control    []*Queue[Message]
	wakeNeeded []bool // wakeNeeded[to]: pushed to shard to since the last wake
	// inspect is a pending Runtime.Inspect, served at the next turn.
	inspect atomic.Pointer[inspection]
	// event is the eventfd through which goroutines off the shards knock (Wake).
	event eventReader
}

// init makes the queues of a shard of a runtime of shardCount shards, each ordinary
// queue from a shard holding inboxCapacity messages.
func (m *mailbox) init(shardCount, inboxCapacity int) {
	m.inbox, m.control = make([]*Queue[Message], shardCount), make([]*Queue[Message], shardCount)
	m.wakeNeeded = make([]bool, shardCount)
	m.event = eventReader{fd: -1, kind: kindEventFd} // until the shard sets up
	for from := range m.inbox {
		m.inbox[from] = NewQueue[Message](inboxCapacity)
		m.control[from] = NewQueue[Message](controlInboxCapacity)
	}
}

// eventReader keeps a read of an eventfd armed on the shard's ring: its completion
// is the knock, and the read is armed again at the next turn.
type eventReader struct {
	fd    int
	buf   *[8]byte // the read's target; heap memory the kernel writes
	armed bool
	kind  completionKind
}

func (e *eventReader) arm(s *Shard) {
	sqe := s.getSQE()
	sqe.PrepareRead(e.fd, e.buf[:], 0)
	sqe.UserData = userData(e.kind, 0)
	e.armed = true
}

// Post queues m for shard target, which receives it in Handler.ServeMessage. It reports
// false when the queue to that shard is full: the caller decides (answer with a
// retryable status, or drop). Posting to the shard itself is allowed; the message is
// served on the next loop iteration.
func (s *Shard) Post(target int, m Message) bool {
	return s.post(s.rt.shards[target].mail.inbox[s.index], target, m)
}

// PostControl is Post on a lane of its own between each pair of shards, served before
// every other message of the target's turn: for the few messages that must not wait
// behind a flood of ordinary ones (the metadata group's replica frames, handed from
// the shard that read them to the one that runs the group, behind thousands of
// partition groups' frames). The lane holds controlInboxCapacity messages; false
// when it is full. No order holds between a shard's messages on the two lanes.
func (s *Shard) PostControl(target int, m Message) bool {
	return s.post(s.rt.shards[target].mail.control[s.index], target, m)
}

func (s *Shard) post(q *Queue[Message], target int, m Message) bool {
	m.From = s.index
	if !q.Push(m) {
		return false
	}
	if target != s.index {
		s.mail.wakeNeeded[target] = true
	}
	return true
}

// controlInboxCapacity is each PostControl lane's: a few turns of the metadata
// group's frames (one Commit a peer every commit broadcast interval, and a
// pipeline's Prepares and PrepareOks).
const controlInboxCapacity = 256

// Wake makes the shard take a loop turn soon (its Ticker runs), from any goroutine and
// at any time: it is how work done off the shards (a password hashed on a goroutine of
// its own) gets back to one. The eventfd is the one door a goroutine without a ring
// can knock on (MSG_RING needs a ring to send from). Once the runtime has closed the
// shard it does nothing.
func (s *Shard) Wake() {
	s.rt.wakeMu.RLock()
	defer s.rt.wakeMu.RUnlock()
	if s.rt.eventFdsClosed || s.mail.event.fd < 0 {
		return
	}
	var one = [8]byte{1}
	unix.Write(s.mail.event.fd, one[:])
}

// drainInboxes serves every message posted to this shard, the control lanes' first
// (PostControl), at most one queue's capacity per inbox per iteration so that a busy
// sender cannot starve the connections.
func (s *Shard) drainInboxes() {
	for _, q := range s.mail.control {
		s.drainInbox(q)
	}
	for _, q := range s.mail.inbox {
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
	for target, needed := range s.mail.wakeNeeded {
		if !needed {
			continue
		}
		s.mail.wakeNeeded[target] = false
		sqe := s.getSQE()
		sqe.PrepareMsgRing(s.rt.shards[target].ring.Fd(), 0, userData(kindWake, ConnID(s.index)), 0)
		sqe.UserData = userData(kindWakeSent, 0)
		sqe.Flags |= ring.SQECQESkipSuccess
	}
}
