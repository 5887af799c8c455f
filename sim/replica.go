package sim

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"

	"github.com/zeebo/xxh3"

	"github.com/iggy-shard/iggy-shard/metadata"
	"github.com/iggy-shard/iggy-shard/metaplane"
	"github.com/iggy-shard/iggy-shard/vsr"
	"github.com/iggy-shard/iggy-shard/wire"
)

// metaReplica is one node's replica of the metadata group: the server's own plane
// (package metaplane) over the node's simulated disk and network, this type its
// host. Every host call completes at once but password work, which completes at
// the node's next tick; a crash on sync takes the whole node down mid-Ready (after
// the Ready's early prepares left, as on a real node).
type metaReplica struct {
	c     *cluster
	node  *node
	disk  *disk
	plane *metaplane.Plane
	rng   *rand.Rand
	// pending are the client requests handed to the plane, by token, until
	// answered; hashed the password work done, answered at the next tick.
	pending map[uint64]*pendingRequest
	hashed  []hashedPassword
	// forwardedAt: the Register under token was taken by a backup (forwarded).
	forwarded map[uint64]bool
	// Monotonicity, per incarnation (the durable view across them).
	lastView        uint32
	lastStatus      vsr.Status
	lastDurableView uint32
	lastCommitMax   uint64
	lastCommitMin   uint64
	// revocationClockMicros is the latest prepare timestamp applied here (or
	// in a state installed here): no revoked token expiring later was pruned.
	revocationClockMicros uint64
}

type pendingRequest struct {
	client   int
	request  uint64
	register bool
	session  uint64
}

type hashedPassword struct {
	id       uint64
	proposal []byte
	err      error
}

// The root user every client logs in as: passwords are not what the simulator
// tests, so it never verifies one, and password work (argon2id, deliberately slow)
// is answered with one hash computed once per process, for every user the
// workload creates and the cluster's root alike.
const rootUsername = "iggy"

var rootPasswordHash = sync.OnceValue(func() string {
	return metadata.HashPassword([]byte("iggy"), []byte("sim-salt-16bytes"))
})

const serverVersion = "sim"

// bootMeta starts (or restarts, from its disk) the node's metadata replica.
func (c *cluster) bootMeta(nd *node, restart bool) {
	mr := nd.meta
	if mr.plane != nil {
		c.addDrops(mr.plane.Core()) // the incarnation that crashed
	}
	mr.pending = make(map[uint64]*pendingRequest)
	mr.forwarded = make(map[uint64]bool)
	mr.hashed = nil
	mr.lastCommitMax, mr.lastCommitMin = 0, 0
	cfg := metaplane.Config{
		Replica: vsr.Config{
			Cluster:      wire.ClusterID(clusterName),
			ReplicaID:    uint8(nd.id),
			ReplicaCount: uint8(c.opts.Replicas),
		},
		Clustered:             true,
		Timing:                Timing,
		CheckpointIntervalOps: metaplane.CheckpointIntervalOpsMax(metaplane.JournalSlotsMin),
		Incarnation:           wire.Uint128{Lo: nd.incarnationCount, Hi: uint64(nd.id) + 1},
		ServerVersion:         serverVersion,
		RootUsername:          rootUsername,
		RootPassword:          "iggy",
		ClientsTableMax:       c.opts.ClientsTableMax,
		Mutation:              c.opts.PlaneMutation,
		CoreMutation:          c.opts.Mutation,
	}
	if c.opts.checkpointIntervalOps != 0 {
		cfg.CheckpointIntervalOps, cfg.OldCheckpointRule = c.opts.checkpointIntervalOps, true
	}
	if c.opts.PlaneMutation == metaplane.MutationApplySkew && nd.id != 0 {
		cfg.Mutation = 0 // replica 0's apply alone takes another clock
	}
	rec := &metaplane.Recovered{
		Snapshot: &metaplane.Snapshot{State: metadata.NewStateWithoutRoot(), Table: vsr.NewClientTable(c.opts.ClientsTableMax)},
		Fresh:    !restart,
	}
	if restart {
		var rotten []uint64
		if nd.rots && (c.opts.broken == brokenRotAboveCommit || c.rngFail.IntN(3) == 0) {
			// A committed op this replica knows committed (at or below its durable
			// commit point or its checkpoint) may rot here: it still has an intact
			// copy on a replica that never rots (see the package doc).
			opMax := max(mr.disk.superDurable.CommitMax, mr.disk.snapshotOp)
			count := 1 + c.rngFail.IntN(3)
			if c.opts.broken == brokenRotAboveCommit {
				opMax, count = ^uint64(0), 50
			}
			rotten = mr.disk.rot(opMax, count)
			c.result.Metadata.RottenEntries += len(rotten)
			c.trace("r%d journal entries rotted at ops %v", nd.id, rotten)
			for _, op := range rotten {
				if op > mr.disk.snapshotOp {
					c.result.Metadata.RottenToRepair++
				}
			}
		}
		var dropped []uint64
		rec.Durable, rec.ViewHeaders, rec.Entries, dropped = mr.disk.recover()
		c.result.Metadata.DamagedEntriesDropped += len(dropped)
		for _, op := range rotten {
			if !slices.Contains(dropped, op) {
				c.fail("replica %d: recovery did not notice the rotten entry of op %d", nd.id, op)
				return
			}
		}
		if mr.disk.snapshot != nil {
			snap, err := metaplane.DecodeSnapshot(mr.disk.snapshot, c.opts.ClientsTableMax)
			if err != nil {
				c.fail("replica %d: its checkpoint does not decode: %v", nd.id, err)
				return
			}
			rec.Snapshot = snap
		}
		if rec.Durable.View < mr.lastDurableView {
			c.fail("replica %d restarted in durable view %d after durable view %d", nd.id, rec.Durable.View, mr.lastDurableView)
		}
	}
	plane, err := metaplane.Open(cfg, rec, mr)
	if err != nil {
		c.fail("replica %d recover: %v", nd.id, err)
		return
	}
	mr.plane = plane
	// The partitions follow the recovered checkpoint's purges before its ops
	// above are applied again (partitionhost's OpenAtStart).
	c.settleStores(nd, plane.State())
	if err := plane.Replay(); err != nil {
		c.fail("replica %d replay: %v", nd.id, err)
		return
	}
	plane.Start()
	if restart {
		core := plane.Core()
		c.trace("r%d restart view %d log_view %d op %d commit %d", nd.id, core.View(), core.LogView(), core.Op(), core.CommitMax())
	}
	mr.lastView = plane.Core().View()
}

