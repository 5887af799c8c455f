package metaplane

import (
	"encoding/binary"
	"errors"

	"github.com/iggy-shard/iggy-shard/metadata"
	"github.com/iggy-shard/iggy-shard/vsr"
	"github.com/iggy-shard/iggy-shard/wire"
)

// Admission: a request is checked against the applied state (the client table's
// Preflight, State.Admit), and only then proposed; State.Apply, not admission, is
// authoritative: an op that an earlier op in flight made invalid commits as a
// refusal (result-framed), on every replay the same. Writes are pipelined: up to
// the core's pipeline depth are numbered and in flight at once; the writes that
// come while a Ready is out wait in the Driver and go into the next Ready, one
// journal write and one fsync for all of them (group commit).

// writes are the plane's proposals: by the Driver's token until proposed
// (byToken); those numbered, in op order, until applied (inflight).
type writes struct {
	byToken  map[uint64]*write
	inflight []*write
	// perClient counts, by client, the numbered requests with the plane: the
	// client table's one request in flight per client, across connections.
	perClient map[wire.Uint128]int
	// minted are the personal access tokens of the clients' last
	// CreatePersonalAccessToken, for their retries.
	minted map[wire.Uint128]mintedToken
}

// loginGate holds logins while a write that changes what a login decides on is
// in flight (accountWrites counts them); waiting run once none is.
type loginGate struct {
	accountWrites int
	waiting       []func()
}

// passwordHashes are the writes whose new password the host hashes, by the id
// the plane gave the work (byID; nextID the last given), and the requests they
// carry, by the Driver's token.
type passwordHashes struct {
	byID     map[uint64]*hashing
	nextID   uint64
	requests map[uint64]*pendingRequest
}

// write is one proposal on its way through the plane. done runs once: with the
// commit right after it applied (before the next op applies), or with the error
// that stopped it.
type write struct {
	// proposed, when set, is told the op the write was prepared as.
	proposed  func(op uint64)
	proposal  vsr.Proposal
	body      []byte // stable: the journal, the host's views and the core alias it
	nowMicros uint64
	done      func(c *Commit, err error)
	op        uint64
	// identity is the prepare's: in a cluster another primary's op may take the
	// same number after a view change, and it is not this write's commit.
	identity wire.Uint128
	commit   Commit
	// fateDeadline: prepared here, then this replica stopped leading; answered
	// when its op applies here, or 57 at this core tick (expireFates).
	fateDeadline uint64
}

// Request is a client's metadata request at this replica.
type Request struct {
	Header *wire.RequestHeader
	// UserID is the user the request's session is bound to.
	UserID uint32
	Body   []byte
	// NowMicros is when it arrived: the proposal's clock.
	NowMicros uint64
}

// pendingRequest is a request whose answer waits (its new password with the
// host's workers, or its commit): a copy of what its answer needs.
type pendingRequest struct {
	header    wire.RequestHeader
	userID    uint32
	body      []byte
	nowMicros uint64
}

// hashing is a request whose new password the host hashes, or the root user's.
type hashing struct {
	token       uint64
	root        bool
	currentHash string
}

// mintedToken is the personal access token of a client's last committed
// CreatePersonalAccessToken, kept in memory only, so that a retry of that request
// is answered with it like any other replay: the client table, whose entries reach
// the snapshot, caches the reply with the token withheld.
type mintedToken struct {
	request uint64
	token   []byte
}

// AccountOperation reports whether op changes what a login is decided on: a
// user's password, status or existence, a token's existence.
func AccountOperation(op wire.Operation) bool {
	switch op {
	case wire.OperationUpdateUser, wire.OperationDeleteUser, wire.OperationChangePassword, wire.OperationDeletePersonalAccessToken:
		return true
	}
	return false
}

// notCommittedCode is the status of a write the plane did not commit: 58 when it
// was never numbered (too many waited, or this replica was not the primary), 57
// when its fate is unknown (the journal failed, the node stopped).
func notCommittedCode(err error) wire.ErrorCode {
	if errors.Is(err, ErrWritesBusy) || errors.Is(err, ErrNotPrimary) {
		return wire.ErrTransientNotAccepted
	}
	return wire.ErrTransientNotCommitted
}

