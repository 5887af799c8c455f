package httpapi

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"net/http"
	"net/netip"
	"strings"
	"unicode/utf8"

	"lukechampine.com/blake3"

	"github.com/iggy-shard/iggy-shard/wire"
)

// Bearers (apache/iggy core/server/src/http/extractor.rs): a JWT this server (or, with
// a shared key, any node of its cluster) issued, else the whole value as a raw
// personal access token.

var (
	errTokenMissing    = errorFromCode(wire.ErrAccessTokenMissing)
	errUnauthenticated = errorFromCode(wire.ErrUnauthenticated)
)

// ErrRevokedTokensFull answers a logout whose token the cluster could not revoke:
// it holds as many revoked tokens as it may (metadata.RevokedTokensMax) until
// some expire. The token stays valid until its own expiry, which the client is
// told rather than left to believe it gone. A Backend returns it from
// RevokeToken.
var ErrRevokedTokensFull error = &apiError{status: http.StatusServiceUnavailable, ID: 503, Code: "revoked_tokens_full",
	Reason: "the cluster holds as many revoked tokens as it may; the token was not revoked and stays valid until it expires; retry later", retryAfter: true}

// httpClientVersion is the client version a login over HTTP presents to the
// binary protocol's login checks.
var httpClientVersion = wire.ClientVersionInfo{ProtocolVersion: wire.ServerProtocolVersion, SDKName: []byte("http"), SDKVersion: []byte("rest")}

// authenticate resolves the request's bearer to a caller.
func (a *API) authenticate(ctx context.Context, h http.Header, addr netip.AddrPort) (Caller, error) {
	v := h.Get("Authorization")
	token, ok := strings.CutPrefix(v, "Bearer ")
	if !ok || !utf8.ValidString(v) {
		return Caller{}, errTokenMissing
	}
	if t, err := a.tokens.verify(token); err == nil {
		if a.opts.Backend.TokenRevoked(t.jti, a.now()) {
			// Logged out: stricter than the reference, which keeps no
			// revocations (a revoked JWT is never taken for a PAT either).
			return Caller{}, errUnauthenticated
		}
		return Caller{UserID: t.userID, LoggedIn: true, Credential: "jwt:" + t.jti, Expiry: t.exp, Addr: addr}, nil
	}
	if t, named, err := a.trusted.verify(token); named {
		if err != nil {
			return Caller{}, errUnauthenticated
		}
		hash := blake3.Sum256([]byte(token))
		return Caller{UserID: t.userID, LoggedIn: true, Credential: "trusted:" + hex.EncodeToString(hash[:]), Expiry: t.exp, Addr: addr}, nil
	}
	if token == "" || len(token) > 255 {
		return Caller{}, errUnauthenticated
	}
	id, err := a.loginPAT(ctx, token, addr)
	var code wire.ErrorCode
	if errors.As(err, &code) {
		return Caller{}, errUnauthenticated
	}
	if err != nil {
		return Caller{}, err
	}
	hash := blake3.Sum256([]byte(token))
	return Caller{UserID: id, LoggedIn: true, Credential: "pat:" + hex.EncodeToString(hash[:]), Addr: addr}, nil
}

// loginPAT checks a raw personal access token through the binary protocol's login.
func (a *API) loginPAT(ctx context.Context, token string, addr netip.AddrPort) (uint32, error) {
	req := wire.LoginRegisterWithPAT{Version: httpClientVersion, Token: []byte(token)}
	body, err := req.Append(nil)
	if err != nil {
		return 0, wire.ErrInvalidPersonalAccessToken
	}
	reply, err := a.opts.Backend.Do(ctx, Caller{Addr: addr}, wire.CodeLoginRegisterWithPAT, body)
	if err != nil {
		return 0, err
	}
	return identityUserID(reply)
}

// identityUserID reads the identity reply, [user_id u32].
func identityUserID(reply []byte) (uint32, error) {
	if len(reply) < 4 {
		return 0, errors.New("httpapi: identity reply shorter than a user id")
	}
	return binary.LittleEndian.Uint32(reply), nil
}

// identityInfo is the login answer (apache/iggy core/server/src/http/users.rs).
type identityInfo struct {
	UserID      uint32       `json:"user_id"`
	AccessToken *accessToken `json:"access_token"`
}

