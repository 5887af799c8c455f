package shard

import (
	"fmt"
	"net/netip"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/iggy-shard/iggy-shard/ring"
)

// linkState is where a connection is in its life, a client's or a replica's. Every
// connection goes the same way: open (a replica's after its handshake), then either
// draining (it reads no more and closes once what it owes is sent) or aborting (it
// drops what is queued), and it is free again once the kernel holds none of its
// buffers: only then is its socket closed and its slot reused.
type linkState uint8

const (
	linkFree        linkState = iota
	linkHandshaking           // a replica connection's handshake runs
	linkOpen                  // reading and writing
	linkDraining              // not reading; closes once what it owes is sent
	linkAborting              // dropping what is queued; closes once the kernel let go of its buffers
)

// linkKinds are the completion kinds of a plane's connections: they tell a client
// connection's completions from a replica connection's in the same slot and
// generation.
type linkKinds struct {
	recv, send, cancel completionKind
}

var (
	clientLinkKinds  = linkKinds{recv: kindRecv, send: kindSend, cancel: kindCancel}
	replicaLinkKinds = linkKinds{recv: kindReplicaRecv, send: kindReplicaSend, cancel: kindReplicaCancel}
)

// link is what every connection of a shard has, client or replica: its socket, its
// one recv and one send in flight, its frame and send deadlines, and the steps of
// its close. Conn and replicaConn embed it; what they do differently (framing, the
// send queue, the handshake, what a close releases) they keep.
type link struct {
	shard  *Shard
	id     ConnID
	fd     int  // a descriptor, or a registered-file slot when direct
	direct bool // fd is a slot of the shard ring's registered-file table
	state  linkState
	kinds  linkKinds
	remote netip.AddrPort

	recvInFlight   bool
	sendInFlight   bool
	recvCancelSent bool
	frameStartNs   int64 // when the frame now partly received began; 0 when none
	sendWaitFromNs int64 // when the send queue last made progress or became non-empty
	closeReason    string

	vec sendVector // the iovecs of the send in flight
}

// sendVectorMax bounds the pieces of one send, the iovecs of one sendmsg: a reply is
// a few pieces ([header][prefix][batches...]), and 64 keeps the iovec array on one
// page (the reference writes up to 256 replica frames per writev).
const sendVectorMax = 64

// sendVector is the iovecs of a link's one send in flight.
type sendVector struct {
	iovecs [sendVectorMax]unix.Iovec
	msg    unix.Msghdr
}

// set makes iovec i point at b.
func (v *sendVector) set(i int, b []byte) {
	v.iovecs[i] = unix.Iovec{Base: unsafe.SliceData(b)}
	v.iovecs[i].SetLen(len(b))
}

// submitSend submits the link's one send, over the first n iovecs set: a plain send
// for one, a sendmsg for more; more (MSG_MORE) when bytes will follow at once.
func (l *link) submitSend(n int, more bool) {
	flags := unix.MSG_NOSIGNAL
	if more {
		flags |= unix.MSG_MORE
	}
	sqe := l.shard.getSQE()
	if n == 1 {
		iov := &l.vec.iovecs[0]
		sqe.PrepareSend(l.fd, unsafe.Slice(iov.Base, int(iov.Len)), flags)
	} else {
		l.vec.msg.Iov = &l.vec.iovecs[0]
		l.vec.msg.SetIovlen(n)
		sqe.PrepareSendmsg(l.fd, &l.vec.msg, flags)
	}
	l.markFixed(sqe)
	sqe.UserData = userData(l.kinds.send, l.id)
	l.sendInFlight = true
}

// newLink returns the link of a connection that opens in state on a socket.
func newLink(s *Shard, slot uint32, previous ConnID, kinds linkKinds, fd int, direct bool, remote netip.AddrPort, state linkState) link {
	generation := (previous.generation() + 1) & connGenerationMask
	return link{shard: s, id: newConnID(s.index, slot, generation), fd: fd, direct: direct, state: state, kinds: kinds, remote: remote}
}