// commit hands a proposal to the Driver; then runs with the commit or the error
// that stopped it (ErrWritesBusy when too many wait, ErrNotPrimary, a broken
// journal). The host has the commit (Committed) before then runs.
func (p *Plane) commit(prop vsr.Proposal, body []byte, nowMicros uint64, then func(c *Commit, err error)) {
	p.commitProposed(prop, body, nowMicros, nil, then)
}

// commitProposed is commit, with proposed told the op the write is prepared as.
func (p *Plane) commitProposed(prop vsr.Proposal, body []byte, nowMicros uint64, proposed func(op uint64), then func(c *Commit, err error)) {
	p.noteNow(nowMicros)
	if p.broken != nil {
		then(nil, p.broken)
		return
	}
	account := AccountOperation(prop.Operation)
	if account {
		p.logins.accountWrites++
	}
	request := prop.Request != 0 // a client's numbered request, not a login or the server's own op
	if request {
		p.writes.perClient[prop.Client]++
	}
	w := &write{proposal: prop, body: append([]byte(nil), body...), nowMicros: max(nowMicros, p.lastNow), proposed: proposed}
	w.done = func(c *Commit, err error) {
		if n := p.writes.perClient[prop.Client] - 1; request && n > 0 {
			p.writes.perClient[prop.Client] = n
		} else if request {
			delete(p.writes.perClient, prop.Client)
		}
		then(c, err)
		if account {
			p.logins.accountWrites--
			p.resumeLogins()
		}
	}
	p.nextToken++
	token := p.nextToken
	p.writes.byToken[token] = w
	p.counters.writesWaiting.Store(int64(len(p.writes.byToken)))
	if err := p.driver.Propose(token); err != nil {
		delete(p.writes.byToken, token)
		p.counters.writesWaiting.Store(int64(len(p.writes.byToken)))
		if errors.Is(err, vsr.ErrPipelineFull) {
			err = ErrWritesBusy
		}
		w.done(nil, err)
	}
}

// AfterAccountWrites runs a login's decision once no write that changes accounts
// is in flight: logins are decided on the applied state, and a session must not
// commit for an account an op before it deletes, deactivates or re-keys.
func (p *Plane) AfterAccountWrites(decide func()) {
	if p.logins.accountWrites > 0 {
		p.logins.waiting = append(p.logins.waiting, decide)
		p.counters.loginsWaiting.Store(int64(len(p.logins.waiting)))
		return
	}
	decide()
}

func (p *Plane) resumeLogins() {
	for p.logins.accountWrites == 0 && len(p.logins.waiting) > 0 {
		next := p.logins.waiting[0]
		p.logins.waiting[0] = nil
		p.logins.waiting = p.logins.waiting[1:]
		p.counters.loginsWaiting.Store(int64(len(p.logins.waiting)))
		next()
	}
}

func (p *Plane) answer(token uint64, a Answer) { p.host.Answer(token, &a) }

func (p *Plane) answerStatus(token uint64, code wire.ErrorCode) {
	p.answer(token, Answer{Status: code})
}

// Write admits a client's metadata write (or Logout) and proposes it, exactly once
// per (client, request): a retry of a committed request is answered from the
// client table. The answer comes through Host.Answer(token).
func (p *Plane) Write(token uint64, r Request) {
	p.write(token, r, nil)
}

