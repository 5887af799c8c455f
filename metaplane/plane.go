package metaplane

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/bits"
	"slices"
	"sync/atomic"
	"unsafe"

	"github.com/iggy-shard/iggy-shard/metadata"
	"github.com/iggy-shard/iggy-shard/vsr"
	"github.com/iggy-shard/iggy-shard/wire"
)

const (
	// JournalSlotsMin is the core's header window (vsr.CoreConfig.JournalSlots) at
	// least; a recovered journal longer than that (checkpoints failing for a
	// while) gets a window that holds it whole.
	JournalSlotsMin = 1024
	// WritesWaitingMax bounds the writes waiting for the core (a Ready out, or the
	// pipeline full): one per connection in flight (a connection's writes go one
	// at a time), so this is reached only by thousands of connections writing at
	// once; the rest are refused as not accepted (58), retried by the client.
	WritesWaitingMax = 4096
	// FramesWaitingMax bounds the peer frames held while a Ready is out; beyond it
	// a frame is dropped and counted (vsr.DropFramesQueueFull): its sender
	// retransmits.
	FramesWaitingMax = 4096
	// SnapshotRetryTicks is how long a clustered plane waits, in ticks, before it
	// tries a failed checkpoint again.
	SnapshotRetryTicks = 100
	// FateWaitHeartbeats bounds, in heartbeat timeouts, how long a replica that
	// stopped leading keeps the writes it had prepared, waiting to learn whether
	// they committed.
	FateWaitHeartbeats = 2
)

var (
	// ErrNotPrimary refuses a write this replica may not propose: it is a backup,
	// or its view is changing. The client retries (58).
	ErrNotPrimary = errors.New("metadata writes: this replica is not the metadata primary")
	// ErrWritesBusy refuses a write that found WritesWaitingMax writes waiting.
	ErrWritesBusy = errors.New("metadata writes: too many waiting")
	// ErrStopped ends the writes a stopping clustered node had numbered but not
	// seen commit: they may yet commit at the others (57, not committed here).
	ErrStopped = errors.New("metadata writes: the node stopped before the write committed")
	// ErrFateUnknown ends a write prepared here whose fate this replica could not
	// learn in time after it stopped leading (FateWaitTicks), or that a state
	// transfer overtook: it may have committed (57: replay the same request).
	ErrFateUnknown = errors.New("metadata writes: prepared, then the view changed; whether it committed is unknown")
)

// Config is one replica of the metadata group.
type Config struct {
	// Replica is this replica of the group (Group is set to wire.MetadataGroup).
	// A single node is a group of one replica: the zero Config.
	Replica vsr.Config
	// Clustered: a cluster's replica, which starts without users (its root user
	// comes from one op of its first primary), ticks, sends and forwards.
	Clustered bool
	Timing    vsr.Timing
	// JournalSlots is the header window at least (0: JournalSlotsMin).
	JournalSlots int
	// CheckpointIntervalOps paces the checkpoints, clamped to vsr's checkpoint
	// rule for the window (CheckpointIntervalOpsMax).
	CheckpointIntervalOps uint64
	// OldCheckpointRule (tests): the interval as given, however far past the
	// window (the rule that wedged a cluster).
	OldCheckpointRule bool
	// Incarnation names this run of the replica (vsr.CoreConfig.Incarnation).
	Incarnation wire.Uint128
	// ServerVersion goes into every login reply.
	ServerVersion string
	// RootUsername and RootPassword are a cluster's root user, proposed once by
	// its first primary.
	RootUsername, RootPassword string
	// ClientsTableMax is the client table's size (0: vsr.ClientsTableMaxDefault):
	// a transferred state's table is decoded to it. The recovered snapshot's table
	// is the host's to size alike (metafiles.Files.ClientsTableMax).
	ClientsTableMax int
	// PipelineDepth bounds the ops in flight (vsr.CoreConfig.PipelineDepth; 0:
	// vsr.PipelineDepthDefault).
	PipelineDepth int
	// Log receives the plane's log lines (nil: none).
	Log *slog.Logger
	// Mutation breaks a rule of the plane on purpose, CoreMutation one of its
	// core's (tests); zero in production.
	Mutation     Mutation
	CoreMutation vsr.Mutation
}

