package server

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/iggy-shard/iggy-shard/metadata"
	"github.com/iggy-shard/iggy-shard/shard"
	"github.com/iggy-shard/iggy-shard/vsr"
	"github.com/iggy-shard/iggy-shard/wire"
)

// metaRouter is shard 0's part of the request path: logins, metadata writes, the
// reads that need the whole node (stats, clients, snapshots), and the commit log
// every shard's view follows (view.go).
type metaRouter struct {
	// dueTick is the grid tick the clustered core next has work at (ticks.go).
	dueTick uint64

	h     *handler
	plane *metaPlane
	stats metadata.StatsSource

	// viewTail is the last entry of the commit log.
	viewTail *viewEntry
	// commits counts the metadata operations committed since the start (metrics).
	commits uint64
	// conns are the node's open connections, logged in or not, from the moment
	// their shard adopted them (handler.ConnOpened) until they close, for
	// GetClients, GetClient, GetMe and the stats' client count; sessions are the
	// logged-in ones by (protocol) client id, the same records.
	conns    map[shard.ConnID]*sessionRecord
	sessions map[wire.Uint128]*sessionRecord

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

	// journal does the plane's file work off the shard (journal.go): a Ready's
	// appends and fdatasync, a snapshot. Metadata writes are pipelined (metaplane.go);
	// a connection's own go one at a time, in arrival order (its record's turn):
	// while one is with the plane, its next writes, logins and its close wait. No
	// write waits for an argon2id run: a new password is hashed before its write
	// takes its turn (hashNewPassword). syncJournal: shard 0 is stopping and the
	// file work runs inline instead. pumping: pumpJournal is running (a write's
	// done, called from inside it, must not start it again).
	journal     *journalWriter
	syncJournal bool
	pumping     bool
	// clientWrites counts, by client, the numbered requests with the plane: the
	// client table's one request in flight per client, across connections.
	clientWrites map[wire.Uint128]int
	// accountWrites counts the writes with the plane that change what a login
	// decides on (accountOperation); logins wait in loginsWaiting until none is.
	accountWrites int
	loginsWaiting []func()
	// loginsWaitingCount is len(loginsWaiting), for observers outside shard 0
	// (tests).
	loginsWaitingCount atomic.Int64

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
	// busy: one of the connection's writes (or its login) is with the metadata
	// plane; queued are its next metadata works, run in order once it is done.
	busy   bool
	queued []func()
}

func newMetaRouter(h *handler, plane *metaPlane, viewTail *viewEntry) *metaRouter {
	plane.nowMicros = h.srv.nowMicros
	plane.fsyncs = &h.srv.journalFsyncs
	r := &metaRouter{
		h:        h,
		plane:    plane,
		stats:    h.srv.stats.of,
		viewTail: viewTail,
		conns:    make(map[shard.ConnID]*sessionRecord),
		sessions: make(map[wire.Uint128]*sessionRecord),
		// Wake needs no shard state: safe from the password workers' goroutines.
		passwords: newPasswordWorkers(h.shard.Wake),
		failures:  newFailureBudgets(),
		checking:  make(map[shard.ConnID]*passwordCheck),
		changing:  make(map[shard.ConnID]*newPassword),
		journal:   newJournalWriter(h.shard.Wake),

		clientWrites: make(map[wire.Uint128]int),

		mintedTokens: make(map[wire.Uint128]mintedToken),
	}
	plane.onApplied = r.published
	if plane.clustered {
		plane.cluster.send = r.sendReplica
		plane.cluster.release = r.releaseReplicaFrame
		plane.cluster.onInstalled = r.publishInstalled
		plane.cluster.onReady = func() { r.publishLeader(); r.afterClusterReady() }
		plane.cluster.lastHeardNs = h.srv.cluster.lastHeardNs
		plane.cluster.heardNs = make([]int64, len(h.srv.cluster.lastHeardNs))
		plane.cluster.tickOf = h.grid.tickAt
		r.publishLeader()
		r.ensureRootUser()
	}
	return r
}

// published puts an applied op into the commit log, before any reply of it leaves.
func (r *metaRouter) published(c *metaCommit) {
	r.commits++
	h := c.header
	r.publish(&viewEntry{op: h.Op, view: h.View, body: c.body, ended: r.evictedSessions(c.tableWasFull),
		header: metadata.Header{Operation: h.Operation, Client: h.Client, UserID: h.UserID, TimestampMicros: h.Timestamp}})
}

