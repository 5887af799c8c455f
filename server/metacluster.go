package server

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"

	"github.com/iggy-shard/iggy-shard/metadata"
	"github.com/iggy-shard/iggy-shard/shard"
	"github.com/iggy-shard/iggy-shard/vsr"
	"github.com/iggy-shard/iggy-shard/wire"
)

// The metadata plane in a cluster (cluster.enabled): the same group, of as many
// replicas as the roster has nodes, on shard 0 of every node. What a single node
// does not need:
//
//   - Frames from the other replicas reach shard 0 from whichever shard owns the
//     peer's connection (cluster.go): retained there, queued here, stepped into
//     the core only while no Ready is out, and released after the Advance that
//     follows (a write or a forward may alias one until then).
//   - The core is ticked on shard 0's grid of 10 ms ticks (ticks.go), which sleeps
//     until the core's next deadline; ticks that fall due while a Ready is out are
//     given afterwards, before the frames that came meanwhile.
//   - A Ready's messages leave (Shard.SendReplica) once its durable work is done,
//     before its commits apply, as vsr.Ready orders them.
//   - Only the primary proposes. A write admitted there that the view change
//     overtakes is answered 58 (TransientNotAccepted): the client retries at the
//     new primary, whose client table answers a retry of an op that did commit
//     with its cached reply.
//   - A login or logout at a backup is forwarded (vsr's ForwardRegister and
//     ForwardLogout: only the verified identity travels); the origin answers its
//     client once it has applied the op itself, so its views hold the session.
//     A consumer group member whose connection closes at a backup leaves its
//     groups through a forwarded logout of its session (leaveGroups, below).
//   - The replicas start without users: the root user comes from one op of the
//     first primary, and logins wait for it (ensureRootUser, below).
//   - State transfer: a replica asked for its state offers its snapshot file
//     (snapshot.bin verbatim, with the client table) and its client table (ICT2)
//     as the ISM1 artifacts; one that receives a state writes it as its snapshot,
//     cuts its journal to the ops above it (which it may have acknowledged), and
//     has every shard's view replaced by it (view.go).
//
// The journal stays in op order, while a backup may be handed a write beyond a gap
// (a body retransmitted before the repair of the ops below it): the journal is
// then rewritten with a marker for the ops it lacks in front of that entry, so the
// write is durable at its own position before the Ready that acknowledges it is
// advanced; a restart reads the marker as a hole and reports its ops as faulty,
// as it does a corrupt entry (journal.go).

// errMetaNotPrimary refuses a metadata write this replica may not propose: it is a
// backup, or its view is changing. The client retries (58).
var errMetaNotPrimary = errors.New("metadata writes: this replica is not the metadata primary")

// errMetaStopped ends the writes a stopping clustered node had numbered but not
// seen commit: they may yet commit at the others (57, not committed here).
var errMetaStopped = errors.New("metadata writes: the node stopped before the write committed")

const (
	// replicaFramesWaitingMax bounds the frames queued for the core while a Ready
	// is out; beyond it a frame is dropped, as a full peer queue drops one: the
	// consensus retransmits.
	replicaFramesWaitingMax = 4096
	// clusterTicksCatchUpMax bounds the ticks given at once after shard 0 was
	// held up: a stall does not fire every timer of the stalled time in a burst.
	// The core never sleeps longer (metaSleepTicksMax).
	clusterTicksCatchUpMax = 100
)

