package vsr

import (
	"errors"

	"github.com/iggy-shard/iggy-shard/wire"
)

// The normal case: the primary turns a proposal into the next prepare of the hash
// chain and sends it down the replication chain (each backup journals it and
// passes it on); each replica acknowledges its durable append with PrepareOk to
// the primary, which commits an op once a replication quorum holds it and every op
// before it, and tells its backups the commit point on the next prepare or Commit
// (the heartbeat a backup's timeout waits for).

// normalCase is the state of the normal case: the primary's pipeline and chain,
// its commit broadcasts, and a backup's last heartbeat.
type normalCase struct {
	// Primary: prepared ops commitMax+1..op, at pipeline[op % depth].
	pipeline []coreEntry
	// hopSilent: the chain's next hop let an op commit without acknowledging it
	// (it is down or cut off). The primary then sends each new prepare to every
	// backup itself instead of down the chain, so an op need not wait for its
	// retransmission; the hop's next acknowledgement restores the chain.
	hopSilent bool
	// pendingSelf are the primary's own appends not durable yet: each counts as
	// its ack at the Advance that makes it durable.
	pendingSelf []uint64
	deferred    []Write // MutationAckBeforeDurable only

	// heartbeatToken numbers a primary's Commit broadcasts; heartbeatTokenSeen
	// is the newest a backup heard (a Commit that came again is no heartbeat).
	heartbeatToken uint64
	// commitBroadcast is the commit point the last Commit broadcast carried
	// (QuietWhenIdle), noCommitBroadcast before a primary's first one;
	// commitRepeats how many broadcasts in a row carried it.
	commitBroadcast    uint64
	commitRepeats      int
	heartbeatTokenSeen uint64
}

// ErrPipelineFull tells the primary's caller to hold the request back (or answer it
// with a retryable status): every pipeline slot is waiting for its quorum.
var ErrPipelineFull = errors.New("vsr: prepare pipeline is full")

// ErrNotPrimary is returned when a replica that does not lead the current view is
// asked to prepare.
var ErrNotPrimary = errors.New("vsr: replica is not the primary of its view")

// ErrNotNormal is returned by Propose while the replica is changing view or
// recovering: the client retries.
var ErrNotNormal = errors.New("vsr: replica is not in normal status")

// Proposal is an admitted client request as the primary turns it into a prepare.
type Proposal struct {
	Client          wire.Uint128
	Request         uint64
	RequestChecksum wire.Uint128
	Operation       wire.Operation
	UserID          uint32
}

// coreEntry is an op in the primary's pipeline: its identity and the replicas
// whose durable append of it the primary heard, a bit each.
type coreEntry struct {
	op       uint64
	identity wire.Uint128
	acks     uint32
}

