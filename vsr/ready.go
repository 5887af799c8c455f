package vsr

import (
	"unsafe"

	"github.com/iggy-shard/iggy-shard/wire"
)

// The output: what the inputs recorded (journal writes, the durable state,
// messages, commits), handed out as one Ready and acknowledged by Advance.

// output is what the next Ready carries beside Core.rd: the durable state and
// view headers to persist, the slots its writes make durable, and the buffers of
// its message bodies.
type output struct {
	state              DurableState
	stateChanged       bool
	viewHeaders        []wire.PrepareHeader
	viewHeadersChanged bool
	dirtySlots         []uint64
	bodyBuffers        [][]byte
	bodyBuffersAt      int
}

// DurableState is what must be durable before any message of the same Ready is sent:
// the view (a replica never goes back to an older view), the log view (the view whose
// log the journal holds) and a commit point at least that log's start.
type DurableState struct {
	View      uint32
	LogView   uint32
	CommitMax uint64
}

// Write is one prepare to journal. Body aliases memory owned by the caller (a
// proposal or a received frame) or by the core, valid until Advance.
type Write struct {
	Header wire.PrepareHeader
	Body   []byte
}

// Message is one replica-plane frame to send: Header is complete and sealed (a
// Prepare or RepairPrepare carries its identity instead of a seal), Body is valid
// until Advance.
type Message struct {
	To     uint8
	Header wire.GenericHeader
	Body   []byte
}

// Ready is the work a Step, Tick or Propose recorded, handed out as one unit, as in
// etcd raft's Ready. It is done in this order, then Advance is called (Driver does
// it; the package doc gives the reason for each step):
//
//  1. Discards and Truncate: remove those journal entries (they are not part of the
//     log the replica follows now).
//  2. State (with ViewHeaders) and Writes: make them durable (fsync).
//  3. Messages: send them; only now, because each may promise what 2 made durable.
//     The exception, SendableEarly: a Prepare that promises nothing may leave
//     before 2, so that the next replica journals it while this one does.
//  4. Committed: apply these ops in order (their bodies are in the journal); then
//     Install, a transferred state, when there is one.
//  5. Forwards: answer the clients whose logins or logouts were forwarded.
//
// After Advance, answer each of StateRequests with OfferState. The slices belong to
// the core and are reused by the next Ready: Ready and Advance allocate nothing in
// the normal case.
type Ready struct {
	Discards []uint64
	// TruncateAbove, when Truncate is set, removes every entry above that op.
	Truncate      bool
	TruncateAbove uint64
	State         *DurableState
	// ViewHeaders, when non-nil, replace the persisted headers of the log view's
	// suffix (head first), atomically with State: Recover gets them back.
	ViewHeaders []wire.PrepareHeader
	Writes      []Write
	Messages    []Message
	Committed   []wire.PrepareHeader
	// Forwards are the answers to logins and logouts this replica forwarded.
	Forwards []ForwardOutcome
	// StateRequests ask this replica for a state to transfer: OfferState.
	StateRequests []StateRequest
	// Install, when non-nil, is a transferred state: install it (and make it
	// durable, as a snapshot) before Advance.
	Install *StateInstall
}

// SendableEarly reports whether Messages[i] may be sent before the Ready's durable
// work (step 2): a Prepare, in a Ready that changes no durable state (no State,
// ViewHeaders, Truncate or Discards), promises nothing. A primary counts its own
// append only once it is durable (Advance), and a backup acknowledges a prepare
// with a PrepareOk, which waits for its own write; the Prepare only lets the next
// replica of the chain journal the op at the same time, as TigerBeetle's replicas
// replicate a prepare before they write it (src/vsr/replica.zig, on_prepare). A
// replica changing view waits: its Prepare is of a view not yet durable here.
func (rd *Ready) SendableEarly(i int) bool {
	return rd.Messages[i].Header.Command == wire.CommandPrepare &&
		rd.State == nil && rd.ViewHeaders == nil && !rd.Truncate && len(rd.Discards) == 0
}

// checkNoReadyOut asserts the caller's side of Ready/Advance: no input between the
// two.
func (c *Core) checkNoReadyOut(input string) {
	if c.readyOut {
		panic("vsr: " + input + " between Ready and Advance")
	}
}

// HasReady reports whether Ready would hand out anything.
func (c *Core) HasReady() bool {
	c.collectCommitted()
	return c.out.stateChanged || c.rd.Truncate || len(c.rd.Discards) > 0 || len(c.rd.Writes) > 0 ||
		len(c.rd.Messages) > 0 || len(c.rd.Committed) > 0 || len(c.rd.Forwards) > 0 ||
		len(c.rd.StateRequests) > 0 || c.rd.Install != nil
}

// Ready hands out the recorded work; its slices are valid until Advance.
func (c *Core) Ready() Ready {
	c.collectCommitted()
	c.refuseContradictingInstall()
	c.readyOut = true
	rd := c.rd
	if c.out.stateChanged {
		s := c.out.state
		rd.State = &s
	}
	if c.out.viewHeadersChanged {
		rd.ViewHeaders = c.out.viewHeaders
		if rd.ViewHeaders == nil {
			rd.ViewHeaders = []wire.PrepareHeader{}
		}
	}
	return rd
}

func (c *Core) collectCommitted() {
	for c.commitMin < c.commitMax {
		s := c.slotAt(c.commitMin + 1)
		if s == nil || !s.trusted || s.body == bodyNone || c.commitMin+1 < c.log.trustLow {
			break
		}
		c.commitMin++
		c.rd.Committed = append(c.rd.Committed, s.header)
	}
}

