package server

import (
	"github.com/iggy-shard/iggy-shard/request"
	"github.com/iggy-shard/iggy-shard/shard"
	"github.com/iggy-shard/iggy-shard/wire"
)

// serveCalls serves the calls waiting in this shard's inbox (caller.go), in order.
func (h *handler) serveCalls() {
	calls := h.srv.transport.calls.inboxes[h.index].take()
	for _, c := range calls {
		h.serveCall(c)
	}
}

// serveCall is serveRequest for a call: the same decisions, with the session
// checks of a connection replaced by the caller's (Do says what differs).
func (h *handler) serveCall(c *request.Call) {
	h.catchUpView()
	inbox := h.srv.transport.calls.inboxes[h.index]
	inbox.served++
	j := h.take()
	j.Call = c
	j.Conn = request.CallConnID(h.index, inbox.served)
	j.UserID = c.Caller.UserID
	j.StartNs = h.shard.NowNs()
	j.Frame = shard.Frame{Header: &c.Header, Body: c.Body}
	op := c.Header.Operation
	switch {
	case c.Code == wire.CodePing:
		h.deliver(j)
	case op == wire.OperationRegister:
		j.Kind = request.KindLogin
		if h.srv.cluster != nil && !h.view.State.HasRoot() {
			h.refuse(j, wire.ErrTransientNotAccepted) // as serveRequest refuses it
			return
		}
		h.toMeta(j)
	case op == wire.OperationReserved:
		// The legacy login codes 38 and 44: the binary protocol evicts them as a
		// malformed login.
		h.refuse(j, wire.ErrInvalidCommand)
	case !c.Caller.LoggedIn:
		h.refuse(j, wire.ErrUnauthenticated)
	case op == wire.OperationLogout:
		// It ends the session of the caller's credential, if it has one
		// (metahost/callers.go).
		j.Kind = request.KindWrite
		h.toMeta(j)
	case op == wire.OperationJoinConsumerGroup || op == wire.OperationLeaveConsumerGroup:
		h.refuse(j, wire.ErrFeatureUnavailable)
	case op.Replicated() && !isPartitionOperation(op):
		j.Kind = request.KindWrite
		h.toMeta(j)
	case op == wire.OperationSendMessages:
		j.Kind = request.KindSend
		h.routeWrite(j)
	case op == wire.OperationStoreConsumerOffset:
		j.Kind = request.KindStoreOffset
		h.routeWrite(j)
	case op == wire.OperationDeleteConsumerOffset:
		j.Kind = request.KindDeleteOffset
		h.routeWrite(j)
	default: // a read
		switch c.Code {
		case wire.CodeFlushUnsavedBuffer:
			h.refuse(j, wire.ErrFeatureUnavailable)
		case wire.CodePollMessages:
			j.Kind = request.KindPoll
			h.route(j)
		case wire.CodeGetConsumerOffset:
			j.Kind = request.KindGetOffset
			h.route(j)
		case wire.CodeGetStats, wire.CodeGetSnapshot, wire.CodeGetClients, wire.CodeGetClient:
			j.Kind = request.KindRead
			h.toMeta(j)
		default:
			j.Kind = request.KindRead
			ch := wire.ClientHeader{UserID: c.Caller.UserID, Transport: wire.ClientTransportHTTP} // a caller is reported as HTTP
			reply, err := h.readLocal(&c.Header, c.Body, c.Caller.UserID, ch, c.Caller.Addr)
			if err != nil {
				j.Out.Status = errorCode(err, wire.ErrInvalidCommand)
			} else {
				j.Out.Reply = append(j.Out.Reply[:0], reply...)
			}
			h.deliver(j)
		}
	}
}

// routeWrite routes a call's partition write. One whose credential holds no
// session yet goes through shard 0 first, which registers it as it does for a
// metadata write (or refuses: 58, 9, 101), once however many writes of the
// credential arrive together; the job then comes back here (bound) and goes on
// to the partition's owner. A credential with a session costs one read-locked
// lookup and no hop; a caller without a credential binds nothing, as before.
func (h *handler) routeWrite(j *job) {
	if cred := j.Call.Caller.Credential; cred != "" && !h.srv.transport.sessions.Has(cred) {
		j.Binding = true
		h.toMeta(j)
		return
	}
	h.route(j)
}

// resumeBound takes back a call's partition write from shard 0, its credential's
// session registered: it goes on to the owner. It reports false for a refused
// one, which is answered as any call is.
func (h *handler) resumeBound(j *job) bool {
	if !j.Binding {
		return false
	}
	j.Binding = false
	if j.Out.Evict != 0 || j.Out.Status != 0 {
		return false
	}
	h.catchUpView()
	h.route(j)
	return true
}

// finishCall answers a call with its job's outcome, on the call's shard: the
// reply's payload copied once into the slice the caller gets, for a poll a
// buffer lent from the server's free list (replybuffers.go).
func (h *handler) finishCall(j *job) {
	c := j.Call
	var reply []byte
	var err error
	switch {
	case j.Out.Evict != 0:
		err = evictionCode(j.Out.Evict)
	case j.Out.Status != 0:
		err = j.Out.Status
	case j.Kind == request.KindPoll && j.Poll.Read:
		reply = h.srv.transport.replies.take(j.Poll.Res.ReplySizeBytes())
		for _, p := range j.Poll.Res.AppendPollBuffers(j.Poll.Parts[:0]) {
			reply = append(reply, p...)
		}
	default:
		body := j.Out.Reply
		if j.Out.RawFrame {
			body = body[wire.HeaderSize:]
		}
		switch j.Kind {
		case request.KindWrite, request.KindLogin, request.KindStoreOffset, request.KindDeleteOffset: // result-framed
			var code wire.ErrorCode
			body, code, err = wire.SplitResult(body)
			if err == nil && code != 0 {
				err = code
			}
		}
		if err == nil {
			reply = append(make([]byte, 0, len(body)), body...)
		}
	}
	h.recycle(j)
	c.Finish(reply, err)
}

// evictionCode is the error a call gets where a connection would be evicted.
func evictionCode(reason wire.EvictionReason) wire.ErrorCode {
	switch reason {
	case wire.EvictionInvalidCredentials:
		return wire.ErrInvalidCredentials
	case wire.EvictionInvalidToken:
		return wire.ErrInvalidPersonalAccessToken
	case wire.EvictionUserInactive:
		return wire.ErrUserInactive
	case wire.EvictionNoSession, wire.EvictionSessionTooLow, wire.EvictionStaleClient:
		return wire.ErrUnauthenticated
	}
	return wire.ErrInvalidCommand
}
