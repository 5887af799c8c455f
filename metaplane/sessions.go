package metaplane

import (
	"github.com/iggy-shard/iggy-shard/metadata"
	"github.com/iggy-shard/iggy-shard/vsr"
	"github.com/iggy-shard/iggy-shard/wire"
)

// One client table on every replica. The client table is replicated state: it
// changes only through committed ops, on every replica alike. A session ends by a
// committed Logout, by a deterministic eviction when a Register finds the table
// full (the entry whose latest reply is oldest: vsr.ClientTable), or by an
// EndSessions op that the node holding the connection proposes when it closes:
// the primary proposes the ends of its own connections and the ends its backups
// forward to it (vsr's ForwardSessionEnd, a ForwardLogout of request 0), those
// that came while the last EndSessions op was in flight together in the next one.
// Applied, the op removes each session's entry, if the client has not registered
// again since (its epoch is still the one that closed), and takes the client out
// of its consumer groups. This keeps Iggy's meaning, a closed connection's session
// ends, without a local edit of the table: the reference drops a disconnected
// client's entry locally only (architecture notes 1.11), and the replicas' tables
// then differ, and so do their checkpoints and their eviction choices. A node that
// dies never closes its clients' sessions: eviction is the backstop.

const (
	// sessionEndRetriesMax bounds the tries of one forwarded session end; one
	// given up leaves its entry to eviction.
	sessionEndRetriesMax = 10
	// sessionEndsWaitingMax bounds the ends waiting to be proposed or retried;
	// beyond it one is dropped, its entry left to eviction.
	sessionEndsWaitingMax = 4096
)

// sessionEnds are the session ends waiting for an EndSessions op (waiting), one
// op of them in flight (out), and those waiting for a normal view (retries).
type sessionEnds struct {
	waiting []sessionEnd
	out     bool
	retries []sessionEnd
}

// sessionEnd is a session to end: local, its connection closed here; else one a
// backup forwarded, whose answer the core sends.
type sessionEnd struct {
	metadata.SessionEnd
	local    bool
	attempts int
}

// EndSession ends the session (client, epoch) whose connection closed here.
func (p *Plane) EndSession(client wire.Uint128, epoch uint64, nowMicros uint64) {
	p.noteNow(nowMicros)
	if client.IsZero() || epoch == 0 {
		return
	}
	if p.cfg.Mutation == MutationDropSessionOnClose {
		p.table.Remove(client)
		return
	}
	p.endSession(sessionEnd{SessionEnd: metadata.SessionEnd{Client: client, Epoch: epoch}, local: true})
}

// endSession has the primary propose a local end, or a backup forward it.
func (p *Plane) endSession(e sessionEnd) {
	switch {
	case p.broken != nil:
	case p.IsPrimary():
		if len(p.ends.waiting) >= sessionEndsWaitingMax {
			p.log.Warn("session end dropped: too many waiting; its entry is left to eviction", "waiting", len(p.ends.waiting))
			return
		}
		p.ends.waiting = append(p.ends.waiting, e)
		p.proposeEnds()
	case p.core.Status() != vsr.StatusNormal:
		p.retrySessionEnd(e)
	default:
		p.sendForward(&forward{done: func(o vsr.ForwardOutcome, err error) {
			if err != nil || o.TimedOut || o.Outcome != uint8(wire.ForwardLogoutOk) {
				p.retrySessionEnd(e)
			}
		}}, false, false, e.Client, 0, e.Epoch, 0)
	}
}

// takeSessionEnds has the primary take the ends its backups forwarded.
func (p *Plane) takeSessionEnds() {
	if !p.cfg.Clustered || !p.core.IsPrimary() {
		return
	}
	for _, e := range p.core.TakeSessionEnds() {
		p.ends.waiting = append(p.ends.waiting, sessionEnd{SessionEnd: metadata.SessionEnd{Client: e.Client, Epoch: e.Epoch}})
	}
	p.proposeEnds()
}

// proposeEnds proposes the waiting ends in one EndSessions op, unless one is in
// flight: those that come meanwhile go in the next.
func (p *Plane) proposeEnds() {
	if p.ends.out || len(p.ends.waiting) == 0 || !p.IsPrimary() {
		return
	}
	n := min(len(p.ends.waiting), metadata.EndSessionsMax)
	batch := append([]sessionEnd(nil), p.ends.waiting[:n]...)
	p.ends.waiting = append(p.ends.waiting[:0], p.ends.waiting[n:]...)
	ends := make([]metadata.SessionEnd, len(batch))
	var forwarded []wire.Uint128
	for i, e := range batch {
		ends[i] = e.SessionEnd
		if !e.local {
			forwarded = append(forwarded, e.Client)
		}
	}
	p.ends.out = true
	p.counters.endOps.Add(1)
	p.counters.endsProposed.Add(int64(len(ends)))
	prop := vsr.Proposal{Operation: wire.OperationEndSessions, UserID: metadata.RootUserID}
	p.commitProposed(prop, metadata.AppendEndSessions(nil, ends), p.lastNow, func(op uint64) {
		if len(forwarded) > 0 {
			p.core.SessionEndsProposed(op, forwarded)
		}
	}, func(_ *Commit, err error) {
		p.ends.out = false
		if err != nil {
			// Not committed here (a view change): this node's own ends go to the
			// new primary; the backups whose ends these were are told Canceled
			// and send them again.
			for _, e := range batch {
				if e.local {
					p.retrySessionEnd(e)
				}
			}
		}
		p.proposeEnds()
	})
}

// retrySessionEnd keeps an end to try again after a later Ready.
func (p *Plane) retrySessionEnd(e sessionEnd) {
	e.attempts++
	if e.attempts >= sessionEndRetriesMax || len(p.ends.retries) >= sessionEndsWaitingMax {
		p.log.Warn("session end given up; its entry is left to eviction", "attempts", e.attempts, "waiting", len(p.ends.retries))
		return
	}
	p.ends.retries = append(p.ends.retries, e)
}

// retrySessionEnds tries the waiting ends again once the view is normal.
func (p *Plane) retrySessionEnds() {
	if len(p.ends.retries) == 0 || p.core.Status() != vsr.StatusNormal || p.driver.Err() != nil {
		return
	}
	retries := p.ends.retries
	p.ends.retries = nil
	for _, e := range retries {
		p.endSession(e)
	}
}

// noteNow keeps the latest time a request brought, the clock of the plane's own
// proposals.
func (p *Plane) noteNow(nowMicros uint64) { p.lastNow = max(p.lastNow, nowMicros) }

// EndSessionOps counts the EndSessions ops this replica proposed, and
// SessionEndsProposed the sessions they named (safe from any goroutine).
func (p *Plane) EndSessionOps() int64 { return p.counters.endOps.Load() }

// SessionEndsProposed is the number of session ends the EndSessions ops this
// replica proposed named.
func (p *Plane) SessionEndsProposed() int64 { return p.counters.endsProposed.Load() }