// write is Write for a request whose new password, if it has one, hashed holds
// (nil: not hashed yet). Every check runs again on the state of now.
func (p *Plane) write(token uint64, r Request, hashed []byte) {
	hdr := r.Header
	op := hdr.Operation
	verdict, cached := p.table.Preflight(hdr.Client, hdr.Session, hdr.Request, hdr.RequestChecksum)
	switch verdict {
	case vsr.PreflightReplay:
		p.replay(token, hdr, cached)
		return
	case vsr.PreflightNoSession, vsr.PreflightSessionTooHigh:
		// The reference drops a too-high epoch; answering with an eviction spares
		// the client its request timeout.
		p.answer(token, Answer{Evict: wire.EvictionNoSession})
		return
	case vsr.PreflightSessionTooLow:
		p.answer(token, Answer{Evict: wire.EvictionSessionTooLow})
		return
	case vsr.PreflightInFlight:
		p.answerStatus(token, wire.ErrTransientNotAccepted)
		return
	case vsr.PreflightExecute:
		if p.writes.perClient[hdr.Client] > 0 || p.cfg.Clustered && p.core.InPipeline(hdr.Client) {
			// The client's previous request is still with the plane (from
			// another connection: a connection's own wait their turn), or in
			// this primary's pipeline from an earlier view (a retry of it: it
			// is answered from the table once it commits).
			p.answerStatus(token, wire.ErrTransientNotAccepted)
			return
		}
	case vsr.PreflightConflict:
		// The same request number with other arguments: neither a replay nor a
		// new request. The reference drops it; a status tells the client at once.
		p.answerStatus(token, wire.ErrInvalidCommand)
		return
	case vsr.PreflightAlreadyApplied:
		if op == wire.OperationLogout {
			p.answerStatus(token, wire.ErrRequestAlreadyApplied)
		} else {
			p.answer(token, Answer{Rejection: wire.ErrRequestAlreadyApplied})
		}
		return
	}
	if !p.IsPrimary() {
		// Metadata writes are admitted on the metadata primary only
		// (iggy.apache.org/docs/clustering/client-failover): a backup, or a
		// replica changing view, answers 58; the SDKs retry and look for the
		// leader. A logout travels to the primary, as a login does.
		if op == wire.OperationLogout && p.core.Status() == vsr.StatusNormal {
			p.forwardLogout(token, hdr)
			return
		}
		p.answerStatus(token, wire.ErrTransientNotAccepted)
		return
	}
	body := r.Body
	if op == wire.OperationLogout {
		p.commitWrite(token, r, body, nil)
		return
	}
	if err := p.state.Admit(op, r.UserID, body); err != nil {
		p.answerStatus(token, errorCode(err, wire.ErrInvalidCommand))
		return
	}
	if op == wire.OperationCreateUser || op == wire.OperationChangePassword {
		p.writeNewPassword(token, r, hashed)
		return
	}
	proposal, minted, err := p.proposeBody(op, body)
	if err != nil {
		p.answerStatus(token, errorCode(err, wire.ErrInvalidCommand))
		return
	}
	p.commitWrite(token, r, proposal, minted)
}

// proposeBody rewrites the bodies whose proposal differs from the request and
// takes no argon2id run: a token is minted, and its digest proposed; the token
// itself is returned for the reply only.
func (p *Plane) proposeBody(op wire.Operation, body []byte) (proposal, token []byte, err error) {
	if op == wire.OperationCreatePersonalAccessToken {
		var secret [metadata.TokenSecretBytes]byte
		p.host.Entropy(secret[:])
		token = metadata.EncodeToken(&secret)
		proposal, err = metadata.ProposeCreatePersonalAccessToken(nil, body, metadata.HashToken(token))
		return proposal, token, err
	}
	return body, nil, nil
}

// commitWrite commits a write's proposal and answers its client. minted is the
// personal access token a CreatePersonalAccessToken minted (nil otherwise): it
// goes into the reply sent, never into the proposal or the cached reply.
func (p *Plane) commitWrite(token uint64, r Request, proposal, minted []byte) {
	hdr := *r.Header
	op := hdr.Operation
	prop := vsr.Proposal{Client: hdr.Client, Request: hdr.Request, RequestChecksum: hdr.RequestChecksum, Operation: op, UserID: r.UserID}
	p.commit(prop, proposal, r.NowMicros, func(c *Commit, err error) {
		if err != nil {
			p.answerStatus(token, notCommittedCode(err))
			return
		}
		if c.Skipped {
			// Prepared twice, or its session ended meanwhile: answered as a retry
			// is.
			switch {
			case c.Frame != nil:
				p.replay(token, &hdr, c.Frame)
			case op == wire.OperationLogout:
				p.answerStatus(token, wire.ErrRequestAlreadyApplied)
			default:
				p.answer(token, Answer{Rejection: wire.ErrRequestAlreadyApplied})
			}
			return
		}
		// The client's table entry now caches this reply: a token kept for the
		// replay of its previous one is of no more use.
		delete(p.writes.minted, hdr.Client)
		frame := c.Frame
		if minted != nil && op == wire.OperationCreatePersonalAccessToken && metadata.TokenWithheld(frame[wire.HeaderSize:]) {
			frame = AppendWithheldToken(append([]byte(nil), frame...), minted)
			p.writes.minted[hdr.Client] = mintedToken{request: hdr.Request, token: minted}
		}
		p.answer(token, Answer{Frame: frame, LoggedOut: op == wire.OperationLogout})
	})
}

