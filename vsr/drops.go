package vsr

import "fmt"

// DropReason is why a replica did nothing with an input: a peer's frame it refused
// or ignored, or one that was simply done already. Every such input is counted
// under its reason (Core.Drops), so a test, the simulator and an operator can see
// why a replica ignored what it got. A dropped input changes nothing of the
// replica's log, view or commit point; a few still serve on the side, and say so
// below (a stale frame may be answered with the view it missed).
type DropReason uint8

const (
	// DropMalformed: a frame refused as bad input (ErrBadMessage): another
	// cluster, group or sender, a broken identity, seal or suffix.
	DropMalformed DropReason = iota
	// DropNewerView: a frame of a view this replica has not joined (or is still
	// electing). It asks that view's primary for a StartView, at most once per
	// RequestStartViewRetransmitTicks.
	DropNewerView
	// DropOlderView: a frame of a view this replica has moved past (or, for a
	// view-change vote, already started). A primary answers the sender with a
	// StartView of its view.
	DropOlderView
	// DropNotNormal: an input this replica's status does not take: it is
	// recovering (it votes in no quorum) or changing view.
	DropNotNormal
	// DropNotForRole: a frame meant for another role or from the wrong sender: a
	// prepare or a probe at the primary, an ack or a probe at a backup, a Commit
	// or StartView not from the view's primary, a frame from this replica itself.
	DropNotForRole
	// DropNotInLog: a frame naming an op under a header this replica's log does
	// not hold there (an older view's prepare, or an op above its head).
	DropNotInLog
	// DropGap: a prepare that does not continue this replica's log (ops missing
	// below it, or a head it does not chain to). It asks its primary for the
	// view's headers (RequestStartView) and repairs from them.
	DropGap
	// DropBehind: a prepare whose slot still holds an op this replica has not
	// applied: a journal window behind, it catches up by repair or state
	// transfer instead.
	DropBehind
	// DropDuplicate: an input already done here: a second ack of an op, a
	// prepare or a repaired body journaled already, a vote counted already, a
	// chunk received already, a state request being prepared already. A
	// duplicate prepare of the view is acknowledged again (the primary may have
	// lost the first ack).
	DropDuplicate
	// DropNothingNew: an answer that brings nothing this replica can use now:
	// a repair round that repaired nothing, a RangeEvicted of ops it need not
	// transfer for, an unavailable or no newer state, a StartView of the view it
	// follows with nothing it lacks. A timer asks again, or another peer.
	DropNothingNew
	// DropStale: an answer to a request this replica no longer waits for: a
	// repair round, a state transfer or a forward it has moved on from, a
	// StartView of an earlier boot or below the applied op, a chunk request
	// for an offer replaced, or beyond the offer made under its nonce (the
	// requester took another incarnation's offer under the same nonce).
	DropStale
	// DropRepairBufferFull: a repaired body below the verified chain that no room
	// is left for (RepairChunkMax candidates): the next round fetches it.
	DropRepairBufferFull
	// DropReadFailed: a chunk request whose artifact could not be read here: the
	// requester asks again, or another peer.
	DropReadFailed
	// DropFramesQueueFull: a frame that arrived while a Ready was out and found
	// the Driver's queue full (DriverConfig.FramesQueuedMax): its sender
	// retransmits.
	DropFramesQueueFull
	// DropContradictsCommitted: a peer's log that contradicts the ops this
	// replica applied (a view-change vote, a StartView, a repaired prepare the
	// chain would join to the applied op), or a state transfer target whose
	// op contradicts the trusted headers held at it and above it (counted
	// again if a state fetched is contradicted before it is handed out):
	// no correct replica sends one (committed.go). A peer of another
	// incarnation of the group's ids, a bug or corruption did; the replica
	// refuses it rather than install it.
	DropContradictsCommitted

	// DropReasonCount is the number of reasons: DropCounts' length.
	DropReasonCount
)

var dropReasonNames = [DropReasonCount]string{
	DropMalformed:            "malformed",
	DropNewerView:            "newer_view",
	DropOlderView:            "older_view",
	DropNotNormal:            "not_normal",
	DropNotForRole:           "not_for_role",
	DropNotInLog:             "not_in_log",
	DropGap:                  "gap",
	DropBehind:               "behind",
	DropDuplicate:            "duplicate",
	DropNothingNew:           "nothing_new",
	DropStale:                "stale",
	DropRepairBufferFull:     "repair_buffer_full",
	DropReadFailed:           "read_failed",
	DropFramesQueueFull:      "frames_queue_full",
	DropContradictsCommitted: "contradicts_committed",
}

// String is the reason's name as a metric label: lower case, underscores.
func (r DropReason) String() string {
	if r < DropReasonCount {
		return dropReasonNames[r]
	}
	return fmt.Sprintf("DropReason(%d)", uint8(r))
}

// DropCounts are a replica's dropped inputs by reason, indexed by DropReason.
type DropCounts [DropReasonCount]uint64

// Total is the count over every reason.
func (d *DropCounts) Total() uint64 {
	n := uint64(0)
	for _, v := range d {
		n += v
	}
	return n
}

// Drops copies out the replica's counts of dropped inputs by reason, since it was
// made: for /metrics, one labelled counter per reason (DropReason.String). It
// allocates nothing.
func (c *Core) Drops() DropCounts { return c.drops }

// drop counts an input the replica does nothing with, and is the nil its handler
// returns: every ignoring return of a handler goes through it.
func (c *Core) drop(r DropReason) error {
	c.drops[r]++
	return nil
}
