// Package passwords runs a node's argon2id work off its shards: logins'
// passwords verified, the new passwords of CreateUser and ChangePassword and a
// cluster's root user hashed, on workers of their own that take turns by source
// address, within bounds, behind a budget of failed checks per source.
package passwords

import (
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/iggy-shard/iggy-shard/linux"
	"github.com/iggy-shard/iggy-shard/metadata"
	"github.com/iggy-shard/iggy-shard/shard"
	"github.com/iggy-shard/iggy-shard/wire"
)

// Workers run shard 0's argon2id work on goroutines of their own: logins'
// passwords verified against their hashes, and the new passwords of CreateUser and
// ChangePassword (the current password verified, the new one hashed into the
// proposal). One argon2id run costs tens of milliseconds of CPU and 19 MiB; done on
// shard 0 it would stall every connection and partition that shard serves for as
// long, once per login or password change, and a reconnecting fleet would stall it
// for seconds. Shard 0 hands the work over and goes on serving; a worker does it,
// queues the outcome and wakes shard 0 (shard.Shard.Wake), whose metadata router
// carries on on its next turn (Collect; metahost/router.go). Nothing else waits
// for an argon2id run: the metadata writes go on meanwhile.
//
// The work waits by source (the peer's IP address), and the workers serve the
// sources round-robin, oldest first within one: a source that floods the workers
// with wrong passwords delays another source's login by at most one run per source
// with work waiting, not by its whole backlog. At most WaitingPerSourceMax
// runs wait per source and WaitingMax in all; beyond, shard 0 refuses the
// request with 58 TransientNotAccepted, which the SDKs retry (a login for the
// whole 30 s request deadline). So a storm holds a bounded amount of memory
// (requests and password copies) and cannot push good logins from elsewhere out;
// and a source whose checks keep failing is refused before it queues anything
// (FailureBudgets), so it cannot keep the workers busy either.
//
// Shard 0 is the only caller of Submit and Collect; the workers share
// nothing with it but what is under mu.
type Workers struct {
	wake func() // shard 0's Wake

	// verify is metadata.VerifyPassword and hash is (*NewPassword).Propose; tests
	// hold the work with their own (Intercept). Read and written under mu.
	verify func(hash string, password []byte) bool
	hash   func(n *NewPassword) ([]byte, error)

	mu sync.Mutex
	// cond is signalled when work arrives, broadcast when the workers close.
	cond    sync.Cond
	waiting sourceQueues // submitted, not yet taken by a worker
	done    []Work       // finished, not yet collected
	closed  bool         // workers exit once waiting is empty
	ready   atomic.Int32 // len(done), read by shard 0 without the lock
	workers sync.WaitGroup
}

// Work is one argon2id task: a *Check, a *NewPassword or a *RootUser.
type Work interface {
	source() netip.Addr
}

// Check is one login's password on its way through the workers. The worker
// reads Hash and Password and writes Match; the request it came with stays with
// its caller (Conn names the connection), in a shard's arena.
type Check struct {
	Conn     shard.ConnID
	Source   netip.Addr
	Hash     string // the PHC string verified against (metadata.PasswordHashToCheck)
	Password []byte // a copy of the password from the request
	Match    bool
}

func (c *Check) source() netip.Addr { return c.Source }

// NewPassword is a CreateUser or ChangePassword on its way through the workers:
// the state it needs was read on shard 0, and the worker computes the proposal
// from copies, writing Proposal and Err. Like a check, the request stays with its
// caller.
type NewPassword struct {
	// ID is the metadata plane's (metaplane.Host.HashPassword).
	ID     uint64
	Conn   shard.ConnID
	Source netip.Addr
	Op     wire.Operation // OperationCreateUser or OperationChangePassword
	Body   []byte         // a copy of the request's body
	Salt   []byte         // metadata.PasswordSaltBytes random bytes for the new hash
	// CurrentHash is what a ChangePassword's current password is verified against
	// (metadata.State.ChangePasswordCurrentHash); the caller proposes the result
	// only while it is still the user's hash.
	CurrentHash string

	Proposal []byte
	// Err is set instead of Proposal: ErrInvalidCredentials when a ChangePassword's
	// current password did not match (the new one is then not hashed), or what
	// the proposal failed with.
	Err error
}

func (n *NewPassword) source() netip.Addr { return n.Source }

// Propose computes the proposal from a verified request: one argon2id run, the
// new password's hash.
func (n *NewPassword) Propose() ([]byte, error) {
	if n.Op == wire.OperationChangePassword {
		return metadata.ProposeChangePasswordVerified(nil, n.Body, n.CurrentHash, n.Salt)
	}
	return metadata.ProposeCreateUser(nil, n.Body, n.Salt)
}

