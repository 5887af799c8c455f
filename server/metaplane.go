package server

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/zeebo/xxh3"

	"github.com/iggy-shard/iggy-shard/metadata"
	"github.com/iggy-shard/iggy-shard/vsr"
	"github.com/iggy-shard/iggy-shard/wire"
)

// The metadata plane lives on shard 0: a consensus group of one replica on a single
// node, of the roster's replicas in a cluster (vsr.Core, one Propose/Ready/Advance
// path for both) over the metadata state machine, with its client table, journal,
// snapshot and state record, all through a metaStorage (metastorage.go):
//
//	local_data/metadata/journal.wal    prepares back to back, from the snapshot's op
//	                                   on: [PrepareHeader 256][body] ... (vsr.ScanJournal;
//	                                   in a cluster with holes, journal.go)
//	local_data/metadata/snapshot.bin   the state as of one applied op:
//
//	+------+---------+--------+------------------+------------------+-----------+---------------+----------+------+------------+
//	| ISV1 | op u64  | view   | last identity    | last timestamp   | meta len  | metadata      | ict len  | ICT2 | xxh3-64 of |
//	|      |         | u32    | u128             | u64 µs           | u64       | snapshot      | u64      |      | all before |
//	+------+---------+--------+------------------+------------------+-----------+---------------+----------+------+------------+
//
//	local_data/metadata/state.bin      the replica's durable state (vsr.DurableState
//	                                   and the view headers of Ready.ViewHeaders):
//
//	+------+--------+----------+------------+----------------+--------------------------+------------+
//	| ISR1 | view   | log view | commit max | headers count  | PrepareHeader 256 each,  | xxh3-64 of |
//	|      | u32    | u32      | u64        | u32            | head first               | all before |
//	+------+--------+----------+------------+----------------+--------------------------+------------+
//
// The state record plays the part of the reference's superblock (its vsr_state):
// small, replaced whole and atomically whenever a Ready carries a new State, before
// that Ready's journal writes. A group of one replica never changes view, so it is
// written at the first start and after that only by a view change a cluster would
// make; recovery reads it back into vsr.CoreRecovered.State. A missing record is the
// zero state (a data directory older than the record).
//
// A write goes: admission (ClientTable.Preflight, State.Admit, on the committed
// state) -> submit (waiting) -> Core.Propose -> Ready: its Writes appended in one
// write and one fdatasync on the journal writer's goroutine (journal.go) while
// shard 0 goes on serving -> Advance (the replica is its own quorum: the ops
// commit) -> the next Ready's Committed: Apply, FillReply, CommitRequest (the
// client table's cache), the write's done (the commit log, the reply).
//
// Writes are pipelined: up to the core's pipeline depth are numbered and in
// flight at once, and State.Apply, not admission, is authoritative: an op that an
// earlier op in flight made invalid commits as a refusal (result-framed), on
// every replay the same. While a Ready's journal write is out the core takes no
// input (Advance clears the whole Ready: a proposal taken meanwhile would be marked
// durable without being written), so the writes that arrive meanwhile wait in
// waiting and go to the core after Advance: the next Ready carries all of them in
// one append and one fdatasync (group commit). A group of one replica has no
// timers (no heartbeats, no retransmissions), so the plane never ticks its core; a
// cluster's does (metacluster.go, which also says how its Readies differ).
//
// Every SnapshotIntervalOps applied ops (at most what vsr's checkpoint rule allows,
// metacheckpoint.go) a snapshot is encoded on shard 0 and written by the journal
// writer, and the journal is replaced by its entries from the snapshot's op on (the
// entry at the snapshot's op included: Core.Recover anchors the log on it), each
// atomically. A crash between the two leaves journal entries below the snapshot's
// op, which recovery skips.

const (
	snapshotMagic    = "ISV1"
	stateRecordMagic = "ISR1"
	snapshotFileName = "snapshot.bin"
	journalFileName  = "journal.wal"
	stateFileName    = "state.bin"
	serverVersion    = "0.11.0"
	metadataFrameMax = 64 << 20
	// metaWritesWaitingMax bounds the metadata writes waiting for the core (a Ready
	// out, or the pipeline full): one per connection in flight (a connection's
	// writes go one at a time, router.go), so this is reached only by thousands of
	// connections writing at once; the rest are refused as not accepted (58),
	// retried by the client, as the password workers refuse theirs.
	metaWritesWaitingMax = 4096
	// journalSlotsMin is the core's header window (vsr.CoreConfig.JournalSlots) at
	// least; a recovered journal longer than that (snapshots failing for a while)
	// gets a window that holds it whole.
	journalSlotsMin = 1024
)

// errMetaWritesBusy refuses a metadata write that found metaWritesWaitingMax
// writes waiting.
var errMetaWritesBusy = errors.New("metadata writes: too many waiting")

