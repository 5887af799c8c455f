package metaplane

import (
	"errors"
	"fmt"

	"github.com/iggy-shard/iggy-shard/vsr"
	"github.com/iggy-shard/iggy-shard/wire"
)

// Host carries out what the plane asks of the world: its disk, its network, its
// clients, its password workers. The plane calls it from the goroutine that calls
// the plane. A call that does its work later returns done false and the host
// reports the outcome through the Plane method named beside it, never from inside
// the call itself; done true means the work is over, with err its outcome.
type Host interface {
	// Persist makes a Ready's durable work durable, in vsr.Host's order: the cut
	// (Discards, Truncate), the state record (State with ViewHeaders), the
	// Writes, fsync (Plane.Persisted). An error stops the plane.
	Persist(rd *vsr.Ready) (done bool, err error)
	// Send sends one message of a Ready (a cluster's replica only); its body is
	// valid until the Ready is over.
	Send(m *vsr.Message)
	// WriteCheckpoint makes cp the checkpoint a restart resumes from: its
	// snapshot replaces the last, then the journal keeps its entries from cp.At.Op
	// on (Plane.CheckpointWritten).
	WriteCheckpoint(cp *Checkpoint) (res CheckpointResult, done bool)
	// InstallState makes a transferred state durable: its snapshot, and the
	// journal's ops above its op kept as they are (this replica may have
	// acknowledged them) (Plane.StateInstalled).
	InstallState(in *Install) (done bool, err error)
	// Committed: an op was applied (every op, whoever proposed it), before any
	// answer of it goes out: the server publishes it to its shards' views, whose
	// partitions follow its effects.
	Committed(c *Commit)
	// StateReplaced: a transferred state replaced the plane's.
	StateReplaced()
	// Answer answers the request the host handed over under token (Write,
	// Register), once.
	Answer(token uint64, a *Answer)
	// HashPassword hands argon2id work off the loop; its outcome comes back
	// through Plane.PasswordHashed(id, ...). False: the host has no room for it
	// now (the plane refuses the write, 58, to be retried).
	HashPassword(id uint64, w *PasswordWork) bool
	// Entropy fills b with random bytes (salts, access tokens).
	Entropy(b []byte)
	// Advanced runs after each Ready of the core: who leads may have changed.
	Advanced()
}

// Checkpoint is a checkpoint to write: the snapshot of the state as of At.
type Checkpoint struct {
	At       Applied
	Snapshot []byte
}

// CheckpointResult is how a checkpoint's writing went.
type CheckpointResult struct {
	// Written: the snapshot is durable; a restart resumes from it.
	Written bool
	Err     error
	// Broken: the journal cannot be appended to any more (replaced, not
	// reopened): the plane stops until a restart.
	Broken bool
}

// Install is a transferred state to make durable: its snapshot as received.
type Install struct {
	At       Applied
	Snapshot []byte
}

// Commit is one op as the plane applied it.
type Commit struct {
	Header *wire.PrepareHeader
	Body   []byte
	// Frame is the reply frame (header and body) the client table caches.
	Frame []byte
	// Epoch is a Register's session epoch (its op).
	Epoch uint64
	// Ended are the clients whose sessions left the client table with this op
	// (a logout, an eviction from a full table).
	Ended []wire.Uint128
	// Skipped: the op changed nothing, a request applied already or of a session
	// ended (applyOp); Frame is then the request's cached reply, nil when the
	// table no longer has it.
	Skipped bool
}

// Answer is the outcome of a request: exactly one of Status, Evict, Rejection and
// Frame is set.
type Answer struct {
	// Status is a header-only refusal (58 not accepted, 57 not committed, ...).
	Status wire.ErrorCode
	// Evict ends the connection's session (an Eviction frame).
	Evict wire.EvictionReason
	// Rejection is a result-framed refusal, the body of a committed refusal.
	Rejection wire.ErrorCode
	// Frame is a whole reply frame (header and body): a commit's, or a cached
	// reply for a retry. A cached one is the table's: copy it before the next
	// commit.
	Frame []byte
	// Epoch and UserID are a login's session; LoggedOut marks a committed
	// Logout.
	Epoch     uint64
	UserID    uint32
	LoggedOut bool
}

// PasswordWork is argon2id work for the host: a CreateUser's or ChangePassword's
// proposal (metadata.ProposeCreateUser, ProposeChangePasswordVerified, the current
// password verified against CurrentHash first), or a cluster's root user
// (metadata.ProposeRootUser).
type PasswordWork struct {
	// Token is the request's (0 for the root user).
	Token       uint64
	Operation   wire.Operation
	Body        []byte
	Salt        []byte
	CurrentHash string
	Root        bool
	Username    string
	Password    string
}

// driverHost is the plane as its Driver's vsr.Host.
type driverHost struct{ p *Plane }

var _ vsr.ForwardHost = driverHost{}

func (d driverHost) Persist(rd *vsr.Ready) bool {
	p := d.p
	p.dropTruncatedBodies(rd)
	for i := range rd.Writes {
		p.recordBody(&rd.Writes[i].Header, rd.Writes[i].Body)
	}
	done, err := p.host.Persist(rd)
	if done && err != nil {
		p.breakPlane(err)
		return false
	}
	return done
}

