package server

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"io"
	"net/netip"
	"os"
	"sync/atomic"
	"time"

	"github.com/iggy-shard/iggy-shard/metadata"
	"github.com/iggy-shard/iggy-shard/partition"
	"github.com/iggy-shard/iggy-shard/shard"
	"github.com/iggy-shard/iggy-shard/vsr"
	"github.com/iggy-shard/iggy-shard/wire"
)

// metaRouter is shard 0's part of the request path: logins, metadata writes and
// reads, and the resolution and permission checks of partition operations before
// they go to the owner shard.
type metaRouter struct {
	h     *handler
	plane *metaPlane
	stats metadata.StatsSource

	// balanced holds each topic's round-robin cursor for Balanced sends.
	balanced map[[2]uint32]*partition.RoundRobin
	// conns are the node's open connections, logged in or not, from the moment
	// their shard adopted them (handler.ConnOpened) until they close, for
	// GetClients, GetClient, GetMe and the stats' client count; sessions are the
	// logged-in ones by (protocol) client id, the same records.
	conns        map[shard.ConnID]*sessionRecord
	sessions     map[wire.Uint128]*sessionRecord
	nextClientID uint32

	// passwords verifies logins' passwords, and hashes new ones, off the shard.
	// checking holds, by connection, the logins' checks handed to it and not yet
	// finished (their jobs wait on them), changing the CreateUser and
	// ChangePassword requests whose argon2id work it does: at most one of each per
	// connection.
	passwords *passwordWorkers
	failures  failureBudgets
	checking  map[shard.ConnID]*passwordCheck
	changing  map[shard.ConnID]*newPassword
	finished  []passwordJob // scratch for finishPasswordChecks
	// abandonedChecks counts the logins and new passwords answered unfinished
	// because shard 0 stopped.
	abandonedChecks int
	// passwordsRefused counts the requests refused for want of room at the workers
	// since the last log line about it, at passwordsRefusedLoggedNs.
	passwordsRefused         int
	passwordsRefusedLoggedNs int64

	// journal appends metadata prepares off the shard. One metadata write runs at a
	// time: while one is journaling, the next ones (writes, logins' commits, the
	// group leave of a closed connection) wait in serial, in arrival order, and run
	// from the state the previous one left. No write waits for an argon2id run: a
	// new password is hashed before its write takes its turn (hashNewPassword).
	// syncJournal: shard 0 is stopping and appends block instead.
	journal     *journalWriter
	journaling  bool
	serial      []func()
	syncJournal bool
	// writesWaiting is len(serial), for observers outside shard 0 (tests).
	writesWaiting atomic.Int64

	// mintedTokens holds, by client, the token of its last committed
	// CreatePersonalAccessToken, for a replay (see replay); memory only.
	mintedTokens map[wire.Uint128]mintedToken

	scratch []byte
}

type sessionRecord struct {
	id     uint32 // the per-connection client id GetClient looks up
	userID uint32 // wire.ClientUserIDNone while not logged in
	// epoch is the logged-in session's epoch (its register's op, never 0), 0
	// while not logged in.
	epoch   uint64
	client  wire.Uint128
	conn    shard.ConnID
	address []byte // the peer's ip:port, as GET_ME and GET_CLIENT(S) report it
	// source is the peer's IP address, by which the password workers share their
	// time (sourceQueues); the zero Addr when the peer is unknown.
	source netip.Addr
	// seen is the session's last request on the runtime's clock, written by the
	// connection's shard.
	seen *atomic.Int64
}

func newMetaRouter(h *handler, plane *metaPlane) *metaRouter {
	return &metaRouter{
		h:        h,
		plane:    plane,
		stats:    h.srv.stats.of,
		balanced: make(map[[2]uint32]*partition.RoundRobin),
		conns:    make(map[shard.ConnID]*sessionRecord),
		sessions: make(map[wire.Uint128]*sessionRecord),
		// Wake needs no shard state: safe from the password workers' goroutines.
		passwords: newPasswordWorkers(h.shard.Wake),
		failures:  newFailureBudgets(),
		checking:  make(map[shard.ConnID]*passwordCheck),
		changing:  make(map[shard.ConnID]*newPassword),
		journal:   newJournalWriter(h.shard.Wake),

		mintedTokens: make(map[wire.Uint128]mintedToken),
	}
}

// serialize runs a metadata write now, or after the writes before it when one is
// journaling (see metaRouter.journal).
func (r *metaRouter) serialize(write func()) {
	if r.journaling {
		r.serial = append(r.serial, write)
		r.writesWaiting.Store(int64(len(r.serial)))
		return
	}
	write()
}

// commit prepares a proposal and journals it; then runs, on shard 0, with the
// committed reply frame or the error that stopped it. Until then no other metadata
// write starts.
func (r *metaRouter) commit(p vsr.Proposal, body []byte, then func(frame []byte, err error)) {
	prepared, err := r.plane.prepare(p, body, nowMicros())
	if err != nil {
		then(nil, err)
		return
	}
	journal := r.plane.journal
	r.startJournalTask(&journalTask{
		work: func(beforeSync func()) error { return appendToJournal(journal, prepared.entry, beforeSync) },
		then: func(journalErr error) {
			frame, err := r.plane.journaled(prepared, journalErr)
			then(frame, err)
			if err == nil && r.plane.checkpointDue() {
				r.checkpoint()
			}
		},
	})
}