type metaPlane struct {
	log     *slog.Logger
	dir     string // for log lines
	store   metaStorage
	state   *metadata.State
	table   *vsr.ClientTable
	replica *vsr.Core
	bodies  *metaBodies
	journal metaJournal
	out     metadata.Output
	// nowMicros is the proposals' clock (the server's).
	nowMicros func() uint64
	// fsyncs, when set, records each journal fdatasync's duration.
	fsyncs *syncedHistogram

	// The journal's entries: journalFirstOp is the op of the first, journalEnds[i]
	// the end offset of op journalFirstOp+i.
	journalFirstOp uint64
	journalEnds    []int64

	// snapshotIntervalOps paces the snapshots (metacheckpoint.go); snapshotOp is
	// the op of the last one written. After a failed one, snapshotRetrying holds
	// the next try until snapshotRetryTick (a cluster's core clock) or
	// snapshotRetryOp (a single node's applied op).
	snapshotIntervalOps uint64
	snapshotOp          uint64
	snapshotRetrying    bool
	snapshotRetryTick   uint64
	snapshotRetryOp     uint64
	// snapshotsTaken counts the snapshots written (tests); proposalsHeld the
	// proposals the core refused until a snapshot (vsr.ErrCheckpointDue).
	snapshotsTaken atomic.Int64
	proposalsHeld  atomic.Int64
	// journalSlots is the core's header window (vsr.CoreConfig.JournalSlots);
	// journalSlotsTest, when set, replaces its minimum (Config.metaJournalSlots).
	journalSlots     int
	journalSlotsTest int
	// oldCheckpointRule (tests, Config.metaOldCheckpointRule): the snapshot
	// interval is taken as configured, however far past the window.
	oldCheckpointRule bool
	// transfersInstalled counts the states this replica installed (tests).
	transfersInstalled atomic.Int64
	// applied is the last applied op: the point a snapshot is taken at.
	applied appliedOp
	// viewHeaders are the last persisted Ready.ViewHeaders (the state record's).
	viewHeaders []wire.PrepareHeader

	// waiting are the writes not handed to the core yet, in arrival order;
	// inflight those it numbered, in op order, until applied.
	waiting  []*metaWrite
	inflight []*metaWrite
	// writesWaiting is len(waiting), for observers outside shard 0 (tests).
	writesWaiting atomic.Int64
	// taskOut: a journal task (a Ready's writes, or a snapshot) is with the
	// journal writer; readyOut: a Ready was taken and not advanced.
	taskOut   bool
	readyOut  bool
	rd        vsr.Ready
	appending appendWork
	// broken is set when a journal write failed after ops were numbered: the
	// replica cannot take them back, so the plane refuses writes until restart.
	broken error

	// onApplied runs for every op applied, before the write that proposed it (if
	// it was proposed here) is done: the router publishes it to the shards' views.
	onApplied func(c *metaCommit)

	// The group's other replicas (metacluster.go); clustered is false and the
	// rest unused on a single node.
	clustered bool
	cluster   metaCluster
}

type appliedOp struct {
	op        uint64
	view      uint32
	identity  wire.Uint128
	timestamp uint64
}

// metaWrite is one proposal on its way through the plane. done runs on shard 0
// once: with the commit right after it applied (before the next op applies), or
// with the error that stopped it (errMetaWritesBusy, a broken journal).
type metaWrite struct {
	proposal vsr.Proposal
	body     []byte // stable: the journal, the view and the core alias it
	done     func(c *metaCommit, err error)
	op       uint64
	// identity is the prepare's: in a cluster another primary's op may take the
	// same number after a view change, and it is not this write's commit.
	identity wire.Uint128
	commit   metaCommit
}

// metaCommit is what applying a write produced.
type metaCommit struct {
	header *wire.PrepareHeader
	body   []byte
	// frame is the reply frame (header and body), cached by the client table.
	frame []byte
	// tableWasFull: a Register found the client table full (it evicted someone).
	tableWasFull bool
	// epoch is a Register's session epoch.
	epoch uint64
}

// metaBodies is the core's vsr.Storage: the bodies of the ops numbered and not yet
// applied (the journal holds them too; these are what the core would read back).
type metaBodies struct {
	byOp map[uint64]metaBody
}

type metaBody struct {
	identity wire.Uint128
	body     []byte
}

func (b *metaBodies) Body(op uint64, identity wire.Uint128) ([]byte, bool) {
	e, ok := b.byOp[op]
	if !ok || e.identity != identity {
		return nil, false
	}
	return e.body, true
}

// snapshotHead is what a snapshot records beside the two encodings.
type snapshotHead struct {
	op             uint64
	view           uint32
	lastIdentity   wire.Uint128
	lastTimestamp  uint64
	metadataBytes  []byte
	clientTableICT []byte
}

