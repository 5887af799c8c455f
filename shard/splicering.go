package shard

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	"github.com/iggy-shard/iggy-shard/ring"
)

// A spliced reply's steps run on a ring of the shard's own, the splice ring, not
// on the connection ring. The connection ring runs its task work only when the
// shard's thread enters it (DEFER_TASKRUN), and io_uring runs every splice in an
// io-wq worker: there, each splice's completion, and the start of the next linked
// step, had to wait for the shard's thread to wake and run them, a wake-up (and a
// hop back to a worker) per step. The splice ring is SINGLE_ISSUER without
// DEFER_TASKRUN: a worker posts a splice's completion itself and goes straight on
// to the next step of the chain, file -> pipe -> socket -> file -> ..., and the
// shard's thread reaps the completions at its next turn. When something waits on
// them (wakeForSplices) it is woken for them through an eventfd the ring
// signals, whose read it then arms on the connection ring (as for the disk
// ring); when nothing does, as for a consumer's reply, the event that starts the
// next turn (that consumer's next poll) is soon enough. The ring and its eventfd, two descriptors, are made at the
// shard's first spliced reply: a shard that never splices (TLS only) has neither,
// and one that cannot make them (the open-file limit) splices on the connection
// ring, as it did before, and tries again a second later.
//
// The ring needs the connection's socket. A plain descriptor it takes as is; a
// slot of the connection ring's registered-file table (the kernel-accepted and
// handed-over sockets, fdpass.ModeMsgRing) is copied, by a msg_ring from the
// connection ring, into the same slot of the splice ring's own table before the
// connection's first spliced reply: a reference the kernel holds, no descriptor of
// the process, so nothing counts against the open-file limit. The copy is dropped
// when the connection's socket is closed (Shard.closeSocket), synchronously, so
// that the slot is empty before the connection ring can hand it to another
// socket; a ring closed at shutdown drops its table whole. Connections never move
// between shards once open, so a copy lives and ends on one shard.
//
// The ring is off unless Config.SpliceRing ([system.partition] splice_ring). On
// this 2-core machine, quiet, main's build against one without the ring, 6
// interleaved rounds (session of 2026-12-05): a lone consumer's 1 MB polls
// (server BenchmarkTransport tls=false/consumer) went at 3,197-4,103 MB/s with it
// against 3,587-5,830 without, slower in every round (p50 239-309 µs against
// 164-262: the worker's completion reached the shard through the eventfd, a wake
// more per reply); four consumers (BenchmarkConsumers) were within noise
// (x-loopback 0.63-0.92 against 0.64-0.81). Loaded by other processes, the ring
// halved the context switches per MB of four consumers (9.6-11.0 to 4.7-6.1) and
// cut their p50 by a quarter to two fifths. Since the eventfd is armed only
// when something waits on a completion (wakeForSplices), the ring wakes the
// shard for ~0.002-0.006 of the polls instead of one each (server
// BenchmarkConsumerSpliceRing, ring-wakes/poll), and in one run of 8 rounds
// (2026-12-06, load 8-12 from other sessions' tests) it was off against on:
// four consumers 3.49 against 4.04 GiB/s (+16%, p=0.038), p50 889 against
// 515 µs, context switches per MB 9.9 against 5.0; a lone consumer 3.00
// against 3.64 GiB/s (within noise), its CPU per GB 333 against 220 ms
// (p=0.021), context switches per MB 16.5 against 8.3.

// socketCopy is whether a registered socket's copy is in the splice ring's table.
type socketCopy uint8

const (
	socketCopyAbsent     socketCopy = iota
	socketCopyInstalling            // the msg_ring that copies it is in flight
	socketCopyInstalled
)

// spliceRingSQEntries sizes the splice ring's submission queue: two chains of the
// longest kind (a chain goes into it whole; it is submitted each turn and when a
// chain would not fit).
const spliceRingSQEntries = 2 * (2*spliceChainPiecesMax + 1)

// spliceOpsPerPipeMax bounds the requests of one spliced reply in the kernel at
// once, the completions it can have waiting in the splice ring: its longest chain
// (a head sendmsg and a file -> pipe -> socket pair a piece) and the three
// cancellations of cancelSplice. A reply holds a pipe while it has any, so the
// pool's bound is the ring's.
const spliceOpsPerPipeMax = 2*spliceChainPiecesMax + 1 + 3

// spliceRoute is where a step of a spliced reply runs: the splice ring, or the
// connection ring when there is none, and the socket's name on that ring.
type spliceRoute struct {
	ring   *ring.Ring
	socket int  // a descriptor, or a slot of ring's registered-file table
	fixed  bool // socket is a slot
}

// mark addresses the socket as a registered file when it is one.
func (r spliceRoute) mark(sqe *ring.SQE) {
	if r.fixed {
		sqe.Flags |= ring.SQEFixedFile
	}
}

