package partition

import (
	"errors"
	"fmt"

	"github.com/iggy-shard/iggy-shard/vsr"
	"github.com/iggy-shard/iggy-shard/wire"
)

// partitionGroup is a partition's consensus group: its Core and the Driver that
// steps it, and what the replica keeps of its life in the group.
type partitionGroup struct {
	core   *vsr.Core
	driver *vsr.Driver
	// fresh: the next startGroup starts a new group (Create, purge), in
	// initialView, rather than recovering the replica's place in an existing one.
	fresh       bool
	initialView uint32
	// probeView: the fresh group's view is not known here (a purge this node
	// carried out late, Store.PurgeMissed): it probes the group for it, as a
	// restarted replica does (vsr.Core.Recover), before it votes or acknowledges.
	probeView bool
	// recovered is what the journal file placed, for startGroup (durable.go).
	recovered *journalRecovery
	// In a cluster (groupstate.go, repair.go): the group's durable state; the
	// applied ops waiting to be checkpointed; the last applied ops, for a peer's
	// repair.
	state   *stateFile
	applied appliedRing
	recent  recentOps
}

// Replication places a store's partitions in their consensus groups: every partition
// is one group (wire.PartitionGroup of its key) on the shard that owns it, and this
// replica is ReplicaID of ReplicaCount in each. The zero value is the single-node
// server: a group of one replica, which commits its own writes.
type Replication struct {
	Cluster      wire.Uint128
	ReplicaID    uint8
	ReplicaCount uint8 // 0 = 1
	// Timing is the groups' timers; zero = partitionTiming.
	Timing vsr.Timing
	// PipelineDepth bounds the prepares of a group in flight, and so how many a
	// durable journal write (enforce_fsync) carries at most. 0 = vsr's default.
	PipelineDepth int
	// Outbox carries the groups' replica-plane frames; nil with one replica.
	Outbox Outbox
	// JournalFile says which enforce_fsync groups keep the durable journal file.
	JournalFile JournalFilePolicy
	// BodyBudgetBytes bounds the copies of bodies the store holds for its groups (a
	// backup's journal copies until its log has written them, frames a group's
	// Driver held while its Ready was out, batches read back for a peer's repair:
	// memory.go); the node's share for this shard. 0 = 64 MiB.
	BodyBudgetBytes int64
	// LentBodiesMax bounds the frames the store's backups journal in place of a
	// copy, lent by StepLending's caller until written (lend.go). 0 =
	// LentBodiesMaxDefault; negative: none, every body is copied.
	LentBodiesMax int
	// OpenFilesMax bounds the files the store's partitions hold open at once
	// (segment.FileCache): the least recently used are closed and opened again
	// when needed. The node's share for this shard of what its open-file limit
	// leaves beside connections and rings. 0 = segment.FilesBudget(GOMAXPROCS):
	// half of RLIMIT_NOFILE split over one store per core.
	OpenFilesMax int
	// ScrubBytesPerSecond is the rate at which Store.Scrub re-verifies sealed
	// segments. 0 = ScrubBytesPerSecondDefault; negative turns the scrubber off.
	ScrubBytesPerSecond int64
	// Plans says when a poll is answered by a plan of file runs (plan.go).
	Plans PlanConfig
	// UntaggedGroups: the groups send untagged group ids, as binaries before
	// incarnation tags did (cluster.partition_incarnation_tags = false, for the
	// first roll of an upgrade from them: incarnation.go). They still check a
	// tagged frame's tag.
	UntaggedGroups bool
	// NonceSeed starts the groups' request nonces (vsr.CoreConfig.NonceSeed):
	// random per boot, so that a group does not take an answer to another boot's
	// request, or to another incarnation's under the same ids, for its own. Zero
	// counts from zero.
	NonceSeed uint64
}

// JournalFilePolicy says which groups of enforce_fsync topics write their journal to
// partition.journal (durable.go).
type JournalFilePolicy uint8

