package vsr

import (
	"errors"
	"fmt"

	"github.com/iggy-shard/iggy-shard/wire"
)

// Recovery: a restarted replica resumes from its journal and its caller's last
// checkpoint. Unless it is a group of one, it does not trust what it finds: it
// probes the cluster (RequestStartView) for the view it should follow, and the
// primary answers with a StartView (viewchange.go).

// CoreRecovered is what a restarted replica found on disk: its durable state and the
// headers of the intact journal entries (their bodies are in Storage), in any order.
type CoreRecovered struct {
	State   DurableState
	Headers []wire.PrepareHeader
	// Faulty are the ops whose journal entries were found corrupt (and, for a
	// torn write, the op whose entry cannot be proven never written): the
	// replica may have acknowledged them, so it must never nack them in a view
	// change (a nack quorum could then truncate a committed op), as
	// TigerBeetle's faulty journal slots and "Viewstamped Replication
	// Revisited"'s recovery protocol require. Each is neither present nor nacked
	// in a DoViewChange and is repaired from a peer. An op also in Headers or
	// ViewHeaders is not faulty. Only a group of several replicas can have them:
	// a group of one has no peer to repair from, so a corrupt synced entry is
	// data loss there (Recover refuses it).
	Faulty []uint64
	// ViewHeaders are the last persisted Ready.ViewHeaders.
	ViewHeaders []wire.PrepareHeader
	// Checkpoint is the last op the caller's restored state already holds (a
	// snapshot): it is not applied again, and the journal may start after it.
	Checkpoint Checkpoint
}

// Checkpoint names the op a snapshot was taken at.
type Checkpoint struct {
	Op        uint64
	Identity  wire.Uint128
	Timestamp uint64
}

// Recover resumes a restarted replica from its journal. A group of one replica is
// its own quorum: everything journaled is committed. A replica of a larger group
// does not trust its log: it enters Recovering and probes the cluster with
// RequestStartView (falling back to an election after ViewProbeAttemptsMax probes).
func (c *Core) Recover(rec CoreRecovered) error {
	if c.op != 0 || c.now != 0 {
		return errors.New("vsr: recover on a replica that already ran")
	}
	if rec.State.LogView > rec.State.View {
		return fmt.Errorf("vsr: recovered log view %d above view %d", rec.State.LogView, rec.State.View)
	}
	if len(rec.Faulty) > 0 && c.cfg.ReplicaCount == 1 {
		return fmt.Errorf("vsr: %d faulty journal entries in a group of one replica: nobody can repair them", len(rec.Faulty))
	}
	base := rec.Checkpoint.Op
	c.view, c.logView = rec.State.View, rec.State.LogView
	c.durable = rec.State
	c.op = base
	for _, headers := range [][]wire.PrepareHeader{rec.Headers, rec.ViewHeaders} {
		for i := range headers {
			h := &headers[i]
			// Its primary's group id, tagged or not (checkGroup).
			if h.Op == 0 || !h.IdentityValid() || !wire.SameGroup(h.Group, c.cfg.Group) {
				return fmt.Errorf("vsr: recovered header for op %d is not a valid prepare of this group", h.Op)
			}
			c.op = max(c.op, h.Op)
		}
	}
	for _, op := range rec.Faulty {
		if op == 0 {
			return errors.New("vsr: recovered faulty op 0")
		}
		if op > base {
			c.op = max(c.op, op)
		}
	}
	slots := uint64(len(c.log.slots))
	inWindow := func(op uint64) bool { return op > base && op+slots > c.op }
	for i := range rec.Headers {
		h := &rec.Headers[i]
		if base > 0 && h.Op == base && h.Checksum == rec.Checkpoint.Identity && base+slots > c.op {
			// The checkpoint's own op stays known: a view change needs the header
			// at the commit point to anchor the log (journals keep it when they
			// drain to a snapshot).
			c.log.slots[base%slots] = slot{header: *h, trusted: true, body: bodyDurable}
			continue
		}
		if !inWindow(h.Op) {
			continue // applied in the checkpoint, or beyond the window
		}
		s := &c.log.slots[h.Op%slots]
		s.header = *h
		s.body = bodyDurable
		// Entries at or above the durable commit point belong to the log view's log
		// (or a newer view's): a view adoption discards what disagrees there before
		// it persists the log view. Below, stale entries of older views may remain.
		s.trusted = h.Op >= rec.State.CommitMax || c.cfg.ReplicaCount == 1
	}
	for _, op := range rec.Faulty {
		if !inWindow(op) || c.slotAt(op) != nil {
			continue // applied in the checkpoint, or an intact entry of it was found
		}
		s := &c.log.slots[op%slots]
		*s = slot{faulty: true}
		s.header.Op = op
	}
	for i := range rec.ViewHeaders {
		h := &rec.ViewHeaders[i]
		if !inWindow(h.Op) {
			continue
		}
		s := &c.log.slots[h.Op%slots]
		if s.header.Op == h.Op && s.header.Checksum == h.Checksum {
			continue
		}
		faulty := s.header.Op == h.Op && s.faulty
		if s.header.Op == h.Op && !faulty {
			c.rd.Discards = append(c.rd.Discards, h.Op)
		}
		// A faulty op stays faulty with its header known: its body may have been
		// acknowledged.
		*s = slot{header: *h, trusted: true, faulty: faulty}
	}
	c.commitMin = base
	c.log.retainedLow = base + 1
	c.log.checkpointOp = base
	c.commitMax = min(max(rec.State.CommitMax, base), c.op)
	c.log.trustLow = c.op + 1
	for c.log.trustLow > base+1 && c.slotAt(c.log.trustLow-1) != nil && c.slotAt(c.log.trustLow-1).trusted {
		c.log.trustLow--
	}
	if head := c.slotAt(c.op); head != nil {
		c.log.lastPrepareChecksum = head.header.Checksum
		c.log.lastTimestamp = head.header.Timestamp
	} else if c.op == base {
		c.log.lastPrepareChecksum = rec.Checkpoint.Identity
		c.log.lastTimestamp = rec.Checkpoint.Timestamp
	}
	if c.cfg.ReplicaCount == 1 {
		// The replica is its own quorum: an op was acknowledged only once it and
		// every op before it were durable, so entries after a hole are the torn rest
		// of the last unsynced batch.
		head := base
		for c.slotAt(head+1) != nil {
			head++
		}
		if head < c.op {
			c.truncateAbove(head)
			c.op = head
		}
		c.log.trustLow = base + 1
		if hs := c.slotAt(c.op); hs != nil {
			c.log.lastPrepareChecksum, c.log.lastTimestamp = hs.header.Checksum, hs.header.Timestamp
		} else {
			c.log.lastPrepareChecksum, c.log.lastTimestamp = rec.Checkpoint.Identity, rec.Checkpoint.Timestamp
		}
		c.commitMax = c.op
		c.status = StatusNormal
		c.startTimers()
		return nil
	}
	c.status = StatusRecovering
	c.timeouts.probeCount = 0
	c.sendRequestStartView(broadcast)
	c.timeouts.probeAt = c.now + c.cfg.Timing.RequestStartViewRetransmitTicks
	c.timeouts.heartbeatAt, c.timeouts.commitAt, c.timeouts.retransmitAt = 0, 0, 0
	return nil
}