// spliceRingRetryNs is how long a shard that could not make its splice ring
// splices on the connection ring before it tries again.
const spliceRingRetryNs = int64(time.Second)

// spliceRing returns the splice ring, made now if there is none yet and the last
// try is long enough ago; nil: splice on the connection ring.
func (s *Shard) spliceRing() *ring.Ring {
	if !s.cfg.SpliceRing {
		return nil
	}
	sp := &s.splice
	if sp.ring != nil || sp.ringTriedNs != 0 && s.clock.nowNs-sp.ringTriedNs < spliceRingRetryNs {
		return sp.ring
	}
	if err := s.setUpSpliceRing(); err != nil {
		sp.ringTriedNs = max(s.clock.nowNs, 1)
		s.log.Warn("replies are spliced on the connection ring", "err", err)
	}
	return sp.ring
}

// setUpSpliceRing creates the splice ring, its eventfd, and, when the connection
// ring has a registered-file table, a table of as many slots (its connections'
// and those handed over).
func (s *Shard) setUpSpliceRing() error {
	cqEntries := uint32(max(spliceRingSQEntries, s.cfg.PipesPerShardMax*spliceOpsPerPipeMax))
	r, err := ring.New(ring.Options{SQEntries: spliceRingSQEntries, CQEntries: min(cqEntries, 1<<16), Flags: ring.SetupSingleIssuer})
	if err != nil {
		return fmt.Errorf("splice ring setup: %w", err)
	}
	for _, op := range []ring.Opcode{ring.OpSplice, ring.OpSendmsg, ring.OpAsyncCancel} {
		if !r.Supports(op) {
			r.Close()
			return fmt.Errorf("the kernel's io_uring lacks opcode %d for spliced replies", op)
		}
	}
	if s.handoff.connSlotCount > 0 {
		if err := r.RegisterFilesSparse(s.handoff.connSlotCount + handoffsInFlightMax); err != nil {
			r.Close()
			return fmt.Errorf("splice ring: %w", err)
		}
	}
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		r.Close()
		return fmt.Errorf("splice eventfd: %w", err)
	}
	if err := r.RegisterEventFd(efd); err != nil {
		r.Close()
		unix.Close(efd)
		return err
	}
	s.splice.ring, s.splice.event = r, eventReader{fd: efd, buf: new([8]byte), kind: kindSpliceEvent}
	return nil
}

// closeSpliceRing closes the ring (the kernel drops its table's copies and ends
// what is still in flight) and its eventfd.
func (s *Shard) closeSpliceRing() error {
	if s.splice.ring == nil {
		return nil
	}
	err := s.splice.ring.Close()
	unix.Close(s.splice.event.fd)
	s.splice.ring = nil
	return err
}

// sqeOn returns a free SQE of the connection ring or of the splice ring.
func (s *Shard) sqeOn(r *ring.Ring) *ring.SQE {
	if r == s.ring {
		return s.getSQE()
	}
	s.counters.sqesPrepared++
	if s.splice.ringOps == 0 {
		s.splice.lazyUntilNs = s.clock.nowNs + spliceReapLazyNs
	}
	s.splice.ringOps++
	sqe, err := r.GetSQE()
	if err != nil {
		s.fail(fmt.Errorf("shard %d: get a splice SQE: %w", s.index, err))
		return new(ring.SQE)
	}
	return sqe
}

// submitSplices hands the splice ring what the turn queued.
func (s *Shard) submitSplices() {
	if s.splice.ring == nil || s.splice.ring.SQPending() == 0 {
		return
	}
	if _, err := s.splice.ring.Submit(); err != nil && !errors.Is(err, ring.ErrCQOverflow) {
		// An overflow (which spliceOpsPerPipeMax rules out) is retried next turn,
		// after the reap.
		s.fail(fmt.Errorf("shard %d: submit splices: %w", s.index, err))
	}
}

// reapSplices acts on every completion the splice ring holds, a batch at a time
// (an action may queue more splices, never complete them: they are submitted at
// the end of the turn).
func (s *Shard) reapSplices() {
	if s.splice.ring == nil {
		return
	}
	for s.splice.ring.CQReady() > 0 {
		n := s.splice.ring.ReapCQEs(s.splice.cqes[:])
		s.counters.cqesReaped += uint64(n)
		s.splice.ringOps -= n
		if s.splice.ringOps == 0 {
			s.splice.awaited = false
		}
		if n > 0 { // the splices move: the bound starts again
			s.splice.lazyUntilNs = s.clock.nowNs + spliceReapLazyNs
		}
		for i := range n {
			s.complete(&s.splice.cqes[i])
		}
	}
}