// Mutation breaks one rule of the plane on purpose, so that the simulator can show
// its checkers catch the break (as vsr.Mutation does for the core). The zero
// value breaks nothing.
type Mutation uint8

const (
	MutationNone Mutation = iota
	// MutationApplyEveryPrepare applies every committed prepare, a retry prepared
	// twice included: a request is executed twice.
	MutationApplyEveryPrepare
	// MutationApplySkew gives this replica's apply another clock: its state
	// parts from the others'.
	MutationApplySkew
	// MutationCheckpointLate takes a checkpoint every header window W (1,024
	// ops), one past the largest interval that never locks a cluster up, W-1.
	// The core's Propose refuses an op a window or more above the last
	// checkpoint c (vsr/core.go, ErrCheckpointDue): the highest op a primary
	// proposes is c+W-1. A checkpoint comes due once the applied op reaches c+I.
	// At I = W-1 the last op proposable brings it due: the primary proposes
	// nothing more until it is durable (here the Ready that applied the op
	// waits for it anyway, so no second pipeline is proposed before it), then
	// the window moves and it goes on. At I = W the op c+W that would bring it
	// due is never proposed: no op commits again, on any replica, and the
	// cluster stops at op W-1 (1,023) with no checkpoint taken. vsr's rule,
	// I <= W-2P (960), is a margin for throughput (the pipeline never runs dry
	// at a checkpoint), not this boundary. TestCheckpointIntervalBoundary (sim/)
	// runs both sides on one long seed; in 16 long seeds at W-1 none locked up
	// (9,000 to 52,000 ops each), in 8 at W every one stopped at op 1,023.
	MutationCheckpointLate
	// MutationDropSessionOnClose ends a closed connection's session as the server
	// did before the EndSessions op (and the reference does): its client entry is
	// removed from this replica's table at once, and nothing is proposed, so the
	// tables drift. (BenchmarkClusterSessionChurn runs it as the baseline of what
	// the op costs.)
	MutationDropSessionOnClose
)

// CheckpointIntervalOpsMax is the largest checkpoint interval a header window of
// slots allows (vsr's checkpoint rule, vsr/checkpoint.go): 960 ops for 1,024.
func CheckpointIntervalOpsMax(slots int) uint64 {
	return vsr.CheckpointIntervalOpsMax(slots, vsr.PipelineDepthDefault)
}

// Recovered is what a host read back from its disk to start the plane from.
type Recovered struct {
	// Snapshot is the last checkpoint, decoded; for a data directory created now,
	// the initial state at op 0 (a single node's holds its root user).
	Snapshot *Snapshot
	// Fresh: a data directory created now. A cluster's replica then starts as a
	// fresh replica of view 0; otherwise it recovers (vsr.Core.Recover) and asks
	// its primary for the view.
	Fresh bool
	// Durable and ViewHeaders are the replica's durable state (the state record).
	Durable     vsr.DurableState
	ViewHeaders []wire.PrepareHeader
	// Entries are the journal's intact entries from the snapshot's op on (the
	// entry at its op, when held, included), in op order; Faulty the ops the
	// journal holds damaged or as holes.
	Entries []vsr.Write
	Faulty  []uint64
}

