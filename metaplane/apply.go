package metaplane

import (
	"fmt"

	"github.com/iggy-shard/iggy-shard/metadata"
	"github.com/iggy-shard/iggy-shard/vsr"
	"github.com/iggy-shard/iggy-shard/wire"
)

// applyCommitted applies committed ops in order: each is handed to the host
// (Committed) and then, when it was proposed here, its write is done, before the
// next op applies.
func (p *Plane) applyCommitted(headers []wire.PrepareHeader) {
	for i := range headers {
		h := &headers[i]
		if h.Op != p.applied.Op+1 {
			panic(fmt.Sprintf("metaplane: commit of op %d after op %d", h.Op, p.applied.Op))
		}
		b, ok := p.bodies.byOp[h.Op]
		if !ok || b.identity != h.Checksum {
			panic(fmt.Sprintf("metaplane: the body of committed op %d is gone", h.Op))
		}
		if !p.cfg.Clustered {
			// A cluster keeps the bodies its journal holds, to serve repair.
			delete(p.bodies.byOp, h.Op)
		}
		c := p.apply(h, b.bytes)
		p.applied = Applied{Op: h.Op, Identity: h.Checksum, Timestamp: h.Timestamp}
		p.revoked.follow(h, b.bytes, c.Skipped, p.out.Result)
		for _, client := range c.Ended {
			delete(p.writes.minted, client)
		}
		// Another primary's op may have taken the number of a write prepared
		// here in an older view: that write never commits (58: safe to send
		// again anywhere).
		mine, others := p.takeInflight(h.Op, h.Checksum)
		if mine != nil {
			mine.commit = c // kept in the write: a commit of its own would escape
			p.host.Committed(&mine.commit)
		} else {
			p.host.Committed(&c)
		}
		for _, w := range others {
			w.done(nil, ErrNotPrimary)
		}
		if mine != nil {
			mine.done(&mine.commit, nil)
		}
	}
	if p.cfg.Clustered {
		p.runAppliedWaiters()
		p.runBarriers()
	}
}

// takeInflight takes the writes prepared here as op: mine, the one whose prepare
// committed (identity), and the others, of older views, whose number another
// prepare took. After a view change a replica may hold writes of an older view
// beside its newer ones, and their ops need not be in order.
func (p *Plane) takeInflight(op uint64, identity wire.Uint128) (mine *write, others []*write) {
	kept := p.writes.inflight[:0]
	for _, w := range p.writes.inflight {
		switch {
		case w.op != op:
			kept = append(kept, w)
		case w.identity == identity:
			mine = w
		default:
			others = append(others, w)
		}
	}
	clear(p.writes.inflight[len(kept):])
	p.writes.inflight = kept
	return mine, others
}

// apply applies a committed prepare to the state and the client table (applyOp).
func (p *Plane) apply(h *wire.PrepareHeader, body []byte) Commit {
	switch p.cfg.Mutation {
	case MutationApplyEveryPrepare:
		return applyOp(p.state, p.table, &p.out, p.cfg.ServerVersion, h, body, false)
	case MutationApplySkew:
		skewed := *h
		skewed.Timestamp++
		c := applyOp(p.state, p.table, &p.out, p.cfg.ServerVersion, &skewed, body, true)
		c.Header = h
		return c
	}
	return applyOp(p.state, p.table, &p.out, p.cfg.ServerVersion, h, body, true)
}