type accessToken struct {
	Token  string `json:"token"`
	Expiry int64  `json:"expiry"`
}

func (rc *reqCtx) answerIdentity(userID uint32) error {
	t, err := rc.api.tokens.issue(userID)
	if err != nil {
		return err
	}
	return rc.json(identityInfo{UserID: userID, AccessToken: &accessToken{Token: t.token, Expiry: t.expirySec}})
}

type loginUserBody struct {
	Username *string `json:"username"`
	Password *string `json:"password"`
}

func (b *loginUserBody) check() error {
	if b.Username == nil {
		return &shapeError{"missing field `username`"}
	}
	if b.Password == nil {
		return &shapeError{"missing field `password`"}
	}
	return nil
}

// loginUser is POST /users/login. Credentials of any length reach the check, which
// answers invalid_credentials for those out of range (users.rs).
func (a *API) loginUser(rc *reqCtx) error {
	var b loginUserBody
	if err := rc.decodeJSON(&b); err != nil {
		return err
	}
	req := wire.LoginRegister{Version: httpClientVersion, Username: []byte(*b.Username), Password: []byte(*b.Password)}
	if !req.CredentialsInRange() {
		return wire.ErrInvalidCredentials
	}
	body, err := req.Append(nil)
	if err != nil {
		return wire.ErrInvalidCredentials
	}
	reply, err := a.opts.Backend.Do(rc.r.Context(), Caller{Addr: rc.caller.Addr}, wire.CodeLoginRegister, body)
	if err != nil {
		return err
	}
	id, err := identityUserID(reply)
	if err != nil {
		return err
	}
	return rc.answerIdentity(id)
}

type tokenBody struct {
	Token *string `json:"token"`
}

func (b *tokenBody) check() error {
	if b.Token == nil {
		return &shapeError{"missing field `token`"}
	}
	return nil
}

// loginWithPAT is POST /personal-access-tokens/login.
func (a *API) loginWithPAT(rc *reqCtx) error {
	var b tokenBody
	if err := rc.decodeJSON(&b); err != nil {
		return err
	}
	if *b.Token == "" || len(*b.Token) > 255 {
		return wire.ErrInvalidPersonalAccessToken
	}
	id, err := a.loginPAT(rc.r.Context(), *b.Token, rc.caller.Addr)
	if err != nil {
		return err
	}
	return rc.answerIdentity(id)
}

// refreshToken is POST /users/refresh-token: a valid token buys a new one; the old
// one stays valid until its own expiry (the reference's refresh is stateless)
// unless it is logged out. A logged-out token buys nothing, and a trusted
// issuer's token is the issuer's to renew (401 invalid_access_token).
func (a *API) refreshToken(rc *reqCtx) error {
	var b tokenBody
	if err := rc.decodeJSON(&b); err != nil {
		return err
	}
	t, err := a.tokens.verify(*b.Token)
	if err != nil {
		if ik, _ := a.trusted.issuerOf(*b.Token); ik != nil {
			return errTrustedNotRefreshable
		}
		return errUnauthenticated
	}
	if a.opts.Backend.TokenRevoked(t.jti, a.now()) {
		return errUnauthenticated
	}
	return rc.answerIdentity(t.userID)
}

// logout is DELETE /users/logout: it ends the server session bound to the bearer
// and, for a JWT, revokes the token on every node until it would expire
// (Backend.RevokeToken), which the reference does not. The session ends first:
// if the revocation then fails, the token still works, so the client can retry
// the logout; the other way round a retry would find its token refused. A
// personal access token is not revoked: deleting it is how it ends.
func (a *API) logout(rc *reqCtx) error {
	if _, err := rc.doEmpty(wire.CodeLogoutUser); err != nil {
		return err
	}
	if _, isJWT := strings.CutPrefix(rc.caller.Credential, "jwt:"); isJWT {
		token, _ := strings.CutPrefix(rc.r.Header.Get("Authorization"), "Bearer ")
		t, err := a.tokens.verify(token)
		if err != nil {
			// It verified a moment ago; it has just expired, and needs no
			// revocation.
			return rc.noContent()
		}
		if err := a.opts.Backend.RevokeToken(rc.r.Context(), rc.caller, t.jti, a.tokens.revokedUntil(t)); err != nil {
			return err
		}
	}
	return rc.noContent()
}
