package server

import (
	"unsafe"

	"github.com/iggy-shard/iggy-shard/shard"
	"github.com/iggy-shard/iggy-shard/vsr"
	"github.com/iggy-shard/iggy-shard/wire"
)

// A backup holds a large prepare in the arena buffer it was received into, for
// two users, instead of copying it for each:
//
//   - its store (partition.BodyLender): the journal keeps the frame's bytes and
//     the log writes them from there; the store gives the loan back once the log
//     has written it (partition/lend.go).
//   - the forward down the chain (shard.SendReplicaLentParts): the backup's
//     Prepare to the next replica leaves from the frame, until the kernel no
//     longer reads it (sent, dropped, or its connection closed). Copying it was
//     5.4-7.9% of a first backup's CPU taking 1 MB batches, on the path to its
//     PrepareOk (BenchmarkPinnedProduce).
//
// The frame goes back to the arena when the last user is done: the step that
// received it, the store's loan, and each lent send (heldFrame). Only a frame
// that has a buffer of its own is held (a large frame, received straight into
// one: Retain hands it over without a copy); a small one, which Retain would
// copy, the store copies itself, and the forward is copied as before.
//
// The store may keep a frame that another shard received and posted here
// (routePartitionFrame); a forward only lends a frame this shard received, as
// its every end then releases it here (at a stop, on the goroutine that closes
// the runtime, once every shard has exited): another shard's frame goes back by
// a post, which a stop's close may find no one left to serve. A forward of
// another shard's frame, and one past forwardLendSendsMax, is copied.
type frameLender struct {
	h *handler
	// The frame being stepped: on the shard that received it (frame), or
	// retained by the shard that did and posted here (in). Nil once held, the
	// frame then stepping.
	frame    *shard.ReplicaFrame
	in       *replicaInbound
	stepping *heldFrame
	// kept are the frames lent to the store, by loan; free the loans free for
	// reuse.
	kept []*heldFrame
	free []uint64

	freeFrames []*heldFrame
	freeSends  []*forwardSend
	held       int // frames held now
	sendsOut   int
	// lent counts the prepares forwarded from the frame they came in, copied
	// those of prepareLendMinBytes or more copied (a frame not held, another
	// shard's, past the bound), outlived the loans the store ended while lent
	// sends of their frame were out: for tests.
	lent, copied, outlived uint64

	// sendLent and giveBack are the shard's SendReplicaLentParts and the
	// handler's giveInboundBack; tests replace them.
	sendLent func(peer uint8, header, body []byte, done shard.Releaser) error
	giveBack func(in *replicaInbound)
}

// forwardLendSendsMax bounds the forwards a shard has lent at once: half the
// arena's class of a default batch's frame (64 a shard). A lent frame is one the
// connection's framer replaces with a new buffer of that class, as a copy would
// take one: while the next hop keeps up the two hold as many buffers. A next hop
// that stalls holds its queue's frames (up to PeerQueueCapacity, 256): copied,
// the class runs out and a copy is dropped (consensus retransmits it), while a
// frame lent, once the class is spent, is one the framer received on the heap,
// which 256 of would hold 320 MiB. So past the bound a forward is copied, as
// before. (A bound of 16 copied some forwards of a first backup on a machine
// that stalled its next hop for a moment.)
const forwardLendSendsMax = 32

// heldFrame is a received frame kept past the call that received it, until its
// users are done: the step (stepping), the store's loan (loaned), the lent
// sends (sends).
type heldFrame struct {
	in       *replicaInbound
	stepping bool
	loaned   bool
	sends    int
}

// forwardSend is one lent forward: its own copy of the header, which the send
// seals in place, and the frame whose body it sends. header comes first: a
// record of this size is 16-byte aligned, as the send needs the header to be.
type forwardSend struct {
	header wire.GenericHeader
	frame  *heldFrame
	lender *frameLender
}

func (l *frameLender) init(h *handler) {
	l.h = h
	l.sendLent = h.shard.SendReplicaLentParts
	l.giveBack = func(in *replicaInbound) {
		if poisonReleasedFrames {
			poison(in.frame.Body) // a lent forward still reading it sends the poison
		}
		h.giveInboundBack(in)
	}
}

func sameBytes(a, b []byte) bool {
	return len(a) > 0 && len(b) > 0 && unsafe.SliceData(a) == unsafe.SliceData(b)
}

// hold holds the frame being stepped when body is its body (exactly, or within
// it), retaining it if need be; nil when body is not in it, or it has no buffer
// of its own.
func (l *frameLender) hold(body []byte, exact bool) *heldFrame {
	in := func(frame []byte) bool {
		if exact {
			return sameBytes(frame, body)
		}
		return within(frame, body)
	}
	switch {
	case l.stepping != nil && in(l.stepping.in.frame.Body):
		return l.stepping
	case l.frame != nil && in(l.frame.Body) && l.frame.Detachable():
		l.stepping = l.takeFrame(l.h.retainInbound(l.frame))
		l.frame = nil
		return l.stepping
	case l.in != nil && in(l.in.frame.Body):
		l.stepping = l.takeFrame(l.in)
		l.in = nil
		return l.stepping
	}
	return nil
}

// endStep is the end of a frame's step: given back unless the store or a lent
// send holds it.
func (l *frameLender) endStep() {
	l.frame = nil
	if in := l.in; in != nil {
		l.in = nil
		l.giveBack(in)
	}
	if f := l.stepping; f != nil {
		l.stepping = nil
		f.stepping = false
		l.unhold(f)
	}
}