// propose makes the proposal the next op of the hash chain: journaled here and
// sent down the replication chain.
func (c *Core) propose(p *Proposal, body []byte, nowMicros uint64) (uint64, error) {
	c.checkNoReadyOut("Propose")
	if err := c.proposable(); err != nil {
		return 0, err
	}
	timestamp := nowMicros
	if timestamp <= c.log.lastTimestamp {
		timestamp = c.log.lastTimestamp + 1
	}
	s := &c.log.slots[(c.op+1)%uint64(len(c.log.slots))]
	*s = slot{trusted: true}
	h := &s.header
	h.Cluster = c.cfg.Cluster
	h.Size = uint32(wire.HeaderSize + len(body))
	h.View = c.view
	h.Command = wire.CommandPrepare
	h.Replica = c.cfg.ReplicaID
	h.Client = p.Client
	h.Parent = c.log.lastPrepareChecksum
	h.RequestChecksum = p.RequestChecksum
	h.Op = c.op + 1
	h.Commit = c.commitMax
	h.Timestamp = timestamp
	h.Request = p.Request
	h.Operation = p.Operation
	h.Group = c.cfg.Group
	h.UserID = p.UserID
	if c.cfg.Group == wire.MetadataGroup {
		h.ChecksumBody = wire.BodyChecksum(body)
	}
	h.SetIdentity()

	c.op = h.Op
	c.log.lastTimestamp = timestamp
	c.log.lastPrepareChecksum = h.Checksum
	c.normal.pipeline[h.Op%uint64(len(c.normal.pipeline))] = coreEntry{op: h.Op, identity: h.Checksum}
	c.write(s, body)
	c.normal.pendingSelf = append(c.normal.pendingSelf, h.Op)
	if next := c.nextHop(c.view); next != c.cfg.ReplicaID && !c.normal.hopSilent {
		c.sendPrepare(next, h, body, wire.CommandPrepare)
	} else if c.normal.hopSilent {
		for peer := uint8(0); int(peer) < c.n(); peer++ {
			if peer != c.cfg.ReplicaID {
				c.sendPrepare(peer, h, body, wire.CommandPrepare)
			}
		}
	}
	if c.timeouts.retransmitAt == 0 && c.n() > 1 {
		c.timeouts.retransmitAt = c.now + c.cfg.Timing.PrepareRetransmitIntervalTicks
		c.timeouts.retransmitCount = 0
	}
	if c.timeouts.commitAt == 0 && c.n() > 1 {
		c.timeouts.commitAt = c.now + c.cfg.Timing.CommitBroadcastIntervalTicks // a quiet group wakes
	}
	return h.Op, nil
}

// proposable is why Propose would refuse a proposal now, nil if it would take one.
func (c *Core) proposable() error {
	switch {
	case c.status != StatusNormal:
		return ErrNotNormal
	case c.Primary() != c.cfg.ReplicaID:
		return ErrNotPrimary
	case c.op-c.commitMax >= uint64(len(c.normal.pipeline)):
		return ErrPipelineFull
	case c.op+1-c.commitMin >= uint64(len(c.log.slots)):
		// The slot would overwrite an op not applied yet.
		return ErrPipelineFull
	case c.cfg.ReportsCheckpoints && c.op+1-c.log.checkpointOp >= uint64(len(c.log.slots)):
		// A restart from the last checkpoint would need more ops than the window
		// holds: the primary waits for the caller's next checkpoint (found by
		// sim/ at a primary of two that committed alone while it could not
		// apply). The caller's interval keeps this rare (checkpoint.go).
		return ErrCheckpointDue
	}
	return nil
}

// nextHop is the chain successor; the chain ends where it would reach the primary.
func (c *Core) nextHop(view uint32) uint8 {
	next := uint8((int(c.cfg.ReplicaID) + 1) % c.n())
	if next == c.PrimaryOf(view) {
		return c.cfg.ReplicaID
	}
	return next
}

func (c *Core) sendPrepare(to uint8, h *wire.PrepareHeader, body []byte, command wire.Command) {
	c.rd.Messages = append(c.rd.Messages, Message{To: to, Body: body})
	m := &c.rd.Messages[len(c.rd.Messages)-1]
	p := (*wire.PrepareHeader)(headerPointer(&m.Header))
	*p = *h
	if command == wire.CommandPrepare {
		// A retransmission carries the current view; the identity ignores it.
		p.View = c.view
	} else {
		p.Command = command
	}
}

