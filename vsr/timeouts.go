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
	c.timeouts.heartbeatAt, c.timeouts.commitAt, c.timeouts.retransmitAt, c.timeouts.svcAt, c.timeouts.viewChangeAt, c.timeouts.probeAt = 0, 0, 0, 0, 0, 0
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
	for _, t := range [...]uint64{c.timeouts.heartbeatAt, c.timeouts.commitAt, c.timeouts.retransmitAt, c.timeouts.svcAt, c.timeouts.viewChangeAt, c.timeouts.probeAt, c.timeouts.repairAt, c.forwardDeadline(), c.transferDeadline()} {
		if t != 0 && (d == 0 || t < d) {
			d = t
		}
	}
	return d
}

// Tick advances the replica's clock by one tick and fires what is due.
func (c *Core) Tick() {
	c.checkNoReadyOut("Tick")
	c.now++
	if d := c.NextDeadline(); d == 0 || c.now < d {
		return
	}
	t := &c.cfg.Timing
	if len(c.forwards.out) > 0 && c.now >= c.forwardDeadline() {
		c.expireForwards()
	}
	if d := c.transferDeadline(); d != 0 && c.now >= d {
		c.transferTick()
	}
	if c.timeouts.heartbeatAt != 0 && c.now >= c.timeouts.heartbeatAt {
		c.timeouts.heartbeatAt = 0
		c.startViewChange(c.view + 1)
		return
	}
	if c.timeouts.commitAt != 0 && c.now >= c.timeouts.commitAt {
		if c.cfg.QuietWhenIdle && c.op == c.commitMax && c.normal.commitBroadcast == c.commitMax && c.normal.commitRepeats >= quietAfterBroadcasts {
			c.timeouts.commitAt = 0 // idle: nothing until the next proposal
		} else {
			c.timeouts.commitAt = c.now + t.CommitBroadcastIntervalTicks
			c.broadcastCommit()
		}
	}
	if c.timeouts.retransmitAt != 0 && c.now >= c.timeouts.retransmitAt {
		c.retransmit()
	}
	if c.timeouts.svcAt != 0 && c.now >= c.timeouts.svcAt {
		c.timeouts.svcAt = c.now + t.ViewChangeRetransmitTicks
		c.sendStartViewChange()
		if c.vc.dvcSent && c.Primary() != c.cfg.ReplicaID {
			c.sendDoViewChange()
		}
		if c.vc.mergeDone {
			c.maybeRepair()
		}
	}
	if c.timeouts.viewChangeAt != 0 && c.now >= c.timeouts.viewChangeAt {
		c.timeouts.viewChangeAt = 0
		c.startViewChange(c.view + 1)
		return
	}
	if c.timeouts.probeAt != 0 && c.now >= c.timeouts.probeAt {
		c.timeouts.probeAt = c.now + t.RequestStartViewRetransmitTicks
		if c.status == StatusRecovering {
			c.timeouts.probeCount++
			if c.timeouts.probeCount >= t.ViewProbeAttemptsMax {
				// Nobody leads a view that answers: the whole cluster restarted.
				// Elect on the recovered log.
				c.startViewChange(c.view + 1)
				return
			}
		}
		c.sendRequestStartView(broadcast)
	}
	if c.timeouts.repairAt != 0 && c.now >= c.timeouts.repairAt {
		c.timeouts.repairAt = 0
		c.repair.active = false
		c.repair.peer++
		c.startRepair()
	}
}