// RootUser is a cluster's root user on its way through the workers: the first
// primary hashes the configured password once, off shard 0 like every new
// password, and proposes the result (metadata.ProposeRootUser); every replica
// applies those bytes. No connection waits for it.
type RootUser struct {
	ID                 uint64
	Username, Password string
	Salt               []byte

	Proposal []byte
	Err      error
}

func (r *RootUser) source() netip.Addr { return netip.Addr{} }

// WorkersCount is how many argon2id runs go at once: argon2id is
// memory-hard (19 MiB each), and the shards need the CPUs more than a login storm
// does.
const WorkersCount = 2

// workersNice is the workers' threads' nice value (see work).
const workersNice = 10

// The bounds of the argon2id work waiting for a worker. Per source: enough for a
// host's reconnecting clients to queue a few each round (more retry after a 58),
// few enough that one source's backlog is worth a fraction of a second of the
// workers. In all: 1024 requests held, each a request buffer and a password copy.
const (
	WaitingPerSourceMax = 16
	WaitingMax          = 1024
)

func NewWorkers(wake func()) *Workers {
	v := &Workers{wake: wake, verify: metadata.VerifyPassword, hash: (*NewPassword).Propose}
	v.cond.L = &v.mu
	v.waiting.init(WaitingPerSourceMax, WaitingMax)
	// Each worker holds a P for a whole argon2id run (tens of milliseconds, the Go
	// scheduler preempts only every 10 ms): without Ps of their own they would keep
	// the journal writer, the timers and the garbage collector waiting for one.
	shard.ReserveProcs(WorkersCount)
	for range WorkersCount {
		v.workers.Go(v.work)
	}
	return v
}

func (v *Workers) work() {
	// A thread of its own, niced: when the shards want the CPU, an argon2id run
	// (a login storm, a flood of wrong current passwords) yields it to them
	// instead of sharing it evenly: at nice 10 the CFS weight is about a tenth
	// of a shard's.
	runtime.LockOSThread()
	linux.NameCurrentThread("passwords")
	linux.NiceCurrentThread(workersNice)
	for {
		v.mu.Lock()
		for v.waiting.len() == 0 && !v.closed {
			v.cond.Wait()
		}
		w, ok := v.waiting.pop()
		if !ok {
			v.mu.Unlock()
			return
		}
		verify, hash := v.verify, v.hash
		v.mu.Unlock()

		switch w := w.(type) {
		case *Check:
			w.Match = verify(w.Hash, w.Password)
		case *NewPassword:
			w.run(verify, hash)
		case *RootUser:
			w.Proposal, w.Err = metadata.ProposeRootUser(nil, w.Username, w.Password, w.Salt)
		}

		v.mu.Lock()
		v.done = append(v.done, w)
		v.ready.Store(int32(len(v.done)))
		v.mu.Unlock()
		v.wake()
	}
}

// run verifies a ChangePassword's current password, and hashes the new password
// of a CreateUser or of a ChangePassword whose current password matched.
func (n *NewPassword) run(verify func(string, []byte) bool, hash func(*NewPassword) ([]byte, error)) {
	if n.Op == wire.OperationChangePassword {
		var r wire.ChangePassword
		if err := r.Decode(n.Body); err != nil {
			n.Err = err
			return
		}
		if n.CurrentHash == "" || !verify(n.CurrentHash, r.CurrentPassword) {
			n.Err = wire.ErrInvalidCredentials
			return
		}
	}
	n.Proposal, n.Err = hash(n)
}

// Submit queues a login's check or a new password; it never blocks. It returns
// false, queuing nothing, when the work's source or the workers have as much
// waiting as they take.
func (v *Workers) Submit(w Work) bool {
	v.mu.Lock()
	ok := !v.closed && v.waiting.push(w)
	v.mu.Unlock()
	if ok {
		v.cond.Signal()
	}
	return ok
}

// Collect appends the finished work to dst and forgets it.
func (v *Workers) Collect(dst []Work) []Work {
	if v.ready.Load() == 0 {
		return dst
	}
	v.mu.Lock()
	dst = append(dst, v.done...)
	clear(v.done)
	v.done = v.done[:0]
	v.ready.Store(0)
	v.mu.Unlock()
	return dst
}

// Intercept replaces the password check (metadata.VerifyPassword) and the new
// password's proposal ((*NewPassword).Propose) the workers run, each when not
// nil: tests hold or count the work with it.
func (v *Workers) Intercept(verify func(hash string, password []byte) bool, hash func(n *NewPassword) ([]byte, error)) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if verify != nil {
		v.verify = verify
	}
	if hash != nil {
		v.hash = hash
	}
}

// Waiting is how much work waits for a worker (tests watch it).
func (v *Workers) Waiting() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.waiting.len()
}

// Close lets the workers finish the work they hold, drops the work not yet taken
// and waits for the workers to exit. Shard 0 answers the requests of what was
// dropped (metahost/router.go, abandonPasswordChecks).
func (v *Workers) Close() {
	v.mu.Lock()
	v.closed = true
	v.waiting.clear()
	v.mu.Unlock()
	v.cond.Broadcast()
	v.workers.Wait()
	shard.ReserveProcs(-WorkersCount)
}