// onAck counts replica's durable append of op, and reports why it counted nothing
// when it did not.
func (c *Core) onAck(replica uint8, op uint64, identity wire.Uint128) (DropReason, bool) {
	if op <= c.commitMax {
		return DropDuplicate, true // committed already
	}
	if op > c.op {
		return DropNotInLog, true
	}
	e := &c.normal.pipeline[op%uint64(len(c.normal.pipeline))]
	if e.op != op || e.identity != identity {
		return DropNotInLog, true
	}
	// A second ack of the op still tells that the replica is back in the chain.
	duplicate := e.acks&(1<<replica) != 0
	e.acks |= 1 << replica
	next := c.nextHop(c.view)
	if replica == next {
		c.normal.hopSilent = false
	}
	moved := false
	for c.commitMax < c.op {
		head := &c.normal.pipeline[(c.commitMax+1)%uint64(len(c.normal.pipeline))]
		if head.op != c.commitMax+1 || popcount(head.acks) < c.quorumReplication() {
			break
		}
		if next != c.cfg.ReplicaID && head.acks&(1<<next) == 0 {
			c.normal.hopSilent = true
		}
		c.commitMax = head.op
		*head = coreEntry{}
		moved = true
	}
	if moved {
		c.timeouts.retransmitCount = 0
		if c.commitMax == c.op {
			c.timeouts.retransmitAt = 0
		} else {
			c.timeouts.retransmitAt = c.now + c.cfg.Timing.PrepareRetransmitIntervalTicks
		}
		if c.cfg.CommitEagerly && c.commitMax == c.op {
			// No prepare in flight will carry the new commit point.
			c.broadcastCommit()
		}
	}
	if duplicate {
		return DropDuplicate, true
	}
	return 0, false
}

func (c *Core) retransmit() {
	c.timeouts.retransmitCount++
	backoff := c.timeouts.retransmitCount
	if backoff > 4 {
		backoff = 4
	}
	c.timeouts.retransmitAt = c.now + c.cfg.Timing.PrepareRetransmitIntervalTicks<<backoff
	if !c.IsPrimary() || c.commitMax == c.op {
		c.timeouts.retransmitAt = 0
		return
	}
	for op := c.commitMax + 1; op <= c.op; op++ {
		e := &c.normal.pipeline[op%uint64(len(c.normal.pipeline))]
		s := c.slotAt(op)
		if e.op != op || s == nil {
			continue
		}
		body, ok := c.cfg.Storage.Body(op, s.header.Checksum)
		if !ok {
			continue
		}
		for peer := 0; peer < c.n(); peer++ {
			if e.acks&(1<<peer) == 0 && uint8(peer) != c.cfg.ReplicaID {
				c.sendPrepare(uint8(peer), &s.header, body, wire.CommandPrepare)
			}
		}
	}
}

// noCommitBroadcast marks a primary that has not broadcast Commit in its view yet.
const noCommitBroadcast = ^uint64(0)

// quietAfterBroadcasts is how many Commit broadcasts in a row must carry an
// unchanged commit point before a QuietWhenIdle primary stops: a backup that
// lost them all still holds ops above its commit point, so liveness from the
// primary's node no longer keeps it waiting (NoteLiveness), and its heartbeat
// timeout brings a view change that commits them.
const quietAfterBroadcasts = 3

func (c *Core) broadcastCommit() {
	if !c.IsPrimary() {
		return
	}
	c.normal.heartbeatToken++
	if c.normal.commitBroadcast == c.commitMax {
		c.normal.commitRepeats++
	} else {
		c.normal.commitBroadcast, c.normal.commitRepeats = c.commitMax, 1
	}
	for peer := 0; peer < c.n(); peer++ {
		if uint8(peer) == c.cfg.ReplicaID {
			continue
		}
		h := c.message(uint8(peer), wire.CommandCommit)
		m := (*wire.CommitHeader)(headerPointer(h))
		m.TimestampMonotonic = c.normal.heartbeatToken
		m.Commit = c.commitMax
		m.Group = c.cfg.Group
		c.seal(nil)
	}
}

// Heartbeat broadcasts a Commit now when this replica leads its group in normal
// status, and reports whether it did: the caller's keep-alive for a node whose
// groups are quiet (CoreConfig.QuietWhenIdle), when nothing else went to a peer
// for a commit broadcast interval.
func (c *Core) Heartbeat() bool {
	c.checkNoReadyOut("Heartbeat")
	if !c.IsPrimary() || c.n() == 1 {
		return false
	}
	c.broadcastCommit()
	return true
}

// NoteLiveness tells a backup that replica sent the shard anything (a frame of any
// group): a frame from its view's primary proves the primary alive, so idle groups
// need no heartbeats of their own.
func (c *Core) NoteLiveness(replica uint8) {
	if c.status == StatusNormal && c.timeouts.heartbeatAt != 0 && replica == c.Primary() && (!c.cfg.QuietWhenIdle || c.op == c.commitMax) {
		c.timeouts.heartbeatAt = c.now + c.cfg.Timing.HeartbeatTimeoutTicks
	}
}

