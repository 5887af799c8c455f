package shard

import (
	"errors"
	"fmt"
	"log/slog"

	"golang.org/x/sys/unix"

	"github.com/iggy-shard/iggy-shard/ring"
	"github.com/iggy-shard/iggy-shard/segment"
)

// A poll reply whose batches lie whole in segment files (partition.Store.PlanPoll)
// leaves without a copy through user space: its head (the reply header and the
// PolledMessages prefix) is copied into the send queue like any reply, and its
// batches follow as one piece of the queue that names file runs. When that piece
// reaches the head of the queue it is the connection's one send in flight: per run
// and per pipe's worth, a file -> pipe splice linked to a pipe -> socket splice,
// through a pipe of the shard's PipePool, taken when the piece reaches the head and
// held only while it is sent. A piece that finds every pipe lent waits, in a
// first-come-first-served line, for one to come back (its deadlines run meanwhile);
// CanSplice tells a caller beforehand that it would wait, and it copies instead.
//
//	queue:  [header+prefix]  [runs: fd/off/len ...]  [next reply] ...
//	         one send,         in ─► out ─► in ─► out (one linked chain)
//	         MSG_MORE
//
// The chain runs on the shard's splice ring, whose io-wq worker goes from one step
// to the next without the shard's thread (splicering.go); a piece is at most what
// an empty pipe takes from its offset (pieceBytes), so a chain breaks only on a
// socket or a file that takes or gives less than asked.
//
// A splice that moves less than asked (a full socket buffer, a signal) breaks the
// chain: the rest of it completes canceled, and the reply goes on step by step
// from what moved, first draining what the pipe holds. Every step ends in the
// loop, so the connection's deadlines, SendTimeout and the plan's own deadline
// (PollPlan.DeadlineNs) are checked between them and cancel a chain that hangs.
// After the last completion the pipe goes back to the pool (closed if it still
// holds bytes) and the plan is released (its descriptors closed): io_uring
// resolves a splice's descriptors when its worker runs it, so none of them may be
// closed while a request that names them is in the kernel.

// ErrSpliceUnavailable: the reply cannot be spliced (a TLS connection). Nothing
// was queued: copy the reply instead.
var ErrSpliceUnavailable = errors.New("shard: the reply cannot be spliced now")

// spliceChainPiecesMax bounds the pipe's worths of one chain (two SQEs each): a
// 64 MiB reply goes out in chains of 16 MiB through 1 MiB pipes, so one
// connection does not fill a shard's submission queue.
const spliceChainPiecesMax = 16

// splicedReply is the file runs of one reply in a send queue, with the pipe it
// goes through and its progress. The shard keeps them for reuse (a steady stream
// of spliced replies allocates nothing).
type splicedReply struct {
	runs       []segment.Run // the caller's, valid until done is released
	sizeBytes  int
	deadlineNs int64
	done       Releaser
	pipe       Pipe
	piped      bool // pipe is lent to it

	// What moved so far: runs[run] has runMoved bytes in the pipe or sent, and
	// inPipe bytes moved into the pipe are not sent yet.
	run      int
	runMoved int64
	inPipe   int

	// The step in flight.
	route        spliceRoute // the ring it runs on and the socket's name there
	ops          int         // its SQEs whose completions have not arrived
	stepHeadSent int         // of the byte pieces before the reply (startSplice)
	stepMoved    int
	stepSent     int
	stepErr      error
	stepProgress bool // a splice of this step moved a byte
}

// CanSplice reports whether a reply spliced now would go without waiting for a
// pipe: the connection is plaintext and open, and the shard's pool has a pipe to
// lend. A caller that plans its reply (partition.Store.PlanPoll) asks first, and
// copies when it says no; a reply it then queues with SendFileRuns is taken all
// the same (it waits for a pipe if the pool emptied meanwhile).
func (c *Conn) CanSplice() bool {
	return c.tls == nil && c.state == linkOpen && c.shard.splice.pipes.available()
}

