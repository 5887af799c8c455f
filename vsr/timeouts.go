package vsr

import (
	"errors"
	"fmt"
)

// The timeouts: each a deadline in the replica's ticks (zero is off), armed by the
// sub-protocol that waits on it and fired by Tick (step.go). The caller ticks a
// group only when NextDeadline falls due (Timers, timers.go).

// Timing is the consensus timers in ticks (the reference server ticks every 10 ms;
// see iggy.apache.org/docs/clustering/configuration for the settings and rules).
type Timing struct {
	HeartbeatTimeoutTicks           uint64
	CommitBroadcastIntervalTicks    uint64
	PrepareRetransmitIntervalTicks  uint64
	ViewChangeRetransmitTicks       uint64
	ViewChangeStatusTimeoutTicks    uint64
	RequestStartViewRetransmitTicks uint64
	ViewProbeAttemptsMax            int
	RepairRetryIntervalTicks        uint64
	RepairChunkMax                  int
}

// TimingDefault is the reference server's defaults at its 10 ms tick.
var TimingDefault = Timing{
	HeartbeatTimeoutTicks:           500,
	CommitBroadcastIntervalTicks:    50,
	PrepareRetransmitIntervalTicks:  25,
	ViewChangeRetransmitTicks:       50,
	ViewChangeStatusTimeoutTicks:    500,
	RequestStartViewRetransmitTicks: 100,
	ViewProbeAttemptsMax:            5,
	RepairRetryIntervalTicks:        100,
	RepairChunkMax:                  128,
}

func (t Timing) validate() error {
	switch {
	case t.HeartbeatTimeoutTicks == 0 || t.CommitBroadcastIntervalTicks == 0 || t.PrepareRetransmitIntervalTicks == 0 ||
		t.ViewChangeRetransmitTicks == 0 || t.ViewChangeStatusTimeoutTicks == 0 ||
		t.RequestStartViewRetransmitTicks == 0 || t.RepairRetryIntervalTicks == 0:
		return errors.New("vsr: every timer must be at least one tick")
	case t.HeartbeatTimeoutTicks < 4*t.CommitBroadcastIntervalTicks:
		return fmt.Errorf("vsr: heartbeat timeout %d ticks below 4x the commit broadcast interval %d", t.HeartbeatTimeoutTicks, t.CommitBroadcastIntervalTicks)
	case t.ViewChangeStatusTimeoutTicks < 4*t.ViewChangeRetransmitTicks:
		return fmt.Errorf("vsr: view change status timeout %d ticks below 4x the retransmit interval %d", t.ViewChangeStatusTimeoutTicks, t.ViewChangeRetransmitTicks)
	case t.ViewProbeAttemptsMax < 1 || t.ViewProbeAttemptsMax > 100:
		return fmt.Errorf("vsr: view probe attempts %d outside 1..100", t.ViewProbeAttemptsMax)
	case t.RepairChunkMax < 1 || t.RepairChunkMax > 1024:
		return fmt.Errorf("vsr: repair chunk %d outside 1..1024", t.RepairChunkMax)
	}
	return nil
}

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

// startTimers arms the timeouts of the replica's status and role, as it enters
// them (a view started or adopted, a group created or recovered).
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
