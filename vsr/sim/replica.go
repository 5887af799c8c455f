package sim

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/zeebo/xxh3"

	"github.com/iggy-shard/iggy-shard/vsr"
	"github.com/iggy-shard/iggy-shard/wire"
)

// groupReplica is one node's replica of one consensus group: its core, its journal
// and the state machine it applies to.
type groupReplica struct {
	node *node
	// group is the index into cluster.groups (0 is the metadata group).
	group int
	core  *vsr.Core
	// driver carries out the core's Readies (groupHost) and takes every input.
	driver *vsr.Driver
	// proposals are the requests handed to the driver, by token, until it
	// proposed them (groupHost.Proposal).
	proposals map[uint64]pendingProposal
	// quiet: the core is QuietWhenIdle (partition groups).
	quiet   bool
	disk    *disk
	machine groupMachine
	// meta is the machine on the metadata group, nil on partition groups.
	meta *metadataMachine
	// applied is the last applied op, the state's checkpoint.
	applied vsr.Checkpoint
	// forwarded maps the nonce of a login forwarded to the primary to its client.
	forwarded map[wire.Uint128]int
	// Monotonicity, per incarnation (the durable view across them).
	lastView        uint32
	lastStatus      vsr.Status
	lastDurableView uint32
	lastCommitMax   uint64
	lastCommitMin   uint64
}

type pendingProposal struct {
	proposal  vsr.Proposal
	body      []byte
	nowMicros uint64
}

// metadataSessions lets the metadata core read the client table the machine holds
// now (a restart or a state transfer replaces it).
type metadataSessions struct{ m *metadataMachine }

func (s metadataSessions) RegisterAllowed(client wire.Uint128, userID uint32) bool {
	return s.m.table.RegisterAllowed(client, userID)
}

func (s metadataSessions) Watermark(client wire.Uint128) uint64 { return s.m.table.Watermark(client) }

func (c *cluster) bootGroup(gr *groupReplica, restart bool) {
	nd := gr.node
	gc := c.groups[gr.group]
	cfg := vsr.CoreConfig{
		Config: vsr.Config{
			Cluster:      wire.ClusterID(clusterName),
			ReplicaID:    uint8(nd.id),
			ReplicaCount: uint8(c.opts.Replicas),
			Group:        gc.id,
		},
		Timing:       Timing,
		JournalSlots: c.opts.JournalSlots,
		Storage:      gr.disk,
		Mutation:     c.opts.Mutation,
		// Every replica restarts from its last checkpoint (checkpointEvery).
		ReportsCheckpoints:    true,
		CheckpointIntervalOps: checkpointEvery,
	}
	if gc.id == wire.MetadataGroup {
		gr.meta = newMetadataMachine()
		gr.meta.applyRetries = c.opts.broken == brokenApplyRetries
		if c.opts.broken == brokenApplyDiverges && nd.id == 0 {
			gr.meta.clockSkewMicros = 1
		}
		gr.machine = gr.meta
		cfg.Incarnation = wire.Uint128{Lo: nd.incarnationCount, Hi: uint64(nd.id) + 1}
		cfg.Sessions = metadataSessions{gr.meta}
	} else {
		gr.machine = newPartitionMachine()
		// Partition groups go quiet when idle, kept alive by their node (keepAlive).
		cfg.QuietWhenIdle = true
		gr.quiet = true
	}
	gr.forwarded = make(map[wire.Uint128]int)
	gr.proposals = make(map[uint64]pendingProposal)
	core, err := vsr.NewCore(cfg)
	if err != nil {
		panic(err)
	}
	if gr.core != nil {
		c.addDrops(gr.core) // the incarnation that crashed
	}
	gr.core = core
	gr.driver = vsr.NewDriver(core, groupHost{c: c, gr: gr}, vsr.DriverConfig{})
	gr.applied = vsr.Checkpoint{}
	gr.lastCommitMax, gr.lastCommitMin = 0, 0
	if restart {
		var rotten []uint64
		if nd.rots && (c.opts.broken == brokenRotAboveCommit || c.rngFail.IntN(3) == 0) {
			// A committed op this replica knows committed (at or below its durable
			// commit point or its checkpoint) may rot here: it still has an intact
			// copy on a replica that never rots (see the package doc).
			opMax := max(gr.disk.superDurable.CommitMax, checkpointOp(gr.disk.checkpointed))
			count := 1 + c.rngFail.IntN(3)
			if c.opts.broken == brokenRotAboveCommit {
				opMax, count = ^uint64(0), 50
			}
			rotten = gr.disk.rot(opMax, count, gr.machine.bodyIntact)
			c.result.RottenEntries += len(rotten)
			c.trace("r%d g%d journal entries rotted at ops %v", nd.id, gr.group, rotten)
			for _, op := range rotten {
				if op > checkpointOp(gr.disk.checkpointed) {
					c.result.RottenToRepair++
				}
			}
		}
		rec, dropped := gr.disk.recover(gr.machine.bodyIntact)
		c.result.DamagedEntriesDropped += len(dropped)
		for _, op := range rotten {
			if !slices.Contains(dropped, op) {
				c.fail("replica %d group %d: recovery did not notice the rotten entry of op %d", nd.id, gr.group, op)
				return
			}
		}
		if arts := gr.disk.checkpointed; arts != nil {
			cp, err := gr.restore(arts)
			if err != nil {
				c.fail("replica %d group %d: its checkpoint does not decode: %v", nd.id, gr.group, err)
				return
			}
			rec.Checkpoint = cp
		}
		if rec.State.View < gr.lastDurableView {
			c.fail("replica %d group %d restarted in durable view %d after durable view %d", nd.id, gr.group, rec.State.View, gr.lastDurableView)
		}
		if err := core.Recover(rec); err != nil {
			c.fail("replica %d group %d recover: %v", nd.id, gr.group, err)
			return
		}
		c.trace("r%d g%d restart view %d log_view %d op %d commit %d", nd.id, gr.group, core.View(), core.LogView(), core.Op(), core.CommitMax())
	}
	gr.lastView = core.View()
}

