package metahost

import (
	"crypto/rand"
	"encoding/binary"
	"net/netip"
	"strconv"

	"github.com/iggy-shard/iggy-shard/metaplane"
	"github.com/iggy-shard/iggy-shard/request"
	"github.com/iggy-shard/iggy-shard/shard"
	"github.com/iggy-shard/iggy-shard/vsr"
	"github.com/iggy-shard/iggy-shard/wire"
)

// A caller (server/caller.go) has no connection and no session of its own, but a
// metadata write goes through the client table, exactly once per (client,
// request). Shard 0 makes a caller's writes under a session of the caller's
// credential (request.Caller.Credential: a JWT's jti, a personal access token's
// hash), as the reference's HTTP server binds them (core/server/src/http/session.rs
// in apache/iggy):
//
//   - the session is registered on the credential's first write at this node (a
//     Register, committed as a binary login's is, without a password: the
//     transport authenticated the user), once however many of the credential's
//     writes arrive together: shard 0 is one goroutine, and a credential's writes
//     go one at a time, behind its registration, with the session's own request
//     numbers;
//   - at most CallerSessionsMax credentials hold a session (half the client
//     table): a new one past the cap is refused 9 (cannot establish connection),
//     after the sessions of expired credentials are ended to make room. The other
//     half stays the binary connections', whose sessions end when they close;
//   - a session the committed state ends (a full table evicts it, an
//     EndSessions names it, a state transfer holds it no more) is marked ended in
//     the step that applies the end (callersEnded), and its credential leaves
//     request.CallerSessions there, so no partition write of it goes to an owner
//     under a session that is gone. As the reference (core/server/src/http/
//     submit.rs in apache/iggy), the credential's next metadata write answers 40
//     (unauthenticated, not applied) and the session is forgotten: the write after
//     registers a new one. Its next partition write registers a new session at
//     once and goes on: the reference's partition writes are sessionless and
//     never see the eviction, so a produce there succeeds too. A write the
//     plane refuses for want of a session (the table's eviction skips entries
//     with a write in flight, so only as a backstop) answers 40 alike;
//   - a caller's partition write (request.Job.Binding) whose credential holds
//     no session comes here first, is registered (or refused) as a metadata
//     write is, and goes back to its shard without being proposed; the
//     credentials that hold a session are listed for every shard
//     (request.CallerSessions, kept as sessions are registered and forgotten),
//     so a credential's later partition writes skip shard 0;
//   - a LOGOUT of the credential ends its session through the log (an
//     EndSessions op, as a closed connection's) and forgets it;
//   - a node that is no longer the primary ends its sessions (releaseCallers):
//     its callers' writes now go to the primary, under the primary's sessions,
//     so the callers' share of the client table stays one node's cap across
//     view changes.

// callerSessionsMaxDefault is the reference's cap on HTTP sessions: half its
// `[metadata] clients_table_max` (4096 of 8192).
const callerSessionsMaxDefault = vsr.ClientsTableMaxDefault / 2

// callerSession is the session a credential's metadata writes go under.
type callerSession struct {
	key    string // the credential (callerKey)
	userID uint32
	client wire.Uint128
	// epoch is the session's (its Register's op); 0 until registered.
	epoch uint64
	// request is the number of the session's last write.
	request uint64
	// expiryMicros is the credential's expiry (0: none known): past it the
	// session is ended to make room for a new one.
	expiryMicros uint64
	// busy: a write (or the registration before it) is with the plane; queued
	// are the credential's next writes, in arrival order.
	busy   bool
	queued []*request.Job
	// ended: the committed state ended the session (callersEnded); it holds no
	// entry in the client table any more.
	ended bool
}

// callerKey is the credential a call's session is keyed by. A caller without one
// (an embedding, a test) writes under a session per user.
func callerKey(c *request.Call) string {
	if c.Caller.Credential != "" {
		return c.Caller.Credential
	}
	return "user:" + strconv.FormatUint(uint64(c.Caller.UserID), 10)
}