// checkpoint has a snapshot of the state written and the journal emptied, off the
// shard; the writes behind it wait, as behind an append.
func (r *metaRouter) checkpoint() {
	snapshot, op := r.plane.checkpointBytes()
	dir := r.plane.dir
	var journal *os.File
	r.startJournalTask(&journalTask{
		work: func(func()) error {
			var err error
			journal, err = checkpointFiles(dir, snapshot)
			return err
		},
		then: func(err error) { r.plane.checkpointed(op, journal, err) },
	})
}

// startJournalTask hands t to the journal writer, or runs it inline on a stopping
// shard 0.
func (r *metaRouter) startJournalTask(t *journalTask) {
	if r.syncJournal {
		t.then(t.work(nil))
		return
	}
	r.journaling = true
	r.journal.submit(t)
}

// finishJournal completes the metadata write whose append finished, then starts the
// writes that waited for it. It runs on shard 0's every turn (handler.Tick).
func (r *metaRouter) finishJournal() {
	if t := r.journal.collect(); t != nil {
		r.journaled(t)
	}
}

func (r *metaRouter) journaled(t *journalTask) {
	r.journaling = false
	t.then(t.err)
	r.runWaitingWrites()
}

// runWaitingWrites starts the writes that waited, in order, until one of them is in
// flight again.
func (r *metaRouter) runWaitingWrites() {
	for !r.journaling && len(r.serial) > 0 {
		next := r.serial[0]
		r.serial[0] = nil
		r.serial = r.serial[1:]
		r.writesWaiting.Store(int64(len(r.serial)))
		next()
	}
}

// stopJournal finishes every metadata write on shard 0's last turn: the one in
// flight, then those waiting, journaled inline. None is left unanswered or half
// done. One journaling must be waited for: its op is numbered. A new password still
// with the workers is not numbered: abandonPasswordChecks refuses it.
func (r *metaRouter) stopJournal() {
	r.syncJournal = true
	if r.journaling {
		if t := r.journal.await(); t != nil {
			r.journaled(t)
		}
	}
	for len(r.serial) > 0 {
		next := r.serial[0]
		r.serial = r.serial[1:]
		r.writesWaiting.Store(int64(len(r.serial)))
		next()
	}
}

// clientOpened lists an accepted connection under a fresh client id, anonymous
// until it logs in. Ids are never reused while the server runs (2^32 accepts
// would wrap them), so a GetClient of a closed connection's id finds nothing
// rather than a newer connection.
func (r *metaRouter) clientOpened(o *clientOpened) {
	rec := r.record(o.conn)
	if o.peer.IsValid() {
		rec.address = []byte(o.peer.String())
		rec.source = o.peer.Addr().Unmap()
	}
}

// record returns the connection's record, creating it if the connection is not
// listed yet (its registration always arrives first; this keeps a lookup total).
func (r *metaRouter) record(conn shard.ConnID) *sessionRecord {
	if rec, ok := r.conns[conn]; ok {
		return rec
	}
	r.nextClientID++
	rec := &sessionRecord{id: r.nextClientID, userID: wire.ClientUserIDNone, conn: conn}
	r.conns[conn] = rec
	return rec
}

func (r *metaRouter) serve(j *job) {
	hdr := j.frame.Header
	if j.kind == jobOpen {
		r.h.reply(j) // answered on the connection's shard already
		return
	}
	if j.kind != jobLogin && j.kind != jobWrite {
		// A connection whose client id registered again elsewhere is a zombie: fence
		// it on every plane, not only where the client table looks.
		epoch, _, ok := r.plane.table.Session(hdr.Client)
		switch {
		case !ok:
			j.evict = wire.EvictionNoSession
		case epoch > hdr.Session:
			j.evict = wire.EvictionSessionTooLow
		}
		if j.evict != 0 {
			r.h.reply(j)
			return
		}
	}
	switch j.kind {
	case jobLogin:
		r.login(j)
	case jobWrite:
		r.serialize(func() { r.write(j) })
	case jobRead:
		r.read(j)
	case jobSend:
		r.routeSend(j)
	case jobPoll:
		r.routePoll(j)
	case jobGetOffset, jobStoreOffset, jobDeleteOffset:
		r.routeOffset(j)
	}
}

// login decides a Register (codes 40 and 45) and commits it: the session epoch is
// the register's op. A password is verified off the shard first (passwordWorkers):
// the job waits, and finishPasswordChecks comes back here with the verdict. Token
// logins and refusals that need no password (a malformed body, a protocol version
// outside the window) are decided at once.
//
// A Register on a connection that is logged in already is checked the same way
// (protocol version, then credentials: a failure evicts) but commits nothing:
// like the reference server (core/server dispatch, complete_login_register), it
// answers with the connection's session as it stands, whatever client id or user
// the Register names. The connection stays bound to its client id, user and
// epoch; the reply's user id is the one the credentials named, as the
// reference's is.
func (r *metaRouter) login(j *job) {
	rb, err := wire.DecodeRegisterBody(j.frame.Body)
	if err == nil && rb.HasPassword && rb.Password.CredentialsInRange() &&
		wire.AcceptedProtocolWindow.Accepts(rb.Version.ProtocolVersion) {
		r.checkPassword(j, rb.Password.Username, rb.Password.Password)
		return
	}
	r.serialize(func() { r.decideLogin(j, metadata.Credentials{State: r.plane.state, NowMicros: nowMicros()}) })
}