// checkpointHeadBytes is the head of a state's first artifact: the op, identity and
// timestamp of the last prepare applied to it (as the server's snapshot file names
// them), which the core's hash chain resumes from.
const checkpointHeadBytes = 8 + 16 + 8

func appendCheckpointHead(b []byte, cp vsr.Checkpoint) []byte {
	b = binary.LittleEndian.AppendUint64(b, cp.Op)
	b = binary.LittleEndian.AppendUint64(b, cp.Identity.Lo)
	b = binary.LittleEndian.AppendUint64(b, cp.Identity.Hi)
	return binary.LittleEndian.AppendUint64(b, cp.Timestamp)
}

func decodeCheckpointHead(b []byte) (vsr.Checkpoint, bool) {
	if len(b) < checkpointHeadBytes {
		return vsr.Checkpoint{}, false
	}
	return vsr.Checkpoint{
		Op:        binary.LittleEndian.Uint64(b),
		Identity:  wire.Uint128{Lo: binary.LittleEndian.Uint64(b[8:]), Hi: binary.LittleEndian.Uint64(b[16:])},
		Timestamp: binary.LittleEndian.Uint64(b[24:]),
	}, true
}

func checkpointOp(arts []vsr.Artifact) uint64 {
	if len(arts) == 0 {
		return 0
	}
	cp, _ := decodeCheckpointHead(arts[0].Bytes)
	return cp.Op
}

// state is the replica's state as of its last applied op, as transfer artifacts.
func (gr *groupReplica) state() []vsr.Artifact {
	arts := gr.machine.artifacts(gr.applied.Op)
	arts[0].Bytes = append(appendCheckpointHead(make([]byte, 0, checkpointHeadBytes+len(arts[0].Bytes)), gr.applied), arts[0].Bytes...)
	return arts
}

// restore installs a state (a checkpoint or a transfer) and returns its checkpoint.
func (gr *groupReplica) restore(arts []vsr.Artifact) (vsr.Checkpoint, error) {
	if len(arts) == 0 {
		return vsr.Checkpoint{}, fmt.Errorf("a state of no artifacts")
	}
	cp, ok := decodeCheckpointHead(arts[0].Bytes)
	if !ok {
		return cp, fmt.Errorf("a state whose first artifact of %d bytes has no checkpoint head", len(arts[0].Bytes))
	}
	stripped := slices.Clone(arts)
	stripped[0].Bytes = arts[0].Bytes[checkpointHeadBytes:]
	if err := gr.machine.install(cp.Op, stripped); err != nil {
		return cp, err
	}
	gr.applied = cp
	return cp, nil
}

func (c *cluster) checkpoint(gr *groupReplica) { gr.disk.checkpoint(gr.state()) }

