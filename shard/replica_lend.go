package shard

import "time"

// Lending across shards. A lent frame (SendReplicaLent) belongs to its caller, whose
// done Releaser touches the caller's own state unsynchronised: it must run on the
// caller's shard. When another shard owns the peer's connection, the frame goes there
// by the transit queue a copied frame takes (so a shard's frames to a peer keep their
// order, lent or copied), and once the kernel no longer reads it its Releaser comes
// back by a return queue from the connection's owner to the lender, drained at the
// top of the lender's turns. A full return queue keeps the Releaser on the owner,
// posted again every turn (lentReturnsKept), as a full inbox keeps a copied frame's
// buffer return. After the runtime has stopped, closeReplica releases what is still
// on its way, on the goroutine that closes the runtime.
//
// Memory: a return queue per ordered pair of shards, made the first time the owner
// returns a frame to that lender, of transitCapacityFor(both classes' capacities,
// peers) slots of 16 bytes (16 KiB for a 3-node cluster at the defaults).

// lentReturn is a lent frame's Releaser on its way back to the shard that lent it.
type lentReturn struct {
	to   int
	done Releaser
}

// returnLent gives a lent frame back to the shard that lent it: at once when that is
// this shard, else through the return queue (kept until it has room).
func (s *Shard) returnLent(to int, done Releaser) {
	if to == s.index {
		done.Release()
		return
	}
	if !s.pushLentReturn(to, done) {
		s.replica.lentReturnsKept = append(s.replica.lentReturnsKept, lentReturn{to: to, done: done})
		s.counters.replica.lentReturnsKept.Add(1)
		s.WakeAt(s.NowNs() + replicaReturnRetryNs)
	}
}

// replicaReturnRetryNs is how soon a shard tries again to pass on what found the way
// back to its shard full (a lent frame's release, a copied frame's buffer), when
// nothing else gives it a turn before.
const replicaReturnRetryNs = int64(time.Millisecond)

func (s *Shard) pushLentReturn(to int, done Releaser) bool {
	if !s.rt.replica.lentReturnQueue(to, s.index).Push(done) {
		return false
	}
	s.mail.wakeNeeded[to] = true
	return true
}

// lentReturnQueue returns the queue of Releasers from shard from to shard to, making
// it on the sender's first use: only the sender writes the pointer, the lender reads
// it.
func (rr *replicaRuntime) lentReturnQueue(to, from int) *Queue[Releaser] {
	slot := &rr.lentReturns[to][from]
	if q := slot.Load(); q != nil {
		return q
	}
	q := NewQueue[Releaser](rr.lentReturnCapacity)
	slot.Store(q)
	return q
}

// retryLentReturns pushes the returns that found their queue full; every turn while
// any is kept.
func (s *Shard) retryLentReturns() {
	retryKept(s, &s.replica.lentReturnsKept, func(p lentReturn) bool { return s.pushLentReturn(p.to, p.done) })
}

// drainLentReturns releases the frames this shard lent that other shards sent, at
// most one queue's capacity from each per turn.
func (s *Shard) drainLentReturns() {
	returns := s.rt.replica.lentReturns[s.index]
	for from := range returns {
		q := returns[from].Load()
		if q == nil {
			continue
		}
		for range q.Cap() {
			done, ok := q.Pop()
			if !ok {
				break
			}
			done.Release()
		}
	}
}

// closeLentReturns releases the lent frames whose way back the stop cut: those in
// the return queues to s and those s kept for want of room.
func (rt *Runtime) closeLentReturns(s *Shard) {
	returns := rt.replica.lentReturns[s.index]
	for from := range returns {
		for q := returns[from].Load(); q != nil; {
			done, ok := q.Pop()
			if !ok {
				break
			}
			done.Release()
		}
	}
	for _, p := range s.replica.lentReturnsKept {
		p.done.Release()
	}
	s.replica.lentReturnsKept = nil
}