// checkPassword hands a login's password to the workers; the job waits for it. A
// connection gets one login verified at a time (an SDK sends one and waits): a second
// one meanwhile is refused as not accepted, to be retried, so that a flood of logins
// holds at most a request buffer per connection; so is one whose source, or the
// workers, have as much waiting as they take (passwordWorkers).
func (r *metaRouter) checkPassword(j *job, username, password []byte) {
	if _, busy := r.checking[j.conn]; busy {
		j.status = wire.ErrTransientNotAccepted
		r.h.reply(j)
		return
	}
	source := r.record(j.conn).source
	if !r.failures.allow(source, r.h.shard.NowNs()) {
		r.refuseBusy(j, "login", "the source failed too many password checks")
		return
	}
	c := &passwordCheck{job: j, source: source, hash: r.plane.state.PasswordHashToCheck(username),
		password: append([]byte(nil), password...)}
	if !r.passwords.submit(c) {
		r.refuseBusy(j, "login", "too much password work waiting from the source or in all")
		return
	}
	r.checking[j.conn] = c
}

// refuseBusy answers a request whose argon2id work is refused (the workers have no
// room for it, or its source spent its failure budget): 58, retried by the client
// (a login for as long as its request deadline). Logged at most once a second, with
// how many were refused since.
func (r *metaRouter) refuseBusy(j *job, what, why string) {
	r.passwordsRefused++
	if now := r.h.shard.NowNs(); now-r.passwordsRefusedLoggedNs >= int64(time.Second) {
		r.h.log.Warn("password work refused", "request", what, "reason", why,
			"source", r.record(j.conn).source.String(), "refused_since_last_line", r.passwordsRefused,
			"waiting", r.passwords.waitingCount(), "per_source_max", passwordWaitingPerSourceMax, "max", passwordWaitingMax,
			"failures_burst", failuresBurst, "failures_per_second", failuresPerSecond)
		r.passwordsRefused, r.passwordsRefusedLoggedNs = 0, now
	}
	j.status = wire.ErrTransientNotAccepted
	r.h.reply(j)
}

// finishPasswordChecks resumes the logins whose passwords have been verified and the
// writes whose new passwords have been hashed, each in its turn among the metadata
// writes. It runs on shard 0's every turn (handler.Tick).
func (r *metaRouter) finishPasswordChecks() {
	r.finished = r.passwords.collect(r.finished[:0])
	now := r.h.shard.NowNs()
	for i, w := range r.finished {
		r.finished[i] = nil
		switch w := w.(type) {
		case *passwordCheck:
			delete(r.checking, w.job.conn)
			if !w.match {
				r.failures.failed(w.source, now)
			}
			r.serialize(func() { r.resumeLogin(w) })
		case *newPassword:
			if errors.Is(w.err, wire.ErrInvalidCredentials) {
				r.failures.failed(w.source, now)
			}
			r.serialize(func() { r.resumeNewPassword(w) })
		}
	}
}

// resumeLogin decides a login whose password has been verified, in its turn among
// the metadata writes.
func (r *metaRouter) resumeLogin(c *passwordCheck) {
	j := c.job
	rb, _ := wire.DecodeRegisterBody(j.frame.Body) // decoded once already
	if hash := r.plane.state.PasswordHashToCheck(rb.Password.Username); hash != c.hash {
		// The user changed (a new password, deleted, created) while the password
		// was being verified: verify against what holds now.
		r.checkPassword(j, rb.Password.Username, rb.Password.Password)
		return
	}
	r.decideLogin(j, verifiedCredentials{
		Credentials: metadata.Credentials{State: r.plane.state, NowMicros: nowMicros()},
		match:       c.match,
	})
}

// abandonPasswordChecks answers the logins and the new passwords still with the
// password workers when shard 0 stops: the server is going away, the client may
// retry elsewhere or later. A new password's write was never numbered, so it is
// refused as not accepted (58): nothing of it was applied.
func (r *metaRouter) abandonPasswordChecks() {
	if n := len(r.checking) + len(r.changing); n > 0 {
		r.h.log.Info("logins and password changes abandoned at shutdown", "logins", len(r.checking), "password_changes", len(r.changing))
	}
	for _, c := range r.checking {
		c.job.status = wire.ErrTransientNotCommitted
		r.h.reply(c.job)
	}
	for _, n := range r.changing {
		n.job.status = wire.ErrTransientNotAccepted
		r.h.reply(n.job)
	}
	r.abandonedChecks += len(r.checking) + len(r.changing)
	clear(r.checking)
	clear(r.changing)
}

// verifiedCredentials answers CheckPassword with a verdict reached off the shard
// against the user's current hash (finishPasswordChecks made sure it still is).
type verifiedCredentials struct {
	metadata.Credentials
	match bool
}

func (c verifiedCredentials) CheckPassword(username, _ []byte) (uint32, bool) {
	id, _, active, ok := c.State.UserByName(username)
	if !ok || !c.match || !active {
		return 0, false
	}
	return id, true
}

