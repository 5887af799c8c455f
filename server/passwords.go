package server

import (
	"sync"
	"sync/atomic"

	"github.com/iggy-shard/iggy-shard/metadata"
	"github.com/iggy-shard/iggy-shard/wire"
)

// passwordWorkers run shard 0's argon2id work on goroutines of their own: logins'
// passwords verified against their hashes, and the new passwords of CreateUser and
// ChangePassword hashed into their proposals. One argon2id run costs tens of
// milliseconds of CPU and 19 MiB; done on shard 0 it would stall every connection
// and partition that shard serves for as long, once per login or password change,
// and a reconnecting fleet would stall it for seconds. Shard 0 hands the work over
// and goes on serving; a worker does it, queues the outcome and wakes shard 0
// (shard.Shard.Wake), whose metadata router carries on on its next turn
// (metaRouter.finishPasswordChecks, metaRouter.finishNewPassword).
//
// A new password holds up every metadata write behind it (the router runs them one
// at a time), a login only itself: so there is at most one new password at a time,
// and the workers take it before any login.
//
// Shard 0 is the only caller of the submit, collect and await methods; the workers
// share nothing with it but what is under mu.
type passwordWorkers struct {
	wake func() // shard 0's Wake

	// verify is metadata.VerifyPassword and hash is (*newPassword).propose; tests
	// hold the work with their own. Read and written under mu.
	verify func(hash string, password []byte) bool
	hash   func(n *newPassword) ([]byte, error)

	mu sync.Mutex
	// cond is signalled when work arrives, broadcast when the workers close or a
	// new password is hashed: shard 0 waits on it too, in awaitHash only, while it
	// submits nothing.
	cond sync.Cond
	// Logins: submitted, not yet taken by a worker; verified, not yet collected.
	todo []*passwordCheck
	done []*passwordCheck
	// The new password in flight, at most one of the three: submitted, not yet
	// taken; being hashed by a worker; hashed, not yet collected.
	pending *newPassword
	hashing *newPassword
	hashed  *newPassword
	// awaitingHash: shard 0 is stopping and waits for the new password a worker
	// is hashing (tests watch it).
	awaitingHash bool
	closed       bool         // workers exit once todo and pending are empty
	ready        atomic.Int32 // len(done), read by shard 0 without the lock
	hashReady    atomic.Bool  // hashed != nil, read by shard 0 without the lock
	workers      sync.WaitGroup
}

// passwordCheck is one login's password on its way through the workers. The worker
// reads hash and password and writes match; it never touches the job, whose request
// frame lives in a shard's arena.
type passwordCheck struct {
	job      *job
	hash     string // the PHC string verified against (metadata.PasswordHashToCheck)
	password []byte // a copy of the password from the request
	match    bool
}

// newPassword is a CreateUser or ChangePassword on its way through the workers: the
// state it needs was read on shard 0 (newPasswordOf), and the worker computes the
// proposal from copies, writing proposal and err. Like a check, it never touches the
// job.
type newPassword struct {
	job  *job
	op   wire.Operation // OperationCreateUser or OperationChangePassword
	body []byte         // a copy of the request's body
	salt []byte         // metadata.PasswordSaltBytes random bytes for the new hash
	// currentHash is what a ChangePassword's current password is verified against
	// (metadata.State.ChangePasswordCurrentHash).
	currentHash string

	proposal []byte
	err      error
}

// propose computes the proposal: one argon2id run for CreateUser, two for
// ChangePassword (the current password verified, the new one hashed).
func (n *newPassword) propose() ([]byte, error) {
	if n.op == wire.OperationChangePassword {
		return metadata.ProposeChangePasswordWith(nil, n.body, n.currentHash, n.salt)
	}
	return metadata.ProposeCreateUser(nil, n.body, n.salt)
}

// passwordWorkersCount is how many argon2id runs go at once: argon2id is
// memory-hard (19 MiB each), and the shards need the CPUs more than a login storm
// does.
const passwordWorkersCount = 2

func newPasswordWorkers(wake func()) *passwordWorkers {
	v := &passwordWorkers{wake: wake, verify: metadata.VerifyPassword, hash: (*newPassword).propose}
	v.cond.L = &v.mu
	for range passwordWorkersCount {
		v.workers.Go(v.work)
	}
	return v
}

func (v *passwordWorkers) work() {
	for {
		v.mu.Lock()
		for v.pending == nil && len(v.todo) == 0 && !v.closed {
			v.cond.Wait()
		}
		if n := v.pending; n != nil {
			v.pending, v.hashing = nil, n
			hash := v.hash
			v.mu.Unlock()

			n.proposal, n.err = hash(n)

			v.mu.Lock()
			v.hashing, v.hashed = nil, n
			v.hashReady.Store(true)
			v.mu.Unlock()
			v.cond.Broadcast() // shard 0 may be waiting for it (awaitHash)
			v.wake()
			continue
		}
		if len(v.todo) == 0 {
			v.mu.Unlock()
			return
		}
		c := v.todo[0]
		v.todo[0] = nil
		v.todo = v.todo[1:]
		verify := v.verify
		v.mu.Unlock()

		c.match = verify(c.hash, c.password)

		v.mu.Lock()
		v.done = append(v.done, c)
		v.ready.Store(int32(len(v.done)))
		v.mu.Unlock()
		v.wake()
	}
}

// submit queues a login's check; it never blocks.
func (v *passwordWorkers) submit(c *passwordCheck) {
	v.mu.Lock()
	v.todo = append(v.todo, c)
	v.mu.Unlock()
	v.cond.Signal()
}

// submitHash hands over the new password to hash; it never blocks. Another must not
// be in flight.
func (v *passwordWorkers) submitHash(n *newPassword) {
	v.mu.Lock()
	if v.pending != nil || v.hashing != nil || v.hashed != nil {
		v.mu.Unlock()
		panic("server: a new password to hash while another is in flight")
	}
	v.pending = n
	v.mu.Unlock()
	v.cond.Signal()
}

// collect appends the verified checks to dst and forgets them.
func (v *passwordWorkers) collect(dst []*passwordCheck) []*passwordCheck {
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

// collectHash returns the hashed new password, if any.
func (v *passwordWorkers) collectHash() *newPassword {
	if !v.hashReady.Load() {
		return nil
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.takeHashed()
}

func (v *passwordWorkers) takeHashed() *newPassword {
	n := v.hashed
	v.hashed = nil
	v.hashReady.Store(false)
	return n
}

// awaitHash returns the new password in flight once it is hashed: for a stopping
// shard 0, which finishes the metadata write waiting for it. One no worker has taken
// yet is hashed on the caller's goroutine rather than after the logins a worker may
// be verifying.
func (v *passwordWorkers) awaitHash() *newPassword {
	v.mu.Lock()
	if n := v.pending; n != nil {
		v.pending = nil
		hash := v.hash
		v.mu.Unlock()
		n.proposal, n.err = hash(n)
		return n
	}
	defer v.mu.Unlock()
	if v.hashing == nil && v.hashed == nil {
		panic("server: awaiting a new password's hash with none in flight")
	}
	v.awaitingHash = true
	for v.hashed == nil {
		v.cond.Wait()
	}
	v.awaitingHash = false
	return v.takeHashed()
}

// close lets the workers finish the work they hold, drops the logins not yet taken
// and waits for the workers to exit.
func (v *passwordWorkers) close() {
	v.mu.Lock()
	v.closed = true
	clear(v.todo)
	v.todo = nil
	v.mu.Unlock()
	v.cond.Broadcast()
	v.workers.Wait()
}