// newCallerClient mints a client id for a caller session: random, as an SDK's is.
func newCallerClient() wire.Uint128 {
	var b [16]byte
	rand.Read(b[:])
	return wire.Uint128{Lo: binary.LittleEndian.Uint64(b[:8]), Hi: binary.LittleEndian.Uint64(b[8:])}
}

// callerWrite makes a caller's metadata write (or LOGOUT) under its credential's
// session, in turn behind the credential's other writes.
func (r *Router) callerWrite(j *request.Job) {
	key := callerKey(j.Call)
	cs := r.callers[key]
	if cs == nil {
		if j.Frame.Header.Operation == wire.OperationLogout {
			r.callerLoggedOut(j) // no session to end
			return
		}
		if len(r.callers) >= r.callerSessionsMax {
			r.makeRoomForCaller()
		}
		if len(r.callers) >= r.callerSessionsMax {
			j.Out.Status = wire.ErrCannotEstablishConnection
			r.shard.Reply(j)
			return
		}
		cs = &callerSession{key: key, userID: j.UserID, client: newCallerClient(), expiryMicros: j.Call.Caller.ExpiryMicros}
		r.callers[key] = cs
	}
	if cs.busy {
		cs.queued = append(cs.queued, j)
		return
	}
	cs.busy = true
	r.callerWriteNow(cs, j)
}