// decideLogin decides a Register with creds and, when it logs in, commits it.
func (r *metaRouter) decideLogin(j *job, creds wire.CredentialChecker) {
	if _, open := r.conns[j.conn]; !open {
		r.h.reply(j) // the connection is gone: its shard just recycles the job
		return
	}
	hdr := j.frame.Header
	decision := wire.DecideRegister(j.frame.Body, wire.AcceptedProtocolWindow, creds)
	if !decision.LoggedIn() {
		j.evict = decision.Reason
		r.h.log.Info("login refused", "conn", j.conn.String(), "reason", decision.Reason.String())
		r.h.reply(j)
		return
	}
	rec := r.record(j.conn)
	if rec.epoch != 0 {
		r.replayLogin(j, rec, decision.UserID)
		return
	}
	if _, owner, known := r.plane.table.Session(hdr.Client); known && owner != decision.UserID {
		// A client id bound to another user is not taken over (the reference drops
		// such a register; an eviction tells the client at once).
		j.evict = wire.EvictionSessionError
		r.h.log.Info("login refused", "conn", j.conn.String(), "reason", "client id bound to another user")
		r.h.reply(j)
		return
	}
	p := vsr.Proposal{Client: hdr.Client, RequestChecksum: hdr.RequestChecksum, Operation: wire.OperationRegister, UserID: decision.UserID}
	r.commit(p, nil, func(frame []byte, err error) {
		if err != nil {
			j.reply = wire.AppendResultRejection(j.reply[:0], wire.ErrTransientNotCommitted)
			r.h.reply(j)
			return
		}
		j.rawReply, j.loggedIn = true, true
		j.reply = append(j.reply[:0], frame...)
		j.userID = decision.UserID
		j.epoch, _, _ = r.plane.table.Session(hdr.Client)
		j.seen = new(atomic.Int64)
		j.seen.Store(r.h.shard.NowNs())
		rec.userID, rec.client, rec.epoch, rec.seen = decision.UserID, hdr.Client, j.epoch, j.seen
		r.sessions[hdr.Client] = rec
		r.h.reply(j)
	})
}

// replayLogin answers a Register on a logged-in connection with its session:
// the same reply a fresh login gets (result-framed, operation Register), the
// epoch the connection holds, nothing committed. The connection's state on its
// shard is left as it is.
func (r *metaRouter) replayLogin(j *job, rec *sessionRecord, userID uint32) {
	login := wire.LoginRegisterReply{UserID: userID, Session: rec.epoch, ServerProtocolVersion: wire.ServerProtocolVersion,
		ServerVersion: []byte(serverVersion)}
	j.reply = append(j.reply[:0], make([]byte, wire.HeaderSize)...)
	j.reply = wire.AppendResultSuccess(j.reply)
	j.reply, _ = login.Append(j.reply)
	rh := wire.ReplyTo(j.frame.Header, 0, len(j.reply)-wire.HeaderSize, true)
	rh.Op, rh.Commit = rec.epoch, max(r.plane.replica.CommitMax(), rec.epoch)
	rh.Put(j.reply)
	j.rawReply = true
	r.h.log.Info("login on a logged-in connection: session kept", "conn", j.conn.String(), "epoch", rec.epoch)
	r.h.reply(j)
}

// write runs a metadata write (and Logout) through the client table and the
// replica: exactly once per (client, request).
func (r *metaRouter) write(j *job) {
	if _, busy := r.changing[j.conn]; busy {
		// The connection's CreateUser or ChangePassword is with the password
		// workers: a later request of it must not commit first (the client table
		// would then take the earlier one for a replay). The SDKs send one request
		// at a time and never get here; a pipelining client retries.
		j.status = wire.ErrTransientNotAccepted
		r.h.reply(j)
		return
	}
	r.writeHashed(j, nil)
}

// writeHashed is write for a request whose new password, if it has one, hashed
// holds (nil: not hashed yet). Every check runs again on the state of now.
func (r *metaRouter) writeHashed(j *job, hashed *newPassword) {
	hdr := j.frame.Header
	op := hdr.Operation
	verdict, cached := r.plane.table.Preflight(hdr.Client, hdr.Session, hdr.Request, hdr.RequestChecksum)
	switch verdict {
	case vsr.PreflightExecute:
	case vsr.PreflightReplay:
		r.replay(j, cached)
		return
	case vsr.PreflightNoSession, vsr.PreflightSessionTooHigh:
		// The reference drops a too-high epoch; answering with an eviction spares the
		// client its request timeout.
		j.evict = wire.EvictionNoSession
		r.h.reply(j)
		return
	case vsr.PreflightSessionTooLow:
		j.evict = wire.EvictionSessionTooLow
		r.h.reply(j)
		return
	case vsr.PreflightInFlight:
		j.status = wire.ErrTransientNotAccepted
		r.h.reply(j)
		return
	case vsr.PreflightConflict:
		// The same request number with other arguments: neither a replay nor a new
		// request. The reference drops it; a status tells the client at once.
		j.status = wire.ErrInvalidCommand
		r.h.reply(j)
		return
	case vsr.PreflightAlreadyApplied:
		if op == wire.OperationLogout {
			j.status = wire.ErrRequestAlreadyApplied
		} else {
			j.reply = wire.AppendResultRejection(j.reply[:0], wire.ErrRequestAlreadyApplied)
		}
		r.h.reply(j)
		return
	}
	body := j.frame.Body
	if op != wire.OperationLogout {
		if err := r.plane.state.Admit(op, j.userID, body); err != nil {
			j.status = errorCode(err, wire.ErrInvalidCommand)
			r.h.reply(j)
			return
		}
		if op == wire.OperationCreateUser || op == wire.OperationChangePassword {
			r.writeNewPassword(j, op, hashed)
			return
		}
		proposal, token, err := r.propose(op, body)
		if err != nil {
			j.status = errorCode(err, wire.ErrInvalidCommand)
			r.h.reply(j)
			return
		}
		r.commitWrite(j, proposal, token)
		return
	}
	r.commitWrite(j, body, nil)
}