// inTurn runs a connection's metadata work now, or after the work of that
// connection already with the plane (see metaRouter.journal).
func (r *metaRouter) inTurn(conn shard.ConnID, work func()) {
	rec, open := r.conns[conn]
	if open && rec.busy {
		rec.queued = append(rec.queued, work)
		return
	}
	work()
}

// turnDone ends a connection's turn and runs its queued work, in order, until one
// of them is with the plane again.
func (r *metaRouter) turnDone(rec *sessionRecord) {
	rec.busy = false
	for !rec.busy && len(rec.queued) > 0 {
		next := rec.queued[0]
		rec.queued[0] = nil
		rec.queued = rec.queued[1:]
		next()
	}
}

// commit hands a proposal to the metadata plane for rec's connection (nil: no
// connection's, a closed one's group leave); then runs, on shard 0, with the
// committed reply frame or the error that stopped it (errMetaWritesBusy when too
// many wait, else a broken journal). Every shard's view has the commit before then
// runs, so before any reply of it leaves.
func (r *metaRouter) commit(rec *sessionRecord, p vsr.Proposal, body []byte, then func(c *metaCommit, err error)) {
	if rec != nil {
		rec.busy = true
	}
	account := accountOperation(p.Operation)
	if account {
		r.accountWrites++
	}
	request := p.Request != 0 // a client's numbered request, not a login or a group leave
	if request {
		r.clientWrites[p.Client]++
	}
	w := &metaWrite{proposal: p, body: append([]byte(nil), body...)}
	w.done = func(c *metaCommit, err error) {
		if n := r.clientWrites[p.Client] - 1; request && n > 0 {
			r.clientWrites[p.Client] = n
		} else if request {
			delete(r.clientWrites, p.Client)
		}
		// A commit is in the commit log already (published).
		then(c, err)
		if rec != nil {
			r.turnDone(rec)
		}
		if account {
			r.accountWrites--
			r.resumeLogins()
		}
	}
	r.plane.submit(w)
	r.pumpJournal()
}

// accountOperation reports whether op changes what a login is decided on: a
// user's password, status or existence, a token's existence.
func accountOperation(op wire.Operation) bool {
	switch op {
	case wire.OperationUpdateUser, wire.OperationDeleteUser, wire.OperationChangePassword, wire.OperationDeletePersonalAccessToken:
		return true
	}
	return false
}

// afterAccountWrites runs a login's decision once no write that changes accounts
// is in flight: logins are decided on the committed state, and a session must not
// commit for an account an op before it deletes, deactivates or re-keys.
func (r *metaRouter) afterAccountWrites(decide func()) {
	if r.accountWrites > 0 {
		r.loginsWaiting = append(r.loginsWaiting, decide)
		r.loginsWaitingCount.Store(int64(len(r.loginsWaiting)))
		return
	}
	decide()
}

func (r *metaRouter) resumeLogins() {
	for r.accountWrites == 0 && len(r.loginsWaiting) > 0 {
		next := r.loginsWaiting[0]
		r.loginsWaiting[0] = nil
		r.loginsWaiting = r.loginsWaiting[1:]
		r.loginsWaitingCount.Store(int64(len(r.loginsWaiting)))
		next()
	}
}

// pumpJournal has the plane do its work on shard 0 and hands the next file work to
// the journal writer, or does it inline on a stopping shard 0.
func (r *metaRouter) pumpJournal() {
	if r.pumping {
		return
	}
	r.pumping = true
	defer func() { r.pumping = false }()
	// Bounded: each inline task finishes a Ready or a snapshot; the writes waiting
	// are finite and every Ready takes some of them.
	for {
		t := r.plane.nextTask()
		if t == nil {
			return
		}
		if !r.syncJournal {
			r.journal.submit(t)
			return
		}
		t.then(t.work(nil))
	}
}

// finishJournal completes the file work the journal writer finished, then has
// the plane go on. It runs on shard 0's every turn (handler.Tick).
func (r *metaRouter) finishJournal() {
	if t := r.journal.collect(); t != nil {
		t.then(t.err)
		r.pumpJournal()
	}
}

