package httpapi

import (
	"context"
	"net/netip"
	"time"

	"github.com/iggy-shard/iggy-shard/wire"
)

// Caller is who runs a command through Backend.Do.
type Caller struct {
	// UserID is the authenticated user; meaningful only when LoggedIn (the root
	// user's id is 0, so 0 cannot mean "nobody").
	UserID   uint32
	LoggedIn bool
	// Credential names the bearer the request came with: "jwt:<jti>", "pat:<hash>"
	// or, for a trusted issuer's token, "trusted:<hash>"; empty before login. The server binds one session per credential to it (the
	// reference does, apache/iggy core/server/src/http/session.rs), so that a client's
	// writes over HTTP are deduplicated as a connection's are.
	Credential string
	// Expiry is when the credential stops being valid (a JWT's exp), zero when
	// it never does or is not known here (a personal access token): the server
	// may end the session of an expired credential to make room for a new one.
	Expiry time.Time
	Addr   netip.AddrPort
}

// Backend is the server as the HTTP transport sees it. Every method is safe from
// any goroutine.
type Backend interface {
	// Do runs one command of the binary catalog as caller and returns its reply
	// body in the wire layout (no result section), or the error the binary
	// protocol answers with (a wire.ErrorCode). Before login only CodeLoginRegister
	// and CodeLoginRegisterWithPAT are allowed: their bodies are those of
	// LOGIN_REGISTER (wire.LoginRegister) and LOGIN_REGISTER_WITH_PAT
	// (wire.LoginRegisterWithPAT); they check the credentials, open no session,
	// and answer the identity reply, [user_id u32].
	Do(ctx context.Context, caller Caller, code wire.CommandCode, body []byte) ([]byte, error)
	// Cluster reports the metadata group's view and primary as this node last
	// saw them: the iggy-view header and linearizable reads read it.
	Cluster() ClusterState
	// RevokeToken revokes the access token jti on every node until until (its
	// expiry, the verifier's leeway and a margin for the nodes' clocks: the
	// instant no node accepts it anyway), through the replicated log: a logout
	// (DELETE /users/logout) of a JWT calls it. It returns once the revocation
	// committed and this node applied it (so the next request with the token
	// here is refused), or the error to answer: ErrRevokedTokensFull when the
	// cluster holds as many revoked tokens as it may (the token stays valid), a
	// wire.ErrorCode (58 when this node cannot propose it, as a backup that does
	// not forward; 57 when its outcome is unknown), or ctx's error. Revoking a
	// token twice is harmless.
	RevokeToken(ctx context.Context, caller Caller, jti string, until time.Time) error
	// TokenRevoked reports whether the access token jti is revoked at now (the
	// API's clock), as this node applied the revocations so far. Every bearer
	// check calls it, so it must be cheap and never wait on the shards.
	TokenRevoked(jti string, now time.Time) bool
}

// ClusterState is the metadata group's view as a node sees it.
type ClusterState struct {
	View uint32
	// Primary tells whether this node is the metadata primary; PrimaryIndex is the
	// primary's replica index in the roster, -1 when unknown.
	Primary      bool
	PrimaryIndex int
}
