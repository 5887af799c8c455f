package partition

import (
	"errors"
	"fmt"

	"github.com/iggy-shard/iggy-shard/vsr"
	"github.com/iggy-shard/iggy-shard/wire"
)

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
	// backup's journal copies until its log has written them, frames a held group
	// queued, batches read back for a peer's repair: memory.go); the node's share
	// for this shard. 0 = 64 MiB.
	BodyBudgetBytes int64
	// OpenFilesMax bounds the files the store's partitions hold open at once
	// (segment.FileCache): the least recently used are closed and opened again
	// when needed. The node's share for this shard of what its open-file limit
	// leaves beside connections and rings. 0 = segment.FilesBudget(GOMAXPROCS):
	// half of RLIMIT_NOFILE split over one store per core.
	OpenFilesMax int
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
	group, ok := wire.PartitionGroup(p.key.StreamID, p.key.TopicID, p.key.PartitionID)
	if !ok {
		return nil, fmt.Errorf("partition %v: ids outside the consensus group id space", p.key)
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
		InitialView:   p.initialView,
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

// startGroup gives p a fresh group on the log it has open: the next prepare is
// stamped at the log's next offset.
func (s *Store) startGroup(p *Partition) error {
	core, err := s.newCore(p)
	if err != nil {
		return err
	}
	s.stopGroup(p)
	p.core = core
	p.journal.reset(1)
	p.committedOp = 0
	p.unappliedBatches = 0
	p.preparedEnd = p.log.NextOffset()
	p.preparedTimestamp = p.log.LastTimestamp()
	p.lastPrepareTimestamp, p.lastProposedOp = 0, 0
	p.pendingOffers = nil
	p.applied = appliedRing{}
	p.recent.reset()
	p.recent.slots = 0
	if s.repl.replicaCount() > 1 {
		p.recent.slots = s.journalSlots()
	}
	fresh := p.fresh
	p.fresh = false
	// A replica opened after a restart (not created, not purged) had a life in the
	// group even when nothing of it reached the disk: it may have acknowledged
	// prepares it kept in memory, so it must not speak in a view change as if it
	// had never seen them.
	if p.state != nil && !fresh {
		if err := p.recoverGroup(core); err != nil {
			return err
		}
	}
	p.recovered = nil
	s.addTimer(p)
	s.noteLeading(p)
	return nil
}

// recoverGroup resumes a replica with a prior life in its group. It does not trust
// its memory of the group: it resumes from its checkpoint when its log ends exactly
// there, with the journal file's ops above it (p.recovered, durable.go), else from
// op 0 (its log is of ops it cannot number); it probes the group for the current
// view (vsr.Core.Recover), and repairs or transfers what it lacks.
func (p *Partition) recoverGroup(core *vsr.Core) error {
	st := p.state
	rec := vsr.CoreRecovered{}
	var entries []replayRecord
	placed := false
	if st.intact {
		rec.State = st.recovered.durable
		if r := p.recovered; r != nil {
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
			p.unappliedBatches++
		}
	}
	p.recomputePrepared()
	if r := p.recovered; r != nil && r.checkpoint.Op > st.recovered.checkpoint.Op {
		st.persistCheckpoint(&r.checkpoint, p.log.NextOffset())
	}
	return nil
}

// stopGroup takes p's group off the shard's timers.
func (s *Store) stopGroup(p *Partition) {
	if p.core == nil {
		return
	}
	if !p.parked {
		s.noteDisarmed(p)
		s.timers.Remove(p.timer)
		s.timerOwners[p.timer] = nil
	}
	p.parked = false
	p.core = nil
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
// equal to the prepare's timestamp; for an offset op, request_checksum equal to the
// body's hash and a payload that decodes.
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
	default:
		return fmt.Errorf("%w: op %d: operation %d is not a partition operation", ErrBatchBinding, h.Op, h.Operation)
	}
	return nil
}

// proposal is a send admitted while the group's Ready is out (its durable journal
// write in flight): it is prepared after Advance, with the others that waited, so
// that they share the next journal write and its fdatasync (group commit).
type proposal struct {
	batch     []byte
	nowMicros uint64
	done      SendCompletion
	token     uint64
}

type proposalQueue struct {
	ring []proposal
	head int
	n    int
}

