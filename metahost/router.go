package metahost

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/iggy-shard/iggy-shard/metadata"
	"github.com/iggy-shard/iggy-shard/metafiles"
	"github.com/iggy-shard/iggy-shard/metaplane"
	"github.com/iggy-shard/iggy-shard/metaview"
	"github.com/iggy-shard/iggy-shard/passwords"
	"github.com/iggy-shard/iggy-shard/request"
	"github.com/iggy-shard/iggy-shard/shard"
	"github.com/iggy-shard/iggy-shard/wire"
)

// Router is shard 0's part of the request path: logins, metadata writes, the
// reads that need the whole node (stats, clients, snapshots), and the commit log
// every shard's view follows (package metaview).
type Router struct {
	// dueTick is the grid tick the clustered core next has work at (ticks.go).
	dueTick uint64

	shard Shard0
	log   *slog.Logger
	plane *Plane
	stats metadata.StatsSource

	// viewTail is the last entry of the commit log.
	viewTail *metaview.Entry
	// commits counts the metadata operations committed since the start (metrics).
	commits uint64
	// conns are the node's open connections, logged in or not, from the moment
	// their shard adopted them (handler.ConnOpened) until they close, for
	// GetClients, GetClient, GetMe and the stats' client count; sessions are the
	// logged-in ones by (protocol) client id, the same records.
	conns    map[shard.ConnID]*sessionRecord
	sessions map[wire.Uint128]*sessionRecord

	// pw is the argon2id work of logins and new passwords (passwordWork).
	pw passwordWork

	// journal does the plane's file work off the shard (metafiles/writer.go): a Ready's
	// appends and fdatasync, a snapshot. Metadata writes are pipelined (package
	// metaplane); a connection's own go one at a time, in arrival order (its
	// record's turn): while one is with the plane, its next writes, logins and its
	// close wait. syncJournal: shard 0 is stopping and the file work runs inline
	// instead.
	journal     *metafiles.Writer
	syncJournal bool
	// pending are the requests handed to the plane (Write, Register) and not
	// answered yet, by token.
	pending   map[uint64]pendingJob
	nextToken uint64
	// callers are the sessions callers' metadata writes go under, by credential
	// (callers.go), at most callerSessionsMax of them.
	callers           map[string]*callerSession
	callerSessionsMax int
	// callerClients are the registered ones among callers by client id, for the
	// ends the committed state brings (callersEnded).
	callerClients map[wire.Uint128]*callerSession
	// callersBound are the credentials of callers with a registered session,
	// for the shards that route a caller's partition write (callers.go).
	callersBound *request.CallerSessions
}

// passwordWork is the router's share of the password workers.
type passwordWork struct {
	// workers verify logins' passwords, and hash new ones, off the shard.
	// checking holds, by connection, the logins' checks handed to them and not
	// yet finished (their jobs wait on them), changing the CreateUser and
	// ChangePassword requests whose argon2id work they do: at most one of each
	// per connection (or call).
	workers  *passwords.Workers
	failures passwords.FailureBudgets
	checking map[shard.ConnID]passwordCheck
	changing map[shard.ConnID]newPassword
	finished []passwords.Work // scratch for finishPasswordChecks
	// abandoned counts the logins and new passwords answered unfinished because
	// shard 0 stopped.
	abandoned int
	// refused counts the requests refused for want of room at the workers since
	// the last log line about it, at refusedLoggedNs.
	refused         int
	refusedLoggedNs int64
}

// pendingJob is a request with the plane: its job, and the connection whose turn
// it holds (nil when the connection is gone).
type pendingJob struct {
	j   *request.Job
	rec *sessionRecord
	// caller is the session of a call's write (callers.go), registering
	// while it is being registered for it.
	caller      *callerSession
	registering bool
}

// passwordCheck is a login's password with the workers, and the job that waits
// for it.
type passwordCheck struct {
	*passwords.Check
	job *request.Job
}

