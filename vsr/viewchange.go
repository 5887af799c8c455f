package vsr

import "github.com/iggy-shard/iggy-shard/wire"

// The view change: a replica that stops hearing its primary (or is asked to)
// moves to the next view and says so (StartViewChange); once a view-change quorum
// agrees, each sends the new view's primary its vote (DoViewChange: its log's
// suffix, with what it holds and what it never prepared), the primary merges a
// quorum of votes into the canonical log (merge.go), repairs the bodies it lacks,
// and starts the view (StartView), which every backup adopts.

// viewChange is the state of a view change: the votes of the view being elected,
// and the answers a replica sends to peers that missed a view.
type viewChange struct {
	svcFrom   uint32          // StartViewChange heard, by replica bit
	dvcSent   bool            // this replica's vote is cast
	dvcs      []*doViewChange // by replica, this view only
	mergeDone bool            // candidate installed the merged log, repairing
	// svQuietUntil[replica] is the tick before which a primary does not tell that stale
	// replica its view again (answerStaleView).
	svQuietUntil []uint64
	// rsvNextAt is when this replica may next ask a newer view's primary for
	// its StartView.
	rsvNextAt uint64
}

// onNewerView: a frame of a view this replica has not joined. It asks that view's
// primary for a StartView (at most once a tick).
func (c *Core) onNewerView(view uint32) {
	if c.now < c.vc.rsvNextAt || c.PrimaryOf(view) == c.cfg.ReplicaID {
		return
	}
	c.vc.rsvNextAt = c.now + c.cfg.Timing.RequestStartViewRetransmitTicks
	c.sendRequestStartView(c.PrimaryOf(view))
}

// answerStaleView: a primary hearing a replica that has not joined its view (an
// older view's frame, or a view change for the view it already started) tells it
// the view.
func (c *Core) answerStaleView(replica uint8) {
	if !c.IsPrimary() || replica == c.cfg.ReplicaID || (c.vc.svQuietUntil[replica] != 0 && c.now < c.vc.svQuietUntil[replica]) {
		return
	}
	c.vc.svQuietUntil[replica] = c.now + c.cfg.Timing.ViewChangeRetransmitTicks
	c.sendStartView(replica, wire.Uint128{})
}

func (c *Core) startViewChange(view uint32) {
	if len(c.forwards.in) > 0 {
		c.answerForwards(true)
	}
	c.forwards.sessionEnds = c.forwards.sessionEnds[:0]
	c.view = view
	c.status = StatusViewChange
	c.abandonForwards()
	c.vc.svcFrom = 1 << c.cfg.ReplicaID
	c.vc.dvcSent = false
	clear(c.vc.dvcs)
	c.vc.mergeDone = false
	clear(c.normal.pipeline)
	c.repair.active, c.timeouts.repairAt = false, 0
	c.timeouts.heartbeatAt, c.timeouts.commitAt, c.timeouts.retransmitAt, c.timeouts.probeAt = 0, 0, 0, 0
	c.timeouts.svcAt = c.now + c.cfg.Timing.ViewChangeRetransmitTicks
	c.timeouts.viewChangeAt = c.now + c.cfg.Timing.ViewChangeStatusTimeoutTicks
	c.normal.heartbeatTokenSeen = 0
	c.persist()
	c.sendStartViewChange()
	c.checkStartViewChangeQuorum()
}

func (c *Core) sendStartViewChange() {
	c.targets(broadcast, func(peer uint8) {
		h := c.message(peer, wire.CommandStartViewChange)
		(*wire.StartViewChangeHeader)(headerPointer(h)).Group = c.cfg.Group
		c.seal(nil)
	})
}