// openMetaPlane opens the metadata plane of the data directory systemPath.
func openMetaPlane(log *slog.Logger, systemPath string, cfg *Config, nowMicros uint64) (*metaPlane, error) {
	dir := filepath.Join(systemPath, "metadata")
	store, err := newOSMetaStorage(dir)
	if err != nil {
		return nil, err
	}
	return openMetaPlaneOn(log, store, dir, cfg, nowMicros)
}

// openMetaPlaneOn recovers the plane from store: the snapshot, the state record and
// the journal's entries above the snapshot, applied again.
func openMetaPlaneOn(log *slog.Logger, store metaStorage, dir string, cfg *Config, nowMicros uint64) (*metaPlane, error) {
	m := &metaPlane{log: log, dir: dir, store: store, bodies: &metaBodies{byOp: make(map[uint64]metaBody)},
		journalSlotsTest: cfg.metaJournalSlots, oldCheckpointRule: cfg.metaOldCheckpointRule}
	// The rule (metacheckpoint.go); Start clamped the configured interval with a
	// warning, a plane opened directly is clamped silently.
	m.snapshotIntervalOps = max(1, min(cfg.SnapshotIntervalOps, vsr.CheckpointIntervalOpsMax(cfg.metaJournalSlotsBase(), vsr.PipelineDepthDefault)))
	if m.oldCheckpointRule {
		m.snapshotIntervalOps = cfg.SnapshotIntervalOps
	}
	m.nowMicros = func() uint64 { return nowMicros }

	if err := m.configureCluster(cfg); err != nil {
		return nil, err
	}
	var head snapshotHead
	raw, err := store.ReadFile(snapshotFileName)
	fresh := errors.Is(err, fs.ErrNotExist)
	switch {
	case fresh:
		// First start. On a single node the root user comes from the
		// configuration, once. A cluster's replicas start without users: the root
		// user comes from an op the first primary proposes (metaRouter.ensureRootUser),
		// so that every replica holds the same one, hash and creation time included;
		// until it commits, logins are answered 58. The state is snapshotted at op 0
		// right away, so a later start never reads the credentials again.
		if m.clustered {
			m.state = metadata.NewStateWithoutRoot()
		} else {
			salt := make([]byte, metadata.PasswordSaltBytes)
			if _, err := io.ReadFull(rand.Reader, salt); err != nil {
				return nil, err
			}
			m.state = metadata.NewState(cfg.RootUsername, metadata.HashPassword([]byte(cfg.RootPassword), salt), nowMicros)
		}
		m.table = vsr.NewClientTable(vsr.ClientsTableMaxDefault)
		if err := store.ReplaceFile(stateFileName, encodeStateRecord(vsr.DurableState{}, nil)); err != nil {
			return nil, fmt.Errorf("metadata state record: %w", err)
		}
		if err := store.ReplaceFile(snapshotFileName, m.encodeSnapshot(appliedOp{})); err != nil {
			return nil, fmt.Errorf("metadata snapshot: %w", err)
		}
		if m.clustered {
			log.Info("metadata created; the root user comes from the first primary", "dir", dir)
		} else {
			log.Info("metadata created", "root_user", cfg.RootUsername, "dir", dir)
		}
	case err != nil:
		return nil, fmt.Errorf("metadata snapshot: %w", err)
	default:
		head, err = decodeSnapshotFile(raw)
		if err != nil {
			return nil, fmt.Errorf("metadata snapshot %s: %w", filepath.Join(dir, snapshotFileName), err)
		}
		state, op, err := metadata.DecodeSnapshot(head.metadataBytes)
		if err != nil {
			return nil, fmt.Errorf("metadata snapshot: %w", err)
		}
		if op != head.op {
			return nil, fmt.Errorf("metadata snapshot: state op %d differs from file op %d", op, head.op)
		}
		table, err := vsr.DecodeICT2(head.clientTableICT, vsr.ClientsTableMaxDefault)
		if err != nil {
			return nil, fmt.Errorf("metadata snapshot client table: %w", err)
		}
		m.state, m.table, m.snapshotOp = state, table, head.op
	}
	m.applied = appliedOp{op: head.op, view: head.view, identity: head.lastIdentity, timestamp: head.lastTimestamp}

	var durable vsr.DurableState
	switch raw, err := store.ReadFile(stateFileName); {
	case errors.Is(err, fs.ErrNotExist):
		// A data directory from before the record: the zero state, recorded now.
		if err := store.ReplaceFile(stateFileName, encodeStateRecord(durable, nil)); err != nil {
			return nil, fmt.Errorf("metadata state record: %w", err)
		}
	case err != nil:
		return nil, fmt.Errorf("metadata state record: %w", err)
	default:
		if durable, m.viewHeaders, err = decodeStateRecord(raw); err != nil {
			return nil, fmt.Errorf("metadata state record %s: %w", filepath.Join(dir, stateFileName), err)
		}
	}
	if err := m.recoverJournal(head, durable, fresh); err != nil {
		return nil, err
	}
	return m, nil
}

