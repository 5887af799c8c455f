package metaplane

import (
	"github.com/iggy-shard/iggy-shard/metadata"
	"github.com/iggy-shard/iggy-shard/vsr"
	"github.com/iggy-shard/iggy-shard/wire"
)

// What a replica of several does that a single node does not:
//
//   - Only the primary proposes. A login or logout at a backup is forwarded (vsr's
//     ForwardRegister and ForwardLogout: only the verified identity travels); the
//     origin answers its client once it has applied the op itself, so its views
//     hold the session.
//   - A login refused at a backup for a user or token it may not have applied yet
//     waits for a read barrier (ReadBarrier).
//   - The replicas start without users: the root user comes from one op of the
//     first primary, and logins wait for it (ensureRootUser).
//   - A session whose connection closes ends through the log (EndSession): a
//     backup forwards it to the primary, which proposes the ends that came
//     together in one op.

// forwards are the logins and logouts forwarded: sent by this backup to the
// primary, by the Driver's token, and received by this primary, by nonce.
type forwards struct {
	sent     map[uint64]*forward
	received map[wire.Uint128]*forward
}

// readWaits are what waits for ops to be applied here: appliedWaiters each for
// one op (afterApplied), barriers (a backup's reads) for every op its primary
// had committed when asked.
type readWaits struct {
	appliedWaiters []appliedWaiter
	barriers       []*readBarrier
}

// rootUser is the root user's creation by a cluster's first primary: pending
// while its password is hashed or its op in flight, refused for good once it
// could not be made.
type rootUser struct {
	pending, refused bool
}

// forward is a login or logout forwarded to the primary; done runs with the
// primary's answer, or the error that kept it from being sent.
type forward struct {
	done func(o vsr.ForwardOutcome, err error)
}

// sendForward hands a forward to the Driver under a token of its own.
func (p *Plane) sendForward(f *forward, register, barrier bool, client wire.Uint128, userID uint32, session, request uint64) {
	if p.broken != nil {
		f.done(vsr.ForwardOutcome{}, p.broken)
		return
	}
	p.nextToken++
	token := p.nextToken
	p.forwards.sent[token] = f
	var err error
	switch {
	case barrier:
		err = p.driver.ForwardLogout(wire.Uint128{}, 0, 0, token)
	case register:
		err = p.driver.ForwardRegister(client, userID, token)
	default:
		err = p.driver.ForwardLogout(client, session, request, token)
	}
	if err != nil {
		if f, ok := p.forwards.sent[token]; ok {
			delete(p.forwards.sent, token)
			f.done(vsr.ForwardOutcome{}, err)
		}
	}
}

// forwardLogin sends a login verified here, at a backup, to the primary; the
// client is answered once the primary committed it and this node applied it.
func (p *Plane) forwardLogin(token uint64, hdr wire.RequestHeader, userID uint32) {
	p.sendForward(&forward{done: func(o vsr.ForwardOutcome, err error) {
		switch {
		case err != nil:
			p.answerStatus(token, wire.ErrTransientNotAccepted)
		case o.TimedOut || o.Outcome == uint8(wire.ForwardRegisterCanceled):
			// The primary may have proposed it: its fate is unknown (57).
			p.answerStatus(token, wire.ErrTransientNotCommitted)
		case o.Outcome == uint8(wire.ForwardRegisterClientIDOwnedByAnotherUser):
			p.answer(token, Answer{Evict: wire.EvictionSessionError})
		case o.Outcome != uint8(wire.ForwardRegisterOk):
			p.answerStatus(token, wire.ErrTransientNotAccepted)
		default:
			p.afterApplied(o.Epoch, func(applied bool) {
				if !applied {
					p.answerStatus(token, wire.ErrTransientNotCommitted)
					return
				}
				p.answer(token, Answer{Frame: p.LoginFrame(&hdr, userID, o.Epoch), Epoch: o.Epoch, UserID: userID})
			})
			return
		}
		p.log.Info("forwarded login not taken", "outcome", o.Outcome, "timed_out", o.TimedOut, "err", err)
	}}, true, false, hdr.Client, userID, 0, 0)
}

// forwardLogout sends a logout at a backup to the primary.
func (p *Plane) forwardLogout(token uint64, req *wire.RequestHeader) {
	hdr := *req
	p.sendForward(&forward{done: func(o vsr.ForwardOutcome, err error) {
		switch {
		case err == nil && (o.TimedOut || o.Outcome == uint8(wire.ForwardLogoutCanceled)):
			// The primary may have proposed it: its fate is unknown (57).
			p.answerStatus(token, wire.ErrTransientNotCommitted)
			return
		case err != nil || o.Outcome != uint8(wire.ForwardLogoutOk):
			// Not taken (not the primary, its pipeline full, another of the
			// client's in flight): never proposed.
			p.answerStatus(token, wire.ErrTransientNotAccepted)
			return
		}
		p.afterApplied(o.Commit, func(applied bool) {
			if !applied {
				p.answerStatus(token, wire.ErrTransientNotCommitted)
				return
			}
			frame := make([]byte, wire.HeaderSize)
			rh := wire.ReplyTo(&hdr, 0, 0, true)
			rh.Op, rh.Commit = o.Commit, o.Commit
			rh.Put(frame)
			p.answer(token, Answer{Frame: frame, LoggedOut: true})
		})
	}}, false, false, hdr.Client, 0, hdr.Session, hdr.Request)
}