func (c *Core) onStartViewChange(m *wire.StartViewChangeHeader) error {
	if err := c.checkGroup(m.Group); err != nil {
		return err
	}
	if c.status == StatusRecovering {
		return c.drop(DropNotNormal)
	}
	switch {
	case m.View < c.view:
		c.answerStaleView(m.Replica)
		return c.drop(DropOlderView)
	case m.View > c.view:
		c.startViewChange(m.View)
	case c.status != StatusViewChange:
		// Our view already started; the sender missed its StartView.
		c.answerStaleView(m.Replica)
		return c.drop(DropOlderView)
	case c.vc.svcFrom&(1<<m.Replica) != 0:
		return c.drop(DropDuplicate)
	}
	c.vc.svcFrom |= 1 << m.Replica
	c.checkStartViewChangeQuorum()
	return nil
}

func (c *Core) checkStartViewChangeQuorum() {
	if c.vc.dvcSent || popcount(c.vc.svcFrom) < QuorumViewChange(c.n()) {
		return
	}
	c.vc.dvcSent = true
	if c.Primary() == c.cfg.ReplicaID {
		c.vc.dvcs[c.cfg.ReplicaID] = c.ownDoViewChange()
		c.checkDoViewChangeQuorum()
		return
	}
	c.sendDoViewChange()
}

func (c *Core) sendDoViewChange() {
	d := c.ownDoViewChange()
	h := c.message(c.Primary(), wire.CommandDoViewChange)
	v := (*wire.DoViewChangeHeader)(headerPointer(h))
	v.Op = d.op
	v.Commit = d.commit
	v.Group = c.cfg.Group
	v.LogView = d.logView
	v.NackBitset = d.nack
	v.PresentBitset = d.present
	body := c.bodyBuffer(len(d.headers) * wire.HeaderSize)
	for i := range d.headers {
		d.headers[i].View = 0
		d.headers[i].Put(body[i*wire.HeaderSize:])
	}
	c.seal(body)
}

// decodeSuffix checks a DoViewChange or StartView body: consecutive ops from head
// down, each a valid identity (blanks aside), chained by parent.
func (c *Core) decodeSuffix(body []byte, head uint64, blanksAllowed bool) ([]wire.PrepareHeader, error) {
	count := len(body) / wire.HeaderSize
	headers := make([]wire.PrepareHeader, count)
	for i := 0; i < count; i++ {
		copy(wire.HeaderBytes(&headers[i])[:], body[i*wire.HeaderSize:])
		h := &headers[i]
		if h.Op != head-uint64(i) || head < uint64(i) {
			return nil, badMessage("suffix entry %d is op %d, want %d", i, h.Op, head-uint64(i))
		}
		if blanksAllowed && h.Operation == wire.OperationReserved && h.Checksum.IsZero() {
			continue
		}
		// A prepare keeps the group id its primary gave it, tagged or not
		// (checkGroup).
		if h.Command != wire.CommandPrepare || !h.IdentityValid() || !wire.SameGroup(h.Group, c.cfg.Group) {
			return nil, badMessage("suffix entry %d (op %d) is not a valid prepare header", i, h.Op)
		}
		if i > 0 && headers[i-1].Checksum != (wire.Uint128{}) && headers[i-1].Parent != h.Checksum {
			return nil, badMessage("suffix op %d does not chain to op %d", h.Op+1, h.Op)
		}
	}
	return headers, nil
}

