package sim

import (
	"errors"
	"fmt"
	"slices"

	"github.com/iggy-shard/iggy-shard/metadata"
	"github.com/iggy-shard/iggy-shard/metaplane"
	"github.com/iggy-shard/iggy-shard/wire"
)

// HTTP logouts: while the faults last, a node now and then serves one as the
// server does, revoking access tokens through its plane (metaplane.RevokeTokens;
// a backup is answered ErrNotPrimary, as the server's HTTP layer relays a
// logout to the primary instead). Every run with them is checked:
//
//   - the copy the node's bearer checks read (Plane.RevokedTokens) holds exactly
//     the state's table after every apply, checkpoint and installed state;
//   - expired entries leave: after every apply no entry of the state's table
//     expired at that op's timestamp;
//   - a revocation answered nil is visible at once on the node that proposed it,
//     and durable: at the end every replica holds every acknowledged token that
//     has not expired at its last apply;
//   - one refused for a full table revoked none of its tokens;
//   - the table agrees on every replica (it is in the state's digest, checked at
//     every checkpoint and at the end).

// RevocationLoad shapes the logouts of a run; the zero value serves none.
type RevocationLoad struct {
	// PerMille is the chance, per tick and node, of a logout while the faults
	// last.
	PerMille int
	// Batch is how many tokens one logout revokes (the server revokes one; the
	// bound's seeds revoke the most one op may name, to reach the bound).
	Batch int
	// LifetimeTicksMin and LifetimeTicksMax bound how long a revoked token
	// lives from its logout (a tick is a millisecond of the prepares' clock).
	LifetimeTicksMin, LifetimeTicksMax uint64
}

// RevocationsResult is what the logouts of a run did.
type RevocationsResult struct {
	// Ops is how many RevokeTokens ops nodes proposed; Revoked how many tokens
	// were answered revoked; RefusedFull how many logouts found the table full;
	// NotProposed how many a backup (or a busy primary) did not propose;
	// Unknown how many ended without knowing whether they committed.
	Ops, Revoked, RefusedFull, NotProposed, Unknown int
	// TableMax is the most tokens a replica's table held.
	TableMax int
}

// revocations is the run's record of its logouts.
type revocations struct {
	seq uint64
	// acked are the tokens answered revoked, with their expiry.
	acked map[string]uint64
}

// RevocationConfig is Config with logouts: one token each, living 200 to 2,000
// ticks, so that many expire within a run (go test ./sim -revoke).
func RevocationConfig(seed uint64) Options {
	o := Config(seed)
	o.Revocations = RevocationLoad{PerMille: 20, Batch: 1, LifetimeTicksMin: 200, LifetimeTicksMax: 2000}
	return o
}

// RevocationLongConfig is LongConfig with logouts: past three checkpoints, with
// a node down across one, which catches up by installing a state that holds
// revoked tokens.
func RevocationLongConfig(seed uint64) Options {
	o := LongConfig(seed)
	o.Revocations = RevocationLoad{PerMille: 10, Batch: 1, LifetimeTicksMin: 500, LifetimeTicksMax: 20_000}
	return o
}

// RevocationBoundConfig is a three-replica Config whose logouts fill the table to
// its bound (metadata.RevokedTokensMax) and past it, again and again as the
// tokens expire: a logout of the most tokens one op may name about every 7
// ticks at the primary, each token living 800 to 1,200 ticks, against a bound
// reached in 64 of them.
func RevocationBoundConfig(seed uint64) Options {
	o := Config(seed)
	o.Replicas = 3
	o.Revocations = RevocationLoad{PerMille: 150, Batch: metadata.RevokeTokensPerOpMax, LifetimeTicksMin: 800, LifetimeTicksMax: 1200}
	return o
}

// revokeTick has the node serve a logout, now and then.
func (c *cluster) revokeTick(nd *node) {
	load := &c.opts.Revocations
	if load.PerMille == 0 || c.healed || !nd.up || c.rngRevoke.IntN(1000) >= load.PerMille {
		return
	}
	now := c.now * 1000
	tokens := make([]metadata.Revocation, load.Batch)
	for i := range tokens {
		c.revoke.seq++
		life := load.LifetimeTicksMin + c.rngRevoke.Uint64N(load.LifetimeTicksMax-load.LifetimeTicksMin+1)
		tokens[i] = metadata.Revocation{JTI: fmt.Sprintf("%d-%d", nd.id, c.revoke.seq), ExpiryMicros: now + life*1000}
	}
	plane := nd.meta.plane
	if plane.IsPrimary() {
		c.result.Revocations.Ops++
	}
	plane.RevokeTokens(tokens, now, func(err error) { c.revoked(nd, plane, tokens, err) })
}