// Plane is one replica of the metadata group: the state, the client table, the
// consensus core and its Driver, and beside them the state of each of its
// concerns, in a struct of its own in the file that tends it. Every method is
// called from one goroutine (the host's loop); none blocks.
type Plane struct {
	cfg  Config
	log  *slog.Logger
	host Host

	state  *metadata.State
	table  *vsr.ClientTable
	core   *vsr.Core
	driver *vsr.Driver
	bodies *bodies
	out    metadata.Output

	applied Applied
	// journalSlots is the core's header window.
	journalSlots int
	// nextToken numbers what the plane hands the Driver: writes and forwards.
	nextToken uint64
	// lastNow is the latest request time: the clock of the plane's own ops.
	lastNow uint64

	checkpoints checkpoints    // checkpoint and install (checkpoint.go)
	writes      writes         // admitted writes, proposed and in flight (admit.go)
	logins      loginGate      // logins waiting for account writes (admit.go)
	passwords   passwordHashes // writes waiting for a password's hash (admit.go)
	forwards    forwards       // logins and logouts forwarded, either way (cluster.go)
	reads       readWaits      // reads waiting for an op applied (cluster.go, apply.go)
	root        rootUser       // the cluster's root user (cluster.go)
	ends        sessionEnds    // closed connections' sessions to end (sessions.go)
	revoked     *RevokedTokens // the applied revoked tokens, for any goroutine (revocations.go)

	// broken is set when the plane cannot go on (a failed durable write): every
	// write is refused until the host restarts it.
	broken error

	counters planeCounters
}

// planeCounters are read by observers on other goroutines (tests, metrics).
type planeCounters struct {
	snapshotsTaken     atomic.Int64
	transfersInstalled atomic.Int64
	rootProposals      atomic.Int64
	writesWaiting      atomic.Int64
	loginsWaiting      atomic.Int64
	endOps             atomic.Int64
	endsProposed       atomic.Int64
	revokeOps          atomic.Int64
}

// bodies is the core's vsr.Storage: the bodies of the ops the journal holds (on a
// single node until applied; in a cluster within the header window, for repair).
type bodies struct {
	byOp map[uint64]body
}

type body struct {
	identity wire.Uint128
	bytes    []byte
}

func (b *bodies) Body(op uint64, identity wire.Uint128) ([]byte, bool) {
	e, ok := b.byOp[op]
	if !ok || e.identity != identity {
		return nil, false
	}
	return e.bytes, true
}

// tableSessions is the primary's read of the client table for forwarded logins;
// the table itself is replaced by a state transfer.
type tableSessions struct{ p *Plane }

func (s tableSessions) RegisterAllowed(client wire.Uint128, userID uint32) bool {
	return s.p.table.RegisterAllowed(client, userID)
}

func (s tableSessions) Watermark(client wire.Uint128) uint64 { return s.p.table.Watermark(client) }