// tick is the node's tick of the metadata replica: its password work done, then
// the core's clock.
func (mr *metaReplica) tick() {
	hashed := mr.hashed
	mr.hashed = nil
	for _, h := range hashed {
		mr.plane.PasswordHashed(h.id, h.proposal, h.err, mr.c.now*1000)
	}
	mr.plane.Tick()
	mr.c.checkMonotonic(mr)
}

// Persist is the simulated disk's write of a Ready: every write lands in the page
// cache and becomes durable at the sync, which may find the node gone.
func (mr *metaReplica) Persist(rd *vsr.Ready) (bool, error) {
	d := mr.disk
	for _, op := range rd.Discards {
		d.discard(op)
	}
	if rd.Truncate {
		d.truncateAbove(rd.TruncateAbove)
	}
	for i := range rd.Writes {
		d.write(&rd.Writes[i].Header, rd.Writes[i].Body)
	}
	if rd.State != nil || rd.ViewHeaders != nil {
		state := mr.plane.Core().Durable()
		if rd.State != nil {
			state = *rd.State
		}
		d.setState(state, rd.ViewHeaders)
	}
	if mr.node.crashOnSync && (len(rd.Writes) > 0 || rd.State != nil) {
		mr.c.crash(mr.node) // stops the plane: the Ready's work goes no further
		return false, nil
	}
	d.sync()
	if rd.State != nil {
		mr.lastDurableView = rd.State.View
	}
	return true, nil
}

func (mr *metaReplica) Send(m *vsr.Message) { mr.c.sendFrame(mr.node.id, m) }

// WriteCheckpoint writes a checkpoint whole (temp file, fsync, rename), and checks
// it: every replica that checkpoints an op must hold the same state there, client
// table included.
func (mr *metaReplica) WriteCheckpoint(cp *metaplane.Checkpoint) (metaplane.CheckpointResult, bool) {
	c := mr.c
	digest := metaplane.SnapshotDigest(cp.Snapshot)
	gc := c.meta
	if want, ok := gc.stateDigests[cp.At.Op]; ok && want != digest {
		c.fail("replica %d checkpoints op %d with another state than a replica before it (client tables %d and %d clients)",
			mr.node.id, cp.At.Op, mr.plane.Table().Len(), gc.stateTableLens[cp.At.Op])
	} else if !ok {
		gc.stateDigests[cp.At.Op] = digest
		gc.stateTableLens[cp.At.Op] = mr.plane.Table().Len()
	}
	if c.opts.Revocations.PerMille > 0 {
		c.checkRevocationsCopy(mr, fmt.Sprintf("its checkpoint at op %d", cp.At.Op))
	}
	mr.disk.checkpoint(cp.At.Op, slices.Clone(cp.Snapshot))
	c.result.Metadata.Checkpoints++
	c.trace("r%d checkpoint at op %d", mr.node.id, cp.At.Op)
	return metaplane.CheckpointResult{Written: true}, true
}