// revoked checks a logout's answer.
func (c *cluster) revoked(nd *node, plane *metaplane.Plane, tokens []metadata.Revocation, err error) {
	r := &c.result.Revocations
	at := plane.Applied().Timestamp
	switch {
	case err == nil:
		r.Revoked += len(tokens)
		for _, t := range tokens {
			if t.ExpiryMicros > at && !plane.RevokedTokens().Revoked(t.JTI, at) {
				c.fail("replica %d: token %s answered revoked is not in its bearer checks' table", nd.id, t.JTI)
				return
			}
			c.revoke.acked[t.JTI] = max(c.revoke.acked[t.JTI], t.ExpiryMicros)
		}
	case errors.Is(err, metaplane.ErrRevokedTokensFull):
		r.RefusedFull++
		for _, t := range tokens {
			if plane.RevokedTokens().Revoked(t.JTI, at) {
				c.fail("replica %d: a logout refused for a full table revoked token %s", nd.id, t.JTI)
				return
			}
		}
	case errors.Is(err, metaplane.ErrNotPrimary), errors.Is(err, metaplane.ErrWritesBusy):
		r.NotProposed++
	case errors.Is(err, wire.ErrInvalidCommand):
		c.fail("replica %d: tokens refused as malformed: %v", nd.id, err)
	default:
		r.Unknown++
	}
}

// checkRevocationsApplied runs after each op a replica applied through its
// state: no entry expired at the op's timestamp is left, and the bearer checks'
// copy is the state's table.
func (c *cluster) checkRevocationsApplied(mr *metaReplica, cm *metaplane.Commit) {
	h := cm.Header
	if cm.Skipped || h.Operation == wire.OperationRegister {
		return
	}
	table := mr.plane.State().RevokedTokens()
	for first := range table.All() {
		if first.ExpiryMicros <= h.Timestamp {
			c.fail("replica %d: revoked token %s expired at %d is still held after op %d at %d", mr.node.id, first.JTI, first.ExpiryMicros, h.Op, h.Timestamp)
			return
		}
		break
	}
	c.result.Revocations.TableMax = max(c.result.Revocations.TableMax, table.Len())
	if h.Operation == wire.OperationRevokeTokens || mr.plane.RevokedTokens().Len() != table.Len() {
		c.checkRevocationsCopy(mr, fmt.Sprintf("op %d", h.Op))
	}
}

// checkRevocationsCopy compares the bearer checks' copy with the state's table.
func (c *cluster) checkRevocationsCopy(mr *metaReplica, when string) {
	if !mr.plane.RevokedTokens().Equal(mr.plane.State().RevokedTokens()) {
		c.fail("replica %d: after %s its bearer checks' revoked tokens (%d) are not its state's (%d)",
			mr.node.id, when, mr.plane.RevokedTokens().Len(), mr.plane.State().RevokedTokens().Len())
	}
}

// revocationsFinalChecks: every replica holds every token answered revoked that
// has not expired at its last apply.
func (c *cluster) revocationsFinalChecks() {
	if c.opts.Revocations.PerMille == 0 {
		return
	}
	jtis := make([]string, 0, len(c.revoke.acked))
	for jti := range c.revoke.acked {
		jtis = append(jtis, jti)
	}
	slices.Sort(jtis) // the first failure named is a function of the seed
	for _, nd := range c.nodes {
		// Every prune on this replica (and in a state it installed) ran at a
		// timestamp at or below its clock: a token expiring later is held.
		state, at := nd.meta.plane.State(), nd.meta.revocationClockMicros
		c.checkRevocationsCopy(nd.meta, "the run")
		for _, jti := range jtis {
			if expiry := c.revoke.acked[jti]; expiry > at && !state.TokenRevoked(jti, at) {
				c.fail("replica %d: token %s answered revoked (until %d) is not revoked at %d", nd.id, jti, expiry, at)
				return
			}
		}
	}
}