// metaCluster is the plane's state that only a group of several replicas has.
type metaCluster struct {
	config vsr.Config
	timing vsr.Timing

	// send carries one of a Ready's messages on the replica plane (set by the
	// router, on shard 0); nil while the runtime is not up: the message is lost,
	// and the core retransmits.
	send func(msg *vsr.Message)
	// release gives a frame stepped into the core back to the shard that holds
	// it.
	release func(in *replicaInbound)
	// frames wait for the core; stepped were stepped since the last Advance.
	frames  []*replicaInbound
	stepped []*replicaInbound
	// tickTarget is the grid tick (ticks.go) of shard 0's last turn, tickedTo the
	// one the core was ticked to, ticks how many it was given; tickOf maps shard
	// 0's clock to its grid.
	tickTarget, tickedTo, ticks uint64
	tickOf                      func(ns int64) uint64
	// sentEarly: the Ready out had messages sent before its durable work
	// (sendEarly).
	sentEarly bool

	forwardsWaiting []*metaForward
	forwarded       map[wire.Uint128]*metaForward
	// appliedWaiters run once the plane has applied their op.
	appliedWaiters []appliedWaiter
	// barriers are the read barriers of refused logins (afterPrimaryCommit), in
	// the order they were asked.
	barriers []*readBarrier

	// holes are the ops whose journal spans are holes (journal.go): damage found
	// at the start, or markers written for a gap.
	holes map[uint64]bool
	// installDue: the Ready out carries a transferred state, to install next.
	installDue bool
	// onInstalled runs on shard 0 once a transferred state replaced the plane's.
	onInstalled func()
	// onReady runs after each Advance: the router publishes who leads.
	onReady func()
	// lastHeardNs are the node's (clusterState), heardNs what the core was told.
	lastHeardNs []atomic.Int64
	heardNs     []int64

	// rootPending: this replica is hashing or has proposed the root user
	// (metaRouter.ensureRootUser); rootRefused: its proposal committed as a
	// refusal on a state still without root (a configuration the state machine
	// refuses), so it is not proposed again.
	rootPending, rootRefused bool
	// rootProposals counts the root user proposals this replica made (tests).
	rootProposals atomic.Int64
	// groupLeaves are the group leaves of closed connections to try again once
	// the view is normal (metaRouter.leaveGroups).
	groupLeaves []groupLeave
}

// replicaInbound is one replica frame on its way to shard 0: retained on the
// shard that owns the peer's connection, released there.
type replicaInbound struct {
	frame shard.RetainedReplicaFrame
	owner int
}

// metaForward is a login or logout to forward to the primary; done runs on shard
// 0 with the primary's answer, or the error that kept it from being sent.
type metaForward struct {
	register bool
	// barrier: a read barrier (vsr.Core.ForwardReadBarrier), of no client.
	barrier          bool
	client           wire.Uint128
	userID           uint32
	session, request uint64
	done             func(o vsr.ForwardOutcome, err error)
}

type appliedWaiter struct {
	op uint64
	// then gets false when the node stops first.
	then func(applied bool)
}

// readBarrier runs then(true) once this backup has applied every op its primary
// had committed when the barrier reached it (answered, commit); then(false) when
// the primary does not answer Ok, at deadline (core ticks), or when the node stops.
type readBarrier struct {
	answered bool
	commit   uint64
	deadline uint64
	done     bool
	then     func(caughtUp bool)
}

// tableSessions is the primary's read of the client table for forwarded logins;
// the table itself is replaced by a state transfer.
type tableSessions struct{ m *metaPlane }

func (s tableSessions) RegisterAllowed(client wire.Uint128, userID uint32) bool {
	return s.m.table.RegisterAllowed(client, userID)
}

func (s tableSessions) Watermark(client wire.Uint128) uint64 { return s.m.table.Watermark(client) }

// configureCluster sets the plane up as a replica of the roster's metadata group.
func (m *metaPlane) configureCluster(cfg *Config) error {
	if !cfg.Cluster.Enabled {
		return nil
	}
	c := &cfg.Cluster
	m.clustered = true
	m.cluster.config = vsr.Config{
		Cluster:      wire.ClusterID(c.Name),
		ReplicaID:    uint8(c.ReplicaID),
		ReplicaCount: uint8(len(c.Nodes)),
		Group:        wire.MetadataGroup,
	}
	m.cluster.timing = c.timing()
	if cfg.clusterTiming != nil {
		m.cluster.timing = *cfg.clusterTiming
	}
	m.cluster.forwarded = make(map[wire.Uint128]*metaForward)
	m.cluster.holes = make(map[uint64]bool)
	return nil
}

