package shard

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/iggy-shard/iggy-shard/arena"
	"github.com/iggy-shard/iggy-shard/wire"
)

// Sending on the replica plane: any shard copies a frame into its arena and passes it
// to the shard that owns the peer's link, which queues it by class
// (replica_queue.go); or lends it instead (replica_lend.go).

// ReplicaOwner returns the shard that owns peer's registered connection. Safe from any
// goroutine; a snapshot.
func (s *Shard) ReplicaOwner(peer uint8) (int, bool) {
	if s.rt.replica == nil {
		return 0, false
	}
	o := s.rt.replica.owners[peer].Load()
	return int(o) - 1, o != 0
}

// SendReplica sends one frame to peer from any shard: parts, concatenated, are the
// frame, the first part holding the whole header, whose size field is the total. The
// frame is copied (parts may be reused on return) and sealed as the spec says
// (wire.SealReplica). It returns nil when the frame is on its way; ErrReplicaPeerDown,
// ErrReplicaQueueFull (its class has no room: ReplicaRoom) and
// ErrReplicaBuffersExhausted when it was dropped (consensus retransmits); any other
// error is the caller's bug: a malformed frame.
func (s *Shard) SendReplica(peer uint8, parts ...[]byte) error {
	rr := s.rt.replica
	if rr == nil {
		return errors.New("shard: SendReplica without a replica plane")
	}
	total := 0
	for _, p := range parts {
		total += len(p)
	}
	if len(parts) == 0 {
		return errors.New("shard: SendReplica of no frame")
	}
	if err := checkReplicaFrame(rr, peer, parts[0], total); err != nil {
		return err
	}
	class := s.frameClass(parts[0])
	owner := rr.owners[peer].Load() - 1
	if owner < 0 {
		s.counters.replica.classes[class].dropped.Add(1)
		return ErrReplicaPeerDown
	}
	if !rr.reserve(peer, class) {
		s.refuseQueueFull(peer, class)
		return ErrReplicaQueueFull
	}
	b, err := s.arena.Acquire(total)
	if err != nil {
		rr.unreserve(peer, class)
		s.counters.replica.classes[class].dropped.Add(1)
		if s.replicaLogAllowed(replicaLogNoBuffer) {
			s.logReplica(replicaLogNoBuffer, "replica frame dropped: no send buffer", "peer", peer, "bytes", total)
		}
		return ErrReplicaBuffersExhausted
	}
	data := b.Full()[:total:total]
	n := 0
	for _, p := range parts {
		n += copy(data[n:], p)
	}
	h, _ := wire.ViewHeader[wire.GenericHeader](data)
	wire.SealReplica(h, data[headerSizeBytes:])
	if int(owner) == s.index {
		return s.enqueueReplica(replicaOut{data: data, buffer: b, from: s.index, peer: peer, class: class})
	}
	t := replicaTransit{data: unsafe.Pointer(unsafe.SliceData(data)), size: uint32(total), peer: peer, class: class,
		bufClass: uint8(b.Class()), bufIndex: uint32(b.Index())}
	if !rr.transitQueue(int(owner), s.index, class).Push(t) {
		// More of the class is on its way to that shard than its budget for all
		// peers: only when one shard owns the links of many peers.
		s.arena.Release(b)
		rr.unreserve(peer, class)
		s.refuseQueueFull(peer, class)
		return ErrReplicaQueueFull
	}
	s.mail.wakeNeeded[owner] = true
	return nil
}

// frameClass returns the class of the frame whose whole header first holds, aligned
// or not.
func (s *Shard) frameClass(first []byte) ReplicaClass {
	h, err := wire.ViewHeader[wire.GenericHeader](first[:headerSizeBytes])
	if err != nil {
		scratch := s.replica.headerScratch
		copy(scratch, first[:headerSizeBytes])
		h, _ = wire.ViewHeader[wire.GenericHeader](scratch)
	}
	return ReplicaFrameClass(h)
}

// refuseQueueFull counts and logs a frame refused because its class's room to peer
// is full: a control frame at WARN, at most once a second; a partition group's at
// INFO, at most once a minute, since for that class it is back-pressure (the
// groups retransmit what a slow peer did not take).
func (s *Shard) refuseQueueFull(peer uint8, class ReplicaClass) {
	c := &s.counters.replica.classes[class]
	c.dropped.Add(1)
	c.queueFull.Add(1)
	kind := replicaLogQueueFull
	if class == ReplicaPartition {
		kind = replicaLogBackPressure
	}
	if s.replicaLogAllowed(kind) {
		s.logReplica(kind, "replica frame refused: the peer's send queue of its class is full", "peer", peer,
			"class", class.String(), "capacity", s.rt.replica.capacity[class])
	}
}