const (
	// JournalFileReplicated: groups of more than one replica. A backup acknowledges a
	// prepare once journaled, before its log has the batch, so only the file makes an
	// acknowledged message survive every replica crashing at once. A group of one
	// acknowledges a send after its log's own fdatasync, which makes the batch as
	// durable as the file would: the file would only add a write and an fdatasync
	// before each (BenchmarkSendFsync: about twice the latency).
	JournalFileReplicated JournalFilePolicy = iota
	// JournalFileAlways: every group of an enforce_fsync topic, one replica or more.
	JournalFileAlways
)

// journalFileWanted reports whether a partition of cfg keeps the journal file.
func (r Replication) journalFileWanted(cfg Config) bool {
	return cfg.EnforceFsync && (r.JournalFile == JournalFileAlways || r.replicaCount() > 1)
}

// Outbox sends a group's replica-plane frames to the peers (the shard's replica
// connections in a cluster).
type Outbox interface {
	// SendReplica sends m to replica m.To (complete and sealed, as vsr.Message says).
	// m and its body are valid only during the call: copy what is kept.
	SendReplica(k Key, m *vsr.Message)
}

// partitionTiming is the reference server's timers with a smaller repair chunk: a
// Core keeps a candidate per chunk entry and twice the larger of the chunk and the
// pipeline in journal slots, for every partition of the shard, and a partition
// repairs from its peers' in-memory journals, which hold little more than the
// pipeline anyway.
var partitionTiming = func() vsr.Timing {
	t := vsr.TimingDefault
	t.RepairChunkMax = 32
	return t
}()

func (r Replication) replicaCount() uint8 { return max(r.ReplicaCount, 1) }

// newCore makes the group of partition k: fresh, at op 0. A restarted partition's
// group starts fresh too: recovery replays its durable journal into the log before
// (durable.go), and with the in-memory journal there is nothing else to recover.
func (s *Store) newCore(p *Partition) (*vsr.Core, error) {
	group, err := p.groupID()
	if err != nil {
		return nil, err
	}
	timing, depth := s.timing(), s.pipelineDepth()
	return vsr.NewCore(vsr.CoreConfig{
		Config: vsr.Config{
			Cluster:       s.repl.Cluster,
			ReplicaID:     s.repl.ReplicaID,
			ReplicaCount:  s.repl.replicaCount(),
			Group:         group,
			PipelineDepth: depth,
		},
		Timing:       timing,
		JournalSlots: s.journalSlots(),
		Storage:      (*journalStorage)(p),
		// An idle partition group sends nothing; the store's keep-alive (Tick)
		// keeps its backups hearing from this node.
		QuietWhenIdle: true,
		CommitEagerly: true,
		InitialView:   p.group.initialView,
		NonceSeed:     s.repl.NonceSeed,
	})
}

func (s *Store) timing() vsr.Timing {
	if s.repl.Timing == (vsr.Timing{}) {
		return partitionTiming
	}
	return s.repl.Timing
}

func (s *Store) pipelineDepth() int {
	if s.repl.PipelineDepth == 0 {
		return vsr.PipelineDepthDefault
	}
	return s.repl.PipelineDepth
}

// journalSlots is the groups' header window (vsr.CoreConfig.JournalSlots): room for
// two pipelines and a repair chunk.
func (s *Store) journalSlots() int { return max(2*s.pipelineDepth(), s.timing().RepairChunkMax) }

// groupFrameBuffersKeptBytes is what a group's Driver keeps of the buffers of the
// frames it held while a Ready was out, once fed: a few headers' worth. A store runs
// a Driver per partition, most of them idle most of the time; a group that took a
// burst of frames once must not hold their buffers for good (memory.go counts the
// copies while they are held).
const groupFrameBuffersKeptBytes = 4 << 10