// frameIn queues a frame for the core.
func (m *metaPlane) frameIn(in *replicaInbound) {
	if len(m.cluster.frames) >= replicaFramesWaitingMax {
		m.cluster.release(in)
		return
	}
	m.cluster.frames = append(m.cluster.frames, in)
}

// forward queues a login or logout for the primary.
func (m *metaPlane) forward(f *metaForward) {
	if m.broken != nil {
		f.done(vsr.ForwardOutcome{}, m.broken)
		return
	}
	m.cluster.forwardsWaiting = append(m.cluster.forwardsWaiting, f)
}

// afterApplied runs then once op is applied here (at once if it is).
func (m *metaPlane) afterApplied(op uint64, then func(applied bool)) {
	if op <= m.applied.op {
		then(true)
		return
	}
	m.cluster.appliedWaiters = append(m.cluster.appliedWaiters, appliedWaiter{op: op, then: then})
}

// afterPrimaryCommit runs then(true) once this backup has applied what its
// primary had committed when a read barrier reached it (vsr's ForwardReadBarrier:
// a ForwardLogout of client 0, answered at once with the primary's commit point):
// what a client saw the primary acknowledge before it came here is then applied
// here, whatever frames were already on their way. Bounded: then(false) after two
// commit broadcast intervals, when the primary does not answer Ok (a view
// change), or when the node stops.
func (m *metaPlane) afterPrimaryCommit(then func(caughtUp bool)) {
	b := &readBarrier{deadline: m.replica.Now() + 2*m.cluster.timing.CommitBroadcastIntervalTicks, then: then}
	m.cluster.barriers = append(m.cluster.barriers, b)
	m.forward(&metaForward{barrier: true, done: func(o vsr.ForwardOutcome, err error) {
		if err != nil || o.TimedOut || o.Outcome != uint8(wire.ForwardLogoutOk) {
			b.finish(false)
			return
		}
		b.answered, b.commit = true, o.Commit
		m.runBarriers()
	}})
}

func (b *readBarrier) finish(caughtUp bool) {
	if b.done {
		return
	}
	b.done = true
	b.then(caughtUp)
}

// runBarriers runs the read barriers whose condition or deadline came. The
// router calls it after every Ready, frame and tick of a clustered plane.
func (m *metaPlane) runBarriers() {
	if len(m.cluster.barriers) == 0 {
		return
	}
	barriers := m.cluster.barriers
	m.cluster.barriers = nil
	for _, b := range barriers {
		switch {
		case b.done:
		case b.answered && m.applied.op >= b.commit:
			b.finish(true)
		case m.replica.Now() >= b.deadline:
			b.finish(false)
		default:
			m.cluster.barriers = append(m.cluster.barriers, b)
		}
	}
}

func (m *metaPlane) runAppliedWaiters() {
	if len(m.cluster.appliedWaiters) == 0 {
		return
	}
	waiters := m.cluster.appliedWaiters
	m.cluster.appliedWaiters = nil
	for _, w := range waiters {
		if w.op <= m.applied.op {
			w.then(true)
			continue
		}
		m.cluster.appliedWaiters = append(m.cluster.appliedWaiters, w)
	}
}

