package vsr

import (
	"errors"
	"fmt"

	"github.com/iggy-shard/iggy-shard/wire"
)

// PipelineDepthDefault and PipelineDepthMax bound the prepares in flight (prepared,
// not yet committed) of one group, as the reference server does.
const (
	PipelineDepthDefault = 32
	PipelineDepthMax     = 127
	// ReplicasMax is the real ceiling of a roster: ack sets are 32-bit masks.
	ReplicasMax = 32
)

// Config is what a replica of one consensus group is made of.
type Config struct {
	Cluster      wire.Uint128
	ReplicaID    uint8
	ReplicaCount uint8
	// Group is wire.MetadataGroup or a wire.PartitionGroup key.
	Group uint64
	// PipelineDepth defaults to PipelineDepthDefault.
	PipelineDepth int
}

func (c *Config) validate() error {
	if c.ReplicaCount == 0 || c.ReplicaCount > ReplicasMax {
		return fmt.Errorf("vsr: replica count %d outside 1..%d", c.ReplicaCount, ReplicasMax)
	}
	if c.ReplicaID >= c.ReplicaCount {
		return fmt.Errorf("vsr: replica id %d not below replica count %d", c.ReplicaID, c.ReplicaCount)
	}
	if c.PipelineDepth == 0 {
		c.PipelineDepth = PipelineDepthDefault
	}
	if c.PipelineDepth < 1 || c.PipelineDepth > PipelineDepthMax {
		return fmt.Errorf("vsr: pipeline depth %d outside 1..%d", c.PipelineDepth, PipelineDepthMax)
	}
	return nil
}

// QuorumReplication is how many durable appends (the primary's own included) commit
// an op: min(ceil(n/2), 3), as in the reference server (flexible quorums: a view
// change must then hear from n - q + 1 replicas).
func QuorumReplication(replicaCount int) int {
	q := (replicaCount + 1) / 2
	if q > 3 {
		q = 3
	}
	return q
}

// QuorumViewChange is the view-change (and nack) quorum that intersects every
// replication quorum.
func QuorumViewChange(replicaCount int) int {
	return replicaCount - QuorumReplication(replicaCount) + 1
}

func popcount(x uint32) int {
	n := 0
	for ; x != 0; x &= x - 1 {
		n++
	}
	return n
}

// Status is a replica's protocol status.
type Status uint8

const (
	// StatusNormal: the replica follows (or leads) its view.
	StatusNormal Status = iota + 1
	// StatusViewChange: the replica is electing the primary of its view.
	StatusViewChange
	// StatusRecovering: a restarted replica that does not trust its local state yet;
	// it probes with RequestStartView, votes in no quorum and acknowledges nothing.
	StatusRecovering
)

func (s Status) String() string {
	switch s {
	case StatusNormal:
		return "Normal"
	case StatusViewChange:
		return "ViewChange"
	case StatusRecovering:
		return "Recovering"
	}
	return fmt.Sprintf("Status(%d)", uint8(s))
}

// Storage is the read side of the replica's journal, in the way of etcd raft's
// Storage: the core hands out journal writes in Ready, the caller makes them durable,
// and the core reads bodies back through Storage when it retransmits a prepare or
// serves repair. It must return what the caller's journal holds now (its page cache),
// durable or not.
type Storage interface {
	// Body returns the body of the journaled prepare at op if its identity is
	// identity. The core only reads it before its next Ready.
	Body(op uint64, identity wire.Uint128) ([]byte, bool)
}

// Mutation breaks one rule of the protocol on purpose. It exists only so that the
// simulator's tests can show that its checkers catch a broken rule; a server never
// sets it.
type Mutation uint8

const (
	MutationNone Mutation = iota
	// MutationCommitBeforeQuorum commits an op one ack short of the replication
	// quorum.
	MutationCommitBeforeQuorum
	// MutationTruncatePastNackQuorum lets a new primary truncate an op with one nack
	// fewer than the nack quorum.
	MutationTruncatePastNackQuorum
	// MutationAckBeforeDurable sends a backup's PrepareOk one Ready before the
	// journal write it promises.
	MutationAckBeforeDurable
)