// markFixed addresses the socket as a registered file when the link is direct.
func (l *link) markFixed(sqe *ring.SQE) {
	if l.direct {
		sqe.Flags |= ring.SQEFixedFile
	}
}

// cancelRecv asks the kernel to end the recv in flight, once.
func (l *link) cancelRecv() {
	if l.recvInFlight && !l.recvCancelSent {
		l.recvCancelSent = true
		l.shard.submitCancel(userData(l.kinds.recv, l.id), userData(l.kinds.cancel, l.id))
	}
}

// beginDrain stops reading: the connection closes once what it owes is sent. It
// reports false when the connection is not open (or handshaking).
func (l *link) beginDrain(reason string) bool {
	if l.state != linkOpen && l.state != linkHandshaking {
		return false
	}
	l.state = linkDraining
	l.closeReason = reason
	l.cancelRecv()
	return true
}

// beginAbort drops what is queued: it cancels what the kernel has in flight, and the
// connection closes once both operations have ended. It reports false when the
// connection is aborting or free already.
func (l *link) beginAbort(reason string) bool {
	if l.state == linkAborting || l.state == linkFree {
		return false
	}
	l.state = linkAborting
	l.closeReason = reason
	l.cancelRecv()
	if l.sendInFlight {
		l.shard.submitCancel(userData(l.kinds.send, l.id), userData(l.kinds.cancel, l.id))
	}
	return true
}

// finishable reports whether a closing connection may be freed: the kernel holds
// none of its buffers, and a draining one owes nothing (owing: queued bytes, or
// replies still to come).
func (l *link) finishable(owing bool) bool {
	switch l.state {
	case linkDraining:
		return !owing && !l.recvInFlight && !l.sendInFlight
	case linkAborting:
		return !l.recvInFlight && !l.sendInFlight
	}
	return false
}

// closeSocket closes the link's socket, as it ends.
func (l *link) closeSocket() { l.shard.closeSocket(l.fd, l.direct) }

// trackFrame moves the frame deadline after bytes were framed: a frame begun and not
// done started now, unless it was begun before and no frame completed since.
func (l *link) trackFrame(partial, frameCompleted bool) {
	if !partial {
		l.frameStartNs = 0
	} else if l.frameStartNs == 0 || frameCompleted {
		l.frameStartNs = l.shard.clock.nowNs
	}
}

// frameOverdue reports whether a frame begun has not completed within timeoutNs.
func (l *link) frameOverdue(nowNs, timeoutNs int64) bool {
	return l.frameStartNs != 0 && nowNs-l.frameStartNs >= timeoutNs
}

// sendOverdue reports whether a non-empty send queue has not moved within timeoutNs.
func (l *link) sendOverdue(queued bool, nowNs, timeoutNs int64) bool {
	return queued && nowNs-l.sendWaitFromNs >= timeoutNs
}

// nextDeadline returns the earliest of next and the frame and send deadlines that
// run, never before nowNs+1: when the connection's timer is to fire again.
func (l *link) nextDeadline(next, nowNs, frameTimeoutNs int64, queued bool, sendTimeoutNs int64) int64 {
	if l.frameStartNs != 0 {
		next = min(next, l.frameStartNs+frameTimeoutNs)
	}
	if queued {
		next = min(next, l.sendWaitFromNs+sendTimeoutNs)
	}
	return max(next, nowNs+1)
}

// linkOf returns the connection ID a completion's user data names.
func (s *Shard) linkOf(rest uint64) ConnID {
	return newConnID(s.index, uint32(rest>>connGenerationBits)&connSlotMax, uint32(rest)&connGenerationMask)
}

// goneLink is the panic of a completion whose connection is gone: the runtime frees a
// slot only once the kernel holds nothing of it, so this is our bug.
func (s *Shard) goneLink(id ConnID) string {
	return fmt.Sprintf("shard %d: completion for a connection that is gone (slot %d)", s.index, id.slot())
}
