package server

import (
	"unsafe"

	"github.com/iggy-shard/iggy-shard/shard"
)

// frameLender lends the shard's partition store the replica frames it steps
// (partition.BodyLender): a backup's journal keeps a large prepare in the arena
// buffer it was received into, given back once the log has written it, instead
// of copying it out. Only a frame that has a buffer of its own is lent (a large
// frame, received straight into one: Retain hands it over without a copy); a
// small one, which Retain would copy, the store copies itself.
type frameLender struct {
	h *handler
	// The frame being stepped: on the shard that received it (frame), or
	// retained by the shard that did and posted here (in). Nil once lent.
	frame *shard.ReplicaFrame
	in    *replicaInbound
	// kept are the frames lent, by loan; free the loans free for reuse.
	kept []*replicaInbound
	free []uint64
}

func sameBytes(a, b []byte) bool {
	return len(a) > 0 && len(b) > 0 && unsafe.SliceData(a) == unsafe.SliceData(b)
}

// Lend implements partition.BodyLender.
func (l *frameLender) Lend(body []byte) (uint64, bool) {
	var in *replicaInbound
	switch {
	case l.frame != nil && sameBytes(l.frame.Body, body) && l.frame.Detachable():
		in = l.h.retainInbound(l.frame)
		l.frame = nil
	case l.in != nil && sameBytes(l.in.frame.Body, body):
		in, l.in = l.in, nil
	default:
		return 0, false
	}
	var loan uint64
	if n := len(l.free); n > 0 {
		loan = l.free[n-1]
		l.free = l.free[:n-1]
	} else {
		loan = uint64(len(l.kept))
		l.kept = append(l.kept, nil)
	}
	l.kept[loan] = in
	return loan, true
}

// Return implements partition.BodyLender: the frame goes back to the shard that
// retained it.
func (l *frameLender) Return(loan uint64) {
	in := l.kept[loan]
	l.kept[loan] = nil
	l.free = append(l.free, loan)
	l.h.giveInboundBack(in)
}

// giveBackUnlent gives a frame another shard retained back to it, unless the
// store kept it (Lend), which then gives it back itself.
func (h *handler) giveBackUnlent(in *replicaInbound) {
	if h.lender.in == nil {
		return
	}
	h.lender.in = nil
	h.giveInboundBack(in)
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