// startGroup gives p a fresh group on the log it has open: the next prepare is
// stamped at the log's next offset.
func (s *Store) startGroup(p *Partition) error {
	core, err := s.newCore(p)
	if err != nil {
		return err
	}
	s.stopGroup(p)
	p.group.core = core
	p.group.driver = vsr.NewDriver(core, (*groupHost)(p), vsr.DriverConfig{
		WaitForRoom: true,
		// Send and the offset ops refuse past journalEntriesMax first (58).
		RequestsQueuedMax:        2 * journalEntriesMax,
		FrameBuffersKeptMaxBytes: groupFrameBuffersKeptBytes,
	})
	p.journal.reset(1)
	p.committedOp = 0
	p.prepared.unappliedBatches = 0
	p.prepared.end = p.log.NextOffset()
	p.prepared.timestamp = p.log.LastTimestamp()
	p.proposing.lastTimestamp, p.proposing.lastOp = 0, 0
	p.persist.ready, p.persist.waits, p.persist.err, p.persist.journalDeferred = nil, 0, nil, false
	p.group.applied = appliedRing{}
	p.group.recent.reset()
	p.group.recent.slots = 0
	if s.repl.replicaCount() > 1 {
		p.group.recent.slots = s.journalSlots()
	}
	fresh := p.group.fresh
	p.group.fresh = false
	// A replica opened after a restart (not created, not purged) had a life in the
	// group even when nothing of it reached the disk: it may have acknowledged
	// prepares it kept in memory, so it must not speak in a view change as if it
	// had never seen them.
	probeView := p.group.probeView
	p.group.probeView = false
	switch {
	case p.group.state != nil && !fresh:
		if err := p.recoverGroup(core); err != nil {
			return err
		}
	case p.group.state != nil && probeView:
		// An empty log, acknowledged to no one: nothing to speak for but the
		// view it learns.
		if err := core.Recover(vsr.CoreRecovered{}); err != nil {
			return fmt.Errorf("partition %v: start a purged life: %w", p.key, err)
		}
	}
	p.group.recovered = nil
	s.addTimer(p)
	s.noteLeading(p)
	return nil
}

// recoverGroup resumes a replica with a prior life in its group. It does not trust
// its memory of the group: it resumes from its checkpoint when its log ends exactly
// there, with the journal file's ops above it (p.group.recovered, durable.go), else from
// op 0 (its log is of ops it cannot number); it probes the group for the current
// view (vsr.Core.Recover), and repairs or transfers what it lacks.
func (p *Partition) recoverGroup(core *vsr.Core) error {
	st := p.group.state
	rec := vsr.CoreRecovered{}
	var entries []replayRecord
	placed := false
	if st.intact {
		rec.State = st.recovered.durable
		if r := p.group.recovered; r != nil {
			rec.Checkpoint = vsr.Checkpoint{Op: r.checkpoint.Op, Identity: r.checkpoint.Checksum, Timestamp: r.checkpoint.Timestamp}
			if r.checkpoint.Op > 0 {
				rec.Headers = append(rec.Headers, r.checkpoint)
			}
			entries = r.unapplied
			placed = true
		} else if p.log.NextOffset() == st.recovered.checkpointEnd {
			rec.Checkpoint = st.recovered.checkpointOf()
			if rec.Checkpoint.Op > 0 {
				rec.Headers = append(rec.Headers, st.recovered.checkpoint)
			}
			placed = true
		}
	}
	if placed {
		// The log view's suffix as adopted (its heads may have no bodies here):
		// the replica speaks for that log in a view change, not for a shorter
		// one. One that cannot place its log has no log view to speak for.
		rec.ViewHeaders = st.recovered.viewHeaders
	}
	for i := range entries {
		rec.Headers = append(rec.Headers, entries[i].header)
	}
	if err := core.Recover(rec); err != nil {
		return fmt.Errorf("partition %v: recover group: %w", p.key, err)
	}
	p.journal.firstOp = rec.Checkpoint.Op + 1
	p.committedOp = rec.Checkpoint.Op
	for i := range entries {
		e := p.journal.put(&entries[i].header)
		e.body = entries[i].body
		if e.header.Operation == wire.OperationSendMessages {
			p.prepared.unappliedBatches++
		}
	}
	p.recomputePrepared()
	if r := p.group.recovered; r != nil && r.checkpoint.Op > st.recovered.checkpoint.Op {
		st.persistCheckpoint(&r.checkpoint, p.log.NextOffset())
	}
	return nil
}