// recoverJournal reads the journal, recovers the core from it and the snapshot,
// applies the ops above the snapshot again and opens the journal for appends.
//
// A clustered replica that restarts does not trust its journal: Core.Recover puts
// it in Recovering until the cluster's primary answers its RequestStartView; only
// a data directory created now starts as a fresh replica of view 0.
func (m *metaPlane) recoverJournal(head snapshotHead, durable vsr.DurableState, fresh bool) error {
	path := filepath.Join(m.dir, journalFileName)
	raw, err := m.store.ReadFile(journalFileName)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("metadata journal: %w", err)
	}
	// Entries below the snapshot's op in front (a crash between the snapshot and
	// the journal's replacement) are dropped; a cluster's replica keeps the holes
	// it finds and reports their ops as faulty (journal.go).
	rec, err := scanMetaJournal(raw, head, m.clustered, m.bodies)
	if err != nil {
		// A single node refuses damage that intact entries follow: with no peer to
		// repair a corrupt synced entry from, that is data loss, and it does not
		// serve without it. A cluster's replica refuses only entries out of order.
		m.log.Error("metadata journal refused", "path", path, "err", err)
		return fmt.Errorf("metadata journal %s: %w", path, err)
	}
	headers := rec.headers
	m.journalFirstOp, m.journalEnds = rec.firstOp, rec.ends
	if m.clustered {
		m.cluster.holes = rec.holes
	}
	if len(rec.faulty) > 0 {
		m.log.Warn("metadata journal: corrupt entries, to repair from the cluster", "path", path, "ops", rec.faulty)
	}
	if scan := rec.scan; scan.TornTailBytes > 0 && !rec.tornKept {
		m.log.Warn("metadata journal: torn tail truncated", "path", path, "valid_bytes", scan.ValidBytes,
			"torn_bytes", scan.TornTailBytes, "reason", scan.TornTailReason)
	}
	validBytes := rec.sizeBytes
	if rec.skipBytes > 0 {
		// The plane counts offsets from the first kept entry: the journal is
		// rewritten without the snapshotted ones.
		kept := raw[rec.skipBytes : rec.skipBytes+validBytes]
		if err := m.store.ReplaceFile(journalFileName, kept); err != nil {
			return fmt.Errorf("metadata journal rewrite: %w", err)
		}
	}

	slots := journalSlotsMin
	if m.journalSlotsTest > 0 {
		slots = m.journalSlotsTest
	}
	for slots < len(headers)+len(rec.faulty)+2*vsr.PipelineDepthDefault {
		slots *= 2
	}
	var incarnation [16]byte
	if _, err := io.ReadFull(rand.Reader, incarnation[:]); err != nil {
		return err
	}
	m.journalSlots = slots
	coreCfg := vsr.CoreConfig{
		Config:       vsr.Config{ReplicaCount: 1, Group: wire.MetadataGroup},
		JournalSlots: slots,
		Storage:      m.bodies,
		Incarnation:  wire.Uint128{Lo: binary.LittleEndian.Uint64(incarnation[:8]), Hi: binary.LittleEndian.Uint64(incarnation[8:])},
	}
	if m.clustered {
		coreCfg.Config = m.cluster.config
		coreCfg.Timing = m.cluster.timing
		coreCfg.Sessions = tableSessions{m}
		// A restarted node resumes from its snapshot: the primary keeps the ops
		// above it within the journal window (Checkpointed after each snapshot).
		coreCfg.ReportsCheckpoints = true
		// A backup applies a commit about a round trip after the primary: a
		// login there finds the user the primary just created, and a forwarded
		// login is answered without waiting for the commit broadcast (500 ms).
		coreCfg.CommitEagerly = true
		coreCfg.CheckpointIntervalOps = m.snapshotIntervalOps
		if m.oldCheckpointRule {
			// The core is told a legal interval; the plane keeps its own.
			coreCfg.CheckpointIntervalOps = vsr.CheckpointIntervalOpsMax(slots, vsr.PipelineDepthDefault)
		}
	}
	core, err := vsr.NewCore(coreCfg)
	if err != nil {
		return err
	}
	if !m.clustered || !fresh {
		err = core.Recover(vsr.CoreRecovered{
			State:       durable,
			Headers:     headers,
			Faulty:      rec.faulty,
			ViewHeaders: m.viewHeaders,
			Checkpoint:  vsr.Checkpoint{Op: head.op, Identity: head.lastIdentity, Timestamp: head.lastTimestamp},
		})
		if err != nil {
			return fmt.Errorf("metadata journal %s: %w", path, err)
		}
	}
	m.replica = core
	if m.journal, err = m.store.OpenJournal(journalFileName, validBytes); err != nil {
		return err
	}
	// Apply the journaled ops again (the core commits them at once: it is its own
	// quorum), inline.
	replayed := m.replica.CommitMax() - head.op
	for t := m.nextTask(); t != nil; t = m.nextTask() {
		t.then(t.work(nil))
	}
	if m.broken != nil {
		return m.broken
	}
	if !m.clustered && !m.state.HasRoot() {
		// Only a cluster's replica waits for its root user from the log
		// (NewStateWithoutRoot); a single node would have no one to log in.
		return fmt.Errorf("metadata %s: no root user", m.dir)
	}
	if replayed > 0 || head.op > 0 {
		m.log.Info("metadata recovered", "snapshot_op", head.op, "replayed_ops", replayed, "op", m.applied.op)
	}
	return nil
}

