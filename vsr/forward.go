package vsr

import (
	"errors"
	"slices"

	"github.com/iggy-shard/iggy-shard/wire"
)

// Session forwarding: a client may log in at a backup; the backup authenticates it
// and forwards only the verified identity to the primary (ForwardRegister), which
// proposes the Register in-process and answers with the session epoch once it is
// committed and applied; a logout travels the same way (ForwardLogout). See
// iggy.apache.org/docs/binary-protocol/server-to-server, "Session forwarding". The
// frames belong to the metadata plane only.

// ForwardTimeoutTicks is how long an origin waits for the primary's answer before
// it reports a timeout (the reference waits 5 s, then answers a transient error).
const ForwardTimeoutTicks = 500

// forwardsMax bounds the forwards in flight at one origin and at the primary.
const forwardsMax = 256

// ErrForwardsFull: too many forwarded logins or logouts are waiting already.
var ErrForwardsFull = errors.New("vsr: too many forwards in flight")

// ErrIsPrimary: the primary proposes a login or logout itself, it does not forward.
var ErrIsPrimary = errors.New("vsr: this replica is the primary: propose instead of forwarding")

// Sessions is the primary's read of the replicated client table, which forwarding
// needs and the core does not own.
type Sessions interface {
	// RegisterAllowed reports whether client may bind to userID: a client id bound
	// to another user is not taken over.
	RegisterAllowed(client wire.Uint128, userID uint32) bool
	// Watermark is the client's committed request watermark.
	Watermark(client wire.Uint128) uint64
}

// ForwardOutcome is the answer to a forward this replica originated, handed out in
// Ready.Forwards: the primary's verdict (Outcome is a wire.ForwardRegisterOutcome or a
// wire.ForwardLogoutOutcome, by Register), or TimedOut when none came in time.
type ForwardOutcome struct {
	Nonce    wire.Uint128
	Client   wire.Uint128
	Register bool
	TimedOut bool
	Outcome  uint8
	// Epoch and Watermark answer a register, Commit a logout; zero unless Ok.
	Epoch     uint64
	Watermark uint64
	Commit    uint64
}

// forwarding is the state of forwarded logins, logouts and session ends: those
// this replica sent its primary and awaits, and, at the primary, those it admitted
// and answers once their ops apply.
type forwarding struct {
	nonce uint64
	out   []forwardOrigin
	in    []forwardAtPrimary
	// sessionEnds are the forwarded session ends the caller has not taken yet
	// (TakeSessionEnds).
	sessionEnds []SessionEnd
}

type forwardOrigin struct {
	nonce    wire.Uint128
	client   wire.Uint128
	register bool
	deadline uint64
}

type forwardAtPrimary struct {
	// op is 0 for a session end the caller has not proposed yet.
	op       uint64
	identity wire.Uint128
	from     uint8
	nonce    wire.Uint128
	client   wire.Uint128
	register bool
	// end: a session end (ForwardSessionEnd) of the session epoch.
	end   bool
	epoch uint64
}

// SessionEnd is a session whose connection closed: the session epoch of client.
type SessionEnd struct {
	Client wire.Uint128
	Epoch  uint64
}

// ForwardRegister sends a login verified here to the primary. Its outcome comes in
// a later Ready's Forwards under the returned nonce.
func (c *Core) ForwardRegister(client wire.Uint128, userID uint32) (wire.Uint128, error) {
	if client.IsZero() {
		return wire.Uint128{}, errors.New("vsr: forward of client id 0")
	}
	return c.forward(client, true, func(h *wire.GenericHeader, nonce wire.Uint128) {
		f := (*wire.ForwardRegisterHeader)(headerPointer(h))
		f.Client, f.Nonce, f.UserID = client, nonce, userID
	})
}

