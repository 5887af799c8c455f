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

// ErrPipelineFull tells the primary's caller to hold the request back (or answer it
// with a retryable status): every pipeline slot is waiting for its quorum.
var ErrPipelineFull = errors.New("vsr: prepare pipeline is full")

// ErrNotPrimary is returned when a replica that does not lead the current view is
// asked to prepare.
var ErrNotPrimary = errors.New("vsr: replica is not the primary of its view")

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

// Proposal is an admitted client request as the primary turns it into a prepare.
type Proposal struct {
	Client          wire.Uint128
	Request         uint64
	RequestChecksum wire.Uint128
	Operation       wire.Operation
	UserID          uint32
}

// pipelineEntry is one prepared op waiting for its quorum.
type pipelineEntry struct {
	op       uint64
	identity wire.Uint128
	// acks has bit i set once replica i made the op durable.
	acks uint32
}

// Replica is the normal-case core of Viewstamped Replication for one consensus
// group: it numbers and chains prepares, counts acknowledgements and moves the
// commit point. It does no I/O and reads no clock: the caller journals the prepares
// it returns, tells it what became durable, applies what it says is committed and
// passes time in as microseconds.
//
// The order of effects is the caller's contract, as in etcd raft's Ready: journal a
// prepare before acknowledging it (OnJournaled), apply committed ops strictly in op
// order (NextCommit/OnApplied), and reply only after apply.
//
// This is the single-replica normal case the server runs today; Core is the whole
// protocol (view change, repair, state transfer, forwarding) for n replicas, and
// the server's metadata plane is to move onto it.
type Replica struct {
	cfg Config

	view    uint32
	logView uint32
	// op is the sequencer head (ops are 1-based; 0 means an empty log).
	op uint64
	// commitMin is the last applied op; it advances by exactly one.
	commitMin uint64
	// commitMax is the highest op known committed; commitMin <= commitMax <= op.
	commitMax uint64

	lastPrepareChecksum wire.Uint128
	lastTimestamp       uint64

	// pipeline is a ring of the prepared, uncommitted ops in op order:
	// pipeline[(head+i) % depth] holds op commitMax+1+i.
	pipeline      []pipelineEntry
	pipelineHead  int
	pipelineCount int
}

// NewReplica starts a replica on an empty log in view 0.
func NewReplica(cfg Config) (*Replica, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Replica{cfg: cfg, pipeline: make([]pipelineEntry, cfg.PipelineDepth)}, nil
}

// Recovered describes the durable state a restarted replica resumes from: the head
// of its journal (op and identity of the last prepare), the highest committed op,
// and the view it was in.
type Recovered struct {
	View          uint32
	Op            uint64
	Commit        uint64
	LastIdentity  wire.Uint128
	LastTimestamp uint64
}

// Restore resumes a single-replica group from its journal: everything journaled is
// committed (the replica is its own quorum) and everything up to Commit is applied.
// A multi-replica group recovers through RequestStartView and the view change, which
// are Core's (Core.Recover), so Restore refuses it.
func (r *Replica) Restore(rec Recovered) error {
	if r.cfg.ReplicaCount != 1 {
		return errors.New("vsr: Replica restores a single-replica group only; a multi-replica group runs on Core")
	}
	if rec.Commit > rec.Op {
		return fmt.Errorf("vsr: recovered commit %d above head op %d", rec.Commit, rec.Op)
	}
	if r.op != 0 {
		return errors.New("vsr: restore on a replica that already prepared")
	}
	r.view, r.logView = rec.View, rec.View
	r.op = rec.Op
	r.commitMin = rec.Commit
	r.commitMax = rec.Op
	r.lastPrepareChecksum = rec.LastIdentity
	r.lastTimestamp = rec.LastTimestamp
	return nil
}

// View, Op, CommitMin and CommitMax expose the replica's position.
func (r *Replica) View() uint32      { return r.view }
func (r *Replica) Op() uint64        { return r.op }
func (r *Replica) CommitMin() uint64 { return r.commitMin }
func (r *Replica) CommitMax() uint64 { return r.commitMax }

// Primary is the primary of the current view: view mod replica count.
func (r *Replica) Primary() uint8 { return uint8(r.view % uint32(r.cfg.ReplicaCount)) }

// IsPrimary reports whether this replica leads the current view.
func (r *Replica) IsPrimary() bool { return r.Primary() == r.cfg.ReplicaID }

// PipelineFull reports whether a Prepare would fail with ErrPipelineFull.
func (r *Replica) PipelineFull() bool { return r.pipelineCount == len(r.pipeline) }