func (d driverHost) Send(m *vsr.Message) {
	if !d.p.cfg.Clustered {
		panic("metaplane: a one-replica metadata group sent something")
	}
	d.p.host.Send(m)
}

func (d driverHost) Apply(committed []wire.PrepareHeader) bool {
	p := d.p
	p.applyCommitted(committed)
	if p.broken == nil && !p.checkpoints.out && p.checkpointDue() {
		return p.startCheckpoint(true)
	}
	return true
}

func (d driverHost) Install(in *vsr.StateInstall) bool { return d.p.install(in) }

func (d driverHost) Forwarded(outcomes []vsr.ForwardOutcome) {
	p := d.p
	for _, o := range outcomes {
		f, ok := p.forwards.received[o.Nonce]
		if !ok {
			continue
		}
		delete(p.forwards.received, o.Nonce)
		f.done(o, nil)
	}
}

func (d driverHost) OfferState(vsr.StateRequest) (uint64, []vsr.Artifact) {
	p := d.p
	return p.applied.Op, p.stateArtifacts()
}

func (d driverHost) Proposal(token uint64) (vsr.Proposal, []byte, uint64) {
	w := d.p.writes.byToken[token]
	return w.proposal, w.body, w.nowMicros
}

func (d driverHost) Proposed(token, op uint64, err error) {
	p := d.p
	w := p.writes.byToken[token]
	delete(p.writes.byToken, token)
	p.counters.writesWaiting.Store(int64(len(p.writes.byToken)))
	switch {
	case err == nil:
		h, _ := p.core.Header(op)
		w.op, w.identity = op, h.Checksum
		p.bodies.byOp[op] = body{identity: h.Checksum, bytes: w.body}
		p.writes.inflight = append(p.writes.inflight, w)
		if w.proposed != nil {
			w.proposed(op)
		}
	case errors.Is(err, vsr.ErrNotPrimary), errors.Is(err, vsr.ErrNotNormal):
		// The view changed since the write was admitted: the client retries
		// (58), at the new primary.
		w.done(nil, ErrNotPrimary)
	case p.driver.Err() != nil:
		// The Driver stopped: a stopping node, or a broken plane.
		w.done(nil, err)
	default:
		panic(fmt.Sprintf("metaplane: the metadata group's primary refused a proposal: %v", err))
	}
}

func (d driverHost) ForwardSent(token uint64, nonce wire.Uint128, err error) {
	p := d.p
	f := p.forwards.sent[token]
	delete(p.forwards.sent, token)
	if f == nil {
		return
	}
	if err != nil {
		f.done(vsr.ForwardOutcome{}, err)
		return
	}
	p.forwards.received[nonce] = f
}

func (d driverHost) Advanced() {
	p := d.p
	if p.cfg.Clustered && !p.core.IsPrimary() {
		// It stopped leading with writes prepared: the new view may commit them
		// or not. Each is answered once this replica applies its op (its commit,
		// or 58 when another prepare took the number: it never commits), or 57
		// if that takes too long (ErrFateUnknown); never 58 while it may commit.
		deadline := p.core.Now() + FateWaitHeartbeats*max(p.cfg.Timing.HeartbeatTimeoutTicks, 1)
		for _, w := range p.writes.inflight {
			if w.fateDeadline == 0 {
				w.fateDeadline = deadline
			}
		}
	}
	p.host.Advanced()
	if p.cfg.Clustered {
		p.afterReady()
	}
}

// recordBody keeps a journal write's body for the apply and for repair (the
// core's Storage); a proposal's is recorded when it is proposed.
func (p *Plane) recordBody(h *wire.PrepareHeader, b []byte) {
	if e, ok := p.bodies.byOp[h.Op]; ok && e.identity == h.Checksum {
		return
	}
	p.bodies.byOp[h.Op] = body{identity: h.Checksum, bytes: append([]byte(nil), b...)}
}

// dropTruncatedBodies forgets the bodies of the ops a Ready truncates or
// discards.
func (p *Plane) dropTruncatedBodies(rd *vsr.Ready) {
	if rd.Truncate {
		for op := range p.bodies.byOp {
			if op > rd.TruncateAbove {
				delete(p.bodies.byOp, op)
			}
		}
	}
	for _, op := range rd.Discards {
		delete(p.bodies.byOp, op)
	}
}

// expireFates answers 57 the writes whose fate this replica waited for too long.
func (p *Plane) expireFates() {
	now := p.core.Now()
	kept := p.writes.inflight[:0]
	var expired []*write
	for _, w := range p.writes.inflight {
		if w.fateDeadline != 0 && now >= w.fateDeadline {
			expired = append(expired, w)
			continue
		}
		kept = append(kept, w)
	}
	clear(p.writes.inflight[len(kept):])
	p.writes.inflight = kept
	for _, w := range expired {
		w.done(nil, ErrFateUnknown)
	}
}

// refuseInflight ends every write numbered and not applied with err.
func (p *Plane) refuseInflight(err error) {
	inflight := p.writes.inflight
	p.writes.inflight = nil
	for _, w := range inflight {
		w.done(nil, err)
	}
}