// journalSizeBytes is the end of the journal's last entry.
func (m *metaPlane) journalSizeBytes() int64 {
	if len(m.journalEnds) == 0 {
		return 0
	}
	return m.journalEnds[len(m.journalEnds)-1]
}

// journalOffset is where op's entry starts in the journal, if the journal holds
// op or is about to (op one past its last entry).
func (m *metaPlane) journalOffset(op uint64) (int64, bool) {
	switch {
	case op < m.journalFirstOp || op > m.journalFirstOp+uint64(len(m.journalEnds)):
		return 0, false
	case op == m.journalFirstOp:
		return 0, true
	}
	return m.journalEnds[op-m.journalFirstOp-1], true
}

// submit queues a write for the core; the router then has the plane's work done
// (metaRouter.pumpJournal). A broken plane, or one with too many writes waiting,
// refuses it at once (done runs before submit returns).
func (m *metaPlane) submit(w *metaWrite) {
	if m.broken != nil {
		w.done(nil, m.broken)
		return
	}
	if len(m.waiting) >= metaWritesWaitingMax {
		w.done(nil, errMetaWritesBusy)
		return
	}
	m.waiting = append(m.waiting, w)
	m.writesWaiting.Store(int64(len(m.waiting)))
}

// nextTask does what the plane can do on shard 0 (apply what committed, hand the
// waiting writes to the core) and returns the next blocking file work for the
// journal writer, if any: a Ready's journal writes, or a snapshot. The caller runs
// it (journalTask.work) and hands its outcome to finishTask; no task is returned
// while one is out.
func (m *metaPlane) nextTask() *journalTask {
	if m.taskOut || m.broken != nil {
		return nil
	}
	if m.readyOut {
		if m.cluster.installDue {
			// The Ready's commits are applied: its transferred state goes next.
			m.cluster.installDue = false
			m.taskOut = true
			return m.installTask()
		}
		return nil
	}
	if t := m.advanceReadies(); t != nil {
		return t
	}
	if m.checkpointDue() {
		return m.checkpointTask()
	}
	m.takeInputs()
	m.feed()
	t := m.advanceReadies()
	if !m.readyOut {
		// Nothing came of the frames stepped: nothing aliases them.
		m.releaseStepped()
	}
	return t
}

// advanceReadies takes the core's Readies: one that only commits is done here
// (applied, advanced); one with durable work becomes the returned task.
func (m *metaPlane) advanceReadies() *journalTask {
	// Bounded: each Ready without journal work applies at least one op or is the
	// last (HasReady is then false).
	for m.replica.HasReady() {
		m.rd = m.replica.Ready()
		m.readyOut = true
		rd := &m.rd
		if !m.clustered && (len(rd.Messages) > 0 || len(rd.Forwards) > 0 || len(rd.StateRequests) > 0 || rd.Install != nil) {
			panic("server: a one-replica metadata group sent, forwarded or transferred something")
		}
		if rd.State != nil || rd.ViewHeaders != nil || len(rd.Writes) > 0 || rd.Truncate || len(rd.Discards) > 0 {
			m.taskOut = true
			m.sendEarly()
			return m.appendTask(rd)
		}
		m.sendMessages()
		m.applyCommitted(rd.Committed)
		if rd.Install != nil {
			m.taskOut = true
			return m.installTask()
		}
		m.finishReady()
	}
	return nil
}

// finishReady ends a Ready whose durable work is done, its messages sent and its
// commits applied: the forwarded logins and logouts it answers, then Advance, then
// what must follow Advance (the state offers, the frames it may have aliased).
func (m *metaPlane) finishReady() {
	if m.clustered {
		m.answerForwards(m.rd.Forwards)
	}
	requests := m.rd.StateRequests
	m.replica.Advance()
	m.readyOut = false
	if m.clustered {
		m.afterAdvance(requests)
	}
}