// newPassword is a CreateUser's or ChangePassword's new password with the
// workers, and the job that waits for it.
type newPassword struct {
	*passwords.NewPassword
	job *request.Job
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

// RouterConfig is what a Router needs of its node beyond shard 0.
type RouterConfig struct {
	Log *slog.Logger
	// Stats are the partitions' figures, for GetStream, GetTopic and GetStats.
	Stats metadata.StatsSource
	// ObserveFsync is told each metadata journal fdatasync's latency (metrics).
	ObserveFsync func(time.Duration)
	// LastHeardNs are, by replica, the runtime clock of the last frame from it,
	// written by whichever shard carried it; TickOf maps shard 0's clock to its
	// grid of consensus ticks. Both for a clustered plane only.
	LastHeardNs []atomic.Int64
	TickOf      func(ns int64) uint64
	// CallerSessionsMax caps the sessions of callers' credentials (callers.go);
	// 0 is the reference's, half the client table.
	CallerSessionsMax int
	// CallerSessions is where the router lists the credentials holding a
	// session, for every shard to read (nil: a set of its own).
	CallerSessions *request.CallerSessions
}

// NewRouter is shard 0's router over plane, publishing the commit log from
// viewTail, its last entry; a clustered plane starts.
func NewRouter(sh Shard0, plane *Plane, viewTail *metaview.Entry, cfg RouterConfig) *Router {
	plane.Files.ObserveFsync = cfg.ObserveFsync
	r := &Router{
		shard:    sh,
		log:      cfg.Log,
		plane:    plane,
		stats:    cfg.Stats,
		viewTail: viewTail,
		conns:    make(map[shard.ConnID]*sessionRecord),
		sessions: make(map[wire.Uint128]*sessionRecord),
		// Wake needs no shard state: safe from the password workers' goroutines.
		pw: passwordWork{
			workers:  passwords.NewWorkers(sh.Wake),
			failures: passwords.NewFailureBudgets(),
			checking: make(map[shard.ConnID]passwordCheck),
			changing: make(map[shard.ConnID]newPassword),
		},
		journal:           metafiles.NewWriter(sh.Wake),
		pending:           make(map[uint64]pendingJob),
		callers:           make(map[string]*callerSession),
		callerClients:     make(map[wire.Uint128]*callerSession),
		callerSessionsMax: cfg.CallerSessionsMax,
		callersBound:      cfg.CallerSessions,
	}
	if r.callersBound == nil {
		r.callersBound = request.NewCallerSessions()
	}
	if r.callerSessionsMax <= 0 {
		r.callerSessionsMax = callerSessionsMaxDefault
	}
	plane.router = r
	plane.Files.StartWriter(r.journal)
	if plane.Clustered {
		plane.lastHeardNs = cfg.LastHeardNs
		plane.heardNs = make([]int64, len(cfg.LastHeardNs))
		plane.tickOf = cfg.TickOf
		r.publishLeader()
		plane.Start()
	}
	return r
}

// published puts an applied op into the commit log, before any reply of it leaves.
func (r *Router) published(c *metaplane.Commit) {
	r.commits++
	r.callersEnded(c.Ended)
	if c.Skipped {
		return // it changed nothing: no view has anything to apply
	}
	h := c.Header
	r.publish(&metaview.Entry{Op: h.Op, View: groupsView(h), Body: c.Body, Ended: c.Ended,
		Header: metadata.Header{Operation: h.Operation, Client: h.Client, UserID: h.UserID, TimestampMicros: h.Timestamp}})
}

// groupsView is the view the partition groups a committed op creates start in
// (metaview.Entry.View): the index of the replica that prepared it, which leads
// that view of a group of the cluster's size. It is part of the op's identity
// (wire.PrepareIdentity), so every node that committed the op derives the same
// view; the prepare's View is not.
func groupsView(h *wire.PrepareHeader) uint32 { return uint32(h.Replica) }

// track hands a job to the plane under a new token: it holds its connection's
// turn (rec, nil for none) until answered.
func (r *Router) track(j *request.Job, rec *sessionRecord) uint64 {
	r.nextToken++
	r.pending[r.nextToken] = pendingJob{j: j, rec: rec}
	if rec != nil {
		rec.busy = true
	}
	return r.nextToken
}

// answered carries out the plane's answer to the job under token, and ends its
// connection's turn.
func (r *Router) answered(token uint64, a *metaplane.Answer) {
	pj, ok := r.pending[token]
	if !ok {
		return
	}
	delete(r.pending, token)
	if pj.caller != nil {
		r.callerAnswered(pj, a)
		return
	}
	j := pj.j
	switch {
	case a.Evict != 0:
		j.Out.Evict = a.Evict
		if j.Kind == request.KindLogin {
			r.log.Info("login refused", "conn", j.Conn.String(), "reason", a.Evict.String())
		}
	default:
		if !putOutcome(j, a) {
			break
		}
		switch {
		case j.Kind == request.KindLogin:
			if rec, open := r.conns[j.Conn]; open {
				r.loggedIn(j, rec, a.UserID, a.Epoch)
			}
		case a.LoggedOut:
			r.loggedOut(j)
		}
	}
	r.shard.Reply(j)
	if pj.rec != nil {
		r.turnDone(pj.rec)
	}
}

// putOutcome puts an applied op's outcome that is no eviction into the job's
// reply: its status, its result rejection, or its reply frame, which it reports
// (the op took effect).
func putOutcome(j *request.Job, a *metaplane.Answer) (applied bool) {
	switch {
	case a.Status != 0:
		j.Out.Status = a.Status
	case a.Rejection != 0:
		j.Out.Reply = wire.AppendResultRejection(j.Out.Reply[:0], a.Rejection)
	default:
		j.Out.RawFrame = true
		j.Out.Reply = append(j.Out.Reply[:0], a.Frame...)
		return true
	}
	return false
}

// inTurn runs a connection's metadata work now, or after the work of that
// connection already with the plane (see Router.journal).
func (r *Router) InTurn(conn shard.ConnID, work func()) {
	rec, open := r.conns[conn]
	if open && rec.busy {
		rec.queued = append(rec.queued, work)
		return
	}
	work()
}

// turnDone ends a connection's turn and runs its queued work, in order, until one
// of them is with the plane again.
func (r *Router) turnDone(rec *sessionRecord) {
	rec.busy = false
	for !rec.busy && len(rec.queued) > 0 {
		next := rec.queued[0]
		rec.queued[0] = nil
		rec.queued = rec.queued[1:]
		next()
	}
}

// finishJournal completes the file work the journal writer finished, then has
// the plane go on. It runs on shard 0's every turn (handler.Tick).
func (r *Router) FinishJournal() { r.plane.Files.Finish() }

// stopJournal finishes every metadata write on shard 0's last turn: the file work
// out is waited for (its ops are numbered), then the writes waiting are journaled
// inline. None is left unanswered or half done. A new password still with the
// workers is not numbered: abandonPasswordChecks refuses it.
//
// A clustered node cannot commit alone: what it numbered and did not see commit
// is answered 57 (it may yet commit at the others), and its forwards end.
func (r *Router) StopJournal() {
	r.syncJournal = true
	r.plane.Files.Stop()
	if r.plane.Clustered {
		r.plane.Stop()
	}
}

// publish appends an entry to the commit log and tells every shard to catch up.
func (r *Router) publish(e *metaview.Entry) {
	r.viewTail.Append(e)
	r.viewTail = e
	r.shard.AnnounceCommit()
}

// clientOpened lists an accepted connection under the client id its shard gave
// it, anonymous until it logs in.
func (r *Router) ClientOpened(o *ClientOpened) {
	rec := r.record(o.Conn)
	rec.id = o.ID
	if o.Peer.IsValid() {
		rec.address = []byte(o.Peer.String())
		rec.source = o.Peer.Addr().Unmap()
	}
}

// record returns the connection's record, creating it if the connection is not
// listed yet (its registration always arrives first; this keeps a lookup total).
func (r *Router) record(conn shard.ConnID) *sessionRecord {
	if rec, ok := r.conns[conn]; ok {
		return rec
	}
	rec := &sessionRecord{userID: wire.ClientUserIDNone, conn: conn}
	r.conns[conn] = rec
	return rec
}

func (r *Router) Serve(j *request.Job) {
	hdr := j.Frame.Header
	if j.Kind == request.KindOpen {
		r.shard.Reply(j) // answered on the connection's shard already
		return
	}
	if j.Binding {
		r.callerWrite(j) // a partition write's session, registered before it goes on
		return
	}
	if j.Kind != request.KindLogin && j.Kind != request.KindWrite && j.Call == nil {
		// A connection whose client id registered again elsewhere is a zombie: fence
		// it on every plane, not only where the client table looks.
		epoch, _, ok := r.plane.Session(hdr.Client)
		switch {
		case !ok:
			j.Out.Evict = wire.EvictionNoSession
		case epoch > hdr.Session:
			j.Out.Evict = wire.EvictionSessionTooLow
		}
		if j.Out.Evict != 0 {
			r.shard.Reply(j)
			return
		}
	}
	switch j.Kind {
	case request.KindLogin:
		r.login(j)
	case request.KindWrite:
		r.InTurn(j.Conn, func() { r.write(j) })
	case request.KindRead:
		r.read(j)
	default:
		panic(fmt.Sprintf("server: a job of kind %d sent to shard 0, which routes no partition operation", j.Kind))
	}
}

// login decides a Register (codes 40 and 45) and commits it: the session epoch is
// the register's op. A password is verified off the shard first (package passwords):
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
func (r *Router) login(j *request.Job) {
	rb, err := wire.DecodeRegisterBody(j.Frame.Body)
	if err == nil && rb.HasPassword && rb.Password.CredentialsInRange() &&
		wire.AcceptedProtocolWindow.Accepts(rb.Version.ProtocolVersion) {
		r.checkPassword(j, rb.Password.Username, rb.Password.Password)
		return
	}
	r.InTurn(j.Conn, func() {
		r.plane.AfterAccountWrites(func() {
			r.decideLogin(j, metadata.Credentials{State: r.plane.State(), NowMicros: r.shard.NowMicros()})
		})
	})
}

// checkPassword hands a login's password to the workers; the job waits for it. A
// connection gets one login verified at a time (an SDK sends one and waits): a second
// one meanwhile is refused as not accepted, to be retried, so that a flood of logins
// holds at most a request buffer per connection; so is one whose source, or the
// workers, have as much waiting as they take (package passwords).
func (r *Router) checkPassword(j *request.Job, username, password []byte) {
	if _, busy := r.pw.checking[j.Conn]; busy {
		j.Out.Status = wire.ErrTransientNotAccepted
		r.shard.Reply(j)
		return
	}
	source := r.sourceOf(j)
	if !r.pw.failures.Allow(source, r.shard.NowNs()) {
		r.refuseBusy(j, "login", "the source failed too many password checks")
		return
	}
	c := &passwords.Check{Conn: j.Conn, Source: source, Hash: r.plane.State().PasswordHashToCheck(username),
		Password: append([]byte(nil), password...)}
	if !r.pw.workers.Submit(c) {
		r.refuseBusy(j, "login", "too much password work waiting from the source or in all")
		return
	}
	r.pw.checking[j.Conn] = passwordCheck{Check: c, job: j}
}

// refuseBusy answers a request whose argon2id work is refused (the workers have no
// room for it, or its source spent its failure budget): 58, retried by the client
// (a login for as long as its request deadline). Logged at most once a second, with
// how many were refused since.
func (r *Router) refuseBusy(j *request.Job, what, why string) {
	r.logRefusedBusy(j, what, why)
	j.Out.Status = wire.ErrTransientNotAccepted
	r.shard.Reply(j)
}

// logRefusedBusy counts a request refused for want of room at the workers, and
// logs it at most once a second.
func (r *Router) logRefusedBusy(j *request.Job, what, why string) {
	r.pw.refused++
	if now := r.shard.NowNs(); now-r.pw.refusedLoggedNs >= int64(time.Second) {
		r.log.Warn("password work refused", "request", what, "reason", why,
			"source", r.sourceOf(j).String(), "refused_since_last_line", r.pw.refused,
			"waiting", r.pw.workers.Waiting(), "per_source_max", passwords.WaitingPerSourceMax, "max", passwords.WaitingMax,
			"failures_burst", passwords.FailuresBurst, "failures_per_second", passwords.FailuresPerSecond)
		r.pw.refused, r.pw.refusedLoggedNs = 0, now
	}
}

// finishPasswordChecks resumes the logins whose passwords have been verified and the
// writes whose new passwords have been hashed, each in its turn among the metadata
// writes. It runs on shard 0's every turn (handler.Tick).
func (r *Router) FinishPasswordChecks() {
	r.pw.finished = r.pw.workers.Collect(r.pw.finished[:0])
	now := r.shard.NowNs()
	for i, w := range r.pw.finished {
		r.pw.finished[i] = nil
		switch w := w.(type) {
		case *passwords.Check:
			c := r.pw.checking[w.Conn]
			delete(r.pw.checking, w.Conn)
			if !w.Match {
				r.pw.failures.Failed(w.Source, now)
			}
			r.InTurn(w.Conn, func() { r.plane.AfterAccountWrites(func() { r.resumeLogin(c) }) })
		case *passwords.NewPassword:
			delete(r.pw.changing, w.Conn)
			if errors.Is(w.Err, wire.ErrInvalidCredentials) {
				r.pw.failures.Failed(w.Source, now)
			}
			if !r.open(w.Conn) {
				// The connection is gone: nothing is proposed for it.
				r.plane.CancelHashing(w.ID)
				continue
			}
			r.plane.PasswordHashed(w.ID, w.Proposal, w.Err, r.shard.NowMicros())
		case *passwords.RootUser:
			r.plane.PasswordHashed(w.ID, w.Proposal, w.Err, r.shard.NowMicros())
		}
	}
}

// resumeLogin decides a login whose password has been verified, in its turn among
// the metadata writes.
func (r *Router) resumeLogin(c passwordCheck) {
	j := c.job
	rb, _ := wire.DecodeRegisterBody(j.Frame.Body) // decoded once already
	if hash := r.plane.State().PasswordHashToCheck(rb.Password.Username); hash != c.Hash {
		// The user changed (a new password, deleted, created) while the password
		// was being verified: verify against what holds now.
		r.checkPassword(j, rb.Password.Username, rb.Password.Password)
		return
	}
	r.decideLogin(j, verifiedCredentials{
		Credentials: metadata.Credentials{State: r.plane.State(), NowMicros: r.shard.NowMicros()},
		match:       c.Match,
	})
}

// abandonPasswordChecks answers the logins and the new passwords still with the
// password workers when shard 0 stops: the server is going away, the client may
// retry elsewhere or later. A new password's write was never numbered, so it is
// refused as not accepted (58): nothing of it was applied.
func (r *Router) AbandonPasswordChecks() {
	if n := len(r.pw.checking) + len(r.pw.changing); n > 0 {
		r.log.Info("logins and password changes abandoned at shutdown", "logins", len(r.pw.checking), "password_changes", len(r.pw.changing))
	}
	for _, c := range r.pw.checking {
		c.job.Out.Status = wire.ErrTransientNotCommitted
		r.shard.Reply(c.job)
	}
	for _, n := range r.pw.changing {
		r.plane.CancelHashing(n.ID)
		n.job.Out.Status = wire.ErrTransientNotAccepted
		r.shard.Reply(n.job)
	}
	r.pw.abandoned += len(r.pw.checking) + len(r.pw.changing)
	clear(r.pw.checking)
	clear(r.pw.changing)
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
func (r *Router) decideLogin(j *request.Job, creds wire.CredentialChecker) {
	if !r.open(j.Conn) {
		r.shard.Reply(j) // the connection is gone: its shard just recycles the job
		return
	}
	hdr := j.Frame.Header
	decision := wire.DecideRegister(j.Frame.Body, wire.AcceptedProtocolWindow, creds)
	if !decision.LoggedIn() && r.mayLag(j, decision.Reason) {
		r.awaitPrimary(j)
		return
	}
	if !decision.LoggedIn() {
		j.Out.Evict = decision.Reason
		r.log.Info("login refused", "conn", j.Conn.String(), "reason", decision.Reason.String())
		r.shard.Reply(j)
		return
	}
	if j.Call != nil {
		// A caller's login checks the credentials only: its session is the
		// transport's token.
		j.UserID = decision.UserID
		j.Out.Reply = callLoginReply(j.Out.Reply, decision.UserID)
		r.shard.Reply(j)
		return
	}
	rec := r.record(j.Conn)
	if rec.epoch != 0 {
		r.replayLogin(j, rec, decision.UserID)
		return
	}
	r.plane.Register(r.track(j, rec), hdr, decision.UserID, r.shard.NowMicros())
}

// loggedIn binds a connection's record and its job to the session a committed
// Register gave it (the job holds the login's reply).
func (r *Router) loggedIn(j *request.Job, rec *sessionRecord, userID uint32, epoch uint64) {
	hdr := j.Frame.Header
	j.Login.LoggedIn = true
	j.UserID = userID
	if rb, err := wire.DecodeRegisterBody(j.Frame.Body); err == nil && !rb.HasPassword && rb.HasToken {
		hash := metadata.HashToken(rb.Token.Token)
		j.Login.Token = &hash
	}
	j.Login.Epoch = epoch
	j.Login.Seen = new(atomic.Int64)
	j.Login.Seen.Store(r.shard.NowNs())
	rec.userID, rec.client, rec.epoch, rec.seen = userID, hdr.Client, j.Login.Epoch, j.Login.Seen
	r.sessions[hdr.Client] = rec
}

// replayLogin answers a Register on a logged-in connection with its session:
// the same reply a fresh login gets (result-framed, operation Register), the
// epoch the connection holds, nothing committed. The connection's state on its
// shard is left as it is.
func (r *Router) replayLogin(j *request.Job, rec *sessionRecord, userID uint32) {
	login := wire.LoginRegisterReply{UserID: userID, Session: rec.epoch, ServerProtocolVersion: wire.ServerProtocolVersion,
		ServerVersion: []byte(ServerVersion)}
	j.Out.Reply = append(j.Out.Reply[:0], make([]byte, wire.HeaderSize)...)
	j.Out.Reply = wire.AppendResultSuccess(j.Out.Reply)
	j.Out.Reply, _ = login.Append(j.Out.Reply)
	rh := wire.ReplyTo(j.Frame.Header, 0, len(j.Out.Reply)-wire.HeaderSize, true)
	rh.Op, rh.Commit = rec.epoch, max(r.plane.Core().CommitMax(), rec.epoch)
	rh.Put(j.Out.Reply)
	j.Out.RawFrame = true
	r.log.Info("login on a logged-in connection: session kept", "conn", j.Conn.String(), "epoch", rec.epoch)
	r.shard.Reply(j)
}

// write hands a metadata write (and Logout) to the plane, which runs it through
// the client table and the replica: exactly once per (client, request).
func (r *Router) write(j *request.Job) {
	if _, busy := r.pw.changing[j.Conn]; busy {
		// The connection's CreateUser or ChangePassword is with the password
		// workers: a later request of it must not commit first (the client table
		// would then take the earlier one for a replay). The SDKs send one request
		// at a time and never get here; a pipelining client retries.
		j.Out.Status = wire.ErrTransientNotAccepted
		r.shard.Reply(j)
		return
	}
	if j.Call != nil {
		r.callerWrite(j)
		return
	}
	req := metaplane.Request{Header: j.Frame.Header, UserID: j.UserID, Body: j.Frame.Body, NowMicros: r.shard.NowMicros()}
	r.plane.Write(r.track(j, r.conns[j.Conn]), req)
}

// loggedOut makes a connection whose Logout committed anonymous again.
func (r *Router) loggedOut(j *request.Job) {
	client := j.Frame.Header.Client
	if rec, ok := r.sessions[client]; ok && rec.conn == j.Conn {
		delete(r.sessions, client)
	}
	if rec, ok := r.conns[j.Conn]; ok {
		rec.userID, rec.client, rec.epoch, rec.seen = wire.ClientUserIDNone, wire.Uint128{}, 0, nil
	}
}

// hashPassword hands the plane's argon2id work to the workers (metaplane.Host):
// a CreateUser's or ChangePassword's new password, checked against its source's
// failure budget, or a cluster's root user. It reports false when the workers
// have no room, or shard 0 stops; the plane then refuses the write (58).
func (r *Router) hashPassword(id uint64, w *metaplane.PasswordWork) bool {
	if r.syncJournal {
		return false // shard 0 is stopping: nothing more is handed to the workers
	}
	if w.Root {
		return r.pw.workers.Submit(&passwords.RootUser{ID: id, Username: w.Username, Password: w.Password, Salt: w.Salt})
	}
	pj, ok := r.pending[w.Token]
	if !ok {
		return false
	}
	j := pj.j
	source := r.sourceOf(j)
	if w.Operation == wire.OperationChangePassword && !r.pw.failures.Allow(source, r.shard.NowNs()) {
		r.logRefusedBusy(j, w.Operation.String(), "the source failed too many password checks")
		return false
	}
	n := &passwords.NewPassword{ID: id, Conn: j.Conn, Source: source, Op: w.Operation, Body: w.Body, Salt: w.Salt, CurrentHash: w.CurrentHash}
	if !r.pw.workers.Submit(n) {
		r.logRefusedBusy(j, w.Operation.String(), "too much password work waiting from the source or in all")
		return false
	}
	r.pw.changing[j.Conn] = newPassword{NewPassword: n, job: j}
	return true
}

// clientGone: a connection closed, in its turn after the connection's writes and
// login with the plane. It leaves the connection list; a logged-in one's session
// ends through the log (an EndSessions op), so a restart and every replica agree.
// A login that committed after the connection's shard saw it close counts as
// logged in here.
func (r *Router) ClientGone(g *ClientGone) {
	rec := r.conns[g.Conn]
	delete(r.conns, g.Conn)
	client, loggedIn, session := g.Client, g.LoggedIn, g.Epoch
	if rec != nil && rec.epoch != 0 {
		client, loggedIn, session = rec.client, true, rec.epoch
	}
	if !loggedIn {
		return
	}
	if rec, ok := r.sessions[client]; ok && rec.conn == g.Conn {
		delete(r.sessions, client)
	}
	// The session ends through the log, on every replica alike (metaplane's
	// EndSession): its client table entry and its consumer group memberships.
	r.plane.EndSession(client, session, r.shard.NowMicros())
}
