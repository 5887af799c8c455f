package shard

import (
	"time"

	"golang.org/x/sys/unix"

	"github.com/iggy-shard/iggy-shard/ring"
)

// acceptor is one listening socket's multishot accept on shard 0, the client
// listener's or the replica plane's: armed, re-armed when the kernel ends it, paused
// after a failure its plane says to wait out, and cancelled (then closed) at a stop.
// What the two planes do differently, with an accepted socket and after a failure,
// is their acceptPolicy.
type acceptor struct {
	fd           int // -1 when this shard does not listen or stopped listening
	armed        bool
	cancelSent   bool
	backoff      time.Duration // the pause after the last failure; 0 after a success
	backoffArmed bool          // a retry timer is pending
	backingOff   bool          // logged once per episode, not per retry

	completion completionKind // the accept's kind: kindAccept or kindReplicaAccept
	cancel     completionKind // its cancellation's
	retry      timerKind      // the timer that arms it again after a pause
	policy     acceptPolicy
}

// acceptPolicy is what a plane does with its listener's accepts.
type acceptPolicy interface {
	// accepted takes a socket the listener accepted.
	accepted(s *Shard, fd int)
	// failed logs an accept failure and returns how long to wait before accepting
	// again; 0 accepts again at once.
	failed(s *Shard, a *acceptor, errno unix.Errno) time.Duration
}

func (a *acceptor) closed() bool { return a.fd < 0 }

func (a *acceptor) arm(s *Shard) {
	if a.armed || a.closed() {
		return
	}
	sqe := s.getSQE()
	// Blocking sockets on purpose: io_uring arms a poll and retries when a blocking
	// socket is not ready, but hands EAGAIN back for an O_NONBLOCK one (a full send
	// buffer would then look like an error).
	sqe.PrepareAcceptMultishot(a.fd, unix.SOCK_CLOEXEC)
	sqe.UserData = userData(a.completion, 0)
	a.armed = true
}

func (a *acceptor) onCompletion(s *Shard, cqe *ring.CQE) {
	if !cqe.More() {
		a.armed = false
	}
	if cqe.Res >= 0 {
		if a.backingOff {
			s.log.Info("accept recovered")
			a.backingOff = false
		}
		a.backoff = 0
		a.policy.accepted(s, int(cqe.Res))
	} else if errno := unix.Errno(-cqe.Res); !(errno == unix.ECANCELED && s.stopping) {
		// ECANCELED while stopping: stop cancelled it.
		if pause := a.policy.failed(s, a, errno); pause > 0 && !s.stopping {
			// Retry once something was freed, without spinning on a listener that
			// keeps failing (connections wait in the kernel's accept queue).
			if !a.armed && !a.backoffArmed {
				a.backoffArmed = true
				s.clock.timers.Push(timer{deadlineNs: s.clock.nowNs + int64(pause), kind: a.retry})
			}
			return
		}
	}
	if s.stopping {
		if !a.armed && !a.closed() {
			unix.Close(a.fd)
			a.fd = -1
		}
		return
	}
	if !a.armed && !a.backoffArmed {
		a.arm(s)
	}
}

// onRetry is the retry timer's: accept again, unless the shard is stopping.
func (a *acceptor) onRetry(s *Shard) {
	a.backoffArmed = false
	if !s.stopping {
		a.arm(s)
	}
}

// stop cancels the accept; the descriptor is closed when the cancelled accept
// completes (the kernel may still be using it until then).
func (a *acceptor) stop(s *Shard) {
	if a.closed() {
		return
	}
	if !a.armed {
		unix.Close(a.fd)
		a.fd = -1
		return
	}
	if !a.cancelSent {
		a.cancelSent = true
		s.submitCancel(userData(a.completion, 0), userData(a.cancel, 0))
	}
}

// closeFd closes the listening socket if it is still open; once the shard exited.
func (a *acceptor) closeFd() {
	if a.fd >= 0 {
		unix.Close(a.fd)
		a.fd = -1
	}
}

// acceptBackoffMin and acceptBackoffMax bound the pause before accepting again after the
// process or system ran out of descriptors or memory: short enough to recover quickly
// once a connection closes, long enough not to spin on a listener that keeps failing.
const (
	acceptBackoffMin = 10 * time.Millisecond
	acceptBackoffMax = time.Second
)