// applyOp applies a committed prepare to state and table and returns the commit
// with its reply frame (header and body), which the table caches. It is the one
// path of a live commit, a replay and every replica, so all cache the same bytes.
//
// A client's request is executed once per session (dedup): a committed prepare of
// a request the client table has applied already (a retry prepared twice: once in
// a view that lost the race, once after), or of a client whose session has ended
// since it was admitted, is skipped, on every replica alike; its commit is then
// the reply cached for the request, when the table still has it.
func applyOp(state *metadata.State, table *vsr.ClientTable, out *metadata.Output, version string, h *wire.PrepareHeader, body []byte, dedup bool) Commit {
	c := Commit{Header: h, Body: body}
	out.Effects = out.Effects[:0]
	out.Result = 0
	if dedup && h.Request != 0 && !h.Client.IsZero() && h.Operation != wire.OperationRegister {
		epoch, _, registered := table.Session(h.Client)
		if !registered {
			c.Skipped = true
			if reply, ok := table.LoggedOutReply(h.Client, h.Request); ok && h.Operation == wire.OperationLogout {
				// A second proposal of the Logout that ended the session.
				c.Frame = append([]byte(nil), reply...)
			}
			return c
		}
		if verdict, cached := table.Preflight(h.Client, epoch, h.Request, h.RequestChecksum); verdict != vsr.PreflightExecute {
			c.Skipped = true
			if verdict == vsr.PreflightReplay {
				c.Frame = append([]byte(nil), cached...)
			}
			return c
		}
	}
	rh := vsr.CommittedReply(h)
	// The table keeps the frame: each commit gets its own (metadata writes are rare).
	frame := make([]byte, wire.HeaderSize, 512)
	out.Effects = out.Effects[:0]
	switch h.Operation {
	case wire.OperationRegister:
		// The session epoch is the register's op.
		frame = wire.AppendResultSuccess(frame)
		login := wire.LoginRegisterReply{UserID: h.UserID, Session: h.Op, ServerProtocolVersion: wire.ServerProtocolVersion, ServerVersion: []byte(version)}
		frame, _ = login.Append(frame)
		rh.Size = uint32(len(frame))
		rh.Put(frame)
		var evicted wire.Uint128
		c.Epoch, evicted = table.CommitRegisterEvicting(h.Client, h.UserID, h.Op, frame)
		if !evicted.IsZero() {
			c.Ended = append(c.Ended, evicted)
		}
	default:
		state.Apply(metadata.Header{Operation: h.Operation, Client: h.Client, UserID: h.UserID, TimestampMicros: h.Timestamp}, body, out)
		frame = append(frame, out.Reply...)
		rh.Size = uint32(len(frame))
		rh.Operation = out.Operation
		rh.Put(frame)
		switch {
		case h.Operation == wire.OperationLogout:
			if table.CommitLogout(h.Client, h.Request, h.RequestChecksum, frame) {
				c.Ended = append(c.Ended, h.Client)
			}
		case h.Operation == wire.OperationEndSessions:
			ends, _ := metadata.DecodeEndSessions(body)
			for _, e := range ends {
				// A client that registered again since keeps its new session.
				if epoch, _, ok := table.Session(e.Client); ok && epoch == e.Epoch {
					table.Remove(e.Client)
					c.Ended = append(c.Ended, e.Client)
				}
			}
		case h.Operation == wire.OperationRemoveConsumerGroupMember, h.Client.IsZero():
			// The server's own ops (a closed connection's group leave, a cluster's
			// root user) are no client's request.
		default:
			table.CommitRequest(h.Client, h.Request, h.RequestChecksum, h.Op, frame)
		}
	}
	c.Frame = frame
	return c
}

// Machine applies committed ops to a state and a client table exactly as the
// plane does, with no core: a bare consensus peer in tests that must hold and
// offer the same state as a plane.
type Machine struct {
	State   *metadata.State
	Table   *vsr.ClientTable
	Applied Applied
	version string
	out     metadata.Output
}

// NewMachine is a Machine over state and table; version goes into login replies.
func NewMachine(state *metadata.State, table *vsr.ClientTable, version string) *Machine {
	return &Machine{State: state, Table: table, version: version}
}

// Apply applies a committed op.
func (m *Machine) Apply(h *wire.PrepareHeader, body []byte) Commit {
	c := applyOp(m.State, m.Table, &m.out, m.version, h, body, true)
	m.Applied = Applied{Op: h.Op, Identity: h.Checksum, Timestamp: h.Timestamp}
	return c
}

// Artifacts is the applied state as a state transfer's artifacts.
func (m *Machine) Artifacts() []vsr.Artifact {
	return []vsr.Artifact{
		{Kind: wire.ArtifactMetadataSnapshot, Frontier: m.Applied.Op, Bytes: AppendSnapshot(nil, m.Applied, m.State, m.Table)},
		{Kind: wire.ArtifactClientTable, Frontier: m.Applied.Op, Bytes: m.Table.AppendICT2(nil)},
	}
}

// Effects are the partition effects of the last op applied (metadata.Effect),
// valid until the next: every replica applying an op asks for the same.
func (p *Plane) Effects() []metadata.Effect { return p.out.Effects }

// Result is the result code of the last op applied (0: it committed as a
// success).
func (p *Plane) Result() wire.ErrorCode { return p.out.Result }

// afterApplied runs then once op is applied here (at once if it is).
func (p *Plane) afterApplied(op uint64, then func(applied bool)) {
	if op <= p.applied.Op {
		then(true)
		return
	}
	p.reads.appliedWaiters = append(p.reads.appliedWaiters, appliedWaiter{op: op, then: then})
}

type appliedWaiter struct {
	op uint64
	// then gets false when the node stops first.
	then func(applied bool)
}

func (p *Plane) runAppliedWaiters() {
	if len(p.reads.appliedWaiters) == 0 {
		return
	}
	waiters := p.reads.appliedWaiters
	p.reads.appliedWaiters = nil
	for _, w := range waiters {
		if w.op <= p.applied.Op {
			w.then(true)
			continue
		}
		p.reads.appliedWaiters = append(p.reads.appliedWaiters, w)
	}
}

// Session returns the epoch and user of a client's session in the applied table.
func (p *Plane) Session(client wire.Uint128) (epoch uint64, userID uint32, ok bool) {
	return p.table.Session(client)
}

var _ vsr.Storage = (*bodies)(nil)