// ForwardLogout sends a logout of a session to the primary. A logout of client 0
// with no session and no request is a read barrier (ForwardReadBarrier); one of
// request 0 ends a session whose connection closed (ForwardSessionEnd).
func (c *Core) ForwardLogout(client wire.Uint128, session, request uint64) (wire.Uint128, error) {
	if client.IsZero() && session == 0 && request == 0 {
		return c.ForwardReadBarrier()
	}
	if request == 0 && session != 0 && !client.IsZero() {
		return c.ForwardSessionEnd(client, session)
	}
	if session == 0 || request == 0 {
		return wire.Uint128{}, errors.New("vsr: a forwarded logout needs its session and request number")
	}
	if client.IsZero() {
		return wire.Uint128{}, errors.New("vsr: forward of client id 0")
	}
	return c.forward(client, false, func(h *wire.GenericHeader, nonce wire.Uint128) {
		f := (*wire.ForwardLogoutHeader)(headerPointer(h))
		f.Client, f.Nonce, f.Session, f.Request = client, nonce, session, request
	})
}

func (c *Core) forward(client wire.Uint128, register bool, fill func(*wire.GenericHeader, wire.Uint128)) (wire.Uint128, error) {
	c.checkNoReadyOut("a forward")
	switch {
	case c.cfg.Group != wire.MetadataGroup:
		return wire.Uint128{}, errors.New("vsr: sessions are forwarded on the metadata plane only")
	case c.status == StatusNormal && c.Primary() == c.cfg.ReplicaID:
		return wire.Uint128{}, ErrIsPrimary
	case c.status != StatusNormal:
		return wire.Uint128{}, ErrNotNormal
	case len(c.forwards.out) >= forwardsMax:
		return wire.Uint128{}, ErrForwardsFull
	}
	c.forwards.nonce++
	// The nonce names the origin too, so two backups' forwards never collide.
	nonce := wire.Uint128{Lo: c.forwards.nonce, Hi: uint64(c.cfg.ReplicaID) + 1}
	command := wire.CommandForwardLogout
	if register {
		command = wire.CommandForwardRegister
	}
	h := c.message(c.Primary(), command)
	fill(h, nonce)
	c.seal(nil)
	c.forwards.out = append(c.forwards.out, forwardOrigin{nonce: nonce, client: client, register: register, deadline: c.now + ForwardTimeoutTicks})
	return nonce, nil
}

// forwardTaken reports whether the forward under nonce from replica is being
// served here already: a copy of its frame is dropped (counted), not answered
// InProgress, which would tell the origin that what the first copy had this
// primary propose was never taken.
func (c *Core) forwardTaken(from uint8, nonce wire.Uint128) bool {
	for i := range c.forwards.in {
		if f := &c.forwards.in[i]; f.from == from && f.nonce == nonce {
			c.drops[DropDuplicate]++
			return true
		}
	}
	return false
}

func (c *Core) onForwardRegister(m *wire.ForwardRegisterHeader) error {
	if m.Client.IsZero() {
		return badMessage("a ForwardRegister of client 0")
	}
	if c.forwardTaken(m.Replica, m.Nonce) {
		return nil
	}
	outcome := c.admitForward(m.Replica, m.Client, m.Nonce, true, Proposal{Client: m.Client, Operation: wire.OperationRegister, UserID: m.UserID})
	if outcome != uint8(wire.ForwardRegisterOk) {
		c.sendForwardRegisterResult(m.Replica, m.Nonce, m.Client, outcome, 0, 0)
	}
	return nil
}

// ForwardReadBarrier asks the primary for its commit point: a ForwardLogout of
// client 0, with no session and no request, which the primary answers at once with
// ForwardLogoutResult Ok and its commit point in commit, proposing nothing. This is
// our use of the spec's frames for a read barrier (raft's ReadIndex): a backup that
// has applied up to that commit point has applied every op the primary had
// acknowledged to any client before the barrier reached it, so a login refused
// here for a user or token the client just created at the primary can be decided
// again on a state that holds it. A logout of no client ends no session. Its
// answer comes in a later Ready's Forwards (Client zero, Commit).
func (c *Core) ForwardReadBarrier() (wire.Uint128, error) {
	return c.forward(wire.Uint128{}, false, func(h *wire.GenericHeader, nonce wire.Uint128) {
		f := (*wire.ForwardLogoutHeader)(headerPointer(h))
		f.Nonce = nonce
	})
}