// SendReplicaLent sends one frame to peer without copying it, from any shard: a large
// frame the caller keeps anyway, such as a journaled prepare, leaves from where it
// lies. The frame is sealed in place (wire.SealReplica) and must then stay unchanged
// until done is released, on this shard, once the kernel no longer reads it (sent, or
// the connection closed); when another shard owns the peer's connection the frame goes
// there and done comes back (replica_lend.go). On an error done is not called and the
// caller still owns the frame: ErrReplicaPeerDown and ErrReplicaQueueFull as for
// SendReplica. (After a stop, done may be released by the goroutine that closes the
// runtime, as Dropper's messages are.)
func (s *Shard) SendReplicaLent(peer uint8, frame []byte, done Releaser) error {
	if len(frame) < headerSizeBytes {
		return fmt.Errorf("shard: replica frame of %d bytes, not a whole header", len(frame))
	}
	return s.SendReplicaLentParts(peer, frame[:headerSizeBytes], frame[headerSizeBytes:], done)
}

// SendReplicaLentParts is SendReplicaLent of a frame whose header and body lie
// apart (a vsr.Message: Header.Bytes() and Body): both are lent, the header sealed
// in place, and both must stay unchanged until done is released. The header must
// be 16-byte aligned (a wire.GenericHeader is).
func (s *Shard) SendReplicaLentParts(peer uint8, header, body []byte, done Releaser) error {
	rr := s.rt.replica
	if rr == nil {
		return errors.New("shard: SendReplicaLent without a replica plane")
	}
	if len(header) != headerSizeBytes {
		return fmt.Errorf("shard: a lent replica header of %d bytes", len(header))
	}
	if err := checkReplicaFrame(rr, peer, header, headerSizeBytes+len(body)); err != nil {
		return err
	}
	h, err := wire.ViewHeader[wire.GenericHeader](header)
	if err != nil {
		return fmt.Errorf("shard: SendReplicaLent of a frame that is not 16-byte aligned: %w", err)
	}
	class := ReplicaFrameClass(h)
	owner := int(rr.owners[peer].Load()) - 1
	c := s.replica.links[peer]
	if owner < 0 || owner == s.index && c == nil {
		s.counters.replica.classes[class].dropped.Add(1)
		return ErrReplicaPeerDown
	}
	if !rr.reserve(peer, class) {
		s.refuseQueueFull(peer, class)
		return ErrReplicaQueueFull
	}
	wire.SealReplica(h, body)
	if owner != s.index {
		return s.lendThrough(owner, replicaTransit{head: unsafe.Pointer(unsafe.SliceData(header)),
			data: unsafe.Pointer(unsafe.SliceData(body)), size: uint32(len(body)), peer: peer, class: class, done: done})
	}
	if !c.enqueue(replicaOut{head: header, data: body, from: s.index, peer: peer, class: class, done: done}) {
		// Not for want of room (the budget bounds the queue): the link is closing.
		rr.unreserve(peer, class)
		s.counters.replica.classes[class].dropped.Add(1)
		return ErrReplicaPeerDown
	}
	return nil
}

// lendThrough passes a lent frame, budgeted, to the shard that owns its peer's
// connection.
func (s *Shard) lendThrough(owner int, t replicaTransit) error {
	rr := s.rt.replica
	if !rr.transitQueue(owner, s.index, t.class).Push(t) {
		rr.unreserve(t.peer, t.class)
		s.refuseQueueFull(t.peer, t.class)
		return ErrReplicaQueueFull
	}
	s.counters.replica.lentAcross.Add(1)
	s.mail.wakeNeeded[owner] = true
	return nil
}

// checkReplicaFrame checks what a sender owes: a whole header first, a size field
// that is the frame's length, within MessageSizeMax, consensus traffic, to a peer.
func checkReplicaFrame(rr *replicaRuntime, peer uint8, first []byte, total int) error {
	if len(first) < headerSizeBytes {
		return fmt.Errorf("shard: replica frame of %d bytes whose first part is not a whole header", total)
	}
	if size := int(leUint32(first[wire.SizeFieldOffset:])); size != total {
		return fmt.Errorf("shard: replica frame of %d bytes whose header says %d", total, size)
	}
	if uint32(total) > rr.cfg.MessageSizeMax {
		return fmt.Errorf("shard: replica frame of %d bytes > message size max %d", total, rr.cfg.MessageSizeMax)
	}
	if peer == rr.cfg.Handshake.Self || peer >= rr.cfg.Handshake.ReplicaCount {
		return fmt.Errorf("shard: a replica frame to replica %d (self %d of %d)", peer, rr.cfg.Handshake.Self, rr.cfg.Handshake.ReplicaCount)
	}
	if command := wire.Command(first[wire.CommandFieldOffset]); !command.ReplicaPlane() ||
		command >= wire.CommandReplicaHello && command <= wire.CommandReplicaFinish {
		return fmt.Errorf("shard: a replica frame of command %s, not consensus traffic", command)
	}
	return nil
}

