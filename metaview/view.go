// Package metaview is the committed metadata as each shard sees it, and the
// commit log shard 0 publishes it by.
//
// Every shard answers reads and routes partition operations from a view of the
// committed metadata of its own: a copy of the metadata state that it brings up to
// date by applying, in op order, the operations shard 0 commits.
//
// Shard 0 publishes each commit as an Entry appended to a singly linked list
// (the commit log), before it sends the commit's reply anywhere. A shard catches up
// by following the list from the last entry it applied: when it serves a request,
// before a partition operation another shard routed to it, and when shard 0 tells it
// a commit happened (server/handler.go, msgViewAdvanced). An entry is immutable once published, and
// shard 0 is the list's only writer, so no lock is shared; a catch-up with nothing
// new costs one atomic load. So once a client holds the reply of a metadata write,
// any request that arrives afterwards, on any connection and shard, sees the write:
// the shard serving it catches up first.
//
// Why copies rather than one state published per commit: a commit costs each shard
// one Apply of one operation, whatever the size of the state; an immutable state
// would be copied whole at every commit. And why not the effects alone, as shard 0
// used to post them: reads need the whole state, and a shard that applies the
// operation derives the effects on its partitions itself (the effects callback of
// CatchUp: server/view.go, carried out a slice per loop turn: partitionhost/effects.go), and
// a partition is created on its owner before any send routed to it is served there.

package metaview

import (
	"fmt"
	"sync/atomic"

	"github.com/iggy-shard/iggy-shard/metadata"
	"github.com/iggy-shard/iggy-shard/wire"
)

// Entry is one committed change of the metadata, or of the sessions the client
// table holds. It is immutable once published (Append).
type Entry struct {
	// Op is the commit's op number; 0 for an entry that only ends sessions.
	// View is the view the partition groups the op creates start in
	// (partition.Store.CreateInView), the same on every node: the index of the
	// replica that prepared the op, its primary then, which leads that view of
	// any group of the cluster's size. Not the prepare's own view field: that is
	// outside the op's checksum (a retransmission re-stamps it, a view change's
	// headers carry 0), so nodes held one op under different views, started its
	// groups in different views, and a group could have two primaries.
	Op     uint64
	View   uint32
	Header metadata.Header
	Body   []byte
	// Ended are the client ids whose sessions left the client table with this
	// entry (a logout, a closed connection, an eviction from a full table).
	Ended []wire.Uint128
	// Replace, when set, is a state a clustered replica installed by state
	// transfer: it replaces the view whole (Op is 0).
	Replace *Replace

	next atomic.Pointer[Entry]
}

// Append publishes next after e, the log's last entry: from now on every view
// that applied e applies next when it catches up. Only shard 0 appends.
func (e *Entry) Append(next *Entry) { e.next.Store(next) }

// Replace is a transferred state as each view takes it: the metadata snapshot
// (each shard decodes its own copy) and the client table's sessions.
type Replace struct {
	Snapshot []byte
	Sessions map[wire.Uint128]uint64
}

// View is one shard's view of the committed metadata.
type View struct {
	// State is the metadata as of the last entry applied; it is this shard's
	// alone, never shared.
	State *metadata.State
	at    *Entry // the last entry applied
	// sessions mirrors the client table's session epochs, for the fence of
	// requests that never reach shard 0: from registrations since the start (a
	// connection only ever holds a session it registered since then).
	sessions map[wire.Uint128]uint64
	out      metadata.Output
	// Replaced runs after the view took a transferred state, with the state it
	// had before: the shard's partitions follow the new one.
	Replaced func(old *metadata.State)
}

// New is a view of the metadata snapshot, following the log from at, the entry
// the snapshot is as of.
func New(snapshot []byte, at *Entry) *View {
	state, _, err := metadata.DecodeSnapshot(snapshot)
	if err != nil {
		panic(fmt.Sprintf("metaview: a shard's copy of the metadata does not decode: %v", err))
	}
	return &View{State: state, at: at, sessions: make(map[wire.Uint128]uint64)}
}

// Behind reports whether shard 0 published entries this view has not applied.
func (v *View) Behind() bool { return v.at.next.Load() != nil }

// CatchUp applies every entry published since the last one applied; effects is
// called after each operation with what it asks of the partitions, and the entry.
// It reports whether an operation changed what live sessions stand on: a user
// updated or deleted, a personal access token deleted.
func (v *View) CatchUp(effects func(state *metadata.State, e []metadata.Effect, at *Entry)) (accountsChanged bool) {
	for e := v.at.next.Load(); e != nil; e = e.next.Load() {
		if e.Replace != nil {
			old := v.State
			v.replaceWith(e.Replace)
			if v.Replaced != nil {
				v.Replaced(old)
			}
			accountsChanged = true
			v.at = e
			continue
		}
		v.apply(e)
		if len(v.out.Effects) > 0 {
			effects(v.State, v.out.Effects, e)
		}
		switch e.Header.Operation {
		case wire.OperationUpdateUser, wire.OperationDeleteUser, wire.OperationDeletePersonalAccessToken:
			accountsChanged = e.Op != 0
		}
		v.at = e
	}
	return accountsChanged
}

func (v *View) replaceWith(r *Replace) {
	state, _, err := metadata.DecodeSnapshot(r.Snapshot)
	if err != nil {
		panic(fmt.Sprintf("metaview: a transferred state published to the views does not decode: %v", err))
	}
	v.State = state
	v.sessions = make(map[wire.Uint128]uint64, len(r.Sessions))
	for client, epoch := range r.Sessions {
		v.sessions[client] = epoch
	}
}

func (v *View) apply(e *Entry) {
	v.out.Effects = v.out.Effects[:0]
	if e.Op != 0 {
		switch e.Header.Operation {
		case wire.OperationRegister:
			v.sessions[e.Header.Client] = e.Op
		default:
			v.State.Apply(e.Header, e.Body, &v.out)
			if e.Header.Operation == wire.OperationLogout {
				delete(v.sessions, e.Header.Client)
			}
		}
	}
	for _, c := range e.Ended {
		delete(v.sessions, c)
	}
}

// Fence checks a logged-in connection's session against the client table as the
// view mirrors it: a client id that registered again (elsewhere) or left the table
// is a zombie on every plane.
func (v *View) Fence(client wire.Uint128, epoch uint64) wire.EvictionReason {
	current, ok := v.sessions[client]
	switch {
	case !ok:
		return wire.EvictionNoSession
	case current > epoch:
		return wire.EvictionSessionTooLow
	}
	return 0
}
