package shard

import "time"

// ReplicaRedialDelayMin is the wait before the first redial of a peer whose connect
// was refused or failed. The wait doubles with each failure up to ReconnectPeriod and
// starts again at this once a connect succeeds.
//
// Nodes of a cluster are seldom started in the same millisecond. Without it, a node
// started a moment before its peer would redial only after ReconnectPeriod (5 s), by
// which time a backup's heartbeat timeout (also 5 s) has run out and the cluster
// changes view for nothing. Doubling keeps a dead peer cheap: 100 ms, 200 ms, 400 ms,
// ... then one dial every ReconnectPeriod, about seven dials in its first ten seconds.
const ReplicaRedialDelayMin = 100 * time.Millisecond

// redialBackoff spaces the dials of one peer after failed connects. It is pure: the
// shard's clock is an input.
type redialBackoff struct {
	nextDelayNs int64 // the wait after the next failure; 0: ReplicaRedialDelayMin
	dueNs       int64 // no dial before this; 0: dial when asked
}

// failed records a refused or failed connect at nowNs and returns when the peer may
// be dialed again.
func (b *redialBackoff) failed(nowNs int64, reconnectPeriod time.Duration) int64 {
	delayNs := b.nextDelayNs
	if delayNs == 0 {
		delayNs = int64(min(ReplicaRedialDelayMin, reconnectPeriod))
	}
	b.dueNs = nowNs + delayNs
	b.nextDelayNs = min(2*delayNs, int64(reconnectPeriod))
	return b.dueNs
}

// connected forgets the failures: the next failure waits ReplicaRedialDelayMin again.
func (b *redialBackoff) connected() { *b = redialBackoff{} }

// ready reports whether the peer may be dialed at nowNs.
func (b *redialBackoff) ready(nowNs int64) bool { return nowNs >= b.dueNs }

// armDialTimer makes sure shard 0 runs dialPeers again by deadlineNs. Timers are
// never cancelled, so an earlier deadline pushes a second timer; the one that fires
// when dialTimerDueNs is not its deadline was superseded and does nothing.
func (s *Shard) armDialTimer(deadlineNs int64) {
	l := &s.replica.listener
	if l.dialTimerDueNs != 0 && l.dialTimerDueNs <= deadlineNs {
		return
	}
	l.dialTimerDueNs = deadlineNs
	s.clock.timers.Push(timer{deadlineNs: deadlineNs, kind: timerReplicaDial})
}

// onDialTimer runs dialPeers for the timer armDialTimer armed last.
func (s *Shard) onDialTimer(t timer) {
	l := &s.replica.listener
	if t.deadlineNs != l.dialTimerDueNs {
		return
	}
	l.dialTimerDueNs = 0
	if !s.stopping {
		s.dialPeers()
	}
}

// dialFailed records a peer's refused or failed connect and arms its redial.
func (s *Shard) dialFailed(peer int) {
	s.counters.replica.dialsFailed.Add(1)
	s.redialLater(peer)
}

// redialLater arms the redial of a peer whose dial failed now.
func (s *Shard) redialLater(peer int) {
	if s.stopping {
		return
	}
	s.armDialTimer(s.replica.dials[peer].backoff.failed(s.clock.nowNs, s.rt.replica.cfg.ReconnectPeriod))
}