// Open makes the plane from what the host recovered, through host: the core
// recovers. Replay then applies the ops journaled above the snapshot again.
func Open(cfg Config, rec *Recovered, host Host) (*Plane, error) {
	if cfg.JournalSlots <= 0 {
		cfg.JournalSlots = JournalSlotsMin
	}
	if cfg.ClientsTableMax <= 0 {
		cfg.ClientsTableMax = vsr.ClientsTableMaxDefault
	}
	if cfg.PipelineDepth <= 0 {
		cfg.PipelineDepth = vsr.PipelineDepthDefault
	}
	cfg.Replica.Group = wire.MetadataGroup
	if cfg.Replica.ReplicaCount == 0 {
		cfg.Replica.ReplicaCount = 1
	}
	p := &Plane{
		cfg:    cfg,
		log:    cfg.Log,
		host:   host,
		bodies: &bodies{byOp: make(map[uint64]body)},
		writes: writes{
			byToken:   make(map[uint64]*write),
			perClient: make(map[wire.Uint128]int),
			minted:    make(map[wire.Uint128]mintedToken),
		},
		passwords: passwordHashes{
			byID:     make(map[uint64]*hashing),
			requests: make(map[uint64]*pendingRequest),
		},
		forwards: forwards{
			sent:     make(map[uint64]*forward),
			received: make(map[wire.Uint128]*forward),
		},
	}
	if p.log == nil {
		p.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	p.checkpoints.intervalOps = max(1, min(cfg.CheckpointIntervalOps, vsr.CheckpointIntervalOpsMax(cfg.JournalSlots, cfg.PipelineDepth)))
	if cfg.Mutation == MutationCheckpointLate {
		// One past the boundary, W-1 (see MutationCheckpointLate).
		cfg.OldCheckpointRule, cfg.CheckpointIntervalOps = true, uint64(cfg.JournalSlots)
		p.cfg = cfg
	}
	if cfg.OldCheckpointRule {
		p.checkpoints.intervalOps = max(1, cfg.CheckpointIntervalOps)
	}
	snap := rec.Snapshot
	p.state, p.table, p.applied, p.checkpoints.snapshotOp = snap.State, snap.Table, snap.At, snap.At.Op
	p.revoked = new(RevokedTokens)
	p.revoked.reset(p.state)

	headers := make([]wire.PrepareHeader, 0, len(rec.Entries))
	for i := range rec.Entries {
		w := &rec.Entries[i]
		headers = append(headers, w.Header)
		if w.Header.Op > snap.At.Op {
			p.bodies.byOp[w.Header.Op] = body{identity: w.Header.Checksum, bytes: w.Body}
		}
	}
	// A single node's window grows to hold a long recovered journal (its
	// checkpoints failed for a while). A cluster's replicas keep one window, all
	// alike: a primary whose window had grown proposed ops beyond its backups'
	// windows, which committed and were applied nowhere, and fell out of every
	// replica's window (the simulator's long seed 44 stalled for good so).
	slots := cfg.JournalSlots
	for !cfg.Clustered && slots < len(headers)+len(rec.Faulty)+2*cfg.PipelineDepth {
		slots *= 2
	}
	p.journalSlots = slots
	coreCfg := vsr.CoreConfig{
		Config:       vsr.Config{ReplicaCount: 1, Group: wire.MetadataGroup},
		JournalSlots: slots,
		Storage:      p.bodies,
		Incarnation:  cfg.Incarnation,
		NonceSeed:    nonceSeed(cfg.Incarnation),
		Mutation:     cfg.CoreMutation,
	}
	if cfg.Clustered {
		coreCfg.Config = cfg.Replica
		coreCfg.Timing = cfg.Timing
		coreCfg.Sessions = tableSessions{p}
		// A restarted node resumes from its checkpoint: the primary keeps the ops
		// above it within the journal window (Checkpointed after each one).
		coreCfg.ReportsCheckpoints = true
		// A backup applies a commit about a round trip after the primary: a login
		// there finds the user the primary just created, and a forwarded login is
		// answered without waiting for the commit broadcast.
		coreCfg.CommitEagerly = true
		coreCfg.CheckpointIntervalOps = p.checkpoints.intervalOps
		if cfg.OldCheckpointRule {
			// The core is told a legal interval; the plane keeps its own.
			coreCfg.CheckpointIntervalOps = vsr.CheckpointIntervalOpsMax(slots, cfg.PipelineDepth)
		}
	}
	coreCfg.Config.PipelineDepth = cfg.PipelineDepth
	core, err := vsr.NewCore(coreCfg)
	if err != nil {
		return nil, err
	}
	if !cfg.Clustered || !rec.Fresh {
		err = core.Recover(vsr.CoreRecovered{
			State:       rec.Durable,
			Headers:     headers,
			Faulty:      rec.Faulty,
			ViewHeaders: rec.ViewHeaders,
			Checkpoint:  vsr.Checkpoint{Op: snap.At.Op, Identity: snap.At.Identity, Timestamp: snap.At.Timestamp},
		})
		if err != nil {
			return nil, err
		}
	}
	p.core = core
	p.driver = vsr.NewDriver(core, driverHost{p}, vsr.DriverConfig{
		FramesQueuedMax:   FramesWaitingMax,
		RequestsQueuedMax: WritesWaitingMax,
		WaitForRoom:       true,
	})
	return p, nil
}

// nonceSeed is where the core's request nonces start (vsr.CoreConfig.NonceSeed):
// drawn from the boot's incarnation, random per boot, mixed so that incarnations
// that differ in a few bits (a simulator's counts) start far apart.
func nonceSeed(incarnation wire.Uint128) uint64 {
	return (incarnation.Lo ^ bits.RotateLeft64(incarnation.Hi, 32)) * 0x9E3779B97F4A7C15
}

// Replay carries out what the recovered core holds: a single node commits its
// journaled ops at once (it is its own quorum) and applies them here (a host that
// completes its work at once, as one reading its disk at a start does, has them
// all applied when Replay returns); a cluster's replica waits for its view.
func (p *Plane) Replay() error {
	p.driver.Run()
	if p.broken != nil {
		return p.broken
	}
	if !p.cfg.Clustered && !p.state.HasRoot() {
		// Only a cluster's replica waits for its root user from the log; a single
		// node would have no one to log in.
		return errors.New("no root user")
	}
	return nil
}

// Start has a clustered plane do what follows a Ready once its host serves: a
// first primary proposes the root user.
func (p *Plane) Start() {
	if p.cfg.Clustered {
		p.afterReady()
	}
}

// SetHost replaces the host: a server opens the plane with a host that reads and
// writes its disk inline, then serves through its loop's.
func (p *Plane) SetHost(h Host) { p.host = h }

// State is the applied metadata state (read it only on the plane's goroutine;
// a state transfer replaces it).
func (p *Plane) State() *metadata.State { return p.state }

// RevokedTokens is the applied table of revoked access tokens, safe from any
// goroutine (the HTTP bearer check's), the same object for the plane's life.
func (p *Plane) RevokedTokens() *RevokedTokens { return p.revoked }

// Table is the applied client table (as State).
func (p *Plane) Table() *vsr.ClientTable { return p.table }

// Core is the consensus core, for reading its state.
func (p *Plane) Core() *vsr.Core { return p.core }

// Driver is the core's Driver, for reading its counters.
func (p *Plane) Driver() *vsr.Driver { return p.driver }

// Clustered reports whether the plane is a cluster's replica.
func (p *Plane) Clustered() bool { return p.cfg.Clustered }

// Applied is the last op applied.
func (p *Plane) Applied() Applied { return p.applied }

// SnapshotOp is the op of the last checkpoint written.
func (p *Plane) SnapshotOp() uint64 { return p.checkpoints.snapshotOp }

// IntervalOps is the checkpoint interval in use.
func (p *Plane) IntervalOps() uint64 { return p.checkpoints.intervalOps }

// JournalSlots is the core's header window.
func (p *Plane) JournalSlots() int { return p.journalSlots }

// PipelineDepth bounds the ops in flight.
func (p *Plane) PipelineDepth() int { return p.cfg.PipelineDepth }

// Broken is why the plane refuses every write until a restart, nil while it
// serves.
func (p *Plane) Broken() error { return p.broken }

// Snapshot is the applied state as a snapshot (AppendSnapshot).
func (p *Plane) Snapshot() []byte { return AppendSnapshot(nil, p.applied, p.state, p.table) }

// Digest is a digest of the whole replicated state as applied here, metadata and
// client table (SnapshotDigest of Snapshot): equal on every replica that applied
// the same ops.
func (p *Plane) Digest() uint64 { return SnapshotDigest(p.Snapshot()) }

// SnapshotsTaken counts the checkpoints written (safe from any goroutine).
func (p *Plane) SnapshotsTaken() int64 { return p.counters.snapshotsTaken.Load() }

// TransfersInstalled counts the transferred states installed (any goroutine).
func (p *Plane) TransfersInstalled() int64 { return p.counters.transfersInstalled.Load() }

// RootProposals counts the root user proposals this replica made (any goroutine).
func (p *Plane) RootProposals() int64 { return p.counters.rootProposals.Load() }

// WritesWaiting counts the writes handed to the Driver and not proposed yet (any
// goroutine).
func (p *Plane) WritesWaiting() int64 { return p.counters.writesWaiting.Load() }

// LoginsWaiting counts the logins waiting for account writes (any goroutine).
func (p *Plane) LoginsWaiting() int64 { return p.counters.loginsWaiting.Load() }

// IsPrimary reports whether this replica proposes: a single node always does.
func (p *Plane) IsPrimary() bool { return !p.cfg.Clustered || p.core.IsPrimary() }

// Step takes a frame from a peer (h validated by wire.DecodeReplicaHeader, body
// the bytes after it); body is copied, so the caller may release its frame at
// once. An error is a frame the core refuses (counted, vsr.DropMalformed).
func (p *Plane) Step(h *wire.GenericHeader, body []byte) error {
	if len(body) > 0 {
		body = alignedCopy(body)
	}
	err := p.driver.Step(h, body)
	if !p.driver.ReadyOut() {
		p.takeSessionEnds()
	}
	p.runBarriers()
	return err
}

// Tick advances the core's clock by one tick (a cluster's: 10 ms).
func (p *Plane) Tick() {
	p.driver.Tick()
	p.expireFates()
	if p.cfg.Clustered && !p.driver.ReadyOut() && !p.checkpoints.out && p.checkpointDue() {
		p.startCheckpoint(false)
	}
	p.runBarriers()
}

// NoteLiveness tells the core that replica's node sent something.
func (p *Plane) NoteLiveness(replica uint8) { p.driver.NoteLiveness(replica) }

// Persisted completes the host's Persist of the Ready out: nil when its work is
// durable.
func (p *Plane) Persisted(err error) {
	if err != nil {
		p.breakPlane(err)
	}
	p.driver.Persisted(err)
}

// breakPlane refuses every write in flight or waiting, and every later one: ops
// were numbered that the journal may not hold, and the core cannot take them back.
func (p *Plane) breakPlane(err error) {
	if p.broken != nil {
		return
	}
	p.broken = err
	p.log.Error("metadata journal write failed; metadata writes refused until restart", "err", err)
	p.driver.Stop(err)
	p.refuseInflight(err)
}

// alignedCopy copies a frame body into a buffer 16-byte aligned as frame bodies
// are (wire.HeaderAlignment).
func alignedCopy(b []byte) []byte {
	raw := make([]byte, len(b)+wire.HeaderAlignment)
	off := (wire.HeaderAlignment - int(uintptr(unsafe.Pointer(&raw[0]))%wire.HeaderAlignment)) % wire.HeaderAlignment
	c := raw[off : off+len(b) : off+len(b)]
	copy(c, b)
	return c
}

// Stop ends, on a stopping node, everything that cannot complete without the
// other replicas or the host's loop: the Driver, the writes in flight and
// waiting (57), the forwards, the waits.
func (p *Plane) Stop() {
	barriers := p.reads.barriers
	p.reads.barriers = nil
	for _, b := range barriers {
		b.finish(false)
	}
	p.driver.Stop(ErrStopped)
	p.refuseInflight(ErrStopped)
	// In the order they were sent (a map's order is random; a run must be a
	// function of its inputs).
	for _, token := range slices.Sorted(maps.Keys(p.forwards.sent)) {
		f := p.forwards.sent[token]
		delete(p.forwards.sent, token)
		f.done(vsr.ForwardOutcome{}, ErrStopped)
	}
	nonces := slices.SortedFunc(maps.Keys(p.forwards.received), func(a, b wire.Uint128) int { return cmp.Compare(a.Lo, b.Lo) })
	for _, nonce := range nonces {
		f := p.forwards.received[nonce]
		delete(p.forwards.received, nonce)
		f.done(vsr.ForwardOutcome{TimedOut: true}, nil)
	}
	waiters := p.reads.appliedWaiters
	p.reads.appliedWaiters = nil
	for _, w := range waiters {
		w.then(false)
	}
}

func (p *Plane) String() string {
	return fmt.Sprintf("metadata replica %d: %v view %d op %d commit %d applied %d", p.core.ReplicaID(), p.core.Status(),
		p.core.View(), p.core.Op(), p.core.CommitMax(), p.applied.Op)
}

// Body is the body the plane holds of op, if it is the prepare of identity (the
// core's Storage).
func (p *Plane) Body(op uint64, identity wire.Uint128) ([]byte, bool) {
	return p.bodies.Body(op, identity)
}
