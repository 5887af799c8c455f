package vsr

import (
	"errors"
	"fmt"

	"github.com/iggy-shard/iggy-shard/wire"
)

// The inputs, and where each goes: a peer's frame (Step) by its command to the
// sub-protocol that handles it, a tick (Tick) to the timeouts due, a client's
// request (Propose) to the normal case. Each sub-protocol lives in its own file
// (doc.go has the map).

// Step takes one frame from a peer: h validated by wire.DecodeReplicaHeader, body
// the frame's bytes after it (16-byte aligned; kept until the next Advance, since a
// write or a forward may alias it). Bad input is an error; the frame is dropped.
// A refused frame is counted (DropMalformed), as is every frame the replica
// ignores (DropReason).
func (c *Core) Step(h *wire.GenericHeader, body []byte) error {
	c.checkNoReadyOut("Step")
	err := c.step(h, body)
	if err != nil {
		c.drops[DropMalformed]++
	}
	return err
}

func (c *Core) step(h *wire.GenericHeader, body []byte) error {
	if err := c.checkFrame(h, body); err != nil {
		return err
	}
	switch h.Command {
	// The normal case (normal.go).
	case wire.CommandPrepare:
		return c.onPrepare(h.Prepare(), body)
	case wire.CommandPrepareOk:
		return c.onPrepareOk(h.PrepareOk())
	case wire.CommandCommit:
		return c.onCommit(h.Commit())
	// The view change (viewchange.go, merge.go).
	case wire.CommandStartViewChange:
		return c.onStartViewChange(h.StartViewChange())
	case wire.CommandDoViewChange:
		return c.onDoViewChange(h.DoViewChange(), body)
	case wire.CommandStartView:
		return c.onStartView(h.StartView(), body)
	// Recovery: a restarted or lagging replica asks for its view (recovery.go).
	case wire.CommandRequestStartView:
		return c.onRequestStartView(h.RequestStartView())
	// Repair (repair.go).
	case wire.CommandRequestPrepares:
		return c.onRequestPrepares(h.RequestPrepares())
	case wire.CommandRepairPrepare:
		return c.onRepairPrepare(h.Prepare(), body)
	case wire.CommandRepairDone, wire.CommandRangeEvicted:
		return c.onRepairRange(h.RepairRange())
	// Forwarded logins, logouts and session ends (forward.go).
	case wire.CommandForwardRegister, wire.CommandForwardRegisterResult, wire.CommandForwardLogout, wire.CommandForwardLogoutResult:
		return c.stepForward(h)
	// State transfer (transfer.go).
	case wire.CommandRequestStateTransfer:
		return c.onRequestStateTransfer(h.RequestStateTransfer())
	case wire.CommandStateTransferTarget:
		return c.onStateTransferTarget(h.StateTransferTarget(), body)
	case wire.CommandRequestStateChunk:
		return c.onRequestStateChunk(h.RequestStateChunk())
	case wire.CommandStateChunk:
		return c.onStateChunk(h.StateChunk(), body)
	}
	return badMessage("command %v is not handled by the consensus core", h.Command)
}

// Tick advances the replica's clock by one tick and fires what is due, in this
// order; a timeout that starts a view change ends the tick.
func (c *Core) Tick() {
	c.checkNoReadyOut("Tick")
	c.now++
	if d := c.NextDeadline(); d == 0 || c.now < d {
		return
	}
	if len(c.forwards.out) > 0 && c.now >= c.forwardDeadline() {
		c.expireForwards() // forward.go
	}
	if d := c.transferDeadline(); d != 0 && c.now >= d {
		c.transferTick() // transfer.go
	}
	t := &c.timeouts
	if c.due(t.heartbeatAt) {
		c.onHeartbeatTimeout() // viewchange.go
		return
	}
	if c.due(t.commitAt) {
		c.onCommitTimeout() // normal.go
	}
	if c.due(t.retransmitAt) {
		c.retransmit() // normal.go
	}
	if c.due(t.svcAt) {
		c.onViewChangeRetransmit() // viewchange.go
	}
	if c.due(t.viewChangeAt) {
		c.onViewChangeTimeout() // viewchange.go
		return
	}
	if c.due(t.probeAt) && c.onProbeTimeout() { // recovery.go
		return
	}
	if c.due(t.repairAt) {
		c.onRepairTimeout() // repair.go
	}
}

// due reports whether a deadline is armed and has come.
func (c *Core) due(at uint64) bool { return at != 0 && c.now >= at }

// Propose prepares an admitted request on the primary: the next op of the hash
// chain, journaled and sent down the replication chain through Ready. body must stay
// valid until the Advance that follows.
func (c *Core) Propose(p Proposal, body []byte, nowMicros uint64) (uint64, error) {
	return c.propose(&p, body, nowMicros)
}

// checkFrame is what Step checks of any frame before its command: the cluster, the
// sender and the size. It reads no state.
func (c *Core) checkFrame(h *wire.GenericHeader, body []byte) error {
	if h.Cluster != c.cfg.Cluster {
		return badMessage("cluster %v, want %v", h.Cluster, c.cfg.Cluster)
	}
	if int(h.Replica) >= c.n() {
		return badMessage("replica %d of %d", h.Replica, c.n())
	}
	if int(h.Size) != wire.HeaderSize+len(body) {
		return badMessage("size %d with %d body bytes", h.Size, len(body))
	}
	return nil
}

// checkGroup refuses a frame of another group. It compares ids without their
// incarnation tags (wire.SameGroup): a node sends untagged ids while
// cluster.partition_incarnation_tags is false, and binaries before the tag always
// did, and the partition that runs this core checked the tag already.
func (c *Core) checkGroup(group uint64) error {
	if !wire.SameGroup(group, c.cfg.Group) {
		return badMessage("group %#x, want %#x", group, c.cfg.Group)
	}
	return nil
}

// ErrBadMessage wraps every refusal of a peer's frame: a wrong cluster, group or
// replica id, a bad identity or body seal, a broken suffix.
var ErrBadMessage = errors.New("vsr: bad message")

func badMessage(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrBadMessage}, args...)...)
}