func (q *proposalQueue) push(e proposal) {
	if q.n == len(q.ring) {
		grown := make([]proposal, max(16, 2*len(q.ring)))
		for i := 0; i < q.n; i++ {
			grown[i] = q.ring[(q.head+i)%len(q.ring)]
		}
		q.ring, q.head = grown, 0
	}
	q.ring[(q.head+q.n)%len(q.ring)] = e
	q.n++
}

func (q *proposalQueue) front() *proposal { return &q.ring[q.head] }

func (q *proposalQueue) popFront() proposal {
	e := q.ring[q.head]
	q.ring[q.head] = proposal{}
	q.head = (q.head + 1) % len(q.ring)
	q.n--
	return e
}

// prepareBatch stamps a validated batch at the group's prepared position and
// proposes it: base_offset is the offset after everything prepared, base_timestamp
// the prepare's timestamp, which the Core makes strictly increasing and which is
// first raised to the last prepared batch's so that batch timestamps never go back.
// The body is the batch in the request buffer itself. An error (58) means the
// pipeline is full or this replica does not lead.
func (p *Partition) prepareBatch(batch []byte, nowMicros uint64, done SendCompletion, token uint64, syncCall bool) (op uint64, err error) {
	if !p.positionKnown() {
		// A primary that holds ops without their bodies (committed ops it has not
		// repaired yet) cannot know the offset the next batch starts at.
		return 0, wire.ErrTransientNotAccepted
	}
	if p.unappliedBatches > 0 && p.firstUnappliedBase() != p.log.NextOffset() {
		// The log moved back under the batches waiting to be applied (a repair cut
		// it; its Failed hook may come later): they can no longer apply.
		p.voidUnapplied(errLogMovedBack)
	}
	if p.unappliedBatches == 0 {
		// Nothing prepared waits: the log's end is the position (it moves back when
		// a storage failure cut batches, and a durable journal records that).
		if end := p.log.NextOffset(); end != p.preparedEnd {
			if p.durable != nil {
				p.durable.noteCut(end)
			}
			p.preparedEnd = end
		}
	}
	timestamp := max(nowMicros, p.preparedTimestamp, p.log.LastTimestamp())
	last := p.lastPrepareTimestamp
	if p.core.Op() != p.lastProposedOp {
		// The head is not this replica's own last proposal (it led no view before,
		// or another replica did since): the Core raises above the head's timestamp.
		if h, ok := p.core.Header(p.core.Op()); ok {
			last = max(last, h.Timestamp)
		}
	}
	if timestamp <= last {
		timestamp = last + 1
	}
	base := p.preparedEnd
	wire.StampBatch(batch, uint64(p.key.PartitionID), base, timestamp)
	header, _ := wire.ViewBatchHeader(batch)
	op, err = p.core.Propose(vsr.Proposal{
		RequestChecksum: wire.Uint128{Lo: header.BatchChecksum()},
		Operation:       wire.OperationSendMessages,
	}, batch, timestamp)
	if err != nil {
		return 0, wire.ErrTransientNotAccepted
	}
	h, _ := p.core.Header(op)
	if h.Timestamp != timestamp {
		panic("partition: the core's prepare timestamp differs from the batch's stamp")
	}
	e := p.journal.put(&h)
	e.body = batch
	e.done, e.token, e.syncCall = done, token, syncCall
	p.lastPrepareTimestamp, p.lastProposedOp = timestamp, op
	p.preparedTimestamp = timestamp
	p.preparedEnd = base + uint64(header.MessageCount())
	p.unappliedBatches++
	return op, nil
}

// holding reports whether the group waits for its journal file: a Ready's write, or
// the file being emptied. Inputs wait meanwhile.
func (p *Partition) holding() bool { return p.held || p.durable != nil && p.durable.compacting }

// proposeWaiting prepares the sends that waited for the last Ready, as many as the
// pipeline takes.
func (p *Partition) proposeWaiting() {
	for p.waiting.n > 0 && !p.holding() {
		w := p.waiting.front()
		if _, err := p.prepareBatch(w.batch, w.nowMicros, w.done, w.token, false); err != nil {
			if p.core.IsPrimary() {
				return // the pipeline is full: the next Advance frees it
			}
			e := p.waiting.popFront()
			e.done.SendDone(e.token, wire.SendConfirmation{}, err)
			continue
		}
		p.waiting.popFront()
	}
}