// replay answers a retried request with its cached reply. A
// CreatePersonalAccessToken reply is cached with its token withheld: the token is
// added back from memory, and when the plane no longer has it (it restarted since,
// or the table entry outlived the connection) the retry is told its request was
// applied (the token exists, but no one can be shown it again; the user deletes
// and recreates it).
func (p *Plane) replay(token uint64, hdr *wire.RequestHeader, cached []byte) {
	if hdr.Operation == wire.OperationCreatePersonalAccessToken && len(cached) >= wire.HeaderSize &&
		metadata.TokenWithheld(cached[wire.HeaderSize:]) {
		minted, ok := p.writes.minted[hdr.Client]
		if !ok || minted.request != hdr.Request {
			p.answer(token, Answer{Rejection: wire.ErrRequestAlreadyApplied})
			return
		}
		p.answer(token, Answer{Frame: AppendWithheldToken(append([]byte(nil), cached...), minted.token)})
		return
	}
	// A Logout's replay ends the connection's session as the Logout did.
	p.answer(token, Answer{Frame: cached, LoggedOut: hdr.Operation == wire.OperationLogout})
}

// AppendWithheldToken completes a committed CreatePersonalAccessToken reply frame
// (metadata.TokenWithheld) with the token: its payload, and the size in its header.
func AppendWithheldToken(frame, token []byte) []byte {
	frame = (&wire.CreatedToken{Token: token}).Append(frame)
	binary.LittleEndian.PutUint32(frame[wire.SizeFieldOffset:], uint32(len(frame)))
	return frame
}

// writeNewPassword commits a CreateUser or ChangePassword, admitted, once hashed
// holds its proposal, or hands it to the host's workers first. A request its user
// may not make is refused before any argon2id run and never journaled, with the
// code Apply would have committed (in the result section, as a committed refusal
// is): so a user without permissions cannot keep the workers busy.
func (p *Plane) writeNewPassword(token uint64, r Request, hashed []byte) {
	op := r.Header.Operation
	if code := p.state.AuthorizeNewPassword(op, r.UserID, r.Body); code != 0 {
		p.answer(token, Answer{Rejection: code})
		return
	}
	if hashed != nil {
		p.commitWrite(token, r, hashed, nil)
		return
	}
	w := &PasswordWork{Token: token, Operation: op, Body: append([]byte(nil), r.Body...), Salt: make([]byte, metadata.PasswordSaltBytes)}
	p.host.Entropy(w.Salt)
	if op == wire.OperationChangePassword {
		current, err := p.state.ChangePasswordCurrentHash(w.Body)
		if err != nil {
			p.answerStatus(token, errorCode(err, wire.ErrInvalidCommand))
			return
		}
		w.CurrentHash = current
	}
	p.passwords.nextID++
	id := p.passwords.nextID
	if !p.host.HashPassword(id, w) {
		p.answerStatus(token, wire.ErrTransientNotAccepted)
		return
	}
	p.passwords.byID[id] = &hashing{token: token, currentHash: w.CurrentHash}
	p.passwords.requests[token] = &pendingRequest{header: *r.Header, userID: r.UserID, body: w.Body, nowMicros: r.NowMicros}
}