// takeInputs gives the core what came while a Ready was out: the ticks elapsed
// (with the liveness of the replicas heard meanwhile, ticks.go), frames and
// forwards, in that order: a frame is stepped at the time it came, so a timer it
// arms counts from then.
func (m *metaPlane) takeInputs() {
	if !m.clustered {
		return
	}
	cl := &m.cluster
	m.tickTo()
	for i, in := range cl.frames {
		cl.frames[i] = nil
		f := &in.frame
		if err := m.replica.Step(f.Header, f.Body); err != nil {
			m.log.Debug("replica frame refused by the metadata group", "peer", f.Peer, "command", f.Header.Command.String(), "err", err)
		}
		cl.stepped = append(cl.stepped, in)
	}
	cl.frames = cl.frames[:0]
	if len(cl.forwardsWaiting) == 0 {
		return
	}
	forwards := cl.forwardsWaiting
	cl.forwardsWaiting = nil
	for _, f := range forwards {
		var nonce wire.Uint128
		var err error
		switch {
		case f.barrier:
			nonce, err = m.replica.ForwardReadBarrier()
		case f.register:
			nonce, err = m.replica.ForwardRegister(f.client, f.userID)
		default:
			nonce, err = m.replica.ForwardLogout(f.client, f.session, f.request)
		}
		if err != nil {
			f.done(vsr.ForwardOutcome{}, err)
			continue
		}
		cl.forwarded[nonce] = f
	}
}

// releaseStepped gives back the frames stepped before the last Advance.
func (m *metaPlane) releaseStepped() {
	cl := &m.cluster
	for i, in := range cl.stepped {
		cl.stepped[i] = nil
		cl.release(in)
	}
	cl.stepped = cl.stepped[:0]
}

// sendEarly sends, before the Ready's durable work, the messages that may leave
// then (vsr.Ready.SendableEarly): a prepare, which the next replica of the chain
// journals while this one does, so that a commit costs one journal write and one
// round trip on the way, not two writes one after the other.
func (m *metaPlane) sendEarly() {
	if m.cluster.send == nil {
		return
	}
	for i := range m.rd.Messages {
		if m.rd.SendableEarly(i) {
			m.cluster.send(&m.rd.Messages[i])
			m.cluster.sentEarly = true
		}
	}
}

// sendMessages sends the Ready's messages not sent early; a single node has none.
func (m *metaPlane) sendMessages() {
	sentEarly := m.cluster.sentEarly
	m.cluster.sentEarly = false
	if m.cluster.send == nil {
		return
	}
	for i := range m.rd.Messages {
		if !sentEarly || !m.rd.SendableEarly(i) {
			m.cluster.send(&m.rd.Messages[i])
		}
	}
}

// recordBody keeps a journal write's body for the apply and for repair (the
// core's Storage); a proposal's is recorded when it is proposed.
func (m *metaPlane) recordBody(h *wire.PrepareHeader, body []byte) {
	if b, ok := m.bodies.byOp[h.Op]; ok && b.identity == h.Checksum {
		return
	}
	m.bodies.byOp[h.Op] = metaBody{identity: h.Checksum, body: append([]byte(nil), body...)}
}

// dropTruncatedBodies forgets the bodies of the ops a Ready truncates or
// discards.
func (m *metaPlane) dropTruncatedBodies(rd *vsr.Ready) {
	if rd.Truncate {
		for op := range m.bodies.byOp {
			if op > rd.TruncateAbove {
				delete(m.bodies.byOp, op)
			}
		}
	}
	for _, op := range rd.Discards {
		delete(m.bodies.byOp, op)
	}
}

// answerForwards hands the primary's answers (or timeouts) to the forwards'
// originators.
func (m *metaPlane) answerForwards(outcomes []vsr.ForwardOutcome) {
	for _, o := range outcomes {
		f, ok := m.cluster.forwarded[o.Nonce]
		if !ok {
			continue
		}
		delete(m.cluster.forwarded, o.Nonce)
		f.done(o, nil)
	}
}