// SendFileRuns appends a reply of head, then the runs' file bytes, to the reply
// being answered: head (the reply header and, for a poll, the PolledMessages
// prefix) is copied, the runs are spliced from their files to the socket, in
// order with the connection's other replies. done is released once no request
// that names the runs' descriptors is in the kernel any more: after the last
// byte was sent, or the connection closed (the runs' descriptors and runs itself
// must stay valid until then). A reply still sending at deadlineNs (the shard's
// clock, NowNs) is cut short and the connection closed.
//
// On ErrSpliceUnavailable (a TLS connection) nothing was queued and done is not
// called: the caller still owns the runs and copies the reply. On another error
// the connection is closed (or was already) and done is not called either.
func (c *Conn) SendFileRuns(head []byte, runs []segment.Run, deadlineNs int64, done Releaser) error {
	if !c.accepts() {
		return ErrConnClosed
	}
	if c.tls != nil {
		return ErrSpliceUnavailable
	}
	size := 0
	for _, r := range runs {
		if r.Length <= 0 {
			panic(fmt.Sprintf("shard: a file run of %d bytes", r.Length))
		}
		size += int(r.Length)
	}
	s := c.shard
	if len(head) > 0 {
		b, err := c.Reserve(len(head))
		if err != nil {
			return err
		}
		copy(b, head)
	}
	if size == 0 {
		if done != nil {
			done.Release() // nothing to splice
		}
		return nil
	}
	r := s.splice.newReply()
	*r = splicedReply{runs: runs, sizeBytes: size, deadlineNs: deadlineNs, done: done}
	seg := sendSegment{spliced: r}
	if !c.straightToQueue(1, size) {
		sl := c.slotFor(c.order.answering)
		sl.pieces = append(sl.pieces, seg)
		c.order.parkedBytes += size
		return nil
	}
	c.out.push(seg)
	c.order.headBytesQueued += size
	c.queued(size)
	return nil
}

// available reports whether Take would lend a pipe without making one past the
// bound (making one may still fail, at the open-file limit).
func (p *PipePool) available() bool { return len(p.free) > 0 || p.lent < p.pipesMax }

// splicer is a shard's means of splicing replies: the pool of pipes they go
// through, the records of spliced replies kept for reuse, and the line of
// connections whose spliced reply waits for a pipe, in the order they came.
type splicer struct {
	pipes   PipePool
	free    []*splicedReply
	waiters []ConnID

	// The ring the splices run on, made at the first spliced reply, and its
	// eventfd (splicering.go); ringTriedNs is when making it last failed.
	ring        *ring.Ring
	event       eventReader
	ringTriedNs int64
	// ringOps is the requests on the ring whose completions are not reaped yet;
	// lazyUntilNs is how long the shard may sleep without a wake from them
	// (splicering.go, wakeForSplices), and awaited says that something waits on
	// one of them: a reply queued behind a step in flight, a connection closing.
	ringOps     int
	lazyUntilNs int64
	awaited     bool
	// files is, by slot of the connection ring's registered-file table, whether
	// that socket is in the splice ring's table too.
	files     []socketCopy
	emptySlot [1]int32 // UpdateFiles' argument, kept here so it is not allocated
	cqes      [completionBatchMax]ring.CQE
}

// newReply returns a zeroed record, a reused one when there is one.
func (sp *splicer) newReply() *splicedReply {
	if n := len(sp.free); n > 0 {
		r := sp.free[n-1]
		sp.free = sp.free[:n-1]
		return r
	}
	return new(splicedReply)
}

// recycle zeroes r and keeps it for the next spliced reply.
func (sp *splicer) recycle(r *splicedReply) {
	*r = splicedReply{}
	sp.free = append(sp.free, r)
}