// PasswordHashed completes the host's HashPassword id: the proposal the worker
// made, or why it made none (wire.ErrInvalidCredentials: a ChangePassword's current
// password did not match). A write is decided again on the state of now; nowMicros
// is its proposal's clock.
func (p *Plane) PasswordHashed(id uint64, proposal []byte, err error, nowMicros uint64) {
	hw, ok := p.passwords.byID[id]
	if !ok {
		return
	}
	delete(p.passwords.byID, id)
	if hw.root {
		p.rootUserHashed(proposal, err, nowMicros)
		return
	}
	pr := p.passwords.requests[hw.token]
	delete(p.passwords.requests, hw.token)
	r := Request{Header: &pr.header, UserID: pr.userID, Body: pr.body, NowMicros: nowMicros}
	if err != nil {
		if code := errorCode(err, wire.ErrInvalidCommand); code == wire.ErrInvalidCredentials {
			p.answer(hw.token, Answer{Rejection: code})
		} else {
			p.answerStatus(hw.token, code)
		}
		return
	}
	if r.Header.Operation == wire.OperationChangePassword {
		if current, err := p.state.ChangePasswordCurrentHash(r.Body); err != nil || current != hw.currentHash {
			// The user's password changed while this one was verified: what was
			// verified no longer proves anything; verify against what holds now.
			proposal = nil
		}
	}
	if proposal == nil {
		p.write(hw.token, r, nil)
		return
	}
	p.write(hw.token, r, proposal)
}

// AbandonHashing forgets the password work the host will not finish (a stopping
// node): the host answers those requests itself.
func (p *Plane) AbandonHashing() {
	clear(p.passwords.byID)
	clear(p.passwords.requests)
	p.root.pending = false
}

// Register commits a login the host verified (credentials, protocol version) for
// client as userID: a new session whose epoch is the Register's op. A client id
// bound to another user is not taken over; a backup forwards the login to the
// primary and answers once it applied the Register itself.
func (p *Plane) Register(token uint64, hdr *wire.RequestHeader, userID uint32, nowMicros uint64) {
	if _, owner, known := p.table.Session(hdr.Client); known && owner != userID {
		// The reference drops such a register; an eviction tells the client at
		// once.
		p.answer(token, Answer{Evict: wire.EvictionSessionError})
		return
	}
	if !p.IsPrimary() {
		if p.core.Status() != vsr.StatusNormal {
			// No primary to forward to: the view is changing (58, retried).
			p.answerStatus(token, wire.ErrTransientNotAccepted)
			return
		}
		p.forwardLogin(token, *hdr, userID)
		return
	}
	prop := vsr.Proposal{Client: hdr.Client, RequestChecksum: hdr.RequestChecksum, Operation: wire.OperationRegister, UserID: userID}
	p.commit(prop, nil, nowMicros, func(c *Commit, err error) {
		switch {
		case errors.Is(err, ErrNotPrimary):
			p.answerStatus(token, wire.ErrTransientNotAccepted)
		case err != nil:
			p.answer(token, Answer{Rejection: notCommittedCode(err)})
		default:
			p.answer(token, Answer{Frame: c.Frame, Epoch: c.Epoch, UserID: userID})
		}
	})
}

// LoginFrame is the reply frame of a login whose Register committed at epoch
// elsewhere (a forwarded login): what the primary's apply cached, the session's
// epoch as op and commit.
func (p *Plane) LoginFrame(hdr *wire.RequestHeader, userID uint32, epoch uint64) []byte {
	login := wire.LoginRegisterReply{UserID: userID, Session: epoch, ServerProtocolVersion: wire.ServerProtocolVersion,
		ServerVersion: []byte(p.cfg.ServerVersion)}
	frame := make([]byte, wire.HeaderSize, 512)
	frame = wire.AppendResultSuccess(frame)
	frame, _ = login.Append(frame)
	rh := wire.ReplyTo(hdr, 0, len(frame)-wire.HeaderSize, true)
	rh.Op, rh.Commit = epoch, epoch
	rh.Put(frame)
	return frame
}

// errorCode is err's protocol code, or fallback when it has none.
func errorCode(err error, fallback wire.ErrorCode) wire.ErrorCode {
	if code, ok := err.(wire.ErrorCode); ok && code != 0 {
		return code
	}
	return fallback
}

// CancelHashing forgets password work whose request the host answers itself (its
// connection is gone): nothing is proposed for it.
func (p *Plane) CancelHashing(id uint64) {
	if hw, ok := p.passwords.byID[id]; ok {
		delete(p.passwords.byID, id)
		delete(p.passwords.requests, hw.token)
		if hw.root {
			p.root.pending = false
		}
	}
}

// Propose commits an op of the host's own, no client's request (then runs with
// its commit, or the error that stopped it).
func (p *Plane) Propose(prop vsr.Proposal, body []byte, nowMicros uint64, then func(c *Commit, err error)) {
	p.commit(prop, body, nowMicros, then)
}