// callerWriteNow registers the session if it has none, then proposes the write;
// a LOGOUT ends the session instead.
func (r *Router) callerWriteNow(cs *callerSession, j *request.Job) {
	now := r.shard.NowMicros()
	switch {
	case j.UserID != cs.userID:
		// A credential names one user; the transport never sends another's.
		j.Out.Status = wire.ErrInvalidClientId
		r.callerAnswer(cs, j)
		return
	case j.Frame.Header.Operation == wire.OperationLogout:
		r.endCaller(cs)
		r.callerLoggedOut(j)
		r.callerAnswer(cs, nil)
		return
	case cs.ended && j.Binding:
		// A partition write registers a new session and goes on (see above).
		r.forgetCaller(cs)
		cs.client, cs.epoch, cs.request, cs.ended = newCallerClient(), 0, 0, false
		r.callers[cs.key] = cs
	case cs.ended:
		j.Out.Status = wire.ErrUnauthenticated
		r.forgetCaller(cs)
		r.callerAnswer(cs, j)
		return
	}
	switch {
	case cs.epoch != 0 && j.Binding:
		// A partition write's session is registered: the write goes back to
		// its shard, and on to the partition's owner.
		r.callerAnswer(cs, j)
		return
	case cs.epoch == 0:
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
	if pj.registering {
		if a.Evict == 0 && a.Status == 0 && a.Rejection == 0 {
			cs.epoch = a.Epoch
			r.callerClients[cs.client] = cs
			r.callersBound.Add(cs.key)
			r.callerWriteNow(cs, j)
			return
		}
		j.Out.Status = registrationRefusal(a)
		r.callerAnswer(cs, j)
		return
	}
	switch {
	case a.Evict == wire.EvictionNoSession || a.Evict == wire.EvictionSessionTooLow:
		// The cluster ended the session: this write was not applied. It answers
		// unauthenticated, once; the next write registers anew.
		j.Out.Status = wire.ErrUnauthenticated
		r.forgetCaller(cs)
	case a.Evict != 0:
		j.Out.Evict = a.Evict
		r.forgetCaller(cs)
	default:
		putOutcome(j, a)
	}
	r.callerAnswer(cs, j)
}

// registrationRefusal is what a caller's write answers when its session's
// Register was refused (the reference's answers, http-api of
// core/server/src/http/session.rs): 58 when provably not admitted (not the
// primary, the pipeline full), 101 when the minted client id is another user's,
// and 9 (cannot establish connection) when the outcome is unknown.
func registrationRefusal(a *metaplane.Answer) wire.ErrorCode {
	switch {
	case a.Status == wire.ErrTransientNotAccepted, a.Rejection == wire.ErrTransientNotAccepted:
		return wire.ErrTransientNotAccepted
	case a.Evict == wire.EvictionSessionError:
		return wire.ErrInvalidClientId
	}
	return wire.ErrCannotEstablishConnection
}

// callerAnswer replies to a caller's write (none for j nil) and starts the
// credential's next one. A session that holds no registration and has nothing
// queued is dropped, so a refused registration keeps no place under the cap; the
// writes queued behind a session that was forgotten start over under a new one.
func (r *Router) callerAnswer(cs *callerSession, j *request.Job) {
	if j != nil {
		r.shard.Reply(j)
	}
	cs.busy = false
	if r.callers[cs.key] != cs {
		queued := cs.queued
		cs.queued = nil
		for _, next := range queued {
			r.callerWrite(next)
		}
		return
	}
	for !cs.busy && len(cs.queued) > 0 {
		next := cs.queued[0]
		cs.queued[0] = nil
		cs.queued = cs.queued[1:]
		cs.busy = true
		r.callerWriteNow(cs, next)
	}
	if !cs.busy && cs.epoch == 0 && r.callers[cs.key] == cs {
		delete(r.callers, cs.key)
	}
}

// forgetCaller drops a session from the callers' table (if it is still the
// credential's).
func (r *Router) forgetCaller(cs *callerSession) {
	if r.callers[cs.key] == cs {
		delete(r.callers, cs.key)
		r.callersBound.Remove(cs.key)
	}
	if r.callerClients[cs.client] == cs {
		delete(r.callerClients, cs.client)
	}
}

// endCaller forgets a session and ends it through the log (metaplane's
// EndSession, best effort: the table evicts an entry whose end was dropped). An
// ended one has nothing left to end.
func (r *Router) endCaller(cs *callerSession) {
	r.forgetCaller(cs)
	if cs.epoch != 0 && !cs.ended {
		r.plane.EndSession(cs.client, cs.epoch, r.shard.NowMicros())
	}
}

// callersEnded marks ended the sessions of callers among clients, whose entries
// the op being applied (or the state a transfer installed) removed from the
// client table, and takes their credentials out of request.CallerSessions: the
// credentials' next partition writes come to shard 0 again (callerWriteNow).
func (r *Router) callersEnded(clients []wire.Uint128) {
	if len(r.callerClients) == 0 {
		return
	}
	for _, client := range clients {
		cs := r.callerClients[client]
		if cs == nil {
			continue
		}
		delete(r.callerClients, client)
		cs.ended = true
		if r.callers[cs.key] == cs {
			r.callersBound.Remove(cs.key)
		}
	}
}

// callersNotIn marks ended the sessions of callers that table (a transferred
// state's) no longer holds.
func (r *Router) callersNotIn(table *vsr.ClientTable) {
	var ended []wire.Uint128
	for client := range r.callerClients {
		if _, _, ok := table.Session(client); !ok {
			ended = append(ended, client)
		}
	}
	r.callersEnded(ended)
}

// makeRoomForCaller forgets the ended sessions and ends the sessions of expired
// credentials that have no write under way: the cap then bites only on live
// credentials. (A credential whose ended session is forgotten so registers anew
// on its next write, without the 40.)
func (r *Router) makeRoomForCaller() {
	now := r.shard.NowMicros()
	for _, cs := range r.callers {
		if !cs.busy && (cs.ended || cs.expiryMicros != 0 && cs.expiryMicros <= now) {
			r.endCaller(cs)
		}
	}
}

// releaseCallers ends the sessions of a node that a view change made a backup
// (their ends forwarded to the primary), each once no write of it is under way.
// It runs after every step of the plane (Plane.Advanced): an empty table or a
// primary costs a check.
func (r *Router) releaseCallers() {
	if len(r.callers) == 0 || r.plane.IsPrimary() || r.plane.Core().Status() != vsr.StatusNormal {
		return
	}
	for _, cs := range r.callers {
		if !cs.busy {
			r.endCaller(cs)
		}
	}
}

// callerLoggedOut answers a caller's LOGOUT: an empty success.
func (r *Router) callerLoggedOut(j *request.Job) {
	j.Out.Reply = wire.AppendResultSuccess(j.Out.Reply[:0])
	r.shard.Reply(j)
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