// afterAdvance does what follows a clustered Ready's Advance: the writes a view
// change overtook are refused, the states asked for are offered, the frames
// stepped are released, and the router learns who leads now.
func (m *metaPlane) afterAdvance(requests []vsr.StateRequest) {
	if !m.replica.IsPrimary() {
		if len(m.inflight) > 0 {
			m.refuseInflight(errMetaNotPrimary)
		}
		if len(m.waiting) > 0 {
			m.refuseWaiting(errMetaNotPrimary)
		}
	}
	if len(requests) > 0 {
		requests = append([]vsr.StateRequest(nil), requests...)
		artifacts := m.stateArtifacts()
		for _, r := range requests {
			m.replica.OfferState(r, m.applied.op, artifacts)
		}
	}
	m.releaseStepped()
	if m.cluster.onReady != nil {
		m.cluster.onReady()
	}
}

// stateArtifacts is the applied state as the ISM1 artifacts of a state transfer:
// the snapshot file (which holds the state, the client table and the op's
// identity and timestamp, the checkpoint the receiver recovers from) and the
// client table on its own.
func (m *metaPlane) stateArtifacts() []vsr.Artifact {
	return []vsr.Artifact{
		{Kind: wire.ArtifactMetadataSnapshot, Frontier: m.applied.op, Bytes: m.encodeSnapshot(m.applied)},
		{Kind: wire.ArtifactClientTable, Frontier: m.applied.op, Bytes: m.table.AppendICT2(nil)},
	}
}

// transferredState is a verified state transfer decoded for install.
type transferredState struct {
	head     snapshotHead
	snapshot []byte
	state    *metadata.State
	table    *vsr.ClientTable
}

func decodeTransferredState(install *vsr.StateInstall) (*transferredState, error) {
	var snapshot, table []byte
	for _, a := range install.Artifacts {
		switch a.Kind {
		case wire.ArtifactMetadataSnapshot:
			snapshot = a.Bytes
		case wire.ArtifactClientTable:
			table = a.Bytes
		}
	}
	if snapshot == nil || table == nil {
		return nil, errors.New("state transfer without a metadata snapshot or a client table")
	}
	head, err := decodeSnapshotFile(snapshot)
	if err != nil {
		return nil, err
	}
	if head.op != install.CommitOp {
		return nil, fmt.Errorf("state transfer of op %d with a snapshot of op %d", install.CommitOp, head.op)
	}
	state, op, err := metadata.DecodeSnapshot(head.metadataBytes)
	if err != nil {
		return nil, err
	}
	if op != head.op {
		return nil, fmt.Errorf("state transfer snapshot: state op %d differs from op %d", op, head.op)
	}
	ct, err := vsr.DecodeICT2(table, vsr.ClientsTableMaxDefault)
	if err != nil {
		return nil, fmt.Errorf("state transfer client table: %w", err)
	}
	return &transferredState{head: head, snapshot: snapshot, state: state, table: ct}, nil
}