// InstallState writes a transferred state as the replica's checkpoint.
func (mr *metaReplica) InstallState(in *metaplane.Install) (bool, error) {
	c, nd := mr.c, mr.node
	if want, ok := c.meta.committed[in.At.Op]; !ok || want != in.At.Identity {
		c.fail("replica %d: transferred state at op %d is not of the committed log", nd.id, in.At.Op)
		return true, fmt.Errorf("a state not of the committed log")
	}
	mr.disk.checkpoint(in.At.Op, slices.Clone(in.Snapshot))
	c.result.Metadata.StateInstalls++
	c.trace("r%d installs a transferred state at op %d", nd.id, in.At.Op)
	return true, nil
}

// Committed checks every op a replica applies: one prepare per op number on
// every replica, the same outcome on every replica, and each client request
// executed at most once in the cluster's history.
func (mr *metaReplica) Committed(cm *metaplane.Commit) {
	c, nd := mr.c, mr.node
	gc := c.meta
	h := cm.Header
	if want, ok := gc.committed[h.Op]; ok && want != h.Checksum {
		c.fail("replica %d committed op %d as %x, another replica as %x", nd.id, h.Op, h.Checksum.Lo, want.Lo)
		return
	} else if !ok {
		gc.committed[h.Op] = h.Checksum
		gc.committedRequest[h.Op] = [2]uint64{h.Client.Lo, h.Request}
	}
	outcome := applyOutcome{skipped: cm.Skipped, replyDigest: xxh3.Hash(cm.Frame), effectsDigest: effectsDigest(mr.plane.Effects())}
	c.carryOutEffects(nd, mr.plane.Effects())
	if first, ok := gc.outcomes[h.Op]; !ok {
		gc.outcomes[h.Op] = outcome
		if !cm.Skipped && mr.plane.Result() != 0 {
			c.result.Metadata.CommittedRefusals++
		}
		if cm.Skipped {
			c.result.Metadata.DuplicatesSkipped++
		}
		if h.Operation == wire.OperationRegister {
			c.result.Metadata.Evictions += len(cm.Ended)
		}
	} else if first != outcome {
		c.fail("replica %d: op %d applied to another outcome than on the first replica that applied it (%+v, then %+v)",
			nd.id, h.Op, first, outcome)
		return
	}
	if at, ok := gc.refused58[requestKey{client: h.Client, request: h.Request}]; ok && h.Request != 0 {
		c.fail("replica %d: request %d of client %v, answered 58 (not admitted, never prepared) at tick %d, is op %d of the log", nd.id, h.Request, h.Client, at, h.Op)
		return
	}
	if !cm.Skipped && h.Request != 0 && !h.Client.IsZero() && h.Operation != wire.OperationRegister {
		epoch, _, _ := mr.plane.Session(h.Client)
		key := appliedRequest{client: h.Client, epoch: epoch, request: h.Request}
		if h.Operation == wire.OperationLogout {
			key.epoch = 0 // applied, the session is gone; the request number stands for it
		}
		if op, ok := gc.applied[key]; ok && op != h.Op {
			c.fail("replica %d: request %d of client %v (epoch %d) applied at op %d and again at op %d", nd.id, h.Request, h.Client, epoch, op, h.Op)
			return
		}
		gc.applied[key] = h.Op
	}
	mr.revocationClockMicros = max(mr.revocationClockMicros, h.Timestamp)
	if c.opts.Revocations.PerMille > 0 {
		c.checkRevocationsApplied(mr, cm)
	}
	if want, ok := gc.stateDigests[h.Op]; ok {
		if got := mr.plane.Digest(); got != want {
			c.fail("replica %d: its state at op %d, a checkpoint, differs from the checkpoint's (client tables %d and %d clients)",
				nd.id, h.Op, mr.plane.Table().Len(), gc.stateTableLens[h.Op])
		}
	}
}

// requestKey names a client's request.
type requestKey struct {
	client  wire.Uint128
	request uint64
}

// appliedRequest names a client's request within a session.
type appliedRequest struct {
	client  wire.Uint128
	epoch   uint64
	request uint64
}

// applyOutcome is what one op's apply produced, as the first replica to apply it
// saw it: every other replica must produce the same.
type applyOutcome struct {
	skipped       bool
	replyDigest   uint64
	effectsDigest uint64
}