// sourceQueues is the work waiting for the password workers, one FIFO per source,
// the sources with work in a ring served round-robin. A source's queue is dropped
// when it empties, so the map holds only sources with work waiting.
type sourceQueues struct {
	perSourceMax, totalMax int
	bySource               map[netip.Addr]*sourceQueue
	ring                   []*sourceQueue // the sources with work, in turn order
	next                   int            // ring index of the source served next
	total                  int
}

type sourceQueue struct {
	source netip.Addr
	jobs   []Work
}

func (q *sourceQueues) init(perSourceMax, totalMax int) {
	q.perSourceMax, q.totalMax = perSourceMax, totalMax
	q.bySource = make(map[netip.Addr]*sourceQueue)
}

func (q *sourceQueues) len() int { return q.total }

// push queues w behind its source's work, or reports false when the source or the
// whole has reached its bound.
func (q *sourceQueues) push(w Work) bool {
	if q.total >= q.totalMax {
		return false
	}
	source := w.source()
	sq := q.bySource[source]
	if sq == nil {
		sq = &sourceQueue{source: source}
		q.bySource[source] = sq
		// A new source takes its turn after every source waiting now: just before
		// the one served next.
		q.ring = append(q.ring, nil)
		copy(q.ring[q.next+1:], q.ring[q.next:])
		q.ring[q.next] = sq
		q.next++
		if q.next == len(q.ring) {
			q.next = 0
		}
	}
	if len(sq.jobs) >= q.perSourceMax {
		return false
	}
	sq.jobs = append(sq.jobs, w)
	q.total++
	return true
}

// pop takes the oldest work of the source whose turn it is.
func (q *sourceQueues) pop() (Work, bool) {
	if q.total == 0 {
		return nil, false
	}
	sq := q.ring[q.next]
	w := sq.jobs[0]
	sq.jobs[0] = nil
	sq.jobs = sq.jobs[1:]
	q.total--
	if len(sq.jobs) == 0 {
		// Drop the source from the ring; the one after it is next.
		delete(q.bySource, sq.source)
		copy(q.ring[q.next:], q.ring[q.next+1:])
		q.ring[len(q.ring)-1] = nil
		q.ring = q.ring[:len(q.ring)-1]
	} else {
		q.next++
	}
	if q.next >= len(q.ring) {
		q.next = 0
	}
	return w, true
}

func (q *sourceQueues) clear() {
	clear(q.bySource)
	clear(q.ring)
	q.ring, q.next, q.total = q.ring[:0], 0, 0
}

// FailureBudgets limits the failed password checks of each source address (wrong
// passwords at login, unknown usernames, wrong current passwords of ChangePassword),
// which cost an argon2id run each: a source may fail FailuresBurst checks in a row
// and then FailuresPerSecond a second; while its budget is spent, its password
// work is refused at once with 58 (the SDKs retry a login for 30 s). So a storm of
// wrong passwords from one address costs the node two argon2id runs a second
// instead of its workers' whole time, and a source that stops failing has its
// budget back within the burst's time. The count is a generic cell rate: each
// failure moves the source's due time on by the interval, and a check is allowed
// while the due time is less than the burst ahead. Sources that have not failed, or
// whose due time has passed, hold no entry. Shard 0 owns it; time is its clock.
type FailureBudgets struct {
	intervalNs int64
	burstNs    int64
	due        map[netip.Addr]int64 // by source: when its budget is whole again
}

const (
	FailuresBurst       = 10
	FailuresPerSecond   = 2
	failureSourcesMax   = 1 << 16
	failureIntervalNs   = int64(1e9) / FailuresPerSecond
	failureBurstSpentNs = FailuresBurst * failureIntervalNs
)

func NewFailureBudgets() FailureBudgets {
	return FailureBudgets{intervalNs: failureIntervalNs, burstNs: failureBurstSpentNs, due: make(map[netip.Addr]int64)}
}

// allow reports whether source may have one more password checked at nowNs.
func (b *FailureBudgets) Allow(source netip.Addr, nowNs int64) bool {
	due, ok := b.due[source]
	return !ok || due-nowNs+b.intervalNs <= b.burstNs
}

// failed records a failed check of source at nowNs.
func (b *FailureBudgets) Failed(source netip.Addr, nowNs int64) {
	due, ok := b.due[source]
	if !ok && len(b.due) >= failureSourcesMax {
		for s, d := range b.due {
			if d <= nowNs {
				delete(b.due, s)
			}
		}
		if len(b.due) >= failureSourcesMax {
			clear(b.due) // more failing sources than we track: start over
		}
	}
	b.due[source] = max(due, nowNs) + b.intervalNs
}