// installTask installs the Ready's transferred state: the snapshot written and the
// journal cut to the ops above the state's op by the journal writer, then, on
// shard 0, the plane's state, table and journal index replaced and the Ready
// finished. A state that does not decode (its bytes matched the manifest, so the
// peer sent it so) breaks the plane rather than leave the core believing in a
// state it does not have.
//
// The core keeps the ops above the installed one as journaled (Core.installed):
// this replica may have acknowledged them, so the journal keeps them, durably,
// entries and holes as they are (installedJournal), before the Advance that has
// the core resume from the state. Emptying the journal would lose them to a crash
// right after the install, and a view change could then lose a committed op.
//
// The snapshot is replaced first: a crash before the journal's replacement leaves
// the new snapshot with the old journal, which holds the same ops above the
// state's op (the restart skips those below it, scanMetaJournal). A restart
// would refuse it if its entry at the state's op, or the one after, were of
// another log: such entries are first marked as holes in the old journal (the
// bridge of planInstalledJournal), which either snapshot then reads.
func (m *metaPlane) installTask() *journalTask {
	install := m.rd.Install
	st, decodeErr := decodeTransferredState(install)
	if decodeErr == nil && st.head.op <= m.applied.op {
		// No newer than the applied state: the core resumes from its own
		// (Core.installed ignores such a state), and so does the plane.
		return &journalTask{
			work: func(func()) error { return nil },
			then: func(error) {
				m.taskOut = false
				m.log.Info("metadata state transfer not installed: the state applied here is as new", "op", st.head.op, "applied_op", m.applied.op)
				m.finishReady()
			},
		}
	}
	journal, store := m.journal, m.store
	firstOp, ends, holes := m.journalFirstOp, slices.Clone(m.journalEnds), maps.Clone(m.cluster.holes)
	var (
		kept     *installedJournal
		reopened metaJournal
	)
	return &journalTask{
		work: func(func()) error {
			if decodeErr != nil {
				return decodeErr
			}
			raw, err := store.ReadFile(journalFileName)
			if err != nil {
				return fmt.Errorf("metadata journal read: %w", err)
			}
			var bridge *installedJournal
			if kept, bridge, err = planInstalledJournal(raw, firstOp, ends, holes, st.head); err != nil {
				return err
			}
			if bridge != nil {
				b, err := layJournal(raw, nil, bridge.pieces)
				if err != nil {
					return err
				}
				if err := store.ReplaceFile(journalFileName, b); err != nil {
					return fmt.Errorf("metadata journal rewrite: %w", err)
				}
			}
			if err := store.ReplaceFile(snapshotFileName, st.snapshot); err != nil {
				return fmt.Errorf("metadata snapshot: %w", err)
			}
			reopened, err = replaceJournal(store, journal, raw, nil, kept.pieces)
			return err
		},
		then: func(err error) {
			m.taskOut = false
			if err != nil {
				m.log.Error("metadata state transfer could not be installed", "op", install.CommitOp, "err", err)
				m.breakPlane(fmt.Errorf("metadata state transfer: %w", err))
				return
			}
			m.journal = reopened
			m.setJournalIndex(kept.firstOp, kept.ends, kept.holes)
			m.state, m.table = st.state, st.table
			m.applied = appliedOp{op: st.head.op, view: st.head.view, identity: st.head.lastIdentity, timestamp: st.head.lastTimestamp}
			m.snapshotOp = st.head.op
			// The bodies of the ops the journal keeps stay, for the apply and
			// for repair; the state holds the others.
			for op := range m.bodies.byOp {
				if op < kept.firstOp {
					delete(m.bodies.byOp, op)
				}
			}
			install.Identity = st.head.lastIdentity
			m.transfersInstalled.Add(1)
			m.log.Info("metadata state transfer installed", "op", st.head.op, "journal_ops_kept", len(kept.ends), "faulty_ops", len(kept.holes))
			// Writes numbered here before the transfer are behind it: whether they
			// committed, the client learns by retrying (the table answers).
			m.refuseInflight(errMetaNotPrimary)
			if m.cluster.onInstalled != nil {
				m.cluster.onInstalled()
			}
			m.runAppliedWaiters()
			m.finishReady()
		},
	}
}

// stopCluster ends, on a stopping node, the writes and forwards that cannot
// complete without the other replicas.
func (m *metaPlane) stopCluster() {
	// First, so that what they decide is refused with the rest.
	barriers := m.cluster.barriers
	m.cluster.barriers = nil
	for _, b := range barriers {
		b.finish(false)
	}
	for i, in := range m.cluster.frames {
		m.cluster.frames[i] = nil
		m.cluster.release(in)
	}
	m.cluster.frames = m.cluster.frames[:0]
	m.releaseStepped()
	m.refuseInflight(errMetaStopped)
	m.refuseWaiting(errMetaStopped)
	forwards := m.cluster.forwardsWaiting
	m.cluster.forwardsWaiting = nil
	for _, f := range forwards {
		f.done(vsr.ForwardOutcome{}, errMetaStopped)
	}
	for nonce, f := range m.cluster.forwarded {
		delete(m.cluster.forwarded, nonce)
		f.done(vsr.ForwardOutcome{TimedOut: true}, nil)
	}
	waiters := m.cluster.appliedWaiters
	m.cluster.appliedWaiters = nil
	for _, w := range waiters {
		w.then(false)
	}
}

