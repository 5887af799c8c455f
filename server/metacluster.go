package server

import (
	"errors"
	"fmt"
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
//   - The core is ticked every 10 ms (the cluster tick) by shard 0's loop; ticks
//     that fall due while a Ready is out are counted and given afterwards.
//   - A Ready's messages leave (Shard.SendReplica) once its durable work is done,
//     before its commits apply, as vsr.Ready orders them.
//   - Only the primary proposes. A write admitted there that the view change
//     overtakes is answered 58 (TransientNotAccepted): the client retries at the
//     new primary, whose client table answers a retry of an op that did commit
//     with its cached reply.
//   - A login or logout at a backup is forwarded (vsr's ForwardRegister and
//     ForwardLogout: only the verified identity travels); the origin answers its
//     client once it has applied the op itself, so its views hold the session.
//   - State transfer: a replica asked for its state offers its snapshot file
//     (snapshot.bin verbatim, with the client table) and its client table (ICT2)
//     as the ISM1 artifacts; one that receives a state writes it as its snapshot,
//     empties its journal, and has every shard's view replaced by it (view.go).
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
	// ticksDue are cluster ticks not given to the core yet.
	ticksDue int

	forwardsWaiting []*metaForward
	forwarded       map[wire.Uint128]*metaForward
	// appliedWaiters run once the plane has applied their op.
	appliedWaiters []appliedWaiter

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
	register         bool
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

// takeInputs gives the core what came while a Ready was out: frames, ticks and
// forwards, in that order.
func (m *metaPlane) takeInputs() {
	if !m.clustered {
		return
	}
	cl := &m.cluster
	for i, in := range cl.frames {
		cl.frames[i] = nil
		f := &in.frame
		if err := m.replica.Step(f.Header, f.Body); err != nil {
			m.log.Debug("replica frame refused by the metadata group", "peer", f.Peer, "command", f.Header.Command.String(), "err", err)
		}
		cl.stepped = append(cl.stepped, in)
	}
	cl.frames = cl.frames[:0]
	if cl.lastHeardNs != nil {
		// A frame of any group (a partition's too, on whichever shard) from
		// the primary's node proves it alive.
		for id := range cl.heardNs {
			if heard := cl.lastHeardNs[id].Load(); heard != cl.heardNs[id] {
				cl.heardNs[id] = heard
				m.replica.NoteLiveness(uint8(id))
			}
		}
	}
	for ; cl.ticksDue > 0; cl.ticksDue-- {
		m.replica.Tick()
	}
	if len(cl.forwardsWaiting) == 0 {
		return
	}
	forwards := cl.forwardsWaiting
	cl.forwardsWaiting = nil
	for _, f := range forwards {
		var nonce wire.Uint128
		var err error
		if f.register {
			nonce, err = m.replica.ForwardRegister(f.client, f.userID)
		} else {
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

// sendMessages sends the Ready's messages; a single node has none.
func (m *metaPlane) sendMessages() {
	if m.cluster.send == nil {
		return
	}
	for i := range m.rd.Messages {
		m.cluster.send(&m.rd.Messages[i])
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
// journal emptied by the journal writer, then, on shard 0, the plane's state and
// table replaced and the Ready finished. A state that does not decode (its bytes
// matched the manifest, so the peer sent it so) breaks the plane rather than
// leave the core believing in a state it does not have.
func (m *metaPlane) installTask() *journalTask {
	install := m.rd.Install
	st, decodeErr := decodeTransferredState(install)
	journal, store := m.journal, m.store
	return &journalTask{
		work: func(func()) error {
			if decodeErr != nil {
				return decodeErr
			}
			if err := store.ReplaceFile(snapshotFileName, st.snapshot); err != nil {
				return fmt.Errorf("metadata snapshot: %w", err)
			}
			if err := journal.Truncate(0); err != nil {
				return err
			}
			return journal.Sync()
		},
		then: func(err error) {
			m.taskOut = false
			if err != nil {
				m.log.Error("metadata state transfer could not be installed", "op", install.CommitOp, "err", err)
				m.breakPlane(fmt.Errorf("metadata state transfer: %w", err))
				return
			}
			m.state, m.table = st.state, st.table
			m.applied = appliedOp{op: st.head.op, view: st.head.view, identity: st.head.lastIdentity, timestamp: st.head.lastTimestamp}
			m.snapshotOp = st.head.op
			m.journalFirstOp, m.journalEnds = st.head.op+1, m.journalEnds[:0]
			for op := range m.bodies.byOp {
				if op <= st.head.op {
					delete(m.bodies.byOp, op)
				}
			}
			install.Identity = st.head.lastIdentity
			m.transfersInstalled.Add(1)
			m.log.Info("metadata state transfer installed", "op", st.head.op)
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
