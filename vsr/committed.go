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