func (c *Core) sendRequestStartView(to uint8) {
	c.targets(to, func(peer uint8) {
		h := c.message(peer, wire.CommandRequestStartView)
		r := (*wire.RequestStartViewHeader)(headerPointer(h))
		r.Group = c.cfg.Group
		if c.status == StatusRecovering {
			r.Incarnation = c.cfg.Incarnation
		}
		c.seal(nil)
	})
}

func (c *Core) onRequestStartView(m *wire.RequestStartViewHeader) error {
	if err := c.checkGroup(m.Group); err != nil {
		return err
	}
	if m.Replica == c.cfg.ReplicaID {
		return c.drop(DropNotForRole)
	}
	if c.IsPrimary() && c.logView == c.view && m.View <= c.view {
		c.sendStartView(m.Replica, m.Incarnation)
		return nil
	}
	// The primary of our own view probes: it restarted and lost its state, so the
	// view cannot go on. Elect at once.
	if c.status == StatusNormal && m.View == c.view && m.Replica == c.Primary() && !c.IsPrimary() && !m.Incarnation.IsZero() {
		c.startViewChange(c.view + 1)
		return nil
	}
	switch {
	case m.View > c.view:
		return c.drop(DropNewerView) // its StartView is not ours to send
	case c.status != StatusNormal:
		return c.drop(DropNotNormal)
	}
	return c.drop(DropNotForRole) // a backup does not answer probes
}

// onProbeTimeout probes again, and reports whether a recovering replica gave up
// probing and started an election instead.
func (c *Core) onProbeTimeout() (electing bool) {
	t := &c.cfg.Timing
	c.timeouts.probeAt = c.now + t.RequestStartViewRetransmitTicks
	if c.status == StatusRecovering {
		c.timeouts.probeCount++
		if c.timeouts.probeCount >= t.ViewProbeAttemptsMax {
			// Nobody leads a view that answers: the whole cluster restarted.
			// Elect on the recovered log.
			c.startViewChange(c.view + 1)
			return true
		}
	}
	c.sendRequestStartView(broadcast)
	return false
}