// commitWrite commits a metadata write's proposal and answers its client. token is
// the personal access token a CreatePersonalAccessToken minted (nil otherwise): it
// goes into the reply sent, never into the proposal or the cached reply.
func (r *metaRouter) commitWrite(j *job, proposal, token []byte) {
	hdr := j.frame.Header
	op := hdr.Operation
	p := vsr.Proposal{Client: hdr.Client, Request: hdr.Request, RequestChecksum: hdr.RequestChecksum, Operation: op, UserID: j.userID}
	r.commit(p, proposal, func(frame []byte, err error) {
		if err != nil {
			j.status = wire.ErrTransientNotCommitted
			r.h.reply(j)
			return
		}
		// The client's table entry now caches this reply: a token kept for the
		// replay of its previous one is of no more use.
		delete(r.mintedTokens, hdr.Client)
		j.rawReply = true
		j.reply = append(j.reply[:0], frame...)
		if token != nil && op == wire.OperationCreatePersonalAccessToken && metadata.TokenWithheld(frame[wire.HeaderSize:]) {
			j.reply = appendWithheldToken(j.reply, token)
			r.mintedTokens[hdr.Client] = mintedToken{request: hdr.Request, token: token}
		}
		if op == wire.OperationLogout {
			if rec, ok := r.sessions[hdr.Client]; ok && rec.conn == j.conn {
				delete(r.sessions, hdr.Client)
			}
			if rec, ok := r.conns[j.conn]; ok {
				rec.userID, rec.client, rec.epoch, rec.seen = wire.ClientUserIDNone, wire.Uint128{}, 0, nil
			}
		}
		r.runEffects()
		r.h.reply(j)
	})
}

// propose rewrites the bodies whose proposal differs from the request and takes no
// argon2id run (hashNewPassword does those): a token is minted, and its digest
// proposed; the token itself is returned for the reply only.
func (r *metaRouter) propose(op wire.Operation, body []byte) (proposal, token []byte, err error) {
	if op == wire.OperationCreatePersonalAccessToken {
		var secret [metadata.TokenSecretBytes]byte
		if _, err := io.ReadFull(rand.Reader, secret[:]); err != nil {
			return nil, nil, wire.ErrTransientNotAccepted
		}
		token = metadata.EncodeToken(&secret)
		proposal, err = metadata.ProposeCreatePersonalAccessToken(nil, body, metadata.HashToken(token))
		return proposal, token, err
	}
	return body, nil, nil
}

// mintedToken is the personal access token of a client's last committed
// CreatePersonalAccessToken, kept in memory only, so that a retry of that request
// is answered with it like any other replay: the client table, whose entries reach
// the metadata snapshot, caches the reply with the token withheld.
type mintedToken struct {
	request uint64
	token   []byte
}

// replay answers a retried request with its cached reply. A CreatePersonalAccessToken
// reply is cached with its token withheld: the token is added back from memory,
// and when the server no longer has it (it restarted since, or the table entry
// outlived the connection) the retry is told its request was applied (the token
// exists, but no one can be shown it again; the user deletes and recreates it).
func (r *metaRouter) replay(j *job, cached []byte) {
	hdr := j.frame.Header
	if hdr.Operation == wire.OperationCreatePersonalAccessToken && len(cached) >= wire.HeaderSize &&
		metadata.TokenWithheld(cached[wire.HeaderSize:]) {
		minted, ok := r.mintedTokens[hdr.Client]
		if !ok || minted.request != hdr.Request {
			j.reply = wire.AppendResultRejection(j.reply[:0], wire.ErrRequestAlreadyApplied)
			r.h.reply(j)
			return
		}
		j.rawReply = true
		j.reply = appendWithheldToken(append(j.reply[:0], cached...), minted.token)
		r.h.reply(j)
		return
	}
	j.rawReply = true
	j.reply = append(j.reply[:0], cached...)
	r.h.reply(j)
}

// appendWithheldToken completes a committed CreatePersonalAccessToken reply frame
// (metadata.TokenWithheld) with the token: its payload, and the size in its header.
func appendWithheldToken(frame, token []byte) []byte {
	frame = (&wire.CreatedToken{Token: token}).Append(frame)
	binary.LittleEndian.PutUint32(frame[wire.SizeFieldOffset:], uint32(len(frame)))
	return frame
}