// readBarrier runs then(true) once this backup has applied every op its primary
// had committed when the barrier reached it (answered, commit); then(false) when
// the primary does not answer Ok, at deadline (core ticks), or when the node
// stops.
type readBarrier struct {
	answered bool
	commit   uint64
	deadline uint64
	done     bool
	then     func(caughtUp bool)
}

// ReadBarrier runs then(true) once this backup has applied what its primary had
// committed when a read barrier reached it (vsr's ForwardReadBarrier: a
// ForwardLogout of client 0, answered at once with the primary's commit point):
// what a client saw the primary acknowledge before it came here is then applied
// here, whatever frames were already on their way. Bounded: then(false) after two
// commit broadcast intervals, when the primary does not answer Ok (a view
// change), or when the node stops.
func (p *Plane) ReadBarrier(then func(caughtUp bool)) {
	b := &readBarrier{deadline: p.core.Now() + 2*p.cfg.Timing.CommitBroadcastIntervalTicks, then: then}
	p.reads.barriers = append(p.reads.barriers, b)
	p.sendForward(&forward{done: func(o vsr.ForwardOutcome, err error) {
		if err != nil || o.TimedOut || o.Outcome != uint8(wire.ForwardLogoutOk) {
			b.finish(false)
			return
		}
		b.answered, b.commit = true, o.Commit
		p.runBarriers()
	}}, false, true, wire.Uint128{}, 0, 0, 0)
}

func (b *readBarrier) finish(caughtUp bool) {
	if b.done {
		return
	}
	b.done = true
	b.then(caughtUp)
}

// runBarriers runs the read barriers whose condition or deadline came.
func (p *Plane) runBarriers() {
	if len(p.reads.barriers) == 0 {
		return
	}
	barriers := p.reads.barriers
	p.reads.barriers = nil
	for _, b := range barriers {
		switch {
		case b.done:
		case b.answered && p.applied.Op >= b.commit:
			b.finish(true)
		case p.core.Now() >= b.deadline:
			b.finish(false)
		default:
			p.reads.barriers = append(p.reads.barriers, b)
		}
	}
}

// BarrierDeadlines calls f with the deadline (core tick) of every read barrier
// waiting, for a host that sleeps until the next one.
func (p *Plane) BarrierDeadlines(f func(tick uint64)) {
	for _, b := range p.reads.barriers {
		f(b.deadline)
	}
}

// afterReady is what a clustered plane does after each Ready.
func (p *Plane) afterReady() {
	p.ensureRootUser()
	p.takeSessionEnds()
	p.retrySessionEnds()
	p.runBarriers()
}

// A cluster's root user. A single node creates its root at its first start, from
// its configuration. In a cluster every replica must hold the same root, salted
// hash and creation time included, or their states differ byte for byte until a
// state transfer: so the replicas start without users
// (metadata.NewStateWithoutRoot) and the root comes from one replicated op. The
// primary that finds the state without root, all of its log applied (a view may
// start with the root's op still to commit), has the configured password hashed
// once (Host.HashPassword) and proposes metadata.ProposeRootUser; every replica
// applies the same bytes. Apply creates the root only on a state without users,
// so a second proposal (another primary's, after a view change) and a restart,
// which recovers the root from the snapshot and journal, never make another.
// Until the op is applied on a node, logins there are answered 58, which the SDKs
// replay.
//
// The reference (apache/iggy core/server/src/boot/credentials.rs,
// ensure_default_root_user) seeds the root user on each node at boot, outside
// the log, from credentials that must be given explicitly on a cluster's first
// start: the same user on every node, each with a hash and creation time of its
// own. Here the first primary's configuration is the cluster's.

// ensureRootUser starts the root user's creation when this replica leads a state
// without it.
func (p *Plane) ensureRootUser() {
	if p.root.pending || p.root.refused || p.broken != nil || p.state.HasRoot() || !p.core.IsPrimary() ||
		p.applied.Op != p.core.Op() {
		return
	}
	w := &PasswordWork{Root: true, Operation: wire.OperationCreateUser, Username: p.cfg.RootUsername, Password: p.cfg.RootPassword,
		Salt: make([]byte, metadata.PasswordSaltBytes)}
	p.host.Entropy(w.Salt)
	p.passwords.nextID++
	id := p.passwords.nextID
	if !p.host.HashPassword(id, w) {
		return // the workers are full: tried again after the next Ready
	}
	p.passwords.byID[id] = &hashing{root: true}
	p.root.pending = true
}

// rootUserHashed proposes the root user whose password the host hashed.
func (p *Plane) rootUserHashed(proposal []byte, err error, nowMicros uint64) {
	if err != nil {
		p.root.pending, p.root.refused = false, true
		p.log.Error("root user: proposal not built; nobody can log in", "err", err)
		return
	}
	if p.state.HasRoot() || !p.core.IsPrimary() {
		p.root.pending = false
		return
	}
	prop := vsr.Proposal{Operation: wire.OperationCreateUser, UserID: metadata.RootUserID}
	p.counters.rootProposals.Add(1)
	p.commit(prop, proposal, nowMicros, func(c *Commit, err error) {
		p.root.pending = false
		if err != nil {
			p.log.Info("root user proposal not committed; the primary proposes it again", "err", err)
			return
		}
		_, code, _ := wire.SplitResult(c.Frame[wire.HeaderSize:])
		switch {
		case code == 0:
			p.log.Info("root user created", "root_user", p.cfg.RootUsername, "op", c.Header.Op)
		case !p.state.HasRoot():
			p.root.refused = true
			p.log.Error("root user refused; nobody can log in", "root_user", p.cfg.RootUsername, "code", code.String())
		}
	})
}