// nextWaiter takes the first connection out of the line for a pipe.
func (sp *splicer) nextWaiter() (ConnID, bool) {
	if len(sp.waiters) == 0 {
		return 0, false
	}
	id := sp.waiters[0]
	n := copy(sp.waiters, sp.waiters[1:])
	sp.waiters = sp.waiters[:n]
	return id, true
}

// release gives the pipe back, then the runs (done), once no request of the
// reply is in the kernel.
func (r *splicedReply) release(s *Shard) {
	if r.ops != 0 {
		panic(fmt.Sprintf("shard: a spliced reply released with %d requests in the kernel", r.ops))
	}
	if r.piped {
		s.givePipe(r.pipe)
	}
	if r.done != nil {
		r.done.Release()
	}
	s.splice.recycle(r)
}

// startSplice submits the next step of the spliced reply r: the pipe's leftover
// bytes after a chain broke, or a chain of file -> pipe -> socket pairs from
// where the reply stands. headPieces > 0 are the byte pieces queued before a
// reply not begun yet (its header and prefix, and replies before it): they lead
// the chain, one sendmsg (MSG_WAITALL: io_uring retries a short send rather than
// let the splices behind it go first), which saves the reply a turn of the loop.
// It reports false, submitting nothing, when r has to wait for a pipe.
func (c *Conn) startSplice(r *splicedReply, headPieces int) bool {
	s := c.shard
	route, ok := c.spliceRoute()
	if !ok {
		return true // the socket's copy to the splice ring is the send in flight
	}
	if !r.piped && !c.takePipe(r) {
		return false
	}
	c.splicing = r
	c.sendInFlight = true
	r.route = route
	if r.inPipe > 0 {
		more := r.sentBefore()+r.inPipe < r.sizeBytes
		c.prepareSpliceOut(r, r.inPipe, more, false)
		c.awaitStep(more, 0)
		return true
	}
	pieces := 0
	run, runMoved := r.run, r.runMoved
	for run < len(r.runs) && pieces < spliceChainPiecesMax {
		run, runMoved = nextPiece(r, run, runMoved)
		pieces++
	}
	// A chain must go into the SQ whole: an SQ filling up midway would cut it.
	if route.ring.SQSpaceLeft() < uint32(2*pieces+1) {
		if _, err := route.ring.Submit(); err != nil {
			s.fail(fmt.Errorf("shard %d: submit before a splice chain: %w", s.index, err))
			return true
		}
	}
	if headPieces > 0 {
		c.vec.msg.Iov = &c.vec.iovecs[0]
		c.vec.msg.SetIovlen(headPieces)
		head := s.sqeOn(route.ring)
		head.PrepareSendmsg(route.socket, &c.vec.msg, unix.MSG_NOSIGNAL|unix.MSG_MORE|unix.MSG_WAITALL)
		route.mark(head)
		head.Flags |= ring.SQEIOLink
		head.UserData = userData(kindSpliceHead, c.id)
		r.ops++
	}
	run, runMoved = r.run, r.runMoved
	left := r.sizeBytes - r.sentBefore()
	for i := range pieces {
		f := r.runs[run]
		chunk := pieceBytes(r, run, runMoved)
		in := s.sqeOn(route.ring)
		in.PrepareSplice(f.FD, uint64(f.Offset+runMoved), r.pipe.WriteFd, ring.SpliceNoOffset, uint32(chunk), unix.SPLICE_F_MOVE)
		in.Flags |= ring.SQEIOLink
		in.UserData = userData(kindSpliceIn, c.id)
		left -= chunk
		c.prepareSpliceOut(r, chunk, left > 0, i < pieces-1)
		r.ops++
		run, runMoved = nextPiece(r, run, runMoved)
	}
	c.awaitStep(run < len(r.runs), headPieces)
	return true
}