// Lend implements partition.BodyLender.
func (l *frameLender) Lend(body []byte) (uint64, bool) {
	f := l.hold(body, true)
	if f == nil || f.loaned {
		return 0, false
	}
	f.loaned = true
	var loan uint64
	if n := len(l.free); n > 0 {
		loan = l.free[n-1]
		l.free = l.free[:n-1]
	} else {
		loan = uint64(len(l.kept))
		l.kept = append(l.kept, nil)
	}
	l.kept[loan] = f
	return loan, true
}

// Return implements partition.BodyLender: the store is done with the frame.
func (l *frameLender) Return(loan uint64) {
	f := l.kept[loan]
	l.kept[loan] = nil
	l.free = append(l.free, loan)
	f.loaned = false
	if f.sends > 0 {
		l.outlived++
	}
	l.unhold(f)
}

// unhold gives f's frame back to the shard that retained it once no one holds it.
func (l *frameLender) unhold(f *heldFrame) {
	if f.stepping || f.loaned || f.sends > 0 {
		return
	}
	in := f.in
	*f = heldFrame{}
	l.freeFrames = append(l.freeFrames, f)
	l.held--
	l.giveBack(in)
}

func (l *frameLender) takeFrame(in *replicaInbound) *heldFrame {
	var f *heldFrame
	if n := len(l.freeFrames); n > 0 {
		f = l.freeFrames[n-1]
		l.freeFrames = l.freeFrames[:n-1]
	} else {
		f = new(heldFrame)
	}
	*f = heldFrame{in: in, stepping: true}
	l.held++
	return f
}

// heldOf returns the held frame, received by this shard, that body lies in: the
// one being stepped (held now if need be) or one the store keeps.
func (l *frameLender) heldOf(body []byte) *heldFrame {
	if f := l.hold(body, false); f != nil {
		return f
	}
	for _, f := range l.kept {
		if f != nil && within(f.in.frame.Body, body) {
			return f
		}
	}
	return nil
}

// forward sends m, a prepare whose body lies in a frame this shard received,
// from that frame, and reports whether it did (or dropped it as a copy's send
// would have); false: copy it.
func (l *frameLender) forward(m *vsr.Message) bool {
	if len(m.Body) < prepareLendMinBytes || m.Header.Command != wire.CommandPrepare {
		return false
	}
	if l.sendsOut >= forwardLendSendsMax {
		l.copied++
		return false
	}
	f := l.heldOf(m.Body)
	if f == nil || f.in.owner != l.h.index {
		l.copied++
		return false
	}
	s := l.takeSend()
	s.header, s.frame = m.Header, f
	switch err := l.sendLent(m.To, s.header.Bytes()[:], m.Body, s); err {
	case nil:
		f.sends++
		l.sendsOut++
		l.lent++
		return true
	case shard.ErrReplicaPeerDown, shard.ErrReplicaQueueFull:
		l.freeSend(s)
		return true // dropped and counted, as SendReplica would have
	default:
		// A frame SendReplica refuses too, and logs.
		l.freeSend(s)
		l.copied++
		return false
	}
}

func (l *frameLender) takeSend() *forwardSend {
	if n := len(l.freeSends); n > 0 {
		s := l.freeSends[n-1]
		l.freeSends = l.freeSends[:n-1]
		return s
	}
	return &forwardSend{lender: l}
}

func (l *frameLender) freeSend(s *forwardSend) {
	s.frame = nil
	l.freeSends = append(l.freeSends, s)
}

// Release implements shard.Releaser: the kernel no longer reads the forward. It
// runs on the shard that lent it (the runtime brings it back from the shard that
// owns the peer's connection), or after a stop on the goroutine that closes the
// runtime.
func (s *forwardSend) Release() {
	l, f := s.lender, s.frame
	if f == nil || f.sends <= 0 {
		panic("server: a lent forward released twice")
	}
	f.sends--
	l.sendsOut--
	l.freeSend(s)
	l.unhold(f)
}

// lentForwards is what a shard's frame lender did since it started, and what
// it holds now.
type lentForwards struct {
	lent, copied, outlived uint64
	out, held              int
}

// LentForwards reports what the frame lender did, for tests.
func (l *frameLender) LentForwards() lentForwards {
	return lentForwards{lent: l.lent, copied: l.copied, outlived: l.outlived, out: l.sendsOut, held: l.held}
}

// giveInboundBack gives a frame retained by some shard back to it.
func (h *handler) giveInboundBack(in *replicaInbound) {
	if in.owner == h.index {
		h.releaseInbound(in)
		return
	}
	m := shard.Message{Kind: msgReplicaRelease, Payload: in}
	if !h.stopped {
		h.post(in.owner, m)
		return
	}
	// Stop's partition close gives back the frames this shard's partitions
	// retained from another shard after the shard has exited: its outbox is
	// never posted again, so post straight. The owner serves it while it runs;
	// once it too has exited the closing runtime hands it to DropMessage, which
	// releases the frame. Only a full inbox (InboxCapacity messages to an owner
	// that has stopped serving) keeps the frame out of the arena, which the
	// runtime's leak check then reports.
	if !h.shard.Post(in.owner, m) {
		h.log.Error("a retained replica frame could not go back to its shard at the stop", "owner", in.owner)
	}
}