// ForwardSessionEnd sends to the primary the end of a session whose connection
// closed here: a ForwardLogout of request 0, our use of the spec's frame. The
// primary hands it to its caller (TakeSessionEnds), which proposes the ends that
// came together in one op (SessionEndsProposed), and answers ForwardLogoutResult
// Ok with that op once applied, or Canceled if the view changes first (the origin
// tries again).
func (c *Core) ForwardSessionEnd(client wire.Uint128, epoch uint64) (wire.Uint128, error) {
	if client.IsZero() || epoch == 0 {
		return wire.Uint128{}, errors.New("vsr: a forwarded session end needs its client and session")
	}
	return c.forward(client, false, func(h *wire.GenericHeader, nonce wire.Uint128) {
		f := (*wire.ForwardLogoutHeader)(headerPointer(h))
		f.Client, f.Nonce, f.Session = client, nonce, epoch
	})
}

// TakeSessionEnds returns, at the primary, the session ends forwarded since the
// last call, for the caller to propose (SessionEndsProposed); nil when none came.
func (c *Core) TakeSessionEnds() []SessionEnd {
	if len(c.forwards.sessionEnds) == 0 {
		return nil
	}
	ends := append([]SessionEnd(nil), c.forwards.sessionEnds...)
	c.forwards.sessionEnds = c.forwards.sessionEnds[:0]
	return ends
}

// SessionEndsProposed tells the primary that op proposes the session ends of
// clients (taken with TakeSessionEnds): the backups that forwarded them are
// answered once op is applied.
func (c *Core) SessionEndsProposed(op uint64, clients []wire.Uint128) {
	s := c.slotAt(op)
	if s == nil {
		return
	}
	for i := range c.forwards.in {
		f := &c.forwards.in[i]
		if f.end && f.op == 0 && slices.Contains(clients, f.client) {
			f.op, f.identity = op, s.header.Checksum
		}
	}
}

// admitSessionEnd takes a forwarded session end at the primary: held for the
// caller's next proposal, or refused.
func (c *Core) admitSessionEnd(m *wire.ForwardLogoutHeader) {
	outcome := wire.ForwardLogoutOk
	switch {
	case !c.IsPrimary():
		outcome = wire.ForwardLogoutNotPrimary
	case len(c.forwards.in) >= forwardsMax:
		outcome = wire.ForwardLogoutPipelineFull
	default:
		for i := range c.forwards.in {
			if f := &c.forwards.in[i]; f.end && f.client == m.Client && f.epoch == m.Session {
				outcome = wire.ForwardLogoutInProgress
			}
		}
	}
	if outcome != wire.ForwardLogoutOk {
		c.sendForwardLogoutResult(m.Replica, m.Nonce, m.Client, outcome, 0)
		return
	}
	c.forwards.in = append(c.forwards.in, forwardAtPrimary{from: m.Replica, nonce: m.Nonce, client: m.Client, end: true, epoch: m.Session})
	c.forwards.sessionEnds = append(c.forwards.sessionEnds, SessionEnd{Client: m.Client, Epoch: m.Session})
}

