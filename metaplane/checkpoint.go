package metaplane

import (
	"errors"
	"fmt"

	"github.com/iggy-shard/iggy-shard/vsr"
	"github.com/iggy-shard/iggy-shard/wire"
)

// Checkpoints: a snapshot of the state (Snapshot, written by the host) and the
// journal cut to the ops from it on, taken every IntervalOps applied ops. In a
// cluster the core's primary proposes no op a header window or more above the
// last checkpoint (vsr.CoreConfig.ReportsCheckpoints), so the interval obeys vsr's
// checkpoint rule (vsr/checkpoint.go): at most the window less two pipelines, 960
// ops for the window of 1,024. A larger one could never come due: the cluster
// stopped committing for good a window above its last checkpoint. A single node
// counts its window from the applied op and could honour more, but one rule with
// one number serves both.
//
// A checkpoint comes due in the Apply of a Ready: the Ready waits for it (its
// Advance follows the checkpoint's writing), so a restart never finds the journal
// cut above what the core counts. One that fails (a full or failing disk) is
// tried again, counting still from the last one written: in a cluster after
// SnapshotRetryTicks of the core's clock, from Tick, since the primary may be
// stopped a window above its checkpoint and apply nothing until one succeeds; on
// a single node after another interval of ops, not at every turn of a failing
// disk.

// checkpoints is the plane's checkpoint and install state.
type checkpoints struct {
	// intervalOps is the interval in use; snapshotOp the op of the last
	// checkpoint written.
	intervalOps, snapshotOp uint64
	// out: a checkpoint is with the host; inApply: the Driver's Apply waits for
	// it.
	out, inApply bool
	// retrying: the last one failed, and is tried again at core tick retryTick
	// (a cluster) or applied op retryOp (a single node).
	retrying           bool
	retryTick, retryOp uint64
	// installing is a transferred state with the host to install, installIn the
	// core's install it completes.
	installing *Snapshot
	installIn  *vsr.StateInstall
}

// checkpointDue reports whether the plane takes a checkpoint now.
func (p *Plane) checkpointDue() bool {
	if p.applied.Op-p.checkpoints.snapshotOp < p.checkpoints.intervalOps {
		return false
	}
	switch {
	case !p.checkpoints.retrying:
		return true
	case p.cfg.Clustered:
		return p.core.Now() >= p.checkpoints.retryTick
	default:
		return p.applied.Op >= p.checkpoints.retryOp
	}
}

// startCheckpoint hands the checkpoint of the applied state to the host. inApply:
// the Driver's Apply waits for it. It reports whether the checkpoint is over.
func (p *Plane) startCheckpoint(inApply bool) bool {
	cp := &Checkpoint{At: p.applied, Snapshot: p.Snapshot()}
	p.checkpoints.out, p.checkpoints.inApply = true, inApply
	res, done := p.host.WriteCheckpoint(cp)
	if !done {
		return false
	}
	p.checkpointWritten(cp.At, res)
	return true
}

// CheckpointWritten completes the host's WriteCheckpoint.
func (p *Plane) CheckpointWritten(at Applied, res CheckpointResult) {
	inApply := p.checkpoints.inApply
	p.checkpointWritten(at, res)
	if inApply {
		p.driver.Applied()
	}
}

func (p *Plane) checkpointWritten(at Applied, res CheckpointResult) {
	p.checkpoints.out, p.checkpoints.inApply = false, false
	if res.Written {
		// A restart resumes from this checkpoint (the entries below it that a
		// journal not cut still holds are skipped).
		p.checkpoints.snapshotOp = at.Op
		p.checkpoints.retrying = false
		p.counters.snapshotsTaken.Add(1)
		p.cutBodies(at.Op)
		if p.cfg.Clustered {
			p.driver.Checkpointed(at.Op)
		}
	}
	if res.Broken {
		p.breakPlane(res.Err)
		return
	}
	if res.Err != nil {
		if !res.Written {
			// Tried again later, counting from the last one written.
			p.checkpoints.retrying = true
			p.checkpoints.retryOp = at.Op + p.checkpoints.intervalOps
			if p.cfg.Clustered {
				p.checkpoints.retryTick = p.core.Now() + SnapshotRetryTicks
			}
		}
		p.log.Error("metadata snapshot failed", "op", at.Op, "snapshot_op", p.checkpoints.snapshotOp, "snapshot_written", res.Written, "err", res.Err)
		return
	}
	p.log.Info("metadata snapshot", "op", at.Op)
}

// cutBodies forgets the bodies below a checkpoint at op: a cluster keeps those of
// the core's header window, which its repair serves to a replica behind.
func (p *Plane) cutBodies(op uint64) {
	keepFrom := op
	if p.cfg.Clustered {
		keepFrom -= min(keepFrom, uint64(p.journalSlots))
	}
	for k := range p.bodies.byOp {
		if k < keepFrom {
			delete(p.bodies.byOp, k)
		}
	}
}

