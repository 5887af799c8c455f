package server

import (
	"sync"
	"sync/atomic"

	"github.com/iggy-shard/iggy-shard/metadata"
)

// passwordVerifier checks logins' passwords against their argon2id hashes on goroutines
// of its own. One verification costs tens of milliseconds of CPU and 19 MiB; done on
// shard 0 it would stall every connection and partition that shard serves for as
// long, once per login, and a reconnecting fleet would stall it for seconds. Shard 0
// hands a check over and goes on serving; a worker verifies, queues the verdict and
// wakes shard 0 (shard.Shard.Wake), whose metadata router finishes the login on its
// next turn (metaRouter.finishPasswordChecks).
//
// Shard 0 is the only caller of submit and collect; the workers share nothing with it
// but the two queues under mu.
type passwordVerifier struct {
	wake func() // shard 0's Wake

	// verify is metadata.VerifyPassword; tests hold a check with their own. Read
	// and written under mu.
	verify func(hash string, password []byte) bool

	mu      sync.Mutex
	cond    sync.Cond        // signalled when todo grows or the verifier closes
	todo    []*passwordCheck // submitted, not yet taken by a worker
	done    []*passwordCheck // verified, not yet collected
	closed  bool             // workers exit once todo is empty
	ready   atomic.Int32     // len(done), read by shard 0 without the lock
	workers sync.WaitGroup
}

// passwordCheck is one login's password on its way through the verifier. The worker
// reads hash and password and writes match; it never touches the job, whose request
// frame lives in a shard's arena.
type passwordCheck struct {
	job      *job
	hash     string // the PHC string verified against (metadata.PasswordHashToCheck)
	password []byte // a copy of the password from the request
	match    bool
}

// passwordWorkers is how many logins are verified at once: argon2id is memory-hard
// (19 MiB each), and the shards need the CPUs more than a login storm does.
const passwordWorkers = 2

func newPasswordVerifier(wake func()) *passwordVerifier {
	v := &passwordVerifier{wake: wake, verify: metadata.VerifyPassword}
	v.cond.L = &v.mu
	for range passwordWorkers {
		v.workers.Go(v.work)
	}
	return v
}

func (v *passwordVerifier) work() {
	for {
		v.mu.Lock()
		for len(v.todo) == 0 && !v.closed {
			v.cond.Wait()
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

// submit queues a check; it never blocks.
func (v *passwordVerifier) submit(c *passwordCheck) {
	v.mu.Lock()
	v.todo = append(v.todo, c)
	v.mu.Unlock()
	v.cond.Signal()
}

// collect appends the verified checks to dst and forgets them.
func (v *passwordVerifier) collect(dst []*passwordCheck) []*passwordCheck {
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

// close lets the workers finish the checks they hold, drops the rest and waits for
// the workers to exit.
func (v *passwordVerifier) close() {
	v.mu.Lock()
	v.closed = true
	clear(v.todo)
	v.todo = nil
	v.mu.Unlock()
	v.cond.Broadcast()
	v.workers.Wait()
}