func (c *Core) onForwardLogout(m *wire.ForwardLogoutHeader) error {
	if !m.Client.IsZero() && c.forwardTaken(m.Replica, m.Nonce) {
		return nil
	}
	if !m.Client.IsZero() && m.Request == 0 {
		c.admitSessionEnd(m)
		return nil
	}
	if m.Client.IsZero() {
		// A read barrier (ForwardReadBarrier): answered now, nothing proposed.
		if m.Session != 0 || m.Request != 0 {
			return badMessage("a ForwardLogout of client 0 with session %d and request %d", m.Session, m.Request)
		}
		if !c.IsPrimary() {
			c.sendForwardLogoutResult(m.Replica, m.Nonce, m.Client, wire.ForwardLogoutNotPrimary, 0)
			return nil
		}
		c.sendForwardLogoutResult(m.Replica, m.Nonce, m.Client, wire.ForwardLogoutOk, c.commitMax)
		return nil
	}
	outcome := c.admitForward(m.Replica, m.Client, m.Nonce, false, Proposal{Client: m.Client, Request: m.Request, Operation: wire.OperationLogout})
	if outcome != uint8(wire.ForwardLogoutOk) {
		c.sendForwardLogoutResult(m.Replica, m.Nonce, m.Client, wire.ForwardLogoutOutcome(outcome), 0)
	}
	return nil
}

// admitForward proposes a forwarded register or logout, or says why not. The
// NotPrimary, PipelineFull, InProgress and Canceled codes are equal in both outcome
// sets except that logouts have no NotCaughtUp, hence the mapping.
func (c *Core) admitForward(from uint8, client, nonce wire.Uint128, register bool, p Proposal) uint8 {
	code := func(r wire.ForwardRegisterOutcome, l wire.ForwardLogoutOutcome) uint8 {
		if register {
			return uint8(r)
		}
		return uint8(l)
	}
	if !c.IsPrimary() {
		return code(wire.ForwardRegisterNotPrimary, wire.ForwardLogoutNotPrimary)
	}
	if c.InPipeline(client) {
		return code(wire.ForwardRegisterInProgress, wire.ForwardLogoutInProgress)
	}
	for i := range c.forwards.in {
		if c.forwards.in[i].client == client {
			return code(wire.ForwardRegisterInProgress, wire.ForwardLogoutInProgress)
		}
	}
	if register && c.cfg.Sessions != nil && !c.cfg.Sessions.RegisterAllowed(client, p.UserID) {
		return uint8(wire.ForwardRegisterClientIDOwnedByAnotherUser)
	}
	if len(c.forwards.in) >= forwardsMax {
		return code(wire.ForwardRegisterPipelineFull, wire.ForwardLogoutPipelineFull)
	}
	op, err := c.Propose(p, nil, c.log.lastTimestamp+1)
	if err != nil {
		return code(wire.ForwardRegisterPipelineFull, wire.ForwardLogoutPipelineFull)
	}
	s := c.slotAt(op)
	c.forwards.in = append(c.forwards.in, forwardAtPrimary{op: op, identity: s.header.Checksum, from: from, nonce: nonce, client: client, register: register})
	return code(wire.ForwardRegisterOk, wire.ForwardLogoutOk)
}

func (c *Core) sendForwardRegisterResult(to uint8, nonce, client wire.Uint128, outcome uint8, epoch, watermark uint64) {
	h := c.message(to, wire.CommandForwardRegisterResult)
	r := (*wire.ForwardRegisterResultHeader)(headerPointer(h))
	r.Nonce, r.Client, r.Outcome = nonce, client, wire.ForwardRegisterOutcome(outcome)
	r.Epoch, r.Watermark = epoch, watermark
	c.seal(nil)
}

func (c *Core) sendForwardLogoutResult(to uint8, nonce, client wire.Uint128, outcome wire.ForwardLogoutOutcome, commit uint64) {
	h := c.message(to, wire.CommandForwardLogoutResult)
	r := (*wire.ForwardLogoutResultHeader)(headerPointer(h))
	r.Nonce, r.Client, r.Outcome, r.Commit = nonce, client, outcome, commit
	c.seal(nil)
}