// stopGroup ends p's group: its Driver stops (a proposal it still holds fails,
// its held frames go: the peers retransmit), the group leaves the shard's timers,
// and its counts of ignored inputs join the store's (Drops).
func (s *Store) stopGroup(p *Partition) {
	if p.group.core == nil {
		return
	}
	p.group.driver.Stop(nil)
	p.releaseHeldFrames()
	p.releaseCandidates()
	drops := p.group.core.Drops()
	for r := range s.dropsRetired {
		s.dropsRetired[r] += drops[r]
	}
	if !p.activity.parked {
		s.noteDisarmed(p)
		s.timers.Remove(p.activity.timer)
		s.timerOwners[p.activity.timer] = nil
	}
	p.activity.parked = false
	p.group.core, p.group.driver = nil, nil
}

// Drops sums, by reason (vsr.DropReason), the inputs the store's partition groups
// ignored: peers' frames refused or done already, and frames that came while a
// group's Ready was out and found its Driver's queue full
// (vsr.DropFramesQueueFull), over every group the store ran since it was made
// (groups restarted, purged or deleted included). For /metrics, one counter per
// reason; it copies the counts out and allocates nothing.
func (s *Store) Drops() vsr.DropCounts {
	sum := s.dropsRetired
	for _, p := range s.order {
		if p.group.core == nil {
			continue
		}
		drops := p.group.core.Drops()
		for r := range sum {
			sum[r] += drops[r]
		}
	}
	return sum
}

// journalStorage is the Core's read side of the partition's journal.
type journalStorage Partition

// Body implements vsr.Storage: the journal holds the ops not applied yet; an
// applied op's batch is read back from the segment log (repair.go).
func (j *journalStorage) Body(op uint64, identity wire.Uint128) ([]byte, bool) {
	p := (*Partition)(j)
	if op < p.journal.firstOp {
		return p.appliedBody(op, identity)
	}
	e := p.journal.at(op)
	if e == nil || !e.present || e.header.Checksum != identity {
		return nil, false
	}
	return e.body, true
}

// HoldsArtifact implements vsr.ArtifactHolder: a transferred segment this replica
// holds byte for byte is not fetched.
func (j *journalStorage) HoldsArtifact(a wire.StateArtifact) bool {
	return (*Partition)(j).holdsArtifact(a)
}

// OldestRetained implements vsr.RetainingStorage: a peer asking for an applied op
// older than the recent ops this replica can read back is answered RangeEvicted,
// and takes a state transfer.
func (j *journalStorage) OldestRetained() uint64 {
	return (*Partition)(j).oldestServed()
}

// Errors of the partition plane's consensus.
var (
	// ErrStampMismatch: a batch's stamp is not what this replica derives from its
	// own position (base_offset its next offset, base_timestamp the prepare's).
	ErrStampMismatch = errors.New("partition: batch stamp differs from this replica's position")
	// ErrBatchBinding: a prepare's request_checksum is not its batch's batch_checksum,
	// or its body fails the batch's checksums.
	ErrBatchBinding = errors.New("partition: prepare body is not the batch its header binds")
)