// InPipeline reports whether client has a prepared, uncommitted request here (the
// primary's admission check: one request in flight per client).
func (c *Core) InPipeline(client wire.Uint128) bool {
	for op := c.commitMax + 1; op <= c.op; op++ {
		if s := c.slotAt(op); s != nil && s.header.Client == client {
			return true
		}
	}
	return false
}

// checkPrepare verifies a prepare's identity and body seal; h is a copy whose
// command is Prepare.
func (c *Core) checkPrepare(h *wire.PrepareHeader, body []byte) error {
	if err := c.checkGroup(h.Group); err != nil {
		return err
	}
	if h.Op == 0 {
		return badMessage("prepare op 0")
	}
	if !h.IdentityValid() {
		return badMessage("prepare op %d: identity checksum mismatch", h.Op)
	}
	if h.Group == wire.MetadataGroup && h.ChecksumBody != wire.BodyChecksum(body) {
		return badMessage("prepare op %d: body checksum mismatch", h.Op)
	}
	if h.Cluster != c.cfg.Cluster {
		return badMessage("prepare op %d of another cluster", h.Op)
	}
	return nil
}

func (c *Core) onPrepare(m *wire.PrepareHeader, body []byte) error {
	h := *m
	if err := c.checkPrepare(&h, body); err != nil {
		return err
	}
	switch {
	case h.View > c.view || (h.View == c.view && c.status == StatusViewChange):
		c.onNewerView(h.View)
		return c.drop(DropNewerView)
	case h.View < c.view:
		return c.drop(DropOlderView)
	case c.status != StatusNormal:
		return c.drop(DropNotNormal)
	case c.Primary() == c.cfg.ReplicaID:
		return c.drop(DropNotForRole)
	}
	// The prepare proves its primary alive and carries the commit point, whatever
	// becomes of its op.
	c.timeouts.heartbeatAt = c.now + c.cfg.Timing.HeartbeatTimeoutTicks
	if h.Commit > c.commitMax {
		c.commitMax = h.Commit
	}
	duplicate := false
	switch {
	case h.Op <= c.commitMin:
		// Applied here; a new primary may still need the ack, when it learned less
		// of the commit point than this replica did.
		if s := c.slotAt(h.Op); s != nil && s.trusted && s.header.Checksum == h.Checksum {
			c.sendPrepareOk(&h)
			return c.drop(DropDuplicate)
		}
		return c.drop(DropNotInLog)
	case h.Op <= c.op:
		s := c.slotAt(h.Op)
		if s == nil || !s.trusted || s.header.Checksum != h.Checksum {
			return c.drop(DropNotInLog)
		}
		if s.body == bodyNone {
			c.write(s, body)
		} else {
			duplicate = true // forwarded and acknowledged again below
		}
	case h.Op == c.op+1 && h.Op-c.commitMin >= uint64(len(c.log.slots)):
		// Its slot still holds an op this replica has not applied: it is too far
		// behind to take new ops, and catches up by repair or state transfer.
		c.maybeRepair()
		return c.drop(DropBehind)
	case h.Op == c.op+1:
		if head := c.slotAt(c.op); c.op > 0 && (head == nil || !head.trusted || head.header.Checksum != h.Parent) {
			// Our head is not this prepare's parent: we missed a view's start.
			c.onNewerView(c.view)
			return c.drop(DropGap)
		}
		if c.op == 0 && !h.Parent.IsZero() {
			return c.drop(DropGap)
		}
		s := &c.log.slots[h.Op%uint64(len(c.log.slots))]
		*s = slot{header: h, trusted: true}
		s.header.View = c.view
		c.op = h.Op
		if c.cfg.Mutation == MutationAckBeforeDurable {
			// The write goes out with the next Ready, after this one's PrepareOk.
			c.normal.deferred = append(c.normal.deferred, Write{Header: s.header, Body: append([]byte(nil), body...)})
		} else {
			c.write(s, body)
		}
	default:
		// A gap: the ops between are committed elsewhere or still coming. The
		// primary's StartView carries the headers to repair from.
		c.onNewerView(c.view)
		return c.drop(DropGap)
	}
	if next := c.nextHop(c.view); next != c.cfg.ReplicaID {
		c.sendPrepare(next, &h, body, wire.CommandPrepare)
	}
	c.sendPrepareOk(&h)
	c.maybeRepair()
	if duplicate {
		return c.drop(DropDuplicate)
	}
	return nil
}