// feed hands the waiting writes to the core, in order, until its pipeline is full.
func (m *metaPlane) feed() {
	proposed := 0
	for _, w := range m.waiting {
		op, err := m.replica.Propose(w.proposal, w.body, m.nowMicros())
		if errors.Is(err, vsr.ErrCheckpointDue) {
			// Only while a snapshot is late (failing, or this new primary's
			// own is due): the writes wait for it.
			m.proposalsHeld.Add(1)
		}
		if errors.Is(err, vsr.ErrPipelineFull) {
			break
		}
		if err != nil && m.clustered && (errors.Is(err, vsr.ErrNotPrimary) || errors.Is(err, vsr.ErrNotNormal)) {
			// The view changed since the write was admitted: the client retries
			// (58), at the new primary.
			m.refuseWaiting(errMetaNotPrimary)
			return
		}
		if err != nil {
			panic(fmt.Sprintf("server: the metadata group's primary refused a proposal: %v", err))
		}
		w.op = op
		h, _ := m.replica.Header(op)
		w.identity = h.Checksum
		m.bodies.byOp[op] = metaBody{identity: h.Checksum, body: w.body}
		m.inflight = append(m.inflight, w)
		proposed++
	}
	if proposed > 0 {
		clear(m.waiting[:proposed])
		m.waiting = append(m.waiting[:0], m.waiting[proposed:]...)
		m.writesWaiting.Store(int64(len(m.waiting)))
	}
}

// appendTask is a Ready's durable work, in the Ready's order: the truncation, the
// state record, then the writes in one append and one fdatasync.
func (m *metaPlane) appendTask(rd *vsr.Ready) *journalTask {
	a := &m.appending
	// The truncation, and the discards (journal.go).
	m.journalCut(a, rd)
	a.stateRecord = nil
	if rd.State != nil || rd.ViewHeaders != nil {
		state := m.replica.Durable()
		if rd.State != nil {
			state = *rd.State
		}
		headers := m.viewHeaders
		if rd.ViewHeaders != nil {
			headers = rd.ViewHeaders
		}
		a.stateRecord = encodeStateRecord(state, headers)
	}
	a.entries = a.entries[:0]
	a.sizes = a.sizes[:0]
	m.dropTruncatedBodies(rd)
	// One append at the journal's end, or a rewrite for a write beyond a gap or
	// into a hole (journal.go).
	m.placeWrites(a, rd, m.journalKept(a.truncateAt))
	a.journal, a.store, a.fsyncs = m.journal, m.store, m.fsyncs
	if a.task.work == nil {
		a.task = journalTask{work: a.work, then: m.appended}
	}
	a.task.err = nil
	return &a.task
}

// appendWork is a Ready's file work, reused Ready after Ready (one is out at a
// time): shard 0 fills it before handing task over, and touches it again only once
// the writer is done with it.
type appendWork struct {
	task        journalTask
	truncateAt  int64 // -1: none
	stateRecord []byte
	entries     []byte // the Ready's writes back to back: one append
	// firstOp is the op of the first entry appended, sizes their sizes in order.
	firstOp uint64
	sizes   []uint32
	// rewrite, when active, lays the journal out anew instead (journal.go).
	rewrite journalRewrite
	journal metaJournal
	store   metaStorage
	fsyncs  *syncedHistogram
}

func (a *appendWork) work(beforeSync func()) error {
	if a.truncateAt >= 0 {
		if err := a.journal.Truncate(a.truncateAt); err != nil {
			return err
		}
	}
	if a.stateRecord != nil {
		if err := a.store.ReplaceFile(stateFileName, a.stateRecord); err != nil {
			return fmt.Errorf("metadata state record: %w", err)
		}
	}
	if a.rewrite.active {
		return a.rewriteJournal()
	}
	if len(a.entries) == 0 {
		return nil
	}
	if err := a.journal.Append(a.entries); err != nil {
		return err
	}
	if beforeSync != nil {
		beforeSync()
	}
	start := time.Now() // off the shards: the journal writer's own clock
	err := a.journal.Sync()
	if a.fsyncs != nil {
		a.fsyncs.observe(time.Since(start))
	}
	return err
}

// appended finishes a Ready whose durable work is done: the commits it carried
// are applied and the core advanced (the writes commit there, the replica being
// its own quorum; the next Ready applies them). A failure breaks the plane.
func (m *metaPlane) appended(err error) {
	if err != nil {
		m.taskOut = false
		m.breakPlane(err)
		return
	}
	// taskOut stays set until Advance: a write's done run from here must not
	// have the plane hand out work meanwhile.
	defer func() { m.taskOut = false }()
	rd := &m.rd
	m.journalWritten()
	if rd.ViewHeaders != nil {
		m.viewHeaders = append(m.viewHeaders[:0], rd.ViewHeaders...)
	}
	m.sendMessages()
	m.applyCommitted(rd.Committed)
	if rd.Install != nil {
		m.cluster.installDue = true
		return
	}
	m.finishReady()
}

// breakPlane refuses every write in flight or waiting, and every later one: ops
// were numbered that the journal does not hold, and the core cannot take them back.
func (m *metaPlane) breakPlane(err error) {
	m.broken = err
	m.log.Error("metadata journal write failed; metadata writes refused until restart", "err", err)
	m.refuseInflight(err)
	m.refuseWaiting(err)
}