// effectsDigest is a digest of an apply's effects (what the server would do to
// partitions and files): every replica must ask for the same.
func effectsDigest(effects []metadata.Effect) uint64 {
	b := make([]byte, 0, len(effects)*32)
	for _, e := range effects {
		b = append(b, byte(e.Kind))
		for _, v := range [...]uint32{e.Stream, e.Topic, e.First, e.Count, e.Group} {
			b = binary.LittleEndian.AppendUint32(b, v)
		}
		b = binary.LittleEndian.AppendUint64(b, e.Generation)
	}
	return xxh3.Hash(b)
}

func (mr *metaReplica) StateReplaced() {
	mr.c.settleStores(mr.node, mr.plane.State())
	mr.revocationClockMicros = max(mr.revocationClockMicros, mr.plane.Applied().Timestamp)
	if mr.c.opts.Revocations.PerMille > 0 {
		mr.c.checkRevocationsCopy(mr, fmt.Sprintf("the state it installed at op %d", mr.plane.Applied().Op))
	}
}

// Answer sends a request's answer to its client.
func (mr *metaReplica) Answer(token uint64, a *metaplane.Answer) {
	c, pr := mr.c, mr.pending[token]
	if pr == nil {
		return // answered already
	}
	delete(mr.pending, token)
	r := &clientReply{client: pr.client, group: metadataGroupIndex, request: pr.request, register: pr.register, session: pr.session}
	switch {
	case a.Evict != 0:
		r.evicted = true
	case a.Status == wire.ErrTransientNotAccepted || a.Status == wire.ErrTransientNotCommitted:
		r.transient, r.status = true, a.Status
	case a.Status != 0, a.Rejection != 0:
		r.refused = true
		c.result.Metadata.AdmitRefused++
	default:
		r.frame = bytes.Clone(a.Frame)
		var rh wire.ReplyHeader
		copy(wire.HeaderBytes(&rh)[:], r.frame)
		r.op = rh.Op
		if pr.register {
			r.epoch = a.Epoch
			if mr.forwarded[token] {
				c.result.Metadata.ForwardedLogins++
			}
		}
	}
	delete(mr.forwarded, token)
	c.sendClient(mr.node.id, c.opts.Replicas+pr.client, packet{reply: r})
}

// HashPassword answers password work at the node's next tick with the one hash
// (rootPasswordHash): the proposal ProposeCreateUser would make, but for the hash.
func (mr *metaReplica) HashPassword(id uint64, w *metaplane.PasswordWork) bool {
	h := hashedPassword{id: id}
	var u wire.CreateUser
	switch {
	case w.Root:
		u = wire.CreateUser{Username: []byte(w.Username), Status: wire.UserActive}
	case w.Operation == wire.OperationCreateUser:
		h.err = u.Decode(w.Body)
	default:
		h.err = fmt.Errorf("sim: no password work for %v", w.Operation)
	}
	if h.err == nil {
		u.Password = []byte(rootPasswordHash())
		h.proposal, h.err = u.Append(nil)
	}
	mr.hashed = append(mr.hashed, h)
	return true
}

func (mr *metaReplica) Entropy(b []byte) {
	for i := range b {
		b[i] = byte(mr.rng.Uint32())
	}
}

func (mr *metaReplica) Advanced() { mr.c.checkMonotonic(mr) }

func (c *cluster) checkMonotonic(mr *metaReplica) {
	if !mr.node.up || mr.plane == nil {
		return
	}
	core := mr.plane.Core()
	id := mr.node.id
	if core.View() != mr.lastView || core.Status() != mr.lastStatus {
		c.trace("r%d %v view %d log_view %d op %d commit %d/%d", id, core.Status(), core.View(), core.LogView(), core.Op(), core.CommitMin(), core.CommitMax())
		mr.lastStatus = core.Status()
	}
	if core.View() < mr.lastView {
		c.fail("replica %d view went back from %d to %d", id, mr.lastView, core.View())
	}
	if core.CommitMax() < mr.lastCommitMax {
		c.fail("replica %d commit_max went back from %d to %d", id, mr.lastCommitMax, core.CommitMax())
	}
	if core.CommitMin() < mr.lastCommitMin {
		c.fail("replica %d commit_min went back from %d to %d", id, mr.lastCommitMin, core.CommitMin())
	}
	mr.lastView, mr.lastCommitMax, mr.lastCommitMin = core.View(), core.CommitMax(), core.CommitMin()
}

// addDrops adds a core's dropped inputs to the run's counts.
func (c *cluster) addDrops(core *vsr.Core) {
	d := core.Drops()
	for r := range d {
		c.result.Metadata.Drops[r] += d[r]
	}
}