// awaitStep marks the splice ring's completions awaited (wakeForSplices) when
// more follows the step just prepared on the connection, whose spliced reply
// is the queue's piece at: the rest of that reply (more), or replies queued or
// parked behind it.
func (c *Conn) awaitStep(more bool, at int) {
	if more || c.out.count > at+1 || c.order.parkedBytes > 0 {
		c.shard.splice.awaited = true
	}
}

// nextPiece returns where the reply stands after one more pipe's worth from run
// at runMoved.
func nextPiece(r *splicedReply, run int, runMoved int64) (int, int64) {
	runMoved += int64(pieceBytes(r, run, runMoved))
	if runMoved == r.runs[run].Length {
		return run + 1, 0
	}
	return run, runMoved
}

// pieceBytes is the size of the file -> pipe splice from run at runMoved: what
// is left of the run, up to what an empty pipe takes from that offset. A pipe
// holds CapacityBytes/pageBytes page references, and file pages go in one a
// slot: a piece that starts inside a page (a batch rarely starts on one) spans
// one more page than its length says, so a full pipe's worth of bytes from
// there would come back a page short and break the chain (a step more, and a
// turn of the loop, for every reply of about a pipe's size).
func pieceBytes(r *splicedReply, run int, runMoved int64) int {
	f := r.runs[run]
	room := int64(r.pipe.CapacityBytes) - (f.Offset+runMoved)%pageBytes
	return int(min(f.Length-runMoved, room))
}

// pageBytes is the page size of the page cache's pages, which a file -> pipe
// splice puts into the pipe one a slot.
var pageBytes = int64(unix.Getpagesize())

// sentBefore is the bytes of the reply sent before the step in flight.
func (r *splicedReply) sentBefore() int {
	moved := 0
	for _, f := range r.runs[:r.run] {
		moved += int(f.Length)
	}
	return moved + int(r.runMoved) - r.inPipe
}

func (c *Conn) prepareSpliceOut(r *splicedReply, n int, more, link bool) {
	flags := uint32(unix.SPLICE_F_MOVE)
	if more {
		flags |= unix.SPLICE_F_MORE
	}
	out := c.shard.sqeOn(r.route.ring)
	out.PrepareSplice(r.pipe.ReadFd, ring.SpliceNoOffset, r.route.socket, ring.SpliceNoOffset, uint32(n), flags)
	r.route.mark(out)
	if link {
		out.Flags |= ring.SQEIOLink
	}
	out.UserData = userData(kindSpliceOut, c.id)
	r.ops++
}

// onSplice takes one completion of the step in flight; the last one decides what
// comes next.
func (c *Conn) onSplice(kind completionKind, res int32) {
	r := c.splicing
	if r == nil || r.ops == 0 {
		panic(fmt.Sprintf("shard %d: a splice completion with no spliced reply in flight", c.shard.index))
	}
	r.ops--
	switch {
	case res > 0 && kind == kindSpliceHead:
		r.stepHeadSent += int(res)
		r.stepProgress = true
		c.sendProgress(int(res))
	case res > 0 && kind == kindSpliceIn:
		r.stepMoved += int(res)
		r.stepProgress = true
	case res > 0:
		r.stepSent += int(res)
		r.stepProgress = true
		c.sendProgress(int(res))
	case res == 0 && kind == kindSpliceIn && r.stepErr == nil:
		// The file ended before the run did: the bytes the plan named are gone
		// (planned bytes are durable and never cut, so this is a bug somewhere).
		r.stepErr = errors.New("segment file ended inside a planned run")
	case res < 0 && res != -int32(unix.ECANCELED) && r.stepErr == nil:
		r.stepErr = unix.Errno(-res)
	}
	if r.ops > 0 {
		return
	}
	c.sendInFlight = false
	c.splicing = nil
	moved, spliced, head := r.stepMoved, r.stepSent, r.stepHeadSent
	r.stepMoved, r.stepSent, r.stepHeadSent = 0, 0, 0
	r.inPipe += moved - spliced
	for moved > 0 {
		k := min(int64(moved), r.runs[r.run].Length-r.runMoved)
		r.runMoved += k
		moved -= int(k)
		if r.runMoved == r.runs[r.run].Length {
			r.run, r.runMoved = r.run+1, 0
		}
	}
	err, progress := r.stepErr, r.stepProgress
	r.stepErr, r.stepProgress = nil, false
	if c.state == linkAborting {
		c.maybeFinish()
		return
	}
	if err == nil && !progress {
		err = errors.New("a splice step moved nothing")
	}
	if err != nil {
		c.shard.log.Debug("connection closed: a spliced reply failed", "conn", c.id, "err", err)
		c.abort("splice: " + err.Error())
		c.maybeFinish()
		return
	}
	if r.run == len(r.runs) && r.inPipe == 0 {
		c.shard.counters.splicedReplies++
		c.shard.counters.splicedBytes += uint64(r.sizeBytes)
	}
	c.sent(head + spliced) // the head's bytes are first in the queue; r may be released
}

