package server

import (
	"context"
	"sync/atomic"

	"github.com/iggy-shard/iggy-shard/request"
	"github.com/iggy-shard/iggy-shard/wire"
)

// The seam for a transport other than the ring's binary connections (HTTP): Do
// runs one command of the binary catalog as a Caller, on the same path a binary
// request takes from its connection's shard (handler.serveCall, callserve.go).
//
// A call enters the shard world through its shard's callInbox, a mutex-guarded
// slice woken with the runtime's eventfd wake (Shard.Wake): the caller's goroutine
// never touches shard state, and a shard with nothing waiting pays one atomic load
// per turn to look. Calls are spread over the shards round-robin; a partition
// operation then hops to the partition's owner, a login or metadata write to shard
// 0, exactly as a binary request does. The reply comes back to the call's shard
// in its job and is copied once, into the slice Do returns.

// Caller is who runs a command that came over a transport other than the ring's
// binary connections (HTTP): already authenticated by that transport. UserID is
// the user it authenticated, when LoggedIn (the root user's id is 0, so "not
// logged in" is LoggedIn false, not a zero id); Addr the client's address, for
// password-check fairness, GET_ME and logs (request.Caller).
type Caller = request.Caller

// ErrStopped is Do's error once the server is stopping or stopped: a call that
// had not reached a shard was not run; one that had may have been.
var ErrStopped = request.ErrStopped

// MetadataRole is what a transport reads of the metadata group, from any
// goroutine: the view (the `iggy-view` header) and who takes metadata writes.
type MetadataRole struct {
	// View is the metadata group's current view; 0 on a single node.
	View uint32
	// Primary: this node is the metadata primary (a single node always is), so
	// a metadata write made here is admitted here.
	Primary bool
	// PrimaryID is the roster's replica id of the primary this node knows of,
	// when PrimaryKnown (false during a view change); 0 on a single node.
	PrimaryID    uint8
	PrimaryKnown bool
}

// MetadataRole reports the metadata group's view and primary as this node last
// saw them. Safe from any goroutine.
func (s *Server) MetadataRole() MetadataRole {
	if s.cluster == nil {
		return MetadataRole{Primary: true, PrimaryKnown: true}
	}
	r := MetadataRole{View: s.cluster.view.Load()}
	if l := s.cluster.leader.Load(); l > 0 {
		r.PrimaryID, r.PrimaryKnown = uint8(l-1), true
		r.Primary = r.PrimaryID == s.cluster.self
	}
	return r
}

// Do runs one command of the binary catalog as caller and returns its reply body
// in the wire layout, or the error the binary protocol answers (a wire.ErrorCode).
// Safe from any goroutine. ctx bounds the wait, not the command: a write that
// has been proposed is not cancelled.
//
// It answers as a binary session of the caller's user is answered: the same
// permissions, limits, validation and errors. Where a binary session's answer is
// not an error code, Do's is:
//
//   - a committed rejection (a result section with a code) is returned as that
//     code, and a success's result section is stripped: the reply is the payload;
//   - an eviction is the code that says why (a login's wrong credentials 42, a
//     wrong token 53, an inactive user 47; a malformed request 3);
//   - LOGIN_REGISTER (40) and LOGIN_REGISTER_WITH_PAT (45) check the credentials
//     (the same argon2id workers, the same budget of failures per source address)
//     and answer the identity, [user_id u32], without registering a session: the
//     transport's token is the caller's session. The legacy codes 38 and 44 are 3;
//   - commands bound to a connection's session: LOGOUT ends the session of the
//     caller's credential, if it has one, and answers empty; GET_ME describes the
//     caller (client id 0, transport HTTP, its address), JOIN and
//     LEAVE_CONSUMER_GROUP are 5 (a caller is no group member, so a group's poll
//     answers as to a non-member);
//   - a metadata write is made under a session of the caller's credential
//     (Caller.Credential; of its user when it has none) that this node
//     registers on first use and keeps (metahost/callers.go): exactly once like
//     a binary client's, one at a time per credential. At a backup it answers
//     58, as the binary protocol does. A new credential past the cap of
//     sessions (half the client table), or whose registration's outcome is
//     unknown, is 9; one whose minted client id is another user's is 101; a
//     write whose session the cluster ended is 40, not applied, and the
//     session is forgotten: the next write registers a new one;
//   - a partition write (SEND_MESSAGES, STORE and DELETE_CONSUMER_OFFSET) of
//     a credential that holds no session registers it the same way (the same
//     cap and refusals, nothing written when refused) before it goes to the
//     partition's owner, as the reference binds every write route's; one whose
//     credential holds a session goes to the owner directly (callserve.go).
//
// A poll's reply is in a buffer lent from the server's free list: a caller done
// with it may give it back (GiveBack).
//
// A body over the frame size limit (system.frame_size_max less the header) is 3
// without reaching a shard, as a TCP frame over it never reaches one. A shard
// with callInboxWaitingMax calls waiting for it takes no more: 58, to be retried.
func (s *Server) Do(ctx context.Context, caller Caller, code wire.CommandCode, body []byte) ([]byte, error) {
	info, ok := wire.LookupCommand(code)
	if !ok {
		return nil, wire.ErrInvalidCommand
	}
	if int64(len(body)) > int64(s.cfg.FrameSizeMaxBytes)-wire.HeaderSize {
		return nil, wire.ErrInvalidCommand
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c := request.NewCall(caller, code, body)
	c.Header.Operation = info.Operation
	if info.Operation == wire.OperationNonReplicated {
		c.Header.NonReplicatedCode = code
	}
	c.Header.Size = uint32(wire.HeaderSize + len(body))
	c.Header.Timestamp = s.nowMicros()
	target := int(s.transport.calls.next.Add(1) % uint32(s.shardCount))
	switch s.transport.calls.inboxes[target].push(c) {
	case pushStopped:
		return nil, ErrStopped
	case pushFull:
		return nil, wire.ErrTransientNotAccepted
	}
	return c.Wait(ctx, s.rt.Done())
}

// callInboxes are the shards' inboxes of calls, and the round-robin cursor Do
// spreads them with.
type callInboxes struct {
	inboxes []*callInbox
	next    atomic.Uint32
}

func (c *callInboxes) init(shards int) {
	c.inboxes = make([]*callInbox, shards)
	for i := range c.inboxes {
		c.inboxes[i] = &callInbox{}
	}
}

// callInbox is a shard's calls waiting to be served: pushed by any goroutine,
// taken by the shard in its turn (handler.Tick).
type callInbox struct {
	wakeInbox[*request.Call]
	// served counts the calls the shard took, for their ids (callConnID);
	// touched by the shard only.
	served uint64
}

// callInboxWaitingMax bounds the calls waiting for one shard to take them: a
// shard that falls that far behind refuses more (58) rather than let its inbox
// grow without bound.
const callInboxWaitingMax = 4096

// push queues a call and wakes the shard, unless the shard has stopped or has
// callInboxWaitingMax calls waiting.
func (b *callInbox) push(c *request.Call) pushOutcome {
	return b.pushWithin(c, callInboxWaitingMax)
}

// close refuses further calls and answers those still waiting: the shard stops.
func (b *callInbox) close() {
	for _, c := range b.wakeInbox.close() {
		c.Finish(nil, ErrStopped)
	}
}