// answerForwards runs after the caller applied commits: every forwarded op now
// applied is answered Ok (the epoch of a register is its op); after a view change
// the rest are Canceled, since their ops may never commit.
func (c *Core) answerForwards(canceled bool) {
	kept := c.forwards.in[:0]
	for _, f := range c.forwards.in {
		s := c.slotAt(f.op)
		applied := !canceled && f.op != 0 && f.op <= c.commitMin && s != nil && s.header.Checksum == f.identity
		switch {
		case applied && f.register:
			watermark := uint64(0)
			if c.cfg.Sessions != nil {
				watermark = c.cfg.Sessions.Watermark(f.client)
			}
			c.sendForwardRegisterResult(f.from, f.nonce, f.client, uint8(wire.ForwardRegisterOk), f.op, watermark)
		case applied:
			c.sendForwardLogoutResult(f.from, f.nonce, f.client, wire.ForwardLogoutOk, f.op)
		case canceled && f.register:
			c.sendForwardRegisterResult(f.from, f.nonce, f.client, uint8(wire.ForwardRegisterCanceled), 0, 0)
		case canceled:
			c.sendForwardLogoutResult(f.from, f.nonce, f.client, wire.ForwardLogoutCanceled, 0)
		default:
			kept = append(kept, f)
		}
	}
	c.forwards.in = kept
}

func (c *Core) onForwardResult(nonce, client wire.Uint128, register bool, outcome ForwardOutcome) error {
	for i := range c.forwards.out {
		f := &c.forwards.out[i]
		if f.nonce == nonce && f.client == client && f.register == register {
			c.rd.Forwards = append(c.rd.Forwards, outcome)
			c.forwards.out = append(c.forwards.out[:i], c.forwards.out[i+1:]...)
			return nil
		}
	}
	// Not ours, or already timed out: the origin answered its client already.
	return c.drop(DropStale)
}

func (c *Core) expireForwards() {
	kept := c.forwards.out[:0]
	for _, f := range c.forwards.out {
		if c.now >= f.deadline {
			c.rd.Forwards = append(c.rd.Forwards, ForwardOutcome{Nonce: f.nonce, Client: f.client, Register: f.register, TimedOut: true})
			continue
		}
		kept = append(kept, f)
	}
	c.forwards.out = kept
}

// abandonForwards answers every forward in flight as timed out at once: this
// replica starts a view change, so the primary they went to is presumed gone and
// its answers may never come. The client hears what a timeout tells it (a
// transient refusal, retried) a heartbeat timeout after the primary failed instead
// of at the forward's own deadline; an op the old primary did commit is replayed
// from the client table like any retry, a Logout from the table's record of the
// sessions ended by their own Logout (logouts.go).
func (c *Core) abandonForwards() {
	for _, f := range c.forwards.out {
		c.rd.Forwards = append(c.rd.Forwards, ForwardOutcome{Nonce: f.nonce, Client: f.client, Register: f.register, TimedOut: true})
	}
	c.forwards.out = c.forwards.out[:0]
}

func (c *Core) forwardDeadline() uint64 {
	d := uint64(0)
	for _, f := range c.forwards.out {
		if d == 0 || f.deadline < d {
			d = f.deadline
		}
	}
	return d
}

func (c *Core) stepForward(h *wire.GenericHeader) error {
	if c.cfg.Group != wire.MetadataGroup {
		return badMessage("%v on partition group %#x: sessions are metadata-plane only", h.Command, c.cfg.Group)
	}
	switch h.Command {
	case wire.CommandForwardRegister:
		return c.onForwardRegister(h.ForwardRegister())
	case wire.CommandForwardLogout:
		return c.onForwardLogout(h.ForwardLogout())
	case wire.CommandForwardRegisterResult:
		r := h.ForwardRegisterResult()
		return c.onForwardResult(r.Nonce, r.Client, true, ForwardOutcome{Nonce: r.Nonce, Client: r.Client, Register: true, Outcome: uint8(r.Outcome), Epoch: r.Epoch, Watermark: r.Watermark})
	case wire.CommandForwardLogoutResult:
		r := h.ForwardLogoutResult()
		return c.onForwardResult(r.Nonce, r.Client, false, ForwardOutcome{Nonce: r.Nonce, Client: r.Client, Outcome: uint8(r.Outcome), Commit: r.Commit})
	}
	return nil
}