// Prepare numbers an admitted request: it fills *h with the next prepare header of
// the hash chain for a body of bodySizeBytes (metadata prepares seal their body,
// partition prepares rely on the batch checksum inside). The caller journals the
// header and body, and reports the durable append with OnJournaled.
func (r *Replica) Prepare(h *wire.PrepareHeader, p Proposal, body []byte, nowMicros uint64) error {
	if !r.IsPrimary() {
		return ErrNotPrimary
	}
	if r.PipelineFull() {
		return ErrPipelineFull
	}
	timestamp := nowMicros
	if timestamp <= r.lastTimestamp {
		// Prepare timestamps are strictly monotonic whatever the wall clock does, so
		// that message timestamps never go backwards across a clock step.
		timestamp = r.lastTimestamp + 1
	}
	*h = wire.PrepareHeader{}
	h.Cluster = r.cfg.Cluster
	h.Size = uint32(wire.HeaderSize + len(body))
	h.View = r.view
	h.Command = wire.CommandPrepare
	h.Replica = r.cfg.ReplicaID
	h.Client = p.Client
	h.Parent = r.lastPrepareChecksum
	h.RequestChecksum = p.RequestChecksum
	h.Op = r.op + 1
	h.Commit = r.commitMax
	h.Timestamp = timestamp
	h.Request = p.Request
	h.Operation = p.Operation
	h.Group = r.cfg.Group
	h.UserID = p.UserID
	if r.cfg.Group == wire.MetadataGroup {
		h.ChecksumBody = wire.BodyChecksum(body)
	}
	h.SetIdentity()

	r.op = h.Op
	r.lastTimestamp = timestamp
	r.lastPrepareChecksum = h.Checksum
	slot := (r.pipelineHead + r.pipelineCount) % len(r.pipeline)
	r.pipeline[slot] = pipelineEntry{op: h.Op, identity: h.Checksum}
	r.pipelineCount++
	return nil
}

// OnJournaled records that replica (this one, through its loopback, or a backup's
// PrepareOk) made op durable. It returns whether the commit point moved; committed
// ops are then taken with NextCommit. Acks for unknown or already committed ops are
// ignored: they are retransmits.
func (r *Replica) OnJournaled(replica uint8, op uint64, identity wire.Uint128) bool {
	if replica >= r.cfg.ReplicaCount || op <= r.commitMax || op > r.op {
		return false
	}
	index := int(op - r.commitMax - 1)
	if index >= r.pipelineCount {
		return false
	}
	entry := &r.pipeline[(r.pipelineHead+index)%len(r.pipeline)]
	if entry.op != op {
		panic(fmt.Sprintf("vsr: pipeline slot holds op %d, want %d", entry.op, op))
	}
	if entry.identity != identity {
		// An ack for a different prepare at this op (an older view's): not ours.
		return false
	}
	entry.acks |= 1 << replica

	quorum := QuorumReplication(int(r.cfg.ReplicaCount))
	moved := false
	for r.pipelineCount > 0 {
		head := &r.pipeline[r.pipelineHead]
		if popcount(head.acks) < quorum {
			break
		}
		r.commitMax = head.op
		*head = pipelineEntry{}
		r.pipelineHead = (r.pipelineHead + 1) % len(r.pipeline)
		r.pipelineCount--
		moved = true
	}
	return moved
}

// NextCommit returns the next op to apply, if one is committed and not yet applied.
func (r *Replica) NextCommit() (op uint64, ok bool) {
	if r.commitMin < r.commitMax {
		return r.commitMin + 1, true
	}
	return 0, false
}

// OnApplied records that op was applied to the state machine. Ops are applied one by
// one in order; anything else is a bug in the caller.
func (r *Replica) OnApplied(op uint64) {
	if op != r.commitMin+1 || op > r.commitMax {
		panic(fmt.Sprintf("vsr: applied op %d out of order (commit_min %d, commit_max %d)", op, r.commitMin, r.commitMax))
	}
	r.commitMin = op
}

// FillReply fills the reply header of a committed op: op and commit are the log
// position, as the reference server stamps committed replies. The caller sets size
// and, when the state machine answers for another operation (CreateTopic replies as
// CreateTopicWithAssignments), the operation.
func (r *Replica) FillReply(h *wire.ReplyHeader, prepare *wire.PrepareHeader) {
	*h = wire.ReplyHeader{}
	h.Cluster = r.cfg.Cluster
	h.Size = wire.HeaderSize
	h.View = r.view
	h.Command = wire.CommandReply
	h.Replica = r.cfg.ReplicaID
	h.RequestChecksum = prepare.RequestChecksum
	h.Client = prepare.Client
	h.Op = prepare.Op
	h.Commit = prepare.Op
	h.Timestamp = prepare.Timestamp
	h.Request = prepare.Request
	h.Operation = prepare.Operation
}

func popcount(x uint32) int {
	n := 0
	for ; x != 0; x &= x - 1 {
		n++
	}
	return n
}