// wakeForSplices bounds how long the shard may sleep, d (negative: until a
// completion of the connection ring), while requests of the splice ring are in
// flight. Their completions are reaped at every turn (Shard.reap), and most of
// the time nothing waits on them: a consumer's next poll comes after its reply
// was sent, and the recv that brings it wakes the shard, which then finds the
// reply's last completion, and its pipe free, before it serves the poll. So
// the eventfd's read, a wake-up of the shard's thread per reply, is armed
// only when something does wait: a reply queued behind a step in flight, a
// connection closing, a reply waiting for a pipe, the shard stopping, or
// spliceReapLazyNs gone with requests in flight and none of them reaped (a
// consumer that does not poll again soon, a step blocked on a full socket),
// whose pipes and plans (segment pins) would otherwise wait for the shard's
// next event. The bound starts at the first request and again at each reap
// that finds completions: several consumers keep requests in flight all the
// time, and a bound from the first would soon wake the shard for every reply.
func (s *Shard) wakeForSplices(d time.Duration) time.Duration {
	sp := &s.splice
	if sp.ring == nil || sp.ringOps == 0 || sp.event.armed {
		return d
	}
	left := sp.lazyUntilNs - s.clock.read()
	if sp.awaited || len(sp.waiters) > 0 || s.stopping || left <= 0 {
		sp.event.arm(s)
		return d
	}
	if d < 0 || time.Duration(left) < d {
		return time.Duration(left)
	}
	return d
}

// spliceReapLazyNs is how long the splice ring's completions may wait for the
// shard's next event before the shard asks to be woken for them (a variable for
// the tests).
var spliceReapLazyNs = int64(time.Millisecond)

// spliceRoute returns where the connection's next splice step runs. On the
// splice ring a plain descriptor is named as it is, and a registered socket by
// its slot once its copy is in the ring's table: before the first spliced reply
// of such a socket, spliceRoute starts the copy, which is then the connection's
// send in flight, and reports false; the connection's flush comes back when the
// copy is done (onSpliceFileInstalled).
func (c *Conn) spliceRoute() (spliceRoute, bool) {
	s := c.shard
	r := s.spliceRing()
	if r == nil {
		return spliceRoute{ring: s.ring, socket: c.fd, fixed: c.direct}, true
	}
	if !c.direct {
		return spliceRoute{ring: r, socket: c.fd}, true
	}
	sp := &s.splice
	if slot := c.fd; slot < len(sp.files) && sp.files[slot] == socketCopyInstalled {
		return spliceRoute{ring: r, socket: slot, fixed: true}, true
	}
	for c.fd >= len(sp.files) {
		sp.files = append(sp.files, make([]socketCopy, max(len(sp.files), 64))...)
	}
	if sp.files[c.fd] != socketCopyAbsent {
		panic(fmt.Sprintf("shard %d: socket slot %d copied to the splice ring twice", s.index, c.fd))
	}
	sp.files[c.fd] = socketCopyInstalling
	sqe := s.getSQE()
	sqe.PrepareMsgRingFd(r.Fd(), uint32(c.fd), uint32(c.fd), 0, ring.MsgRingCQESkip)
	sqe.UserData = userData(kindSpliceFile, c.id)
	c.sendInFlight = true
	return spliceRoute{}, false
}

// onSpliceFileInstalled takes the completion of the copy spliceSocket started.
func (c *Conn) onSpliceFileInstalled(res int32) {
	c.sendInFlight = false
	sp := &c.shard.splice
	if res < 0 {
		sp.files[c.fd] = socketCopyAbsent
		if c.state != linkAborting {
			c.shard.log.Warn("connection closed: its socket could not be given to the splice ring", "conn", c.id, "err", unix.Errno(-res))
			c.abort("splice ring: " + unix.Errno(-res).Error())
		}
		c.maybeFinish()
		return
	}
	sp.files[c.fd] = socketCopyInstalled
	if c.state == linkAborting {
		c.maybeFinish()
		return
	}
	c.shard.markDirty(c) // its flush starts the spliced reply
}

// dropSpliceFile empties slot of the splice ring's table if a socket's copy is in
// it. It runs as the socket's slot in the connection ring is closed, before the
// kernel can reuse that slot: synchronously, since a close queued on the splice
// ring could run after the slot's next socket was copied there.
func (s *Shard) dropSpliceFile(slot int) {
	sp := &s.splice
	if slot >= len(sp.files) || sp.files[slot] == socketCopyAbsent {
		return
	}
	if sp.files[slot] == socketCopyInstalling {
		panic(fmt.Sprintf("shard %d: socket slot %d closed while its copy to the splice ring is in flight", s.index, slot))
	}
	sp.files[slot] = socketCopyAbsent
	sp.emptySlot[0] = -1
	if _, err := sp.ring.UpdateFiles(uint32(slot), sp.emptySlot[:]); err != nil {
		// The socket would stay open in the kernel (its peer never sees the close).
		s.fail(fmt.Errorf("shard %d: %w", s.index, err))
	}
}