// refuseInflight ends every write numbered and not applied with err.
func (m *metaPlane) refuseInflight(err error) {
	inflight := m.inflight
	m.inflight = nil
	for _, w := range inflight {
		w.done(nil, err)
	}
}

// refuseWaiting ends every write not handed to the core yet with err.
func (m *metaPlane) refuseWaiting(err error) {
	waiting := m.waiting
	m.waiting = nil
	m.writesWaiting.Store(0)
	for _, w := range waiting {
		w.done(nil, err)
	}
}

// applyCommitted applies committed ops in order; each write's done runs right
// after its op, before the next op applies.
func (m *metaPlane) applyCommitted(headers []wire.PrepareHeader) {
	for i := range headers {
		h := &headers[i]
		if h.Op != m.applied.op+1 {
			panic(fmt.Sprintf("server: metadata commit of op %d after op %d", h.Op, m.applied.op))
		}
		b, ok := m.bodies.byOp[h.Op]
		if !ok || b.identity != h.Checksum {
			panic(fmt.Sprintf("server: the body of committed metadata op %d is gone", h.Op))
		}
		if !m.clustered {
			// A cluster keeps the bodies its journal holds, to serve repair.
			delete(m.bodies.byOp, h.Op)
		}
		c := m.apply(h, b.body)
		m.applied = appliedOp{op: h.Op, view: h.View, identity: h.Checksum, timestamp: h.Timestamp}
		var w *metaWrite
		if len(m.inflight) > 0 && m.inflight[0].op == h.Op {
			w = m.inflight[0]
			m.inflight[0] = nil
			m.inflight = m.inflight[1:]
		}
		switch {
		case w != nil && w.identity != h.Checksum:
			// Another primary's op took the number: this write never committed.
			if m.onApplied != nil {
				m.onApplied(&c)
			}
			w.done(nil, errMetaNotPrimary)
		case w != nil:
			w.commit = c // kept in the write: a commit of its own would escape
			if m.onApplied != nil {
				m.onApplied(&w.commit)
			}
			w.done(&w.commit, nil)
		case m.onApplied != nil:
			m.onApplied(&c)
		}
	}
	if m.clustered {
		m.runAppliedWaiters()
	}
}

// apply applies a committed prepare to the state and the client table and returns
// the reply frame (header and body), which the table caches. It is the one path of
// both a live commit and a replay, so both cache the same bytes.
func (m *metaPlane) apply(h *wire.PrepareHeader, body []byte) metaCommit {
	c := metaCommit{header: h, body: body}
	var rh wire.ReplyHeader
	m.replica.FillReply(&rh, h)
	// The table keeps the frame: each commit gets its own (metadata writes are rare).
	frame := make([]byte, wire.HeaderSize, 512)
	m.out.Effects = m.out.Effects[:0]
	switch h.Operation {
	case wire.OperationRegister:
		// The session epoch is the register's op.
		c.tableWasFull = m.table.Len() >= vsr.ClientsTableMaxDefault
		frame = wire.AppendResultSuccess(frame)
		login := wire.LoginRegisterReply{UserID: h.UserID, Session: h.Op, ServerProtocolVersion: wire.ServerProtocolVersion, ServerVersion: []byte(serverVersion)}
		frame, _ = login.Append(frame)
		rh.Size = uint32(len(frame))
		rh.Put(frame)
		c.epoch = m.table.CommitRegister(h.Client, h.UserID, h.Op, frame)
	default:
		m.state.Apply(metadata.Header{Operation: h.Operation, Client: h.Client, UserID: h.UserID, TimestampMicros: h.Timestamp}, body, &m.out)
		frame = append(frame, m.out.Reply...)
		rh.Size = uint32(len(frame))
		rh.Operation = m.out.Operation
		rh.Put(frame)
		switch {
		case h.Operation == wire.OperationLogout:
			m.table.Remove(h.Client)
		case h.Operation == wire.OperationRemoveConsumerGroupMember, h.Client.IsZero():
			// The server's own ops (a closed connection's group leave, a cluster's
			// root user) are no client's request.
		default:
			m.table.CommitRequest(h.Client, h.Request, h.RequestChecksum, h.Op, frame)
		}
	}
	c.frame = frame
	return c
}

func (m *metaPlane) encodeSnapshot(at appliedOp) []byte {
	b := []byte(snapshotMagic)
	b = binary.LittleEndian.AppendUint64(b, at.op)
	b = binary.LittleEndian.AppendUint32(b, at.view)
	b = binary.LittleEndian.AppendUint64(b, at.identity.Lo)
	b = binary.LittleEndian.AppendUint64(b, at.identity.Hi)
	b = binary.LittleEndian.AppendUint64(b, at.timestamp)
	metaStart := len(b) + 8
	b = binary.LittleEndian.AppendUint64(b, 0)
	b = m.state.AppendSnapshot(b, at.op)
	binary.LittleEndian.PutUint64(b[metaStart-8:], uint64(len(b)-metaStart))
	ictStart := len(b) + 8
	b = binary.LittleEndian.AppendUint64(b, 0)
	b = m.table.AppendICT2(b)
	binary.LittleEndian.PutUint64(b[ictStart-8:], uint64(len(b)-ictStart))
	b = binary.LittleEndian.AppendUint64(b, xxh3.Hash(b))
	return b
}