// drive does the group's Readies until it has none, or until one waits for its
// durable journal write (enforce_fsync): that one finishes in onJournalDurable.
func (p *Partition) drive() {
	for range driveRoundsMax {
		if p.holding() || p.journalErr != nil {
			break
		}
		if !p.core.HasReady() {
			// The sends that waited go after the Ready an Advance left (commits to
			// apply), so that those are not held behind the next journal write.
			p.proposeWaiting()
			if !p.core.HasReady() {
				break
			}
		}
		rd := p.core.Ready()
		if rd.Truncate {
			p.dropAbove(rd.TruncateAbove)
			if p.durable != nil {
				p.durable.noteDiscard(rd.TruncateAbove+1, true)
			}
		}
		for _, op := range rd.Discards {
			p.discard(op)
			if p.durable != nil {
				p.durable.noteDiscard(op, false)
			}
		}
		for i := range rd.Writes {
			p.journalWrite(&rd.Writes[i])
		}
		needJournal := p.durable != nil && (len(rd.Writes) > 0 || p.durable.cutPending || len(p.durable.discards) > 0)
		needState := p.state != nil && (rd.State != nil || rd.ViewHeaders != nil)
		if needJournal || needState {
			// The Ready's frames promise what these make durable: they go out once
			// both are done (finishHeld). A prepare this backup forwards down the
			// chain has its body in the frame it came in, which the caller
			// releases when Step returns: it goes out with the journal's copy.
			for i := range rd.Messages {
				m := &rd.Messages[i]
				if m.Header.Command != wire.CommandPrepare {
					continue
				}
				h := m.Header.Prepare()
				if e := p.journal.at(h.Op); e != nil && e.present && e.header.Checksum == h.Checksum {
					m.Body = e.body
				}
			}
			p.heldReady = rd
			p.held = true
			p.heldWaits, p.heldErr = 0, nil
			p.heldSentEarly = p.sendEarly(&rd)
			if needState {
				p.heldWaits++
			}
			if needJournal {
				// The journal first, the view state once it is durable: a restart
				// that finds the new log view must find the entries of the old
				// one it discarded gone (the file's discard records), else it would
				// take a stale entry for the new view's.
				p.heldWaits++
				p.heldStateAfterJournal = needState
				p.durable.submit(p, rd.Writes)
			} else if needState {
				p.persistHeldView()
			}
			break
		}
		p.finishReady(&rd, false)
	}
	p.store.rearm(p)
}

// sendEarly sends, before a held Ready's durable writes, the frames that may leave
// then (vsr.Ready.SendableEarly): its prepares, so that the next replica of the
// chain writes its journal file while this one does, and an enforce_fsync op
// commits after one journal fdatasync and a round trip, not two fdatasyncs one
// after the other. It reports whether it sent any.
func (p *Partition) sendEarly(rd *vsr.Ready) bool {
	out := p.store.repl.Outbox
	if out == nil {
		return false
	}
	sent := false
	for i := range rd.Messages {
		if rd.SendableEarly(i) {
			out.SendReplica(p.key, &rd.Messages[i])
			p.store.counts.framesSent++
			sent = true
		}
	}
	return sent
}

// driveRoundsMax bounds one drive: each round is a Ready, and a group of one
// replica needs two per proposal batch (journal, then commit); more rounds than this
// in one call would be a core that never runs out of work, a bug.
const driveRoundsMax = 1 << 16

