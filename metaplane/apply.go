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
		p.applied = Applied{Op: h.Op, View: h.View, Identity: h.Checksum, Timestamp: h.Timestamp}
		var w *write
		if len(p.inflight) > 0 && p.inflight[0].op == h.Op {
			w = p.inflight[0]
			p.inflight[0] = nil
			p.inflight = p.inflight[1:]
		}
		switch {
		case w != nil && w.identity != h.Checksum:
			// Another primary's op took the number: this write never committed.
			p.host.Committed(&c)
			w.done(nil, ErrNotPrimary)
		case w != nil:
			w.commit = c // kept in the write: a commit of its own would escape
			p.host.Committed(&w.commit)
			w.done(&w.commit, nil)
		default:
			p.host.Committed(&c)
		}
	}
	if p.cfg.Clustered {
		p.runAppliedWaiters()
		p.runBarriers()
	}
}

// apply applies a committed prepare to the state and the client table (applyOp).
func (p *Plane) apply(h *wire.PrepareHeader, body []byte) Commit {
	return applyOp(p.state, p.table, &p.out, p.cfg.ServerVersion, h, body)
}

// applyOp applies a committed prepare to state and table and returns the commit
// with its reply frame (header and body), which the table caches. It is the one
// path of a live commit, a replay and every replica, so all cache the same bytes.
func applyOp(state *metadata.State, table *vsr.ClientTable, out *metadata.Output, version string, h *wire.PrepareHeader, body []byte) Commit {
	c := Commit{Header: h, Body: body}
	rh := replyHeader(h)
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
			if table.Remove(h.Client) {
				c.Ended = append(c.Ended, h.Client)
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

// replyHeader is a committed op's reply header, built from its prepare alone:
// every replica caches the same bytes, whichever view it learned the prepare in.
func replyHeader(prepare *wire.PrepareHeader) wire.ReplyHeader {
	var h wire.ReplyHeader
	h.Cluster = prepare.Cluster
	h.Size = wire.HeaderSize
	h.View = prepare.View
	h.Command = wire.CommandReply
	h.Replica = prepare.Replica
	h.RequestChecksum = prepare.RequestChecksum
	h.Client = prepare.Client
	h.Op = prepare.Op
	h.Commit = prepare.Op
	h.Timestamp = prepare.Timestamp
	h.Request = prepare.Request
	h.Operation = prepare.Operation
	return h
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
	c := applyOp(m.State, m.Table, &m.out, m.version, h, body)
	m.Applied = Applied{Op: h.Op, View: h.View, Identity: h.Checksum, Timestamp: h.Timestamp}
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
	p.appliedWaiters = append(p.appliedWaiters, appliedWaiter{op: op, then: then})
}

type appliedWaiter struct {
	op uint64
	// then gets false when the node stops first.
	then func(applied bool)
}

func (p *Plane) runAppliedWaiters() {
	if len(p.appliedWaiters) == 0 {
		return
	}
	waiters := p.appliedWaiters
	p.appliedWaiters = nil
	for _, w := range waiters {
		if w.op <= p.applied.Op {
			w.then(true)
			continue
		}
		p.appliedWaiters = append(p.appliedWaiters, w)
	}
}

// Session returns the epoch and user of a client's session in the applied table.
func (p *Plane) Session(client wire.Uint128) (epoch uint64, userID uint32, ok bool) {
	return p.table.Session(client)
}

var _ vsr.Storage = (*bodies)(nil)