// stopJournal finishes every metadata write on shard 0's last turn: the file work
// out is waited for (its ops are numbered), then the writes waiting are journaled
// inline. None is left unanswered or half done. A new password still with the
// workers is not numbered: abandonPasswordChecks refuses it.
//
// A clustered node cannot commit alone: what it numbered and did not see commit
// is answered 57 (it may yet commit at the others), and its forwards end.
func (r *metaRouter) stopJournal() {
	r.syncJournal = true
	if t := r.journal.await(); t != nil {
		t.then(t.err)
	}
	r.pumpJournal()
	if r.plane.clustered {
		r.plane.stopCluster()
	}
}

// publish appends an entry to the commit log and tells every shard to catch up.
func (r *metaRouter) publish(e *viewEntry) {
	r.viewTail.next.Store(e)
	r.viewTail = e
	if r.h.srv.cfg.quietCommits {
		return
	}
	for i := 0; i < r.h.srv.shardCount; i++ {
		r.h.post(i, shard.Message{Kind: msgViewAdvanced})
	}
}

// evictedSessions lists the sessions a registration into a full client table
// pushed out of it.
func (r *metaRouter) evictedSessions(tableWasFull bool) []wire.Uint128 {
	if !tableWasFull {
		return nil
	}
	var gone []wire.Uint128
	for client := range r.sessions {
		if _, _, ok := r.plane.table.Session(client); !ok {
			gone = append(gone, client)
		}
	}
	return gone
}

// clientOpened lists an accepted connection under the client id its shard gave
// it, anonymous until it logs in.
func (r *metaRouter) clientOpened(o *clientOpened) {
	rec := r.record(o.conn)
	rec.id = o.id
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
	rec := &sessionRecord{userID: wire.ClientUserIDNone, conn: conn}
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
		r.inTurn(j.conn, func() { r.write(j) })
	case jobRead:
		r.read(j)
	default:
		panic(fmt.Sprintf("server: a job of kind %d sent to shard 0, which routes no partition operation", j.kind))
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
	r.inTurn(j.conn, func() {
		r.afterAccountWrites(func() {
			r.decideLogin(j, metadata.Credentials{State: r.plane.state, NowMicros: r.h.srv.nowMicros()})
		})
	})
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
			r.inTurn(w.job.conn, func() { r.afterAccountWrites(func() { r.resumeLogin(w) }) })
		case *newPassword:
			if errors.Is(w.err, wire.ErrInvalidCredentials) {
				r.failures.failed(w.source, now)
			}
			r.inTurn(w.job.conn, func() { r.resumeNewPassword(w) })
		case *rootUserHash:
			r.rootUserHashed(w)
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
		Credentials: metadata.Credentials{State: r.plane.state, NowMicros: r.h.srv.nowMicros()},
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
	if !decision.LoggedIn() && r.mayLag(j, decision.Reason) {
		r.awaitPrimary(j)
		return
	}
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
	if r.plane.clustered && !r.plane.replica.IsPrimary() {
		if r.plane.replica.Status() != vsr.StatusNormal {
			// No primary to forward to: the view is changing (58, retried).
			j.status = wire.ErrTransientNotAccepted
			r.h.reply(j)
			return
		}
		r.forwardLogin(j, rec, decision.UserID)
		return
	}
	p := vsr.Proposal{Client: hdr.Client, RequestChecksum: hdr.RequestChecksum, Operation: wire.OperationRegister, UserID: decision.UserID}
	r.commit(rec, p, nil, func(c *metaCommit, err error) {
		if err != nil {
			if errors.Is(err, errMetaNotPrimary) {
				j.status = wire.ErrTransientNotAccepted
			} else {
				j.reply = wire.AppendResultRejection(j.reply[:0], notCommittedCode(err))
			}
			r.h.reply(j)
			return
		}
		r.loggedIn(j, rec, decision.UserID, c.epoch, c.frame)
		r.h.reply(j)
	})
}

// loggedIn binds a connection's record and its job to the session a committed
// Register gave it; frame is the login's reply.
func (r *metaRouter) loggedIn(j *job, rec *sessionRecord, userID uint32, epoch uint64, frame []byte) {
	hdr := j.frame.Header
	j.rawReply, j.loggedIn = true, true
	j.reply = append(j.reply[:0], frame...)
	j.userID = userID
	if rb, err := wire.DecodeRegisterBody(j.frame.Body); err == nil && !rb.HasPassword && rb.HasToken {
		hash := metadata.HashToken(rb.Token.Token)
		j.token = &hash
	}
	j.epoch = epoch
	j.seen = new(atomic.Int64)
	j.seen.Store(r.h.shard.NowNs())
	rec.userID, rec.client, rec.epoch, rec.seen = userID, hdr.Client, j.epoch, j.seen
	r.sessions[hdr.Client] = rec
}