// writeNewPassword commits a CreateUser or ChangePassword, admitted, once hashed
// holds its proposal, or hands it to the workers first (hashNewPassword). A request
// its user may not make is refused before any argon2id run and never journaled,
// with the code Apply would have committed (in the result section, as a committed
// refusal is): so a user without permissions cannot keep the workers busy.
func (r *metaRouter) writeNewPassword(j *job, op wire.Operation, hashed *newPassword) {
	state := r.plane.state
	if code := state.AuthorizeNewPassword(op, j.userID, j.frame.Body); code != 0 {
		r.refuseUncommitted(j, code)
		return
	}
	if hashed != nil && op == wire.OperationChangePassword {
		if current, err := state.ChangePasswordCurrentHash(j.frame.Body); err != nil || current != hashed.currentHash {
			// The user's password changed while this one was verified: what was
			// verified no longer proves anything; verify against what holds now.
			hashed = nil
		}
	}
	if hashed == nil {
		r.hashNewPassword(j, op)
		return
	}
	if hashed.err != nil {
		if code := errorCode(hashed.err, wire.ErrInvalidCommand); code == wire.ErrInvalidCredentials {
			r.refuseUncommitted(j, code)
		} else {
			j.status = code
			r.h.reply(j)
		}
		return
	}
	r.commitWrite(j, hashed.proposal, nil)
}

// refuseUncommitted answers a metadata write refused before it was proposed with a
// committed-looking refusal: the result section holding code, which the SDKs read
// like the same refusal committed. A retry is decided again.
func (r *metaRouter) refuseUncommitted(j *job, code wire.ErrorCode) {
	j.reply = wire.AppendResultRejection(j.reply[:0], code)
	r.h.reply(j)
}

// hashNewPassword hands a CreateUser's or ChangePassword's argon2id work to the
// workers (the current password verified, the new one hashed and salted, so not in
// Apply); finishPasswordChecks brings it back to writeHashed in its turn, which
// checks it all again on the state of then. No metadata write waits for it.
func (r *metaRouter) hashNewPassword(j *job, op wire.Operation) {
	if r.syncJournal {
		// Shard 0 is stopping: nothing more is handed to the workers.
		j.status = wire.ErrTransientNotAccepted
		r.h.reply(j)
		return
	}
	source := r.record(j.conn).source
	if op == wire.OperationChangePassword && !r.failures.allow(source, r.h.shard.NowNs()) {
		r.refuseBusy(j, op.String(), "the source failed too many password checks")
		return
	}
	n := &newPassword{job: j, source: source, op: op, body: append([]byte(nil), j.frame.Body...)}
	var err error
	if n.salt, err = randomBytes(metadata.PasswordSaltBytes); err != nil {
		j.status = wire.ErrTransientNotAccepted
		r.h.reply(j)
		return
	}
	if op == wire.OperationChangePassword {
		if n.currentHash, err = r.plane.state.ChangePasswordCurrentHash(n.body); err != nil {
			j.status = errorCode(err, wire.ErrInvalidCommand)
			r.h.reply(j)
			return
		}
	}
	if !r.passwords.submit(n) {
		r.refuseBusy(j, op.String(), "too much password work waiting from the source or in all")
		return
	}
	r.changing[j.conn] = n
}

// resumeNewPassword runs, in its turn among the metadata writes, a write whose
// argon2id work is done.
func (r *metaRouter) resumeNewPassword(n *newPassword) {
	j := n.job
	delete(r.changing, j.conn)
	if _, open := r.conns[j.conn]; !open {
		r.h.reply(j) // the connection is gone: its shard just recycles the job
		return
	}
	r.writeHashed(j, n)
}

func randomBytes(n int) ([]byte, error) {
	b := make([]byte, n)
	_, err := io.ReadFull(rand.Reader, b)
	return b, err
}

// runEffects carries out what the last commit asks of the partition shards. The
// messages leave shard 0 before any later request is routed, and each shard's
// queue is ordered, so a partition exists on its owner before a send can reach it.
func (r *metaRouter) runEffects() {
	state := r.plane.state
	for _, e := range r.plane.out.Effects {
		k := partition.Key{StreamID: e.Stream, TopicID: e.Topic, PartitionID: e.First}
		var cfg partition.Config
		var topic *metadata.Topic
		if st := state.Stream(e.Stream); st != nil {
			topic = st.Topic(e.Topic)
		}
		if topic != nil {
			cfg = partition.ConfigFromTopicOptions(topic.Options, topic.PartitionsCount())
		}
		switch e.Kind {
		case metadata.EffectCreatePartitions, metadata.EffectDeletePartitions:
			for p := e.First; p < e.First+e.Count; p++ {
				pk := partition.Key{StreamID: e.Stream, TopicID: e.Topic, PartitionID: p}
				ef := &effect{kind: e.Kind, key: pk, cfg: cfg}
				if topic != nil && int(p) < len(topic.Partitions) {
					ef.createdAt = topic.Partitions[p].CreatedAtMicros
					ef.purgeGeneration = topic.PurgeGeneration
				}
				r.h.post(r.h.srv.ownerOf(pk), shard.Message{Kind: msgEffect, Payload: ef})
			}
			if topic != nil {
				r.toAllShards(&effect{key: k, cfg: cfg, reconfig: true})
			}
		case metadata.EffectDeleteSegments:
			r.h.post(r.h.srv.ownerOf(k), shard.Message{Kind: msgEffect, Payload: &effect{kind: e.Kind, key: k, count: e.Count}})
		case metadata.EffectUpdateTopic:
			if topic != nil {
				r.toAllShards(&effect{key: k, cfg: cfg, reconfig: true})
			}
		default: // whole topics and streams, purges, group offsets: every shard may own some
			r.toAllShards(&effect{kind: e.Kind, key: k, group: e.Group, purgeGeneration: e.Generation})
		}
		if e.Kind == metadata.EffectDeleteTopic || e.Kind == metadata.EffectDeleteStream {
			for key := range r.balanced {
				if key[0] == e.Stream && (e.Kind == metadata.EffectDeleteStream || key[1] == e.Topic) {
					delete(r.balanced, key)
				}
			}
		}
	}
}