// finishReady does the rest of a Ready once its journal writes are done: the frames
// go out (but those sendEarly sent), the committed ops are applied in order, and
// the core is told.
func (p *Partition) finishReady(rd *vsr.Ready, sentEarly bool) {
	if out := p.store.repl.Outbox; out != nil {
		for i := range rd.Messages {
			if !sentEarly || !rd.SendableEarly(i) {
				out.SendReplica(p.key, &rd.Messages[i])
				p.store.counts.framesSent++
			}
		}
	}
	p.releaseRepairReads() // the frames that carried them are out
	for i := range rd.Committed {
		h := &rd.Committed[i]
		e := p.journal.at(h.Op)
		if e == nil || !e.present || e.header.Checksum != h.Checksum {
			panic("partition: a committed op is not in the journal")
		}
		p.committedOp = h.Op
	}
	// Committed ops are applied before an installed state (vsr.Ready's order);
	// here they wait in the journal for applyCommitted, and install drops those it
	// covers.
	if rd.Install != nil {
		if err := p.install(rd.Install); err != nil {
			p.journalErr = fmt.Errorf("partition %v: %w", p.key, err)
		}
	}
	p.pendingOffers = append(p.pendingOffers, rd.StateRequests...)
	p.core.Advance()
	p.applyCommitted()
	p.serveOffers()
}

// onJournalDurable is the completion of a held Ready's journal file write: the
// view state that waited for it is written next.
func (p *Partition) onJournalDurable(err error) {
	if p.heldStateAfterJournal {
		p.heldStateAfterJournal = false
		if err == nil {
			p.persistHeldView()
		} else {
			p.heldWaits-- // the state is not written after a failed journal
		}
	}
	p.heldWriteDone(err)
}

// persistHeldView writes the held Ready's view state (and view headers).
func (p *Partition) persistHeldView() {
	rd := &p.heldReady
	ds := p.state.wanted.durable
	if rd.State != nil {
		ds = *rd.State
	}
	p.heldStateGen = p.state.persistView(ds, rd.ViewHeaders)
}

// heldWriteDone counts one of the held Ready's durable writes (journal file, view
// state) done. It runs inside a storage completion, so the Ready is finished
// later, once the storage's Poll has returned (resume): finishing it may install a
// state, which closes the log and waits for the log's requests, and a request of
// the log completed in the same batch as this write would have its hook still to
// run, out of every poll's reach (the shard's disk ring reaps a batch of
// completions before it runs their hooks).
func (p *Partition) heldWriteDone(err error) {
	if err != nil && p.heldErr == nil {
		p.heldErr = err
	}
	p.heldWaits--
	if p.heldWaits == 0 {
		p.resumeWanted = true
	}
}

// resume does what storage completions left for after the storage's Poll: the held
// Ready whose writes are durable is finished, and the group driven (a journal file
// emptied, a state request whose log is now written). Every poll of a partition's
// storage outside the log's own waits goes through pollStorage, which calls it.
func (p *Partition) resume() {
	for p.resumeWanted {
		p.resumeWanted = false
		if p.state != nil && p.state.openErr != nil {
			p.state.failOpen()
		}
		if p.held {
			if p.heldWaits == 0 {
				p.finishHeld()
			}
			continue
		}
		if p.core != nil {
			p.serveOffers()
			p.drive()
		}
	}
}

// pollStorage runs the completions of p's storage (Storage.Poll), then what they
// left to do (resume).
func (p *Partition) pollStorage(wait bool) int {
	n := p.storage.Poll(wait)
	p.resume()
	return n
}

// finishHeld finishes the held Ready once its journal writes and its view state are
// durable, then feeds what waited for it.
func (p *Partition) finishHeld() {
	err := p.heldErr
	p.heldErr = nil
	rd, sentEarly := p.heldReady, p.heldSentEarly
	p.held, p.heldReady, p.heldSentEarly = false, vsr.Ready{}, false
	if err != nil {
		if p.store.repl.replicaCount() > 1 {
			// The Ready's acks must not go out, and its ops may commit elsewhere: the
			// partition refuses sends until Recover starts a fresh group.
			p.journalErr = fmt.Errorf("partition %v: journal write: %w", p.key, err)
			p.failUnapplied(wire.ErrCannotSaveMessagesToSegment)
			p.journal.reset(p.journal.lastOp() + 1)
			p.unappliedBatches = 0
			return
		}
		// A group of one: its ops commit here or nowhere. They are failed (4006, as a
		// failed log fdatasync fails its batches) and skipped at apply, and a cut
		// record voids whatever of them the file kept.
		p.voidWrites(rd.Writes)
	}
	p.finishReady(&rd, sentEarly)
	p.feedSteps()
	p.drive()
}

