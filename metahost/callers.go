package metahost

import (
	"crypto/rand"
	"encoding/binary"
	"net/netip"

	"github.com/iggy-shard/iggy-shard/metaplane"
	"github.com/iggy-shard/iggy-shard/request"
	"github.com/iggy-shard/iggy-shard/shard"
	"github.com/iggy-shard/iggy-shard/wire"
)

// A caller (server/caller.go) has no connection and no session of its own, but a
// metadata write goes through the client table, exactly once per (client,
// request): shard 0 makes a user's callers' writes under a session of that user
// it registers on the first write at this node (a Register, committed as a
// binary login's is, without a password: the transport authenticated the user),
// one write at a time, with its own request numbers. The session stays while the
// client table keeps it; one the cluster ended (a full table evicted it, a
// restart of the table) is registered again, once per write.
//
// The reference's HTTP server binds a session per credential in the same way
// (core/server/src/http/session.rs in apache/iggy); this one binds it per user,
// which a Caller names.

// callerSession is the session a user's callers' metadata writes go under.
type callerSession struct {
	client wire.Uint128
	// epoch is the session's (its Register's op); 0 until registered.
	epoch uint64
	// request is the number of the session's last write.
	request uint64
	// busy: a write (or the registration before it) is with the plane; queued
	// are the user's next writes, in arrival order.
	busy   bool
	queued []*request.Job
}

// newCallerClient mints a client id for a caller session: random, as an SDK's is.
func newCallerClient() wire.Uint128 {
	var b [16]byte
	rand.Read(b[:])
	return wire.Uint128{Lo: binary.LittleEndian.Uint64(b[:8]), Hi: binary.LittleEndian.Uint64(b[8:])}
}

// callerWrite makes a caller's metadata write under its user's session, in turn
// behind the user's other callers' writes.
func (r *Router) callerWrite(j *request.Job) {
	cs := r.callers[j.UserID]
	if cs == nil {
		cs = &callerSession{client: newCallerClient()}
		r.callers[j.UserID] = cs
	}
	if cs.busy {
		cs.queued = append(cs.queued, j)
		return
	}
	cs.busy = true
	r.callerWriteNow(cs, j)
}

// callerWriteNow registers the session if it has none, then proposes the write.
func (r *Router) callerWriteNow(cs *callerSession, j *request.Job) {
	now := r.shard.NowMicros()
	if cs.epoch == 0 {
		if !r.plane.IsPrimary() {
			// A backup refuses the write itself (58), as it refuses a binary
			// client's: no session is registered for it.
			j.Out.Status = wire.ErrTransientNotAccepted
			r.callerAnswer(cs, j)
			return
		}
		hdr := wire.RequestHeader{Operation: wire.OperationRegister, Client: cs.client, Timestamp: j.Frame.Header.Timestamp}
		r.plane.Register(r.trackCaller(j, cs, true), &hdr, j.UserID, now)
		return
	}
	cs.request++
	hdr := j.Frame.Header // the call's own header
	hdr.Client, hdr.Session, hdr.Request = cs.client, cs.epoch, cs.request
	r.plane.Write(r.trackCaller(j, cs, false), metaplane.Request{Header: hdr, UserID: j.UserID, Body: j.Frame.Body, NowMicros: now})
}

// trackCaller hands a caller's job to the plane under a new token.
func (r *Router) trackCaller(j *request.Job, cs *callerSession, registering bool) uint64 {
	r.nextToken++
	r.pending[r.nextToken] = pendingJob{j: j, caller: cs, registering: registering}
	return r.nextToken
}

// callerAnswered carries out the plane's answer to a caller's registration or
// write.
func (r *Router) callerAnswered(pj pendingJob, a *metaplane.Answer) {
	cs, j := pj.caller, pj.j
	refused := a.Evict != 0 || a.Status != 0 || a.Rejection != 0
	switch {
	case pj.registering && !refused:
		cs.epoch = a.Epoch
		r.callerWriteNow(cs, j)
		return
	case !pj.registering && (a.Evict == wire.EvictionNoSession || a.Evict == wire.EvictionSessionTooLow) && !j.Call.Reregistered:
		// The cluster ended the session: a new one, under a new client id.
		j.Call.Reregistered = true
		cs.client, cs.epoch, cs.request = newCallerClient(), 0, 0
		r.callerWriteNow(cs, j)
		return
	}
	switch {
	case a.Evict != 0:
		j.Out.Evict = a.Evict
		cs.client, cs.epoch, cs.request = newCallerClient(), 0, 0
	case a.Status != 0:
		j.Out.Status = a.Status
	case a.Rejection != 0:
		j.Out.Reply = wire.AppendResultRejection(j.Out.Reply[:0], a.Rejection)
	default:
		j.Out.RawFrame = true
		j.Out.Reply = append(j.Out.Reply[:0], a.Frame...)
	}
	r.callerAnswer(cs, j)
}

// callerAnswer replies to a caller's write and starts the user's next one.
func (r *Router) callerAnswer(cs *callerSession, j *request.Job) {
	r.shard.Reply(j)
	cs.busy = false
	for !cs.busy && len(cs.queued) > 0 {
		next := cs.queued[0]
		cs.queued[0] = nil
		cs.queued = cs.queued[1:]
		cs.busy = true
		r.callerWriteNow(cs, next)
	}
}

// sourceOf is the address a job's password work is accounted to: the
// connection's peer, or the caller's.
func (r *Router) sourceOf(j *request.Job) netip.Addr {
	if j.Call != nil {
		return j.Call.Caller.Addr.Addr().Unmap()
	}
	return r.record(j.Conn).source
}

// open reports whether the work of conn is still wanted: its connection is open,
// or it is a call's (a call is answered whether its caller still waits or not).
func (r *Router) open(conn shard.ConnID) bool {
	_, open := r.conns[conn]
	return open || request.IsCallConn(conn)
}

// callLoginReply is a call's login answer: the identity, behind a success result
// section as every login reply is (the call's shard strips it: server/callserve.go).
func callLoginReply(dst []byte, userID uint32) []byte {
	dst = wire.AppendResultSuccess(dst[:0])
	return binary.LittleEndian.AppendUint32(dst, userID)
}