func (r *metaRouter) toAllShards(e *effect) {
	for i := 0; i < r.h.srv.shardCount; i++ {
		copyOf := *e
		r.h.post(i, shard.Message{Kind: msgEffect, Payload: &copyOf})
	}
}

// clientGone: a connection closed. It leaves the connection list; a logged-in
// one's consumer group memberships end through a committed
// RemoveConsumerGroupMember, so a restart agrees.
func (r *metaRouter) clientGone(g *clientGone) {
	delete(r.conns, g.conn)
	if !g.loggedIn {
		return
	}
	if rec, ok := r.sessions[g.client]; ok && rec.conn == g.conn {
		delete(r.sessions, g.client)
		// The reference drops a disconnected client's table entry locally (not
		// replicated): otherwise every login ever made would hold a slot until the
		// table is full, and then the oldest live sessions would be evicted first.
		r.plane.table.Remove(g.client)
		delete(r.mintedTokens, g.client)
	}
	if r.plane.state.ClientGroupsCount(g.client) == 0 {
		return
	}
	p := vsr.Proposal{Client: g.client, Operation: wire.OperationRemoveConsumerGroupMember, UserID: metadata.RootUserID}
	r.commit(p, metadata.AppendClientGoneProposal(nil, g.client), func(_ []byte, err error) {
		if err != nil {
			r.h.log.Error("consumer group leave of a closed connection failed", "err", err)
			return
		}
		r.runEffects()
	})
}

// routeSend resolves a SendMessages batch's partition and hands it to the owner.
func (r *metaRouter) routeSend(j *job) {
	if err := j.send.Decode(j.frame.Body); err != nil {
		// A namespace that does not decode is 20 (errors.md §2); a batch the decoder
		// refuses keeps the decoder's code (checksums, lengths).
		j.status = errorCode(err, wire.ErrResourceNotFound)
		if j.status == wire.ErrInvalidCommand || j.status == wire.ErrInvalidFormat {
			j.status = wire.ErrResourceNotFound
		}
		r.h.reply(j)
		return
	}
	state := r.plane.state
	s, t, count, err := state.ResolveTopic(j.send.StreamID, j.send.TopicID)
	if err != nil {
		j.status = wire.ErrResourceNotFound
		r.h.reply(j)
		return
	}
	if !state.CanSend(j.userID, s, t) {
		j.status = wire.ErrUnauthorized
		r.h.reply(j)
		return
	}
	cursor := r.balanced[[2]uint32{s, t}]
	if cursor == nil && j.send.Partitioning.Kind == wire.PartitioningBalanced {
		cursor = new(partition.RoundRobin)
		r.balanced[[2]uint32{s, t}] = cursor
	}
	p, err := partition.ResolvePartition(j.send.Partitioning, count, cursor)
	if err != nil {
		j.status = errorCode(err, wire.ErrResourceNotFound)
		r.h.reply(j)
		return
	}
	j.key = partition.Key{StreamID: s, TopicID: t, PartitionID: p}
	r.toOwner(j)
}

func (r *metaRouter) toOwner(j *job) {
	r.h.post(r.h.srv.ownerOf(j.key), shard.Message{Conn: j.conn, Kind: msgToOwner, Payload: j})
}

// routePoll resolves a poll (responses.md §5 PollMessages): typed statuses for
// what does not resolve, the empty 16-byte reply for the rest.
func (r *metaRouter) routePoll(j *job) {
	var req wire.PollMessages
	if err := req.Decode(j.frame.Body); err != nil {
		j.reply = partition.AppendEmptyPollReply(j.reply[:0], 0, 0)
		r.h.reply(j)
		return
	}
	state := r.plane.state
	consumer := partition.Consumer{Kind: req.Consumer.Kind}
	var partitionID uint32
	if req.Consumer.Kind == wire.ConsumerGroup {
		if !req.Partition.Set {
			j.reply = partition.AppendEmptyPollReply(j.reply[:0], 0, 0)
			r.h.reply(j)
			return
		}
		// The ownership fence runs before resolution (the reference's order).
		target := wire.GroupTarget{StreamID: req.StreamID, TopicID: req.TopicID, GroupID: req.Consumer.ID}
		_, owned, ok := state.Assignment(j.frame.Header.Client, &target)
		groupID, found := r.groupID(req.StreamID, req.TopicID, req.Consumer.ID)
		if !ok || !found || !containsU32(owned, req.Partition.ID) {
			j.reply = partition.AppendEmptyPollReply(j.reply[:0], wire.PollPartitionResync, 0)
			r.h.reply(j)
			return
		}
		consumer.ID = groupID
		partitionID = req.Partition.ID
	} else {
		if req.Consumer.ID.Kind != wire.IdentifierNumeric {
			// Plain consumers are numbered; a named one has no offsets to use.
			j.reply = partition.AppendEmptyPollReply(j.reply[:0], 0, 0)
			r.h.reply(j)
			return
		}
		consumer.ID = req.Consumer.ID.Numeric
		if req.Partition.Set {
			partitionID = req.Partition.ID
		}
	}
	s, t, count, err := state.ResolveTopic(req.StreamID, req.TopicID)
	if err != nil {
		j.status = errorCode(err, wire.ErrTopicIdNotFound)
		r.h.reply(j)
		return
	}
	if partitionID >= count {
		j.status = wire.ErrPartitionNotFound
		r.h.reply(j)
		return
	}
	if !state.CanPoll(j.userID, s, t) {
		j.status = wire.ErrUnauthorized
		r.h.reply(j)
		return
	}
	j.key = partition.Key{StreamID: s, TopicID: t, PartitionID: partitionID}
	j.pollReq = partition.PollRequest{Consumer: consumer, Strategy: req.Strategy, Count: req.Count, AutoCommit: req.AutoCommit,
		MaxBytes: pollReadBytesMax}
	r.toOwner(j)
}