// voidWrites fails the sends of ops whose journal write failed and marks them to be
// skipped at apply; the prepared position goes back to before them.
func (p *Partition) voidWrites(writes []vsr.Write) {
	for i := range writes {
		e := p.journal.at(writes[i].Header.Op)
		if e == nil || !e.present || e.void {
			continue
		}
		e.void = true
		if e.header.Operation == wire.OperationSendMessages {
			p.unappliedBatches--
		}
		p.finishEntry(e, wire.ErrCannotSaveMessagesToSegment)
	}
	p.recomputePrepared()
	if p.durable != nil {
		p.durable.noteCut(p.preparedEnd)
	}
}

// voidUnapplied handles the log moving back under the group (a storage failure cut
// it, or a stalled log was reopened): every batch prepared and not applied was
// stamped past the new end and would fail its stamp check at apply. In a group of
// one, whose ops commit here or nowhere, they fail now (4006, as the cut batches do)
// and the next prepare is stamped at the log's end (behind a cut record in the
// journal file). A replica of a larger group holds applied batches its peers still
// have: it stops serving the partition until Recover.
func (p *Partition) voidUnapplied(cause error) {
	if p.core == nil || p.unappliedBatches == 0 && p.preparedEnd == p.log.NextOffset() {
		return
	}
	if p.store.repl.replicaCount() > 1 {
		p.diverged = fmt.Errorf("%w: the log moved back under the group: %v", ErrStampMismatch, cause)
		return
	}
	for op := p.journal.firstOp; op <= p.journal.lastOp(); op++ {
		e := p.journal.at(op)
		if e == nil || !e.present || e.void || e.header.Operation != wire.OperationSendMessages {
			continue
		}
		e.void = true
		p.unappliedBatches--
		p.finishEntry(e, wire.ErrCannotSaveMessagesToSegment)
	}
	p.recomputePrepared()
	if p.durable != nil {
		p.durable.noteCut(p.preparedEnd)
	}
}

var errLogMovedBack = errors.New("partition: the log's end moved back below the prepared batches")

// firstUnappliedBase is the base_offset of the oldest batch prepared and not applied
// (the journal must hold one).
func (p *Partition) firstUnappliedBase() uint64 {
	for op := p.journal.firstOp; op <= p.journal.lastOp(); op++ {
		if e := p.journal.at(op); e != nil && e.present && !e.void && e.header.Operation == wire.OperationSendMessages {
			bh, _ := wire.ViewBatchHeader(e.body)
			return bh.BaseOffset()
		}
	}
	panic("partition: no unapplied batch in the journal")
}

// recomputePrepared sets the prepared position from the log's end and the batches in
// the journal that will be applied.
func (p *Partition) recomputePrepared() {
	p.preparedEnd, p.preparedTimestamp = p.log.NextOffset(), max(p.preparedTimestamp, p.log.LastTimestamp())
	for op := p.journal.firstOp; op <= p.journal.lastOp(); op++ {
		if e := p.journal.at(op); e != nil && e.present && !e.void && e.header.Operation == wire.OperationSendMessages {
			bh, _ := wire.ViewBatchHeader(e.body)
			p.preparedEnd = bh.BaseOffset() + uint64(bh.MessageCount())
		}
	}
}

// journalWrite puts a Ready's write in the journal: on the primary the entry is
// there since prepareBatch (or prepareOffsetOp), on a backup the body is copied, as
// the frame it came in is released after Advance.
func (p *Partition) journalWrite(w *vsr.Write) {
	if e := p.journal.at(w.Header.Op); e != nil && e.present && e.header.Checksum == w.Header.Checksum {
		return
	}
	if w.Header.Op < p.journal.firstOp {
		return // applied already: a repair rewrote what the log holds
	}
	e := p.journal.put(&w.Header)
	p.copyBody(e, w.Body)
	if w.Header.Operation != wire.OperationSendMessages {
		return
	}
	p.unappliedBatches++
	if w.Header.Op == p.journal.lastOp() {
		bh, _ := wire.ViewBatchHeader(e.body)
		p.preparedEnd = bh.BaseOffset() + uint64(bh.MessageCount())
		p.preparedTimestamp = bh.BaseTimestamp()
		return
	}
	// A batch below the journal's last op (a repair, a prepare that came late):
	// the prepared end is the last present batch's, whatever came first.
	p.recomputePrepared()
}

