package vsr

import "github.com/iggy-shard/iggy-shard/wire"

// The applied ops are never taken back. An op this replica applied was committed
// (a replication quorum journaled it in some view), and every view started after
// that one carries it: the new primary merges a view-change quorum of votes, which
// meets every replication quorum, and keeps what it finds committed. So the log of
// any view at or after the one the op committed in holds that op at its number,
// and chains the next op to it. A replica's log view is the view whose log it
// holds, and the replica applied only ops of its log (trusted headers, chained
// from a view's canonical head), so each of its applied ops committed in a view at
// or before its log view.
//
// Hence a peer's log (a DoViewChange vote, a StartView, the repaired prepares its
// chain names) that puts another op at an applied op's number, or chains the op
// above the applied one to anything else, comes from no correct replica: from a
// peer still running another incarnation of the group's ids (partition groups carry
// an incarnation tag, which can collide), a bug, or corruption. It is refused
// (DropContradictsCommitted) before it is installed; verifyDown's check of the
// applied op stays as the last line, for a broken invariant of our own.

// appliedSlot is the slot of op if this replica applied op and still holds its
// trusted header.
func (c *Core) appliedSlot(op uint64) *slot {
	if op == 0 || op > c.commitMin {
		return nil
	}
	if s := c.slotAt(op); s != nil && s.trusted {
		return s
	}
	return nil
}

// contradictsApplied reports whether a peer's headers (any order, blanks aside),
// those at or below upTo, contradict the ops this replica applied: another header
// at an applied op it holds, or the op above the applied one not chained to it.
func (c *Core) contradictsApplied(headers []wire.PrepareHeader, upTo uint64) bool {
	for i := range headers {
		h := &headers[i]
		if h.Checksum.IsZero() || h.Op > upTo {
			continue
		}
		switch {
		case h.Op == c.commitMin+1:
			if a := c.appliedSlot(c.commitMin); a != nil && h.Parent != a.header.Checksum {
				return true
			}
		case h.Op <= c.commitMin:
			if a := c.appliedSlot(h.Op); a != nil && h.Checksum != a.header.Checksum {
				return true
			}
		}
	}
	return false
}

// voteContradictsApplied: a DoViewChange vote whose log contradicts the ops this
// replica applied. A vote of a log view at or after ours holds a log that carries
// every op we applied, so all of its headers must agree. A vote of an older log
// view may hold, above its commit point, ops of a log a later view cut (prepared
// and never committed), standing where we applied others: only its committed ops,
// at or below its commit point, must agree.
func (c *Core) voteContradictsApplied(d *doViewChange) bool {
	upTo := d.op
	if d.logView < c.logView {
		upTo = d.commit
	}
	return c.contradictsApplied(d.headers, upTo)
}

// A transferred state is a peer's word too. The state at op T that a correct peer
// offers was applied there, so T committed in a view no newer than the peer's, and
// the peer's view is not newer than this replica's log view (a target of a newer
// view makes the replica join that view first). So this replica's log, of its log
// view, holds that op at T and chains T+1 to it: every trusted header it holds at
// T (an applied op's, in a forced transfer) must be the state's op, and every
// trusted header at T+1 must chain to it. A state that contradicts them is
// refused, at its target and again as it is handed out for install (the log may
// have gained trusted headers while the state was fetched); it is never installed.
// The check needs the op's identity, which the target names in its
// CommitChecksum: an offer from a node before that field names none and is taken
// unchecked, as before.
//
// A state above everything this replica holds (no trusted header at T or T+1)
// cannot be checked here: its op chains to ops this replica lacks.

// stateContradicts reports whether a state at op whose prepare's identity is
// identity contradicts the trusted headers this replica holds at op and op+1.
func (c *Core) stateContradicts(op uint64, identity wire.Uint128) bool {
	if identity.IsZero() {
		return false
	}
	if s := c.slotAt(op); s != nil && s.trusted && s.header.Checksum != identity {
		return true
	}
	if s := c.slotAt(op + 1); s != nil && s.trusted && s.header.Parent != identity {
		return true
	}
	return false
}

// appliedIdentity is the identity of the prepare at op, an op this replica
// applied, for an offer of its state there: from the applied header, or the
// trusted one above it, which chains to it; zero when it holds neither (the
// requester takes the state unchecked).
func (c *Core) appliedIdentity(op uint64) wire.Uint128 {
	if s := c.appliedSlot(op); s != nil {
		return s.header.Checksum
	}
	if s := c.slotAt(op + 1); s != nil && s.trusted {
		return s.header.Parent
	}
	return wire.Uint128{}
}

// refuseContradictingInstall withholds a fetched state that the log contradicts
// now, just before the Ready hands it out: the fetch starts over from the next
// peer.
func (c *Core) refuseContradictingInstall() {
	in := c.rd.Install
	if in == nil || !c.stateContradicts(in.CommitOp, in.Identity) {
		return
	}
	c.rd.Install = nil
	c.drops[DropContradictsCommitted]++
	c.restartTransfer()
}