func (c *Core) onDoViewChange(m *wire.DoViewChangeHeader, body []byte) error {
	if err := c.checkGroup(m.Group); err != nil {
		return err
	}
	if !m.BodySealValid(body) {
		return badMessage("do view change body seal mismatch")
	}
	headers, err := c.decodeSuffix(body, m.Op, true)
	if err != nil {
		return err
	}
	// The vote's shape is checked before it changes anything: a bad vote of a
	// newer view must not start that view change here.
	d := &doViewChange{logView: m.LogView, op: m.Op, commit: m.Commit, nack: m.NackBitset, present: m.PresentBitset, headers: headers}
	if err := d.checkShape(); err != nil {
		return err
	}
	if c.status == StatusRecovering {
		return c.drop(DropNotNormal)
	}
	if c.voteContradictsApplied(d) {
		// No correct replica casts it (committed.go): it is neither a vote nor a
		// sign that its sender changes view. The view change waits for the other
		// votes, a view-change quorum of correct replicas; if they are too few, it
		// times out and the next view tries again, until that peer catches up (a
		// StartView it can take) or is outvoted.
		return c.drop(DropContradictsCommitted)
	}
	if m.View > c.view {
		c.startViewChange(m.View)
	}
	if m.View < c.view || c.status != StatusViewChange {
		c.answerStaleView(m.Replica)
		return c.drop(DropOlderView)
	}
	counted := c.vc.svcFrom&(1<<m.Replica) != 0
	c.vc.svcFrom |= 1 << m.Replica
	if c.Primary() != c.cfg.ReplicaID {
		// At a replica that will not lead the view, a vote counts as a
		// StartViewChange.
		c.checkStartViewChangeQuorum()
		if counted {
			return c.drop(DropDuplicate)
		}
		return nil
	}
	duplicate := c.vc.dvcs[m.Replica] != nil
	if !duplicate {
		c.vc.dvcs[m.Replica] = d
	}
	c.checkStartViewChangeQuorum()
	c.checkDoViewChangeQuorum()
	if duplicate {
		return c.drop(DropDuplicate)
	}
	return nil
}

// maybeStartView starts the view once the new primary holds every uncommitted body
// of the merged log.
func (c *Core) maybeStartView() {
	if !c.vc.mergeDone || c.status != StatusViewChange {
		return
	}
	for op := c.commitMax + 1; op <= c.op; op++ {
		if s := c.slotAt(op); s == nil || s.body == bodyNone {
			c.maybeRepair()
			return
		}
	}
	c.status = StatusNormal
	c.logView = c.view
	c.vc.mergeDone = false
	clear(c.vc.dvcs)
	c.timeouts.svcAt, c.timeouts.viewChangeAt = 0, 0
	c.persistLog()
	clear(c.normal.pipeline)
	for op := c.commitMax + 1; op <= c.op; op++ {
		s := c.slotAt(op)
		e := coreEntry{op: op, identity: s.header.Checksum}
		if s.body == bodyDurable {
			e.acks = 1 << c.cfg.ReplicaID
		} else {
			c.normal.pendingSelf = append(c.normal.pendingSelf, op)
		}
		c.normal.pipeline[op%uint64(len(c.normal.pipeline))] = e
	}
	c.repair.active, c.timeouts.repairAt = false, 0
	c.startTimers()
	c.sendStartView(broadcast, wire.Uint128{})
	c.maybeRepair()
}

func (c *Core) sendStartView(to uint8, incarnation wire.Uint128) {
	low := c.commitMax
	if low == 0 {
		low = 1
	}
	if c.op+1 > low+wire.DoViewChangeSuffixMax {
		low = c.op + 1 - wire.DoViewChangeSuffixMax
	}
	count := 0
	if c.op >= low {
		count = int(c.op - low + 1)
	}
	c.targets(to, func(peer uint8) {
		body := c.bodyBuffer(count * wire.HeaderSize)
		n := 0
		for op := c.op; op >= low && op > 0; op-- {
			s := c.slotAt(op)
			if s == nil || !s.trusted && s.faulty {
				break
			}
			h := s.header
			h.View = 0
			h.Put(body[n*wire.HeaderSize:])
			n++
		}
		body = body[:n*wire.HeaderSize]
		h := c.message(peer, wire.CommandStartView)
		sv := (*wire.StartViewHeader)(headerPointer(h))
		sv.Op = c.op
		sv.Commit = c.commitMax
		sv.Group = c.cfg.Group
		sv.Incarnation = incarnation
		c.seal(body)
	})
}