// discard drops one journal entry the core no longer counts as its log's (a stale
// op of an older view, replaced by the one the hash chain names; the ops above it
// stay): its send fails, as its batch will never be in the log.
func (p *Partition) discard(op uint64) {
	e := p.journal.at(op)
	if e == nil || !e.present {
		return
	}
	if !e.void && e.header.Operation == wire.OperationSendMessages {
		p.unappliedBatches--
	}
	p.finishEntry(e, wire.ErrCannotSaveMessagesToSegment)
	p.releaseBody(e)
	*e = journalEntry{}
	p.recomputePrepared()
}

// dropAbove drops the journal entries above op (a view change truncated them);
// their sends fail, as the batches will never be in the log.
func (p *Partition) dropAbove(op uint64) {
	p.journal.truncateAbove(op, func(e *journalEntry) {
		if e.present && !e.void && e.header.Operation == wire.OperationSendMessages {
			p.unappliedBatches--
		}
		p.finishEntry(e, wire.ErrCannotSaveMessagesToSegment)
	})
	p.recomputePrepared()
}

// applyCommitted applies the committed ops in order, until one waits for the log's
// in-flight window (it is retried from settleSends).
func (p *Partition) applyCommitted() {
	if p.core != nil && p.core.Transferring() {
		// A state is on its way: it was asked for as of the op applied now (at
		// least), and what is applied meanwhile would be cut from under the core
		// by the install. The ops wait in the journal; those above the installed
		// state apply after it.
		return
	}
	for p.journal.len() > 0 && p.journal.firstOp <= p.committedOp {
		e := p.journal.front()
		if !p.apply(e) {
			return
		}
		p.journal.popFront()
	}
}

// apply applies one committed op; false when the log cannot take it yet.
func (p *Partition) apply(e *journalEntry) bool {
	if e.void {
		return true // failed when its journal write did
	}
	switch e.header.Operation {
	case wire.OperationSendMessages:
		if err := p.checkStamp(e); err != nil {
			if e.done == nil && !e.syncCall && p.requestTransfer() {
				// A backup whose log does not continue the primary's: it takes the
				// primary's state, which drops this op from the journal.
				return false
			}
			p.unappliedBatches--
			if e.done == nil && !e.syncCall {
				// A backup whose log does not continue where the primary's did: it
				// must not serve a different batch under the same offsets.
				p.diverged = err
			}
			p.lastFailure = err
			p.finishEntry(e, wire.ErrCannotSaveMessagesToSegment)
			return true
		}
		bh, _ := wire.ViewBatchHeader(e.body)
		base, end := bh.BaseOffset(), bh.BaseOffset()+uint64(bh.MessageCount())
		if err := p.log.Append(e.body); err != nil {
			if err == wire.ErrTransientNotAccepted {
				// The window may be full of batches written but not yet durable,
				// waiting for a save threshold: save as soon as their writes are done.
				p.saveWanted = true
				return false
			}
			p.unappliedBatches--
			p.finishEntry(e, appendError(err))
			return true
		}
		p.unappliedBatches--
		p.writeBody(e, end)
		p.noteApplied(e.header.Op, end, false)
		p.recent.note(&e.header, base, nil)
		if e.done != nil {
			p.sends.push(pendingSend{base: base, end: end, done: e.done, token: e.token})
			e.done = nil
		}
	case wire.OperationStoreConsumerOffset, wire.OperationDeleteConsumerOffset:
		c, offset, err := decodeOffsetOp(e.header.Operation, e.body)
		if err == nil {
			if e.header.Operation == wire.OperationStoreConsumerOffset {
				err = p.log.StoreConsumerOffset(c.segmentKind(), c.ID, offset)
			} else {
				err = p.log.DeleteConsumerOffset(c.segmentKind(), c.ID)
			}
		}
		if e.syncCall {
			p.offsetErr = err
		}
		if e.offsetDone != nil {
			if err != nil {
				err = statusOf(err)
			}
			e.offsetDone.OffsetDone(e.token, err)
			e.offsetDone = nil
		}
		p.noteApplied(e.header.Op, p.log.NextOffset(), true)
		p.recent.note(&e.header, 0, e.body)
	}
	return true
}