// pollReadBytesMax bounds the stored bytes one poll reads (at least one batch is
// read whatever its size), so a reply stays well inside the 64 MiB frame every SDK
// accepts.
const pollReadBytesMax = 32 << 20

// routeOffset resolves GetConsumerOffset (empty body for what does not resolve)
// and Store/DeleteConsumerOffset (20 for what does not resolve).
func (r *metaRouter) routeOffset(j *job) {
	var consumer wire.Consumer
	var streamID, topicID wire.Identifier
	var part wire.OptionalPartition
	var decodeErr error
	switch j.kind {
	case jobGetOffset:
		var req wire.GetConsumerOffset
		decodeErr = req.Decode(j.frame.Body)
		consumer, streamID, topicID, part = req.Consumer, req.StreamID, req.TopicID, req.Partition
	case jobStoreOffset:
		var req wire.StoreConsumerOffset
		decodeErr = req.Decode(j.frame.Body)
		consumer, streamID, topicID, part = req.Consumer, req.StreamID, req.TopicID, req.Partition
		j.offset, j.ack = req.Offset, req.Ack
	default:
		var req wire.DeleteConsumerOffset
		decodeErr = req.Decode(j.frame.Body)
		consumer, streamID, topicID, part = req.Consumer, req.StreamID, req.TopicID, req.Partition
		j.ack = req.Ack
	}
	unresolved := func() {
		if j.kind == jobGetOffset {
			j.reply = j.reply[:0]
		} else {
			j.status = wire.ErrResourceNotFound
		}
		r.h.reply(j)
	}
	if decodeErr != nil {
		unresolved()
		return
	}
	state := r.plane.state
	s, t, count, err := state.ResolveTopic(streamID, topicID)
	if err != nil {
		unresolved()
		return
	}
	c := partition.Consumer{Kind: consumer.Kind}
	partitionID := uint32(0)
	if part.Set {
		partitionID = part.ID
	}
	if consumer.Kind == wire.ConsumerGroup {
		groupID, found := r.groupID(streamID, topicID, consumer.ID)
		if !found {
			unresolved()
			return
		}
		c.ID = groupID
		target := wire.GroupTarget{StreamID: streamID, TopicID: topicID, GroupID: consumer.ID}
		_, owned, member := state.Assignment(j.frame.Header.Client, &target)
		if !part.Set {
			if !member || len(owned) == 0 {
				unresolved()
				return
			}
			partitionID = owned[0]
		} else if j.kind != jobGetOffset && (!member || !containsU32(owned, partitionID)) {
			unresolved()
			return
		}
	} else {
		if consumer.ID.Kind != wire.IdentifierNumeric {
			unresolved()
			return
		}
		c.ID = consumer.ID.Numeric
	}
	if partitionID >= count {
		if j.kind == jobGetOffset {
			j.status = wire.ErrPartitionNotFound
			r.h.reply(j)
			return
		}
		unresolved()
		return
	}
	if !state.CanPoll(j.userID, s, t) {
		j.status = wire.ErrUnauthorized
		r.h.reply(j)
		return
	}
	j.key = partition.Key{StreamID: s, TopicID: t, PartitionID: partitionID}
	j.consumer = c
	r.toOwner(j)
}

// groupID resolves a consumer group identifier within a topic.
func (r *metaRouter) groupID(streamID, topicID, groupID wire.Identifier) (uint32, bool) {
	s, t, _, err := r.plane.state.ResolveTopic(streamID, topicID)
	if err != nil {
		return 0, false
	}
	topic := r.plane.state.Stream(s).Topic(t)
	if groupID.Kind == wire.IdentifierNumeric {
		return groupID.Numeric, topic.Group(groupID.Numeric) != nil
	}
	found := 0
	// Group ids only grow within a topic; stop once every group was seen.
	for id := uint32(0); found < topic.GroupsCount() && id < 1<<24; id++ {
		g := topic.Group(id)
		if g == nil {
			continue
		}
		found++
		if g.Name == string(groupID.String) {
			return id, true
		}
	}
	return 0, false
}

func containsU32(v []uint32, x uint32) bool {
	for _, e := range v {
		if e == x {
			return true
		}
	}
	return false
}
