package server

import (
	"encoding/binary"

	"github.com/iggy-shard/iggy-shard/shard"
	"github.com/iggy-shard/iggy-shard/wire"
)

// clientTransportHTTP is the transport GET_ME reports for a caller: the
// reference's Http (3), between its Quic (2) and WebSocket (4).
const clientTransportHTTP uint8 = 3

// serveCalls serves the calls waiting in this shard's inbox (caller.go), in order.
func (h *handler) serveCalls() {
	calls := h.srv.calls.inboxes[h.index].take()
	for _, c := range calls {
		h.serveCall(c)
	}
}

// serveCall is serveRequest for a call: the same decisions, with the session
// checks of a connection replaced by the caller's (Do says what differs).
func (h *handler) serveCall(c *call) {
	h.catchUpView()
	inbox := h.srv.calls.inboxes[h.index]
	inbox.served++
	j := h.take()
	j.call = c
	j.conn = callConnID(h.index, inbox.served)
	j.userID = c.caller.UserID
	j.startNs = h.shard.NowNs()
	j.frame = shard.Frame{Header: &c.header, Body: c.body}
	op := c.header.Operation
	switch {
	case c.code == wire.CodePing:
		h.deliver(j)
	case op == wire.OperationRegister:
		j.kind = jobLogin
		if h.srv.cluster != nil && !h.view.State.HasRoot() {
			h.refuse(j, wire.ErrTransientNotAccepted) // as serveRequest refuses it
			return
		}
		h.toMeta(j)
	case op == wire.OperationReserved:
		// The legacy login codes 38 and 44: the binary protocol evicts them as a
		// malformed login.
		h.refuse(j, wire.ErrInvalidCommand)
	case !c.caller.LoggedIn:
		h.refuse(j, wire.ErrUnauthenticated)
	case op == wire.OperationLogout:
		h.deliver(j) // empty: a caller has no session to end
	case op == wire.OperationJoinConsumerGroup || op == wire.OperationLeaveConsumerGroup:
		h.refuse(j, wire.ErrFeatureUnavailable)
	case op.Replicated() && !isPartitionOperation(op):
		j.kind = jobWrite
		h.toMeta(j)
	case op == wire.OperationSendMessages:
		j.kind = jobSend
		h.route(j)
	case op == wire.OperationStoreConsumerOffset:
		j.kind = jobStoreOffset
		h.route(j)
	case op == wire.OperationDeleteConsumerOffset:
		j.kind = jobDeleteOffset
		h.route(j)
	default: // a read
		switch c.code {
		case wire.CodeFlushUnsavedBuffer:
			h.refuse(j, wire.ErrFeatureUnavailable)
		case wire.CodePollMessages:
			j.kind = jobPoll
			h.route(j)
		case wire.CodeGetConsumerOffset:
			j.kind = jobGetOffset
			h.route(j)
		case wire.CodeGetStats, wire.CodeGetSnapshot, wire.CodeGetClients, wire.CodeGetClient:
			j.kind = jobRead
			h.toMeta(j)
		default:
			j.kind = jobRead
			ch := wire.ClientHeader{UserID: c.caller.UserID, Transport: clientTransportHTTP}
			reply, err := h.readLocal(&c.header, c.body, c.caller.UserID, ch, c.caller.Addr)
			if err != nil {
				j.out.status = errorCode(err, wire.ErrInvalidCommand)
			} else {
				j.out.reply = append(j.out.reply[:0], reply...)
			}
			h.deliver(j)
		}
	}
}

// finishCall answers a call with its job's outcome, on the call's shard: the
// reply's payload copied once into the slice the caller gets.
func (h *handler) finishCall(j *job) {
	c := j.call
	var reply []byte
	var err error
	switch {
	case j.out.evict != 0:
		err = evictionCode(j.out.evict)
	case j.out.status != 0:
		err = j.out.status
	case j.kind == jobPoll && j.poll.read:
		reply = make([]byte, 0, j.poll.res.ReplySizeBytes())
		for _, p := range j.poll.res.AppendPollBuffers(j.poll.parts[:0]) {
			reply = append(reply, p...)
		}
	default:
		body := j.out.reply
		if j.out.rawFrame {
			body = body[wire.HeaderSize:]
		}
		switch j.kind {
		case jobWrite, jobLogin, jobStoreOffset, jobDeleteOffset: // result-framed
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
	c.finish(reply, err)
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

// callLoginReply is a call's login answer: the identity, behind a success result
// section as every login reply is (finishCall strips it).
func callLoginReply(dst []byte, userID uint32) []byte {
	dst = wire.AppendResultSuccess(dst[:0])
	return binary.LittleEndian.AppendUint32(dst, userID)
}