// requestTransfer asks the group's primary for its state, on a backup of a group of
// more than one replica whose log cannot take the primary's next batch. It reports
// whether a transfer is under way (the core must be in normal status, as a backup).
func (p *Partition) requestTransfer() bool {
	if p.store.repl.replicaCount() == 1 || p.core == nil || p.holding() {
		return false
	}
	p.catchUp()
	return p.core.RequestTransfer(p.journal.firstOp - 1)
}

// checkStamp is the apply-time check every replica makes of a batch: its stamp is
// the one this replica derives from its own position (base_offset its log's next
// offset, partition_id its own, base_timestamp the prepare's and not below its log's
// last), and the header still binds the body. On the primary it is its own check: it
// fails only for batches stamped before a storage failure cut the log back.
func (p *Partition) checkStamp(e *journalEntry) error {
	bh, err := wire.ViewBatchHeader(e.body)
	if err != nil {
		return fmt.Errorf("%w: op %d: %v", ErrBatchBinding, e.header.Op, err)
	}
	switch {
	case bh.BaseOffset() != p.log.NextOffset():
		return fmt.Errorf("%w: op %d: base_offset %d, the log's next offset is %d", ErrStampMismatch, e.header.Op, bh.BaseOffset(), p.log.NextOffset())
	case bh.PartitionID() != uint64(p.key.PartitionID):
		return fmt.Errorf("%w: op %d: partition_id %d", ErrStampMismatch, e.header.Op, bh.PartitionID())
	case bh.BaseTimestamp() != e.header.Timestamp || bh.BaseTimestamp() < p.log.LastTimestamp():
		return fmt.Errorf("%w: op %d: base_timestamp %d, prepare timestamp %d, log's last %d", ErrStampMismatch, e.header.Op, bh.BaseTimestamp(), e.header.Timestamp, p.log.LastTimestamp())
	case e.header.RequestChecksum != (wire.Uint128{Lo: bh.BatchChecksum()}):
		return fmt.Errorf("%w: op %d", ErrBatchBinding, e.header.Op)
	}
	return nil
}

// finishEntry ends an entry's send with err: returned by the Send call that admitted
// it when it is still running, otherwise through SendDone.
func (p *Partition) finishEntry(e *journalEntry, err error) {
	if e.offsetDone != nil {
		// An offset op that will not apply here (a view change cut it): the client
		// asks again, at whichever replica leads then.
		e.offsetDone.OffsetDone(e.token, wire.ErrTransientNotAccepted)
		e.offsetDone = nil
		return
	}
	switch {
	case e.syncCall:
		if e.header.Operation == wire.OperationSendMessages {
			p.syncErr = err
		} else {
			p.offsetErr = err
		}
	case e.done != nil:
		e.done.SendDone(e.token, wire.SendConfirmation{}, err)
	}
	e.done = nil
}

// failUnapplied fails every send prepared or waiting and not applied.
func (p *Partition) failUnapplied(code wire.ErrorCode) {
	for p.waiting.n > 0 {
		w := p.waiting.popFront()
		w.done.SendDone(w.token, wire.SendConfirmation{}, code)
	}
	for op := p.journal.firstOp; op <= p.journal.lastOp(); op++ {
		if e := p.journal.at(op); e != nil {
			p.finishEntry(e, code)
		}
	}
}

// Step takes a replica-plane frame from a peer for partition k's group (h validated
// by wire.DecodeReplicaHeader, body the bytes after it). A Prepare or RepairPrepare
// is checked first as a partition prepare must be: its body is the batch its header
// binds (checkBinding) and, when it is the next op, the stamp is the one this
// replica derives from its own position; a refusal is an error and the frame is
// dropped. A frame that arrives while the group's Ready waits for its durable
// journal write is copied and fed after Advance.
func (s *Store) Step(k Key, h *wire.GenericHeader, body []byte) error {
	p, ok := s.partitions[k]
	if !ok {
		return wire.ErrResourceNotFound
	}
	if err := s.SyncDirs(); err != nil {
		return err
	}
	s.activate(p)
	if err := p.broken(); err != nil {
		return err
	}
	if h.Command == wire.CommandPrepare || h.Command == wire.CommandRepairPrepare {
		if p.copiedBytes > 0 && s.bodies.full(len(body)) {
			return errBodyBudget
		}
		if err := p.checkIngress(h.Prepare(), body); err != nil {
			if errors.Is(err, ErrStampMismatch) && p.requestTransfer() {
				p.drive()
			}
			return err
		}
	}
	if p.holding() {
		p.queueStep(h, body)
		return nil
	}
	return p.step(h, body)
}