// NextRetryTick is the core tick at which a failed checkpoint is tried again,
// when one waits.
func (p *Plane) NextRetryTick() (uint64, bool) {
	return p.checkpoints.retryTick, p.cfg.Clustered && p.checkpoints.retrying
}

// State transfer: a replica asked for its state offers its applied state as the
// ISM1 artifacts, the snapshot (which holds the state, the client table and the
// op's identity and timestamp, the checkpoint the receiver recovers from) and the
// client table on its own; one that receives a newer state than it applied has
// the host write it as its checkpoint (keeping the journal's ops above it, which
// it may have acknowledged) and replaces its state, table and applied op by it.

// stateArtifacts is the applied state as the ISM1 artifacts of a state transfer.
func (p *Plane) stateArtifacts() []vsr.Artifact {
	return []vsr.Artifact{
		{Kind: wire.ArtifactMetadataSnapshot, Frontier: p.applied.Op, Bytes: p.Snapshot()},
		{Kind: wire.ArtifactClientTable, Frontier: p.applied.Op, Bytes: p.table.AppendICT2(nil)},
	}
}

// decodeTransferred decodes a verified state transfer for install.
func (p *Plane) decodeTransferred(install *vsr.StateInstall) (*Snapshot, []byte, error) {
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
		return nil, nil, errors.New("state transfer without a metadata snapshot or a client table")
	}
	st, err := DecodeSnapshot(snapshot, p.cfg.ClientsTableMax)
	if err != nil {
		return nil, nil, err
	}
	if st.At.Op != install.CommitOp {
		return nil, nil, fmt.Errorf("state transfer of op %d with a snapshot of op %d", install.CommitOp, st.At.Op)
	}
	// The table travels twice; the snapshot's is the one kept, and must be the
	// same.
	if _, err := vsr.DecodeICT2(table, p.cfg.ClientsTableMax); err != nil {
		return nil, nil, fmt.Errorf("state transfer client table: %w", err)
	}
	return st, append([]byte(nil), snapshot...), nil
}

// install takes a Ready's transferred state: one no newer than the applied state
// is not installed (the core resumes from its own, Core.installed ignores it); a
// newer one is written by the host, then replaces the plane's. A state that does
// not decode (its bytes matched the manifest, so the peer sent it so) stops the
// plane rather than leave the core believing in a state it does not have.
func (p *Plane) install(in *vsr.StateInstall) bool {
	st, snapshot, err := p.decodeTransferred(in)
	if err != nil {
		p.log.Error("metadata state transfer could not be installed", "op", in.CommitOp, "err", err)
		p.breakPlane(fmt.Errorf("metadata state transfer: %w", err))
		return false
	}
	if st.At.Op <= p.applied.Op {
		p.log.Info("metadata state transfer not installed: the state applied here is as new", "op", st.At.Op, "applied_op", p.applied.Op)
		return true
	}
	p.checkpoints.installing, p.checkpoints.installIn = st, in
	done, err := p.host.InstallState(&Install{At: st.At, Snapshot: snapshot})
	if !done {
		return false
	}
	return p.installed(err)
}

// StateInstalled completes the host's InstallState.
func (p *Plane) StateInstalled(err error) {
	if p.installed(err) {
		p.driver.Installed(nil)
	}
}

func (p *Plane) installed(err error) bool {
	st, in := p.checkpoints.installing, p.checkpoints.installIn
	p.checkpoints.installing, p.checkpoints.installIn = nil, nil
	if err != nil {
		p.log.Error("metadata state transfer could not be installed", "op", st.At.Op, "err", err)
		p.breakPlane(fmt.Errorf("metadata state transfer: %w", err))
		return false
	}
	p.state, p.table, p.applied, p.checkpoints.snapshotOp = st.State, st.Table, st.At, st.At.Op
	p.revoked.reset(p.state)
	p.checkpoints.retrying = false
	// The bodies of the ops the journal keeps stay, for the apply and for repair;
	// the state holds the others.
	for op := range p.bodies.byOp {
		if op < st.At.Op {
			delete(p.bodies.byOp, op)
		}
	}
	in.Identity = st.At.Identity
	p.counters.transfersInstalled.Add(1)
	p.log.Info("metadata state transfer installed", "op", st.At.Op)
	// Writes numbered here before the transfer are behind it: whether they
	// committed, the client learns by retrying the same request (the table
	// answers).
	p.refuseInflight(ErrFateUnknown)
	p.host.StateReplaced()
	p.runAppliedWaiters()
	p.runBarriers()
	return true
}