func (c *Core) onStartView(m *wire.StartViewHeader, body []byte) error {
	if err := c.checkGroup(m.Group); err != nil {
		return err
	}
	if !m.BodySealValid(body) {
		return badMessage("start view body seal mismatch")
	}
	headers, err := c.decodeSuffix(body, m.Op, false)
	if err != nil {
		return err
	}
	if want := min(m.Op-max(m.Commit, 1)+1, wire.DoViewChangeSuffixMax); m.Op > 0 && uint64(len(headers)) != want {
		return badMessage("start view of head %d and commit %d carries %d headers, want %d", m.Op, m.Commit, len(headers), want)
	}
	switch {
	case m.Replica != c.PrimaryOf(m.View) || m.Replica == c.cfg.ReplicaID:
		return c.drop(DropNotForRole)
	case m.View < c.view:
		return c.drop(DropOlderView)
	case m.Op < c.commitMin:
		return c.drop(DropStale) // it would take back ops this replica applied
	case c.status == StatusRecovering && !m.Incarnation.IsZero() && m.Incarnation != c.cfg.Incarnation:
		return c.drop(DropStale) // an answer to an earlier boot's probe
	case c.contradictsApplied(headers, m.Op):
		// A view's log carries every op this replica applied (committed.go):
		// this one is no view's. Its commit point is not taken either.
		return c.drop(DropContradictsCommitted)
	}
	if m.View == c.view && c.status == StatusNormal {
		// A refresh of the view we follow (we asked: a gap, or committed ops we have
		// no header of): take the headers we lack, keep the ones we have.
		c.timeouts.heartbeatAt = c.now + c.cfg.Timing.HeartbeatTimeoutTicks
		news := m.Commit > c.commitMax || m.Op > c.op
		if m.Commit > c.commitMax {
			c.commitMax = m.Commit
		}
		if m.Op > c.op {
			c.adoptLog(headers, m.Op)
			c.persistLog()
		}
		c.maybeRepair()
		if !news {
			return c.drop(DropNothingNew)
		}
		return nil
	}
	c.view = m.View
	c.logView = m.View
	c.status = StatusNormal
	clear(c.vc.dvcs)
	c.vc.mergeDone = false
	clear(c.normal.pipeline)
	if m.Commit > c.commitMax {
		c.commitMax = m.Commit
	}
	c.adoptLog(headers, m.Op)
	c.persistLog()
	c.repair.active, c.timeouts.repairAt = false, 0
	c.normal.heartbeatTokenSeen = 0
	c.startTimers()
	// Ack what the new primary has not committed (it may know less of the commit
	// point than this replica).
	for op := m.Commit + 1; op <= c.op; op++ {
		if s := c.slotAt(op); s != nil && s.trusted && s.body != bodyNone {
			c.sendPrepareOk(&s.header)
		}
	}
	c.maybeRepair()
	return nil
}

// adoptLog installs a StartView's headers (head first) as the log up to head.
func (c *Core) adoptLog(headers []wire.PrepareHeader, head uint64) {
	if head < c.op {
		c.truncateAbove(head)
	}
	// No slot holds an op above the old head, so the ops between it and the
	// suffix are simply unknown until repaired.
	c.op = head
	c.installLog(headers, head, c.commitMax)
}

// onHeartbeatTimeout: a backup heard nothing from its primary for a heartbeat
// timeout, and moves on to the next view.
func (c *Core) onHeartbeatTimeout() {
	c.timeouts.heartbeatAt = 0
	c.startViewChange(c.view + 1)
}

// onViewChangeRetransmit resends this replica's part of the view change, which a
// peer may have missed.
func (c *Core) onViewChangeRetransmit() {
	c.timeouts.svcAt = c.now + c.cfg.Timing.ViewChangeRetransmitTicks
	c.sendStartViewChange()
	if c.vc.dvcSent && c.Primary() != c.cfg.ReplicaID {
		c.sendDoViewChange()
	}
	if c.vc.mergeDone {
		c.maybeRepair()
	}
}

// onViewChangeTimeout: the view change did not elect its primary in time, and
// moves on to the next view.
func (c *Core) onViewChangeTimeout() {
	c.timeouts.viewChangeAt = 0
	c.startViewChange(c.view + 1)
}