// Advance tells the replica that the last Ready was done: its writes and state are
// durable, its messages sent and its commits applied.
func (c *Core) Advance() {
	c.readyOut = false
	if c.out.stateChanged {
		c.durable = c.out.state
		c.out.stateChanged = false
	}
	c.out.viewHeadersChanged = false
	for _, op := range c.out.dirtySlots {
		if s := c.slotAt(op); s != nil && s.body == bodyWriting {
			s.body = bodyDurable
		}
	}
	c.out.dirtySlots = c.out.dirtySlots[:0]
	c.rd.Discards = c.rd.Discards[:0]
	c.rd.Truncate = false
	c.rd.TruncateAbove = 0
	// Cleared, not only cut: the bodies a write names (a repaired op's copy, a
	// frame's) must not stay reachable from the slice's backing array.
	clear(c.rd.Writes)
	c.rd.Writes = c.rd.Writes[:0]
	clear(c.rd.Messages)
	c.rd.Messages = c.rd.Messages[:0]
	c.rd.Committed = c.rd.Committed[:0]
	c.rd.Forwards = c.rd.Forwards[:0]
	c.rd.StateRequests = c.rd.StateRequests[:0]
	c.out.bodyBuffersAt = 0
	if c.rd.Install != nil {
		identity := c.rd.Install.Identity
		c.rd.Install = nil
		c.installed(identity)
	}
	for _, w := range c.normal.deferred {
		if s := c.slotAt(w.Header.Op); s != nil && s.header.Checksum == w.Header.Checksum {
			c.write(s, w.Body)
		}
	}
	clear(c.normal.deferred)
	c.normal.deferred = c.normal.deferred[:0]
	// The primary's own append is one ack, counted once it is durable.
	pending := c.normal.pendingSelf
	c.normal.pendingSelf = c.normal.pendingSelf[:0]
	if c.IsPrimary() {
		for _, op := range pending {
			if s := c.slotAt(op); s != nil {
				c.onAck(c.cfg.ReplicaID, op, s.header.Checksum)
			}
		}
	}
	if len(c.forwards.in) > 0 {
		// The commits of that Ready are applied now: the session table has them.
		c.answerForwards(!c.IsPrimary())
	}
}

func (c *Core) persist() {
	c.out.state = DurableState{View: c.view, LogView: c.logView, CommitMax: c.commitMax}
	c.out.stateChanged = c.out.stateChanged || c.out.state != c.durable
}

// persistLog persists the state with the headers of the log view's suffix (from the
// commit point to the head). A replica that adopted a view but has not repaired
// every body yet must still know the view's head and headers after a crash: its
// DoViewChange speaks for that view's log, and a shorter head there would let a new
// primary drop committed ops.
func (c *Core) persistLog() {
	c.persist()
	c.out.stateChanged = true
	c.out.viewHeaders = c.out.viewHeaders[:0]
	low := c.commitMax
	if low == 0 {
		low = 1
	}
	for op := c.op; op >= low && op > 0; op-- {
		s := c.slotAt(op)
		if s == nil || !s.trusted {
			break
		}
		c.out.viewHeaders = append(c.out.viewHeaders, s.header)
	}
	c.out.viewHeadersChanged = true
}

// headerPointer views a message's header as its command's typed header; message
// sets the command first, so the view is the one the frame will carry.
func headerPointer(h *wire.GenericHeader) unsafe.Pointer { return unsafe.Pointer(h) }

// broadcast, as a message's destination, means every other replica.
const broadcast = 0xFF

func (c *Core) message(to uint8, command wire.Command) *wire.GenericHeader {
	c.rd.Messages = append(c.rd.Messages, Message{To: to})
	m := &c.rd.Messages[len(c.rd.Messages)-1]
	h := &m.Header
	h.Cluster = c.cfg.Cluster
	h.Size = wire.HeaderSize
	h.View = c.view
	h.Command = command
	h.Replica = c.cfg.ReplicaID
	return h
}

// seal finishes the last message: the body seal where the command has one, then the
// frame seal.
func (c *Core) seal(body []byte) {
	m := &c.rd.Messages[len(c.rd.Messages)-1]
	m.Body = body
	m.Header.Size = uint32(wire.HeaderSize + len(body))
	if m.Header.Command == wire.CommandDoViewChange || m.Header.Command == wire.CommandStartView {
		m.Header.SealBody(body)
	}
	if m.Header.Command.FrameSealed() {
		wire.SealFrame(m.Header.Bytes())
	}
}

// targets calls f for one peer, or for every other replica when to is broadcast.
func (c *Core) targets(to uint8, f func(peer uint8)) {
	if to != broadcast {
		f(to)
		return
	}
	for peer := 0; peer < c.n(); peer++ {
		if uint8(peer) != c.cfg.ReplicaID {
			f(uint8(peer))
		}
	}
}

func (c *Core) bodyBuffer(size int) []byte {
	if c.out.bodyBuffersAt == len(c.out.bodyBuffers) {
		c.out.bodyBuffers = append(c.out.bodyBuffers, make([]byte, 0, size))
	}
	b := c.out.bodyBuffers[c.out.bodyBuffersAt][:0]
	c.out.bodyBuffersAt++
	if cap(b) < size {
		b = make([]byte, 0, size)
		c.out.bodyBuffers[c.out.bodyBuffersAt-1] = b
	}
	return b[:size]
}