func leUint32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

// enqueueReplica queues a frame (budgeted) on this shard's registered connection to
// its peer, or drops it (counted) when there is none.
func (s *Shard) enqueueReplica(out replicaOut) error {
	c := s.replica.links[out.peer]
	if c == nil || !c.enqueue(out) {
		// No connection, or one closing; a full queue cannot be: the class's
		// budget, taken when the frame was accepted, is the queue's capacity.
		s.counters.replica.classes[out.class].dropped.Add(1)
		s.releaseReplicaOut(out)
		return ErrReplicaPeerDown
	}
	return nil
}

// ReplicaQueueRoom returns how many more partition frames (the class a pacing
// sender, such as a repair stream or a benchmark, sends) peer takes now, from any
// shard; 0 when its connection is down. See ReplicaRoom.
func (s *Shard) ReplicaQueueRoom(peer uint8) int { return s.ReplicaRoom(peer, ReplicaPartition) }

// ReplicaRoom returns how many more frames of class peer takes now, from any shard
// (a snapshot: other shards send too); 0 when its connection is down. A sender that
// paces itself asks before it sends; one that does not meets ErrReplicaQueueFull.
func (s *Shard) ReplicaRoom(peer uint8, class ReplicaClass) int {
	rr := s.rt.replica
	if rr == nil || int(peer) >= len(rr.budgets) || class >= replicaClassCount || rr.owners[peer].Load() == 0 {
		return 0
	}
	return rr.room(peer, class)
}

// serveReplicaMessage serves the runtime's own replica message: a sent frame's
// buffer coming home.
func (s *Shard) serveReplicaMessage(m Message) {
	s.arena.Release(s.arena.BufferAt(int(m.Value&0xff), int(m.Value>>8)))
}

// releaseReplicaOut gives a queued frame's buffer back to the shard it came from (a
// lent frame to its lender): at once when that is this shard, else by a message (kept
// until the inbox has room).
func (s *Shard) releaseReplicaOut(out replicaOut) {
	if !out.handshake {
		s.rt.replica.unreserve(out.peer, out.class)
	}
	if out.done != nil {
		s.returnLent(out.from, out.done)
		return
	}
	if out.from == s.index {
		s.arena.Release(out.buffer)
		return
	}
	m := Message{internal: internalReplicaRelease, Value: uint64(out.bufClass) | uint64(out.bufIndex)<<8}
	if !s.Post(out.from, m) {
		s.replica.releases = append(s.replica.releases, pendingRelease{to: out.from, m: m})
		s.WakeAt(s.NowNs() + replicaReturnRetryNs)
	}
}

// retryReleases posts the buffer returns that found their inbox full; every turn.
func (s *Shard) retryReleases() {
	retryKept(s, &s.replica.releases, func(p pendingRelease) bool { return s.Post(p.to, p.m) })
}

// retryKept pushes again the returns that found their queue full (a copied
// frame's buffer, a lent frame's release), keeps those that still find it full,
// and asks for a turn soon while any is kept: an idle shard may take no other.
func retryKept[T any](s *Shard, kept *[]T, push func(T) bool) {
	if len(*kept) == 0 {
		return
	}
	still := (*kept)[:0]
	for _, p := range *kept {
		if !push(p) {
			still = append(still, p)
		}
	}
	clear((*kept)[len(still):])
	*kept = still
	if len(still) > 0 {
		s.WakeAt(s.NowNs() + replicaReturnRetryNs)
	}
}

type pendingRelease struct {
	to int
	m  Message
}

// replicaOut is one frame in a peer's send queue: its bytes, its class, and whose
// arena buffer holds them (this shard's buffer, or bufClass and bufIndex in shard
// from's arena).
type replicaOut struct {
	// head, for a frame lent in two parts (SendReplicaLentParts), is its header,
	// sent before data; nil otherwise.
	head     []byte
	data     []byte
	sent     int          // of head and data
	buffer   arena.Buffer // set when from is this shard
	from     int
	bufIndex uint32
	bufClass uint8
	peer     uint8
	class    ReplicaClass
	// handshake: a handshake frame, not counted as consensus traffic and not
	// budgeted.
	handshake bool
	// done, for a lent frame (SendReplicaLent), is told when the kernel is done
	// with it, on shard from; the frame then has no buffer of the runtime's.
	done Releaser
}