// loginFrame is the reply frame of a login whose Register committed at epoch
// elsewhere (a forwarded login): what the primary's apply cached, the session's
// epoch as op and commit.
func (r *metaRouter) loginFrame(j *job, userID uint32, epoch uint64) []byte {
	login := wire.LoginRegisterReply{UserID: userID, Session: epoch, ServerProtocolVersion: wire.ServerProtocolVersion,
		ServerVersion: []byte(serverVersion)}
	frame := make([]byte, wire.HeaderSize, 512)
	frame = wire.AppendResultSuccess(frame)
	frame, _ = login.Append(frame)
	rh := wire.ReplyTo(j.frame.Header, 0, len(frame)-wire.HeaderSize, true)
	rh.Op, rh.Commit = epoch, epoch
	rh.Put(frame)
	return frame
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
	case vsr.PreflightExecute:
		if r.clientWrites[hdr.Client] > 0 {
			// The client's previous request is still with the plane (from
			// another connection: a connection's own wait their turn).
			j.status = wire.ErrTransientNotAccepted
			r.h.reply(j)
			return
		}
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
	if r.plane.clustered && !r.plane.replica.IsPrimary() {
		// Metadata writes are admitted on the metadata primary only
		// (iggy.apache.org/docs/clustering/client-failover): a backup, or a
		// replica changing view, answers 58; the SDKs retry and look for the
		// leader. A logout travels to the primary, as a login does.
		if op == wire.OperationLogout && r.plane.replica.Status() == vsr.StatusNormal {
			r.forwardLogout(j)
			return
		}
		j.status = wire.ErrTransientNotAccepted
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
	r.commit(r.conns[j.conn], p, proposal, func(c *metaCommit, err error) {
		if err != nil {
			j.status = notCommittedCode(err)
			r.h.reply(j)
			return
		}
		frame := c.frame
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
			r.loggedOut(j)
		}
		r.h.reply(j)
	})
}

// loggedOut makes a connection whose Logout committed anonymous again.
func (r *metaRouter) loggedOut(j *job) {
	client := j.frame.Header.Client
	if rec, ok := r.sessions[client]; ok && rec.conn == j.conn {
		delete(r.sessions, client)
	}
	if rec, ok := r.conns[j.conn]; ok {
		rec.userID, rec.client, rec.epoch, rec.seen = wire.ClientUserIDNone, wire.Uint128{}, 0, nil
	}
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

// clientGone: a connection closed, in its turn after the connection's writes and
// login with the plane. It leaves the connection list; a logged-in one's consumer
// group memberships end through the log (leaveGroups), so a restart and every
// replica agree. A login that committed after the connection's shard saw it close
// counts as logged in here.
func (r *metaRouter) clientGone(g *clientGone) {
	rec := r.conns[g.conn]
	delete(r.conns, g.conn)
	client, loggedIn, session := g.client, g.loggedIn, g.epoch
	if rec != nil && rec.epoch != 0 {
		client, loggedIn, session = rec.client, true, rec.epoch
	}
	if !loggedIn {
		return
	}
	// A logout a backup forwards for it takes the request after the client's last.
	request := r.plane.table.Watermark(client) + 1
	if rec, ok := r.sessions[client]; ok && rec.conn == g.conn {
		delete(r.sessions, client)
		// The reference drops a disconnected client's table entry locally (not
		// replicated): otherwise every login ever made would hold a slot until the
		// table is full, and then the oldest live sessions would be evicted first.
		if r.plane.table.Remove(client) {
			r.publish(&viewEntry{ended: []wire.Uint128{client}})
		}
		delete(r.mintedTokens, client)
	}
	r.leaveGroups(groupLeave{client: client, session: session, request: request})
}

// notCommittedCode is the status of a write the plane did not commit: 58 when too
// many waited (it was never numbered), 57 when the journal failed.
func notCommittedCode(err error) wire.ErrorCode {
	if errors.Is(err, errMetaWritesBusy) || errors.Is(err, errMetaNotPrimary) {
		return wire.ErrTransientNotAccepted
	}
	return wire.ErrTransientNotCommitted
}