// A cluster's root user. A single node creates its root at its first start, from
// the configuration. In a cluster every replica must hold the same root, salted
// hash and creation time included, or their states differ byte for byte until a
// state transfer: so the replicas start without users (NewStateWithoutRoot) and
// the root comes from one replicated op. The primary that finds the state
// without root, all of its log applied (a view may start with the root's op
// still to commit), hashes the configured password once on the password workers,
// off shard 0, and proposes metadata.ProposeRootUser; every replica applies the
// same bytes. Apply creates the root only on a state without users, so a second
// proposal (another primary's, after a view change) and a restart, which recovers
// the root from the snapshot and journal, never make another. Until the op is
// applied on a node, logins there are answered 58 (handler.serveRequest), which
// the SDKs replay.
//
// The reference (apache/iggy core/server/src/boot/credentials.rs,
// ensure_default_root_user) seeds the root user on each node at boot, outside
// the log, from credentials that must be given explicitly on a cluster's first
// start: the same user on every node, each with a hash and creation time of its
// own. Here the first primary's configuration (IGGY_ROOT_USERNAME,
// IGGY_ROOT_PASSWORD, iggy/iggy by default) is the cluster's.

// ensureRootUser starts the root user's creation when this replica leads a
// state without it. It runs after every Ready of a clustered plane.
func (r *metaRouter) ensureRootUser() {
	p := r.plane
	cl := &p.cluster
	if !p.clustered || cl.rootPending || cl.rootRefused || r.syncJournal || p.broken != nil || p.state.HasRoot() ||
		!p.replica.IsPrimary() || p.applied.op != p.replica.Op() {
		return
	}
	salt, err := randomBytes(metadata.PasswordSaltBytes)
	if err != nil {
		r.h.log.Error("root user: no salt", "err", err)
		return
	}
	cfg := &r.h.srv.cfg
	if !r.passwords.submit(&rootUserHash{username: cfg.RootUsername, password: cfg.RootPassword, salt: salt}) {
		return // the workers are full: tried again after the next Ready
	}
	cl.rootPending = true
}

// rootUserHashed proposes the root user whose password the workers hashed.
func (r *metaRouter) rootUserHashed(w *rootUserHash) {
	p := r.plane
	cl := &p.cluster
	if w.err != nil {
		cl.rootPending, cl.rootRefused = false, true
		r.h.log.Error("root user: proposal not built; nobody can log in", "err", w.err)
		return
	}
	if p.state.HasRoot() || !p.replica.IsPrimary() || r.syncJournal {
		cl.rootPending = false
		return
	}
	prop := vsr.Proposal{Operation: wire.OperationCreateUser, UserID: metadata.RootUserID}
	cl.rootProposals.Add(1)
	r.commit(nil, prop, w.proposal, func(c *metaCommit, err error) {
		cl.rootPending = false
		if err != nil {
			r.h.log.Info("root user proposal not committed; the primary proposes it again", "err", err)
			return
		}
		_, code, _ := wire.SplitResult(c.frame[wire.HeaderSize:])
		switch {
		case code == 0:
			r.h.log.Info("root user created", "root_user", r.h.srv.cfg.RootUsername, "op", c.header.Op)
		case !p.state.HasRoot():
			cl.rootRefused = true
			r.h.log.Error("root user refused; nobody can log in", "root_user", r.h.srv.cfg.RootUsername, "code", code.String())
		}
	})
}

// groupLeave is the consumer group leave of a connection that closed: its
// client, and the session and next request number of the logout a backup
// forwards for it.
type groupLeave struct {
	client           wire.Uint128
	session, request uint64
	attempts         int
}