// CoreConfig is one replica of one consensus group.
type CoreConfig struct {
	Config
	Timing Timing
	// JournalSlots is how many recent ops the replica keeps headers for (and can
	// serve repair of); a replica further behind needs state transfer.
	JournalSlots int
	Storage      Storage
	// Incarnation is random per boot (metadata plane) so that a StartView answering
	// an older boot's probe is recognised; zero on partition planes.
	Incarnation wire.Uint128
	// NonceSeed is where the replica's repair and state transfer nonces start
	// counting: random per boot, so that an answer to another boot's request, or
	// to another incarnation's of the group's ids, carrying what would be the
	// same count, is not taken for an answer to this one's (a requester that took
	// another's state transfer offer under its nonce fetched bytes of another
	// state). Zero counts from zero, as before.
	NonceSeed uint64
	// Sessions lets a metadata-plane primary answer forwarded logins (optional).
	Sessions Sessions
	// ReportsCheckpoints: the caller restarts from checkpoints (snapshots of its
	// applied state) and reports each durable one with Checkpointed. The primary
	// then never proposes an op the journal window could not hold beside every op
	// above the last checkpoint, so a restart from that checkpoint finds in its
	// journal every op it must apply again. Without it the window is counted from
	// the applied op, which suffices for a caller that recovers nothing from its
	// journal (a partition group's in-memory journal).
	ReportsCheckpoints bool
	// CheckpointIntervalOps is, for a ReportsCheckpoints caller, how many applied
	// ops at most pass between its checkpoints: NewCore refuses one above
	// CheckpointIntervalOpsMax (checkpoint.go), which could stop the group.
	CheckpointIntervalOps uint64
	// QuietWhenIdle: the primary broadcasts Commit only while it has news (ops in
	// flight, or a commit point its backups have not been sent), then disarms its
	// commit timer, so an idle group sends nothing and costs no tick. Its backups
	// stay alive through NoteLiveness: the caller counts any frame from a node as
	// a sign of life of the node, and a node that leads a quiet group makes sure
	// every peer hears from it at least once per commit broadcast interval
	// (Heartbeat on one of its groups when nothing else went to that peer). The
	// frames on the wire stay the spec's. For partition groups; the metadata group
	// keeps its heartbeat.
	QuietWhenIdle bool
	// CommitEagerly: the primary sends Commit to its backups as soon as its
	// commit point reaches its head, not at the next commit broadcast, so that a
	// backup applies an op about a round trip after the primary: a client that
	// saw its write acknowledged finds it at a backup at once, and an origin
	// waiting to apply a forwarded login answers it at once. One frame per
	// backup per burst of commits: for the metadata group, whose ops are few.
	CommitEagerly bool
	// InitialView is the view a fresh group starts in (NewCore): a group created by
	// an operation of another group (a partition's, by the metadata op that made
	// it) starts in that op's view on every replica, so that it is led by the node
	// that leads the cluster rather than by replica 0.
	InitialView uint32
	Mutation    Mutation
}

// Core is Viewstamped Replication for one replica of one consensus group, as a pure
// state machine in the shape of etcd raft's RawNode: Step (a validated frame from a
// peer), Tick (one logical tick) and Propose (a client request, on the primary)
// record work; Ready hands it out; Advance says it was done. It reads no clock and
// touches no socket or file.
type Core struct {
	cfg CoreConfig

	// The replica's state, which every sub-protocol reads: its clock, status and
	// view, and its log's head and commit points.
	now    uint64
	status Status
	view   uint32
	// logView is the view whose log the journal holds (<= view).
	logView   uint32
	op        uint64
	commitMin uint64
	commitMax uint64

	// Each sub-protocol's own state, beside its file.
	log      slotLog       // the slots and hash chain (log.go)
	normal   normalCase    // the pipeline, chain and heartbeats (normal.go)
	vc       viewChange    // the votes of a view change (viewchange.go, merge.go)
	repair   repairRound   // the repair round and its candidates (repair.go)
	transfer stateTransfer // the state fetched and the states offered (transfer.go)
	forwards forwarding    // forwarded logins, logouts and session ends (forward.go)
	timeouts timeouts      // the deadlines Tick fires (timeouts.go)

	// The output (ready.go). durable is the durable state as of the last Advance;
	// rd is the next Ready, out the rest of what it will carry, both reused from
	// one Ready to the next.
	durable DurableState
	rd      Ready
	out     output
	// readyOut: a Ready was handed out and its Advance has not come yet. Advance
	// clears everything the Ready held, so an input taken meanwhile would be marked
	// done without having been done (a proposal durable without being written):
	// the caller holds its inputs back until Advance (see the package comment).
	readyOut bool

	// drops counts the inputs ignored, by reason (drops.go).
	drops DropCounts
}