// drainGroup carries out what the group's core holds (after a boot) and checks the
// replica's monotonicity. Every input goes through gr.driver, which carries out the
// Readies it leads to before it returns (the simulated disk completes at once).
func (c *cluster) drainGroup(gr *groupReplica) {
	if !gr.node.up {
		return
	}
	gr.driver.Run()
	c.checkMonotonic(gr)
}

// groupHost carries out a group replica's Readies for its vsr.Driver: the
// simulated disk and network, and the state machine. Every call completes at once;
// a crash on sync takes the whole node down mid-Ready (after the Ready's early
// prepares left, as on a real node).
type groupHost struct {
	c  *cluster
	gr *groupReplica
}

func (h groupHost) Persist(rd *vsr.Ready) bool {
	c, gr := h.c, h.gr
	for _, op := range rd.Discards {
		gr.disk.discard(op)
	}
	if rd.Truncate {
		gr.disk.truncateAbove(rd.TruncateAbove)
	}
	for i := range rd.Writes {
		gr.disk.write(&rd.Writes[i].Header, rd.Writes[i].Body)
	}
	if rd.State != nil {
		gr.disk.setState(*rd.State, rd.ViewHeaders)
	}
	if gr.node.crashOnSync && (len(rd.Writes) > 0 || rd.State != nil) {
		c.crash(gr.node) // stops the driver: the Ready's work goes no further
		return false
	}
	gr.disk.sync()
	if rd.State != nil {
		gr.lastDurableView = rd.State.View
	}
	return true
}

func (h groupHost) Send(m *vsr.Message) { h.c.sendFrame(h.gr.node.id, m) }

func (h groupHost) Apply(committed []wire.PrepareHeader) bool {
	for i := range committed {
		h.c.apply(h.gr, &committed[i])
		if h.c.violation != nil {
			h.gr.driver.Stop(h.c.violation)
			break
		}
	}
	return true
}

func (h groupHost) Install(in *vsr.StateInstall) bool {
	h.c.install(h.gr, in)
	if h.c.violation != nil {
		h.gr.driver.Stop(h.c.violation)
	}
	return true
}

func (h groupHost) Forwarded(outcomes []vsr.ForwardOutcome) {
	c, gr := h.c, h.gr
	for _, f := range outcomes {
		clientID, ok := gr.forwarded[f.Nonce]
		delete(gr.forwarded, f.Nonce)
		if ok && f.Register && !f.TimedOut && f.Outcome == uint8(wire.ForwardRegisterOk) {
			c.result.ForwardedLogins++
			c.sendClient(gr.node.id, c.opts.Replicas+clientID, packet{reply: &clientReply{client: clientID, register: true, epoch: f.Epoch}})
		}
	}
}

func (h groupHost) OfferState(vsr.StateRequest) (uint64, []vsr.Artifact) {
	h.c.result.StateOffers++
	return h.gr.applied.Op, h.gr.state()
}

func (h groupHost) Proposal(token uint64) (vsr.Proposal, []byte, uint64) {
	p := h.gr.proposals[token]
	return p.proposal, p.body, p.nowMicros
}

// Proposed: a proposal the core refused (not the primary, the pipeline full) is
// retried by its client, as a request a server answered 58 is.
func (h groupHost) Proposed(token, _ uint64, _ error) { delete(h.gr.proposals, token) }

// ForwardSent records a login forwarded to the primary under its nonce; token is
// the client.
func (h groupHost) ForwardSent(token uint64, nonce wire.Uint128, err error) {
	if err == nil {
		h.gr.forwarded[nonce] = int(token)
	}
}

func (h groupHost) Advanced() {}

// addDrops adds a core's dropped inputs to the run's counts.
func (c *cluster) addDrops(core *vsr.Core) {
	d := core.Drops()
	for r := range d {
		c.result.Drops[r] += d[r]
	}
}

func (c *cluster) install(gr *groupReplica, in *vsr.StateInstall) {
	nd := gr.node
	// The artifacts are the core's until Advance; the checkpoint keeps them.
	arts := make([]vsr.Artifact, len(in.Artifacts))
	for i, a := range in.Artifacts {
		arts[i] = vsr.Artifact{Kind: a.Kind, Frontier: a.Frontier, Bytes: slices.Clone(a.Bytes)}
	}
	cp, err := gr.restore(arts)
	if err != nil || cp.Op != in.CommitOp {
		c.fail("replica %d group %d: transferred state does not install (op %d of commit op %d): %v", nd.id, gr.group, cp.Op, in.CommitOp, err)
		return
	}
	if want, ok := c.groups[gr.group].committed[cp.Op]; !ok || want != cp.Identity {
		c.fail("replica %d group %d: transferred state at op %d is not of the committed log", nd.id, gr.group, cp.Op)
		return
	}
	in.Identity = cp.Identity
	gr.disk.checkpoint(arts)
	c.result.StateInstalls++
	c.trace("r%d g%d installs a transferred state at op %d", nd.id, gr.group, cp.Op)
}