const (
	// groupLeavesWaitingMax bounds the leaves waiting to be tried again; beyond
	// it one is dropped, logged, and its member left to the primary's heartbeat
	// check if it is connected there.
	groupLeavesWaitingMax = 4096
	// groupLeaveAttemptsMax bounds the tries of one leave.
	groupLeaveAttemptsMax = 10
)

// leaveGroups ends the consumer group memberships of a client whose connection
// closed here, through the log. The primary (and a single node) proposes
// RemoveConsumerGroupMember. A backup cannot propose: it forwards a logout of
// the closed session to the primary, as it forwards a client's logout (vsr's
// ForwardLogout), and the committed Logout takes the client out of every group
// on every replica, its client table entry with it. That is where the reference
// ends too, later: its primary holds a lease per member that the backups renew
// for the sessions connected to them, and commits a Logout of a member whose
// lease expired (apache/iggy core/server/src/consumer_group/liveness.rs);
// disconnects themselves only drop the client table entry locally. Here the
// backup knows at once, so it need not wait for an expiry. A client that is in no
// group is not forwarded: its table entry goes locally only, as the reference
// does. The SDKs log in under a fresh client id after a reconnect, so the logout
// never ends a newer session; one that registered again meanwhile is spared
// when this node has applied its Register (see below).
func (r *metaRouter) leaveGroups(l groupLeave) {
	p := r.plane
	if p.state.ClientGroupsCount(l.client) == 0 {
		return
	}
	if !p.clustered || p.replica.IsPrimary() {
		prop := vsr.Proposal{Client: l.client, Operation: wire.OperationRemoveConsumerGroupMember, UserID: metadata.RootUserID}
		r.commit(nil, prop, metadata.AppendClientGoneProposal(nil, l.client), func(_ *metaCommit, err error) {
			if err == nil {
				return
			}
			if p.clustered && errors.Is(err, errMetaNotPrimary) {
				r.retryGroupLeave(l)
				return
			}
			r.h.log.Error("consumer group leave of a closed connection failed", "err", err)
		})
		return
	}
	if epoch, _, ok := p.table.Session(l.client); ok && epoch > l.session {
		return // the client registered again: its new session is not ended
	}
	if p.replica.Status() != vsr.StatusNormal {
		r.retryGroupLeave(l)
		return
	}
	p.forward(&metaForward{client: l.client, session: l.session, request: l.request, done: func(o vsr.ForwardOutcome, err error) {
		if err == nil && !o.TimedOut && o.Outcome == uint8(wire.ForwardLogoutOk) {
			return
		}
		r.retryGroupLeave(l)
	}})
	r.pumpJournal()
}

// retryGroupLeave keeps a leave to try again after a later Ready.
func (r *metaRouter) retryGroupLeave(l groupLeave) {
	cl := &r.plane.cluster
	l.attempts++
	if l.attempts >= groupLeaveAttemptsMax || len(cl.groupLeaves) >= groupLeavesWaitingMax {
		r.h.log.Warn("consumer group leave of a closed connection given up", "attempts", l.attempts,
			"waiting", len(cl.groupLeaves))
		return
	}
	cl.groupLeaves = append(cl.groupLeaves, l)
}

// retryGroupLeaves tries the waiting leaves again once the view is normal. It
// runs after every Ready of a clustered plane.
func (r *metaRouter) retryGroupLeaves() {
	cl := &r.plane.cluster
	if len(cl.groupLeaves) == 0 || r.plane.replica.Status() != vsr.StatusNormal || r.syncJournal {
		return
	}
	leaves := cl.groupLeaves
	cl.groupLeaves = nil
	for _, l := range leaves {
		r.leaveGroups(l)
	}
}

// afterClusterReady is what a clustered plane does after each Ready, once the
// router has published who leads.
func (r *metaRouter) afterClusterReady() {
	r.ensureRootUser()
	r.retryGroupLeaves()
	r.plane.runBarriers()
}