var errSnapshotFile = errors.New("snapshot file corrupt")

func decodeSnapshotFile(b []byte) (snapshotHead, error) {
	var h snapshotHead
	const fixed = 4 + 8 + 4 + 16 + 8
	if len(b) < fixed+8+8+8 || string(b[:4]) != snapshotMagic {
		return h, fmt.Errorf("%w: bad magic or too short (%d bytes)", errSnapshotFile, len(b))
	}
	body, sum := b[:len(b)-8], binary.LittleEndian.Uint64(b[len(b)-8:])
	if xxh3.Hash(body) != sum {
		return h, fmt.Errorf("%w: checksum mismatch", errSnapshotFile)
	}
	h.op = binary.LittleEndian.Uint64(b[4:])
	h.view = binary.LittleEndian.Uint32(b[12:])
	h.lastIdentity = wire.Uint128{Lo: binary.LittleEndian.Uint64(b[16:]), Hi: binary.LittleEndian.Uint64(b[24:])}
	h.lastTimestamp = binary.LittleEndian.Uint64(b[32:])
	rest := body[fixed:]
	metaLen := binary.LittleEndian.Uint64(rest)
	if metaLen > uint64(len(rest)-8) {
		return h, fmt.Errorf("%w: metadata length %d beyond the file", errSnapshotFile, metaLen)
	}
	h.metadataBytes = rest[8 : 8+metaLen]
	rest = rest[8+metaLen:]
	if len(rest) < 8 {
		return h, fmt.Errorf("%w: client table missing", errSnapshotFile)
	}
	ictLen := binary.LittleEndian.Uint64(rest)
	if ictLen != uint64(len(rest)-8) {
		return h, fmt.Errorf("%w: client table length %d, %d bytes left", errSnapshotFile, ictLen, len(rest)-8)
	}
	h.clientTableICT = rest[8:]
	return h, nil
}

var errStateRecord = errors.New("state record corrupt")

// stateRecordFixedBytes is the record without its headers: magic, view, log view,
// commit max, headers count, checksum.
const stateRecordFixedBytes = 4 + 4 + 4 + 8 + 4 + 8

func encodeStateRecord(s vsr.DurableState, headers []wire.PrepareHeader) []byte {
	b := make([]byte, 0, stateRecordFixedBytes+len(headers)*wire.HeaderSize)
	b = append(b, stateRecordMagic...)
	b = binary.LittleEndian.AppendUint32(b, s.View)
	b = binary.LittleEndian.AppendUint32(b, s.LogView)
	b = binary.LittleEndian.AppendUint64(b, s.CommitMax)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(headers)))
	for i := range headers {
		start := len(b)
		b = append(b, make([]byte, wire.HeaderSize)...)
		headers[i].Put(b[start:])
	}
	return binary.LittleEndian.AppendUint64(b, xxh3.Hash(b))
}

func decodeStateRecord(b []byte) (vsr.DurableState, []wire.PrepareHeader, error) {
	var s vsr.DurableState
	if len(b) < stateRecordFixedBytes || string(b[:4]) != stateRecordMagic {
		return s, nil, fmt.Errorf("%w: bad magic or too short (%d bytes)", errStateRecord, len(b))
	}
	body, sum := b[:len(b)-8], binary.LittleEndian.Uint64(b[len(b)-8:])
	if xxh3.Hash(body) != sum {
		return s, nil, fmt.Errorf("%w: checksum mismatch", errStateRecord)
	}
	s.View = binary.LittleEndian.Uint32(b[4:])
	s.LogView = binary.LittleEndian.Uint32(b[8:])
	s.CommitMax = binary.LittleEndian.Uint64(b[12:])
	count := binary.LittleEndian.Uint32(b[20:])
	if uint64(count)*wire.HeaderSize != uint64(len(b)-stateRecordFixedBytes) {
		return s, nil, fmt.Errorf("%w: %d headers in %d bytes", errStateRecord, count, len(b))
	}
	headers := make([]wire.PrepareHeader, count)
	for i := range headers {
		copy(wire.HeaderBytes(&headers[i])[:], b[24+i*wire.HeaderSize:])
	}
	return s, headers, nil
}

func (m *metaPlane) close() error {
	if m.journal == nil {
		return nil
	}
	err := m.journal.Sync()
	if cerr := m.journal.Close(); err == nil {
		err = cerr
	}
	m.journal = nil
	return err
}