// cancelSplice asks the kernel to end the steps of a spliced reply in flight, as
// the connection aborts; their completions still come, and the connection is
// freed (the pipe given back, the runs released) after the last.
func (c *Conn) cancelSplice() {
	if r := c.splicing; r != nil && r.ops > 0 {
		c.shard.splice.awaited = true // the connection is freed after the last
		for _, kind := range [...]completionKind{kindSpliceHead, kindSpliceIn, kindSpliceOut} {
			sqe := c.shard.sqeOn(r.route.ring)
			sqe.PrepareCancel(userData(kind, c.id), ring.CancelAll)
			sqe.UserData = userData(kindCancel, c.id)
		}
	}
}

// spliceDeadline returns the earliest deadline of the spliced replies the
// connection holds, queued or parked.
func (c *Conn) spliceDeadline() (int64, bool) {
	deadline, ok := int64(0), false
	take := func(seg *sendSegment) {
		if r := seg.spliced; r != nil && (!ok || r.deadlineNs < deadline) {
			deadline, ok = r.deadlineNs, true
		}
	}
	for i := range c.out.count {
		take(c.out.at(i))
	}
	for i := range c.order.parked {
		sl := &c.order.parked[i]
		for k := sl.moved; k < len(sl.pieces); k++ {
			take(&sl.pieces[k])
		}
	}
	return deadline, ok
}

// takePipe lends r a pipe of the shard's pool, or puts the connection in the line
// of those waiting for one and reports false.
func (c *Conn) takePipe(r *splicedReply) bool {
	s := c.shard
	pipe, err := s.splice.pipes.Take()
	if err == nil {
		r.pipe, r.piped = pipe, true
		c.waitingForPipe = false // an entry left in the line is skipped
		return true
	}
	if !errors.Is(err, ErrNoPipe) {
		// The open-file limit: a pipe given back wakes the line, and the
		// connection's timer tries again (checkDeadlines) in case none is lent.
		s.logLimited(logNoPipe, slog.LevelWarn, "spliced reply waits: no pipe", "err", err)
	}
	if !c.waitingForPipe {
		c.waitingForPipe = true
		s.splice.waiters = append(s.splice.waiters, c.id)
		s.counters.pipeWaits++
	}
	return false
}

// givePipe takes a pipe back and hands the turn to the first connection in line
// for one that is still waiting.
func (s *Shard) givePipe(pipe Pipe) {
	s.splice.pipes.Give(pipe)
	for {
		id, ok := s.splice.nextWaiter()
		if !ok {
			return
		}
		if c := s.Conn(id); c != nil && c.waitingForPipe {
			c.waitingForPipe = false // out of the line: back in it if it loses the pipe
			s.markDirty(c)           // its flush takes the pipe
			return
		}
	}
}

// fresh reports whether nothing of the reply has moved yet.
func (r *splicedReply) fresh() bool { return r.run == 0 && r.runMoved == 0 }
