package vsr

// The timeouts: each a deadline in the replica's ticks (zero is off), armed by the
// sub-protocol that waits on it and fired by Tick (step.go). The caller ticks a
// group only when NextDeadline falls due (Timers, timers.go).

// timeouts are the replica's deadlines, absolute ticks; zero is off.
type timeouts struct {
	heartbeatAt     uint64 // a backup's: its primary's silence starts a view change
	commitAt        uint64 // a primary's next Commit broadcast
	retransmitAt    uint64 // a primary's next retransmission of unacknowledged prepares
	retransmitCount int    // retransmissions since the last commit, for the backoff
	svcAt           uint64 // the next resend of a view change's messages
	viewChangeAt    uint64 // a view change that took too long moves to the next view
	probeAt         uint64 // a recovering replica's next RequestStartView
	probeCount      int    // the probes that went unanswered
	repairAt        uint64 // a repair round's retry, from the next peer
}

func (c *Core) startTimers() {
	c.normal.hopSilent = false
	t := &c.timeouts
	t.heartbeatAt, t.commitAt, t.retransmitAt, t.svcAt, t.viewChangeAt, t.probeAt = 0, 0, 0, 0, 0, 0
	switch {
	case c.status != StatusNormal:
	case c.Primary() == c.cfg.ReplicaID:
		if c.n() > 1 {
			c.timeouts.commitAt = c.now + c.cfg.Timing.CommitBroadcastIntervalTicks
			c.normal.commitBroadcast = noCommitBroadcast
			if c.op > c.commitMax {
				c.timeouts.retransmitAt = c.now + c.cfg.Timing.PrepareRetransmitIntervalTicks
			}
		}
	default:
		c.timeouts.heartbeatAt = c.now + c.cfg.Timing.HeartbeatTimeoutTicks
	}
}

// NextDeadline is the tick at which the replica next has something to do on its
// own (zero: nothing until a message arrives). A shard driving thousands of groups
// keeps them ordered by it and ticks only those due, so an idle group costs nothing.
func (c *Core) NextDeadline() uint64 {
	d := uint64(0)
	t := &c.timeouts
	for _, at := range [...]uint64{t.heartbeatAt, t.commitAt, t.retransmitAt, t.svcAt, t.viewChangeAt, t.probeAt, t.repairAt, c.forwardDeadline(), c.transferDeadline()} {
		if at != 0 && (d == 0 || at < d) {
			d = at
		}
	}
	return d
}