func (p *Partition) step(h *wire.GenericHeader, body []byte) error {
	p.catchUp()
	err := p.core.Step(h, body)
	p.drive()
	return err
}

// checkIngress is checkBinding plus the position: a prepare of the next op must be
// stamped at this replica's prepared end.
func (p *Partition) checkIngress(h *wire.PrepareHeader, body []byte) error {
	if err := p.checkBinding(h, body); err != nil {
		return err
	}
	if h.Operation != wire.OperationSendMessages || h.Op != p.core.Op()+1 || !p.positionKnown() {
		return nil // not the next op here, or a body below it missing: apply checks its stamp
	}
	if h.View > p.core.View() {
		// A view this replica has not joined: its position is its own log's, which
		// that view may have cut. The core takes no prepare of it, and asks the
		// view's primary for its StartView (a refusal here would ask the old
		// view's primary for a state instead).
		return nil
	}
	bh, _ := wire.ViewBatchHeader(body)
	end := p.preparedEnd
	if p.unappliedBatches == 0 {
		end = p.log.NextOffset()
	}
	if bh.BaseOffset() != end || bh.BaseTimestamp() < max(p.preparedTimestamp, p.log.LastTimestamp()) {
		return fmt.Errorf("%w: op %d: base_offset %d base_timestamp %d, this replica is at %d", ErrStampMismatch, h.Op, bh.BaseOffset(), bh.BaseTimestamp(), end)
	}
	return nil
}

// positionKnown reports whether the journal holds the body of every op the core
// has above the applied one, so that the offset after them (preparedEnd) is known:
// an op whose header came without its body (a repair not done yet) may be a batch
// of any length.
func (p *Partition) positionKnown() bool {
	applied := p.journal.firstOp - 1
	if p.core.Op() < applied || p.core.Op()-applied != uint64(p.journal.len()) {
		return false
	}
	for op := p.journal.firstOp; op <= p.journal.lastOp(); op++ {
		if e := p.journal.at(op); e == nil || !e.present {
			return false
		}
	}
	return true
}

// queuedStep is a frame copied while the group's Ready was out.
type queuedStep struct {
	header wire.GenericHeader
	body   []byte
}

// stepsQueuedMax bounds the frames a held group keeps: beyond it they are dropped,
// as a lossy network would, and the peers retransmit.
const stepsQueuedMax = 64

func (p *Partition) queueStep(h *wire.GenericHeader, body []byte) {
	if len(p.steps) == stepsQueuedMax {
		return
	}
	q := queuedStep{header: *h}
	if len(body) > 0 {
		q.body = append([]byte(nil), body...)
		p.store.bodies.take(len(body))
	}
	p.steps = append(p.steps, q)
}

// feedSteps feeds the frames that waited, in order, until the group holds again.
func (p *Partition) feedSteps() {
	i := 0
	for ; i < len(p.steps) && !p.holding(); i++ {
		q := &p.steps[i]
		_ = p.step(&q.header, q.body) // checked at ingress; the core's refusals are peers' faults
		// What the core kept of the frame it copied: the copy goes.
		p.store.bodies.give(len(q.body))
		q.body = nil
	}
	n := copy(p.steps, p.steps[i:])
	clear(p.steps[n:])
	p.steps = p.steps[:n]
}

// dropSteps forgets the frames queued (the group is replaced): the peers
// retransmit what matters.
func (p *Partition) dropSteps() {
	for i := range p.steps {
		p.store.bodies.give(len(p.steps[i].body))
	}
	clear(p.steps)
	p.steps = p.steps[:0]
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
		if p.core == nil || p.holding() || p.broken() != nil || p.core.Status() != vsr.StatusNormal || p.core.IsPrimary() {
			continue
		}
		p.catchUp()
		if p.core.TakeOver() {
			moved++
			p.drive()
		}
	}
	return moved
}