// checkBinding verifies a partition prepare's body against its header, as a replica
// must before it journals or acknowledges it: for a batch, every frame checksum and
// the batch checksum over the body (wire.CheckStoredBatch), the header's
// request_checksum equal to that batch_checksum, the partition id and base_timestamp
// equal to the prepare's timestamp; for an offset op or a DeleteSegments op
// (deletesegments.go), request_checksum equal to the body's hash and a payload
// that decodes.
func (p *Partition) checkBinding(h *wire.PrepareHeader, body []byte) error {
	switch h.Operation {
	case wire.OperationSendMessages:
		if err := wire.CheckStoredBatch(body); err != nil {
			return fmt.Errorf("%w: op %d: %v", ErrBatchBinding, h.Op, err)
		}
		bh, _ := wire.ViewBatchHeader(body)
		if h.RequestChecksum != (wire.Uint128{Lo: bh.BatchChecksum()}) {
			return fmt.Errorf("%w: op %d: request_checksum %v, batch_checksum %#x", ErrBatchBinding, h.Op, h.RequestChecksum, bh.BatchChecksum())
		}
		if bh.PartitionID() != uint64(p.key.PartitionID) || bh.BaseTimestamp() != h.Timestamp {
			return fmt.Errorf("%w: op %d: partition %d base_timestamp %d, prepare timestamp %d", ErrStampMismatch, h.Op, bh.PartitionID(), bh.BaseTimestamp(), h.Timestamp)
		}
	case wire.OperationStoreConsumerOffset, wire.OperationDeleteConsumerOffset:
		if h.RequestChecksum != wire.BodyChecksum(body) {
			return fmt.Errorf("%w: op %d: request_checksum of an offset op", ErrBatchBinding, h.Op)
		}
		if _, _, err := decodeOffsetOp(h.Operation, body); err != nil {
			return fmt.Errorf("%w: op %d: %v", ErrBatchBinding, h.Op, err)
		}
	case wire.OperationDeleteSegments:
		if h.RequestChecksum != wire.BodyChecksum(body) {
			return fmt.Errorf("%w: op %d: request_checksum of a DeleteSegments op", ErrBatchBinding, h.Op)
		}
		if _, _, err := decodeDeleteSegmentsOp(body); err != nil {
			return fmt.Errorf("%w: op %d: %v", ErrBatchBinding, h.Op, err)
		}
	default:
		return fmt.Errorf("%w: op %d: operation %d is not a partition operation", ErrBatchBinding, h.Op, h.Operation)
	}
	return nil
}

// Step takes a replica-plane frame from a peer for partition k's group (h validated
// by wire.DecodeReplicaHeader, body the bytes after it). A Prepare or RepairPrepare
// is checked first as a partition prepare must be: its body is the batch its header
// binds (checkBinding) and, when it is the next op, the stamp is the one this
// replica derives from its own position; a refusal is an error and the frame is
// dropped, and counted (IngressDrops), as is a frame for a partition the store
// does not hold, one of another incarnation of its ids (incarnation.go) or one
// that refuses everything until Recover, and a prepare the
// body budget has no room for. A Commit that brings a parked backup nothing is
// taken as its primary's keep-alive and leaves the group parked (IngressDrops,
// IngressParkedKeepAlive). A frame that arrives while the group's Ready waits for
// its durable writes is copied by the group's Driver and fed after Advance
// (counted against the body budget meanwhile); past the Driver's bound it is
// dropped and counted (vsr.DropFramesQueueFull, Drops).
func (s *Store) Step(k Key, h *wire.GenericHeader, body []byte) error {
	p, ok := s.partitions[k]
	if !ok {
		return s.refuse(IngressUnknownPartition, wire.ErrResourceNotFound)
	}
	if p.ofOtherIncarnation(h) {
		return s.refuse(IngressOtherIncarnation, errOtherIncarnation)
	}
	if err := s.SyncDirs(); err != nil {
		return s.refuse(IngressStorageFailing, err)
	}
	if p.keepAliveOnly(h) {
		s.ingress[IngressParkedKeepAlive]++
		return nil
	}
	s.activate(p)
	if err := p.broken(); err != nil {
		return s.refuse(IngressBroken, err)
	}
	prepare := h.Command == wire.CommandPrepare || h.Command == wire.CommandRepairPrepare
	if prepare {
		if !p.admitsBody(h.Prepare().Op, len(body), h.Command == wire.CommandRepairPrepare) {
			return s.refuse(IngressBodyBudget, errBodyBudget)
		}
		if err := p.checkIngress(h.Prepare(), body); err != nil {
			if errors.Is(err, ErrStampMismatch) && p.requestTransfer() {
				p.run()
			}
			return s.refuse(ingressReason(err), err)
		}
	}
	if p.holding() {
		if !prepare && len(body) > 0 && !s.bodies.admit(len(body), false) {
			return s.refuse(IngressBodyBudget, errBodyBudget)
		}
		return p.holdFrame(h, body)
	}
	p.catchUp()
	err := p.group.driver.Step(h, body)
	p.afterRun()
	return err
}