// NewCore makes a replica of a fresh group: empty log, view 0, Normal.
func NewCore(cfg CoreConfig) (*Core, error) {
	if err := cfg.Config.validate(); err != nil {
		return nil, err
	}
	if cfg.Timing == (Timing{}) {
		cfg.Timing = TimingDefault
	}
	if err := cfg.Timing.validate(); err != nil {
		return nil, err
	}
	if cfg.JournalSlots == 0 {
		cfg.JournalSlots = 1024
	}
	if cfg.JournalSlots < 2*cfg.PipelineDepth || cfg.JournalSlots < cfg.Timing.RepairChunkMax {
		return nil, fmt.Errorf("vsr: journal slots %d below twice the pipeline depth or the repair chunk", cfg.JournalSlots)
	}
	if err := checkCheckpointInterval(&cfg); err != nil {
		return nil, err
	}
	if cfg.Storage == nil {
		return nil, errors.New("vsr: a core needs a Storage")
	}
	n := int(cfg.ReplicaCount)
	c := &Core{
		cfg:    cfg,
		status: StatusNormal,
		log: slotLog{
			slots:       make([]slot, cfg.JournalSlots),
			trustLow:    1,
			retainedLow: 1,
		},
		normal: normalCase{pipeline: make([]coreEntry, cfg.PipelineDepth)},
		vc: viewChange{
			dvcs:         make([]*doViewChange, n),
			svQuietUntil: make([]uint64, n),
		},
	}
	c.repair.nonce, c.transfer.nonceNext = cfg.NonceSeed, cfg.NonceSeed
	c.view, c.logView = cfg.InitialView, cfg.InitialView
	c.durable = DurableState{View: cfg.InitialView, LogView: cfg.InitialView}
	c.startTimers()
	return c, nil
}

// Accessors for tests and the caller.
func (c *Core) Status() Status    { return c.status }
func (c *Core) View() uint32      { return c.view }
func (c *Core) LogView() uint32   { return c.logView }
func (c *Core) Op() uint64        { return c.op }
func (c *Core) CommitMin() uint64 { return c.commitMin }
func (c *Core) CommitMax() uint64 { return c.commitMax }
func (c *Core) Now() uint64       { return c.now }

// Durable is the durable state as of the last Advance.
func (c *Core) Durable() DurableState { return c.durable }

// Checkpointed reports that the caller's state as of op, an applied op, is durable:
// a restart resumes from it (CoreConfig.ReportsCheckpoints). It takes no input of
// the protocol, so it may be called between Ready and Advance, from the apply of a
// Committed op.
func (c *Core) Checkpointed(op uint64) {
	if op > c.commitMin { // commitMin counts the Committed of a Ready out
		panic(fmt.Sprintf("vsr: checkpoint at op %d beyond the applied op %d", op, c.commitMin))
	}
	c.log.checkpointOp = max(c.log.checkpointOp, op)
}
func (c *Core) ReplicaID() uint8         { return c.cfg.ReplicaID }
func (c *Core) PrimaryOf(v uint32) uint8 { return uint8(v % uint32(c.cfg.ReplicaCount)) }
func (c *Core) Primary() uint8           { return c.PrimaryOf(c.view) }

// IsPrimary reports whether the replica leads its view and can take proposals.
func (c *Core) IsPrimary() bool { return c.status == StatusNormal && c.Primary() == c.cfg.ReplicaID }

// Header returns the trusted header the replica holds for op.
func (c *Core) Header(op uint64) (wire.PrepareHeader, bool) {
	s := c.slotAt(op)
	if s == nil || !s.trusted || op+1 < c.log.retainedLow {
		return wire.PrepareHeader{}, false
	}
	return s.header, true
}

// FillReply fills the reply header of a committed op (CommittedReply).
func (c *Core) FillReply(h *wire.ReplyHeader, prepare *wire.PrepareHeader) {
	*h = CommittedReply(prepare)
	h.Cluster = c.cfg.Cluster
}

// CommittedReply is the reply header of a committed op: op and commit are the
// log position, as the reference server stamps committed replies. The caller sets
// size and, when the state machine answers for another operation (CreateTopic
// replies as CreateTopicWithAssignments), the operation. Every field comes from
// the prepare's identity, none from the replica: the client table caches the
// reply, and every replica's table must be the same bytes, as snapshots and state
// transfers carry it. The prepare's view and replica are left out: a
// retransmission in a later view restamps them, so two replicas may hold one op
// under different views.
func CommittedReply(prepare *wire.PrepareHeader) wire.ReplyHeader {
	var h wire.ReplyHeader
	h.Cluster = prepare.Cluster
	h.Size = wire.HeaderSize
	h.Command = wire.CommandReply
	h.RequestChecksum = prepare.RequestChecksum
	h.Client = prepare.Client
	h.Op = prepare.Op
	h.Commit = prepare.Op
	h.Timestamp = prepare.Timestamp
	h.Request = prepare.Request
	h.Operation = prepare.Operation
	return h
}

func (c *Core) n() int { return int(c.cfg.ReplicaCount) }

func (c *Core) quorumReplication() int {
	q := QuorumReplication(c.n())
	if c.cfg.Mutation == MutationCommitBeforeQuorum && q > 1 {
		q--
	}
	return q
}

func (c *Core) quorumNack() int {
	q := QuorumViewChange(c.n())
	if c.cfg.Mutation == MutationTruncatePastNackQuorum && q > 1 {
		q--
	}
	return q
}