func (c *cluster) checkMonotonic(gr *groupReplica) {
	if !gr.node.up {
		return
	}
	core := gr.core
	id := gr.node.id
	if core.View() != gr.lastView || core.Status() != gr.lastStatus {
		c.trace("r%d g%d %v view %d log_view %d op %d commit %d/%d", id, gr.group, core.Status(), core.View(), core.LogView(), core.Op(), core.CommitMin(), core.CommitMax())
		gr.lastStatus = core.Status()
	}
	if core.View() < gr.lastView {
		c.fail("replica %d group %d view went back from %d to %d", id, gr.group, gr.lastView, core.View())
	}
	if core.CommitMax() < gr.lastCommitMax {
		c.fail("replica %d group %d commit_max went back from %d to %d", id, gr.group, gr.lastCommitMax, core.CommitMax())
	}
	if core.CommitMin() < gr.lastCommitMin {
		c.fail("replica %d group %d commit_min went back from %d to %d", id, gr.group, gr.lastCommitMin, core.CommitMin())
	}
	gr.lastView, gr.lastCommitMax, gr.lastCommitMin = core.View(), core.CommitMax(), core.CommitMin()
}

// applyOutcome is what one op's apply produced, as the first replica to apply it
// saw it: every other replica must produce the same.
type applyOutcome struct {
	answered    bool
	replyDigest uint64
	// effectsDigest is the metadata apply's effects (metadataMachine.effectsDigest).
	effectsDigest uint64
}

func (c *cluster) apply(gr *groupReplica, h *wire.PrepareHeader) {
	nd := gr.node
	gc := c.groups[gr.group]
	if want, ok := gc.committed[h.Op]; ok && want != h.Checksum {
		c.fail("replica %d group %d committed op %d as %x, another replica as %x", nd.id, gr.group, h.Op, h.Checksum.Lo, want.Lo)
		return
	} else if !ok {
		gc.committed[h.Op] = h.Checksum
		gc.committedRequest[h.Op] = [2]uint64{h.Client.Lo, h.Request}
	}
	body, ok := gr.disk.Body(h.Op, h.Checksum)
	if !ok {
		c.fail("replica %d group %d applies op %d without its body in the journal", nd.id, gr.group, h.Op)
		return
	}
	if h.Op != gr.applied.Op+1 {
		c.fail("replica %d group %d applies op %d after op %d", nd.id, gr.group, h.Op, gr.applied.Op)
		return
	}
	clientID := int(h.Client.Lo) - 1
	if clientID < 0 || clientID >= len(c.clients) {
		c.fail("replica %d group %d applies op %d of unknown client %v", nd.id, gr.group, h.Op, h.Client)
		return
	}
	reply, answered := gr.machine.apply(h, body)
	gr.applied = vsr.Checkpoint{Op: h.Op, Identity: h.Checksum, Timestamp: h.Timestamp}
	if h.Op%checkpointEvery == 0 {
		c.checkpoint(gr)
		gr.driver.Checkpointed(h.Op)
	}
	outcome := applyOutcome{answered: answered, replyDigest: xxh3.Hash(reply)}
	if gr.meta != nil {
		outcome.effectsDigest = gr.meta.effectsDigest()
	}
	if first, ok := gc.outcomes[h.Op]; !ok {
		gc.outcomes[h.Op] = outcome
		if gr.meta != nil && gr.meta.lastRefused {
			c.result.CommittedRefusals++
		}
	} else if first != outcome {
		c.fail("replica %d group %d: op %d applied to another outcome than on the first replica that applied it (%+v, then %+v)",
			nd.id, gr.group, h.Op, first, outcome)
		return
	}
	if !answered || !gr.core.IsPrimary() {
		return
	}
	r := clientReply{client: clientID, group: gr.group, request: h.Request, op: h.Op, frame: reply}
	if h.Operation == wire.OperationRegister {
		r.register, r.epoch = true, h.Op
	}
	c.sendClient(nd.id, c.opts.Replicas+clientID, packet{reply: &r})
}
