package metaplane

import (
	"errors"
	"sync"

	"github.com/iggy-shard/iggy-shard/metadata"
	"github.com/iggy-shard/iggy-shard/vsr"
	"github.com/iggy-shard/iggy-shard/wire"
)

// Revoked access tokens (metadata/revocations.go). An HTTP logout has the node
// that serves it revoke its bearer through RevokeTokens: the primary proposes a
// RevokeTokens op (70), the server's own like EndSessions, applied once on every
// replica. Bearer checks run on the HTTP goroutines, not the plane's: they read
// RevokedTokens, a copy of the applied table that the plane keeps in step with
// every apply and every installed state, behind a lock.

// ErrRevokedTokensFull answers a RevokeTokens whose op committed as a refusal:
// the table held metadata.RevokedTokensMax tokens, and none was revoked. The
// tokens stay valid until they expire; a later logout finds room as they do.
var ErrRevokedTokensFull = errors.New("metadata: the revoked tokens table is full")

// RevokeTokens revokes access tokens on every replica: the primary proposes a
// RevokeTokens op of tokens (1..metadata.RevokeTokensPerOpMax, each a jti and
// the instant it stops being accepted anyway), and then runs once with:
//
//   - nil: the op committed and applied here, so every later RevokedTokens
//     check on this node refuses the tokens (on another node, once it applied
//     the op: a backup applies a commit about a round trip after the primary);
//   - ErrRevokedTokensFull: committed as a refusal, nothing revoked;
//   - wire.ErrInvalidCommand: tokens the op cannot carry (none, too many, a jti
//     empty, over 255 bytes or not UTF-8); nothing proposed;
//   - ErrNotPrimary or ErrWritesBusy: not proposed (a backup, a view change, too
//     many writes waiting): 58, retry, on the primary;
//   - another error (the journal failed, the node stopped, the view changed
//     with the op in flight): whether it committed is unknown (57). Revoking a
//     token twice is harmless, so the caller may simply retry.
//
// Call it on the plane's goroutine, like every method but RevokedTokens.
func (p *Plane) RevokeTokens(tokens []metadata.Revocation, nowMicros uint64, then func(err error)) {
	body, err := metadata.AppendRevokeTokens(nil, tokens)
	if err != nil {
		then(err)
		return
	}
	if !p.IsPrimary() {
		p.noteNow(nowMicros)
		then(ErrNotPrimary)
		return
	}
	p.counters.revokeOps.Add(1)
	prop := vsr.Proposal{Operation: wire.OperationRevokeTokens, UserID: metadata.RootUserID}
	p.commit(prop, body, nowMicros, func(c *Commit, err error) {
		if err != nil {
			then(err)
			return
		}
		then(revokeOutcome(c))
	})
}

// revokeOutcome reads a committed RevokeTokens op's result section.
func revokeOutcome(c *Commit) error {
	_, result, err := wire.SplitResult(c.Frame[wire.HeaderSize:])
	switch {
	case err != nil:
		panic("metaplane: a committed RevokeTokens reply has no result section: " + err.Error())
	case result == metadata.RevokedTokensFullCode:
		return ErrRevokedTokensFull
	case result != 0:
		return result
	}
	return nil
}

// RevokeTokenOps counts the RevokeTokens ops this replica proposed (safe from
// any goroutine).
func (p *Plane) RevokeTokenOps() int64 { return p.counters.revokeOps.Load() }

// RevokedTokens is the applied table of revoked tokens, readable from any
// goroutine: the plane brings it up to date at every apply, before the commit's
// host call, and replaces it with an installed state's. It is the same object
// for the plane's whole life.
type RevokedTokens struct {
	mu    sync.RWMutex
	table metadata.RevocationTable
}

// Revoked reports whether the access token jti is revoked at nowMicros (the
// bearer check's clock, in unix microseconds).
func (r *RevokedTokens) Revoked(jti string, nowMicros uint64) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.table.Revoked(jti, nowMicros)
}

// Len is the number of revoked tokens held.
func (r *RevokedTokens) Len() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.table.Len()
}

// Snapshot is a copy of the table as it is now.
func (r *RevokedTokens) Snapshot() metadata.RevocationTable {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.table.Clone()
}

// Equal reports whether the table holds exactly t's entries (tests and the
// simulator check it against the state's).
func (r *RevokedTokens) Equal(t *metadata.RevocationTable) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.table.Equal(t)
}

// follow mirrors the state's apply of h (applyOp): when the op went through
// State.Apply (not skipped, not a Register), the entries expired at the
// prepare's timestamp leave, and a RevokeTokens op the state took (result 0)
// adds its tokens, as the state's table did; so the two hold the same entries
// at every op.
func (r *RevokedTokens) follow(h *wire.PrepareHeader, body []byte, skipped bool, result wire.ErrorCode) {
	if skipped || h.Operation == wire.OperationRegister {
		return
	}
	var tokens []metadata.Revocation
	if result == 0 && h.Operation == wire.OperationRevokeTokens {
		tokens, _ = metadata.DecodeRevokeTokens(body)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.table.Prune(h.Timestamp)
	if len(tokens) > 0 {
		if code := r.table.Revoke(tokens, h.Timestamp); code != 0 {
			panic("metaplane: the revoked tokens' copy refused an op the state took")
		}
	}
}

// reset replaces the table with a copy of state's (an opened or installed state).
func (r *RevokedTokens) reset(state *metadata.State) {
	t := state.RevokedTokens().Clone()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.table = t
}