// checkIngress is checkBinding plus the position: a prepare of the next op must be
// stamped at this replica's prepared end.
func (p *Partition) checkIngress(h *wire.PrepareHeader, body []byte) error {
	if err := p.checkBinding(h, body); err != nil {
		return err
	}
	if h.Operation != wire.OperationSendMessages || h.Op != p.group.core.Op()+1 || !p.positionKnown() {
		return nil // not the next op here, or a body below it missing: apply checks its stamp
	}
	if h.View > p.group.core.View() {
		// A view this replica has not joined: its position is its own log's, which
		// that view may have cut. The core takes no prepare of it, and asks the
		// view's primary for its StartView (a refusal here would ask the old
		// view's primary for a state instead).
		return nil
	}
	bh, _ := wire.ViewBatchHeader(body)
	end := p.prepared.end
	if p.prepared.unappliedBatches == 0 {
		end = p.log.NextOffset()
	}
	if bh.BaseOffset() != end || bh.BaseTimestamp() < max(p.prepared.timestamp, p.log.LastTimestamp()) {
		return fmt.Errorf("%w: op %d: base_offset %d base_timestamp %d, this replica is at %d", ErrStampMismatch, h.Op, bh.BaseOffset(), bh.BaseTimestamp(), end)
	}
	return nil
}

// positionKnown reports whether the journal holds the body of every op the core
// has above the applied one, so that the offset after them (prepared.end) is known:
// an op whose header came without its body (a repair not done yet) may be a batch
// of any length.
func (p *Partition) positionKnown() bool {
	applied := p.journal.firstOp - 1
	if p.group.core.Op() < applied || p.group.core.Op()-applied != uint64(p.journal.len()) {
		return false
	}
	for op := p.journal.firstOp; op <= p.journal.lastOp(); op++ {
		if e := p.journal.at(op); e == nil || !e.present {
			return false
		}
	}
	return true
}

func (s *Store) byTimer(h vsr.GroupHandle) *Partition {
	if int(h) < len(s.timerOwners) {
		return s.timerOwners[h]
	}
	return nil
}

// LeadGroups moves to this replica the primaryship of up to max groups it backs in
// normal status (vsr.Core.TakeOver) and returns how many it moved. The caller calls
// it while its node leads the metadata group: clients write where
// GetClusterMetadata names the leader, and a partition led elsewhere answers them
// 58 until its group follows.
func (s *Store) LeadGroups(max int) int {
	if s.SyncDirs() != nil {
		return 0
	}
	moved := 0
	for _, p := range s.order {
		if moved == max {
			break
		}
		if p.group.core == nil || p.holding() || p.broken() != nil || p.group.core.Status() != vsr.StatusNormal || p.group.core.IsPrimary() {
			continue
		}
		p.catchUp()
		if p.group.driver.TakeOver() {
			moved++
			p.afterRun()
		}
	}
	return moved
}