func (c *Core) sendPrepareOk(p *wire.PrepareHeader) {
	h := c.message(c.Primary(), wire.CommandPrepareOk)
	ok := (*wire.PrepareOkHeader)(headerPointer(h))
	ok.Parent = p.Parent
	ok.PrepareChecksum = p.Checksum
	ok.Op = p.Op
	ok.Commit = c.commitMax
	ok.Timestamp = p.Timestamp
	ok.Request = p.Request
	ok.Operation = p.Operation
	ok.Group = c.cfg.Group
	c.seal(nil)
}

func (c *Core) onPrepareOk(m *wire.PrepareOkHeader) error {
	if err := c.checkGroup(m.Group); err != nil {
		return err
	}
	switch {
	case m.View > c.view:
		c.onNewerView(m.View)
		return c.drop(DropNewerView)
	case m.View < c.view:
		return c.drop(DropOlderView)
	case c.status != StatusNormal:
		return c.drop(DropNotNormal)
	case !c.IsPrimary() || m.Replica == c.cfg.ReplicaID:
		return c.drop(DropNotForRole)
	}
	if r, dropped := c.onAck(m.Replica, m.Op, m.PrepareChecksum); dropped {
		return c.drop(r)
	}
	return nil
}

func (c *Core) onCommit(m *wire.CommitHeader) error {
	if err := c.checkGroup(m.Group); err != nil {
		return err
	}
	switch {
	case m.View > c.view || (m.View == c.view && c.status == StatusViewChange):
		c.onNewerView(m.View)
		return c.drop(DropNewerView)
	case m.View < c.view:
		c.answerStaleView(m.Replica)
		return c.drop(DropOlderView)
	case c.status != StatusNormal:
		return c.drop(DropNotNormal)
	case m.Replica != c.Primary() || c.IsPrimary():
		return c.drop(DropNotForRole)
	}
	// A heartbeat that came again, or behind a newer one, is done already (it
	// still has a repair go on).
	duplicate := m.TimestampMonotonic <= c.normal.heartbeatTokenSeen && m.Commit <= c.commitMax
	if m.TimestampMonotonic > c.normal.heartbeatTokenSeen {
		c.normal.heartbeatTokenSeen = m.TimestampMonotonic
		c.timeouts.heartbeatAt = c.now + c.cfg.Timing.HeartbeatTimeoutTicks
	}
	if m.Commit > c.commitMax {
		c.commitMax = m.Commit
	}
	if c.commitMax > c.op {
		// Committed ops we have no header of: the StartView names them.
		c.onNewerView(c.view)
	}
	c.maybeRepair()
	if duplicate {
		return c.drop(DropDuplicate)
	}
	return nil
}

// onCommitTimeout broadcasts the commit point, the backups' heartbeat; a
// QuietWhenIdle primary whose backups heard an unchanged one often enough stops
// until the next proposal.
func (c *Core) onCommitTimeout() {
	if c.cfg.QuietWhenIdle && c.op == c.commitMax && c.normal.commitBroadcast == c.commitMax && c.normal.commitRepeats >= quietAfterBroadcasts {
		c.timeouts.commitAt = 0 // idle: nothing until the next proposal
		return
	}
	c.timeouts.commitAt = c.now + c.cfg.Timing.CommitBroadcastIntervalTicks
	c.broadcastCommit()
}
