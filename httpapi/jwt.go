package httpapi

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math/big"
	"slices"
	"strconv"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"lukechampine.com/blake3"

	"github.com/iggy-shard/iggy-shard/config"
)

// The access tokens of apache/iggy core/server/src/http/jwt.rs: HS256 (or HS384,
// HS512) JWTs with the claims jti (a UUIDv7), iss, aud (a string), sub (the user id in
// decimal), iat, exp and nbf in unix seconds.

// jwtKeyDerivationContext is the BLAKE3 key-derivation context the reference uses to
// turn the cluster's shared secret into the HMAC key (apache/iggy
// core/server/src/http/jwt.rs), so that every node of a cluster verifies every node's
// bearers, across restarts.
const jwtKeyDerivationContext = "apache-iggy server http-jwt v1 psk->hs256-key"

// neverExpiresSeconds is the lifetime of a token when access_token_expiry is "none".
const neverExpiresSeconds = 1_000_000_000

// tokens issues and verifies access tokens.
type tokens struct {
	cfg    config.JWT
	method jwt.SigningMethod
	encKey []byte
	decKey []byte
	// KeySource says where the key came from, for the start's log line.
	keySource string
	now       func() time.Time
}

// newTokens picks the key (jwt.rs): the configured secrets (one set serves
// both); else, when clusterSecret is given, BLAKE3.derive_key of it, hex, used as
// a configured secret would be; else random per start.
func newTokens(cfg config.JWT, clusterSecret string, now func() time.Time) (*tokens, error) {
	t := &tokens{cfg: cfg, method: jwt.GetSigningMethod(cfg.Algorithm), now: now}
	if _, ok := t.method.(*jwt.SigningMethodHMAC); !ok {
		return nil, &config.SettingError{Setting: "http.jwt.algorithm", Value: cfg.Algorithm, Reason: "must be HS256, HS384 or HS512"}
	}
	enc, dec := cfg.EncodingSecret, cfg.DecodingSecret
	switch {
	case enc == "" && dec == "" && clusterSecret != "":
		var key [32]byte
		blake3.DeriveKey(key[:], jwtKeyDerivationContext, []byte(clusterSecret))
		enc = hex.EncodeToString(key[:])
		dec, t.keySource = enc, "derived from cluster.auth.shared_secret"
	case enc == "" && dec == "":
		enc = randomAlphanumeric()
		dec, t.keySource = enc, "random for this process (tokens die with it)"
	case enc == "":
		enc, t.keySource = dec, "http.jwt.decoding_secret"
	case dec == "":
		dec, t.keySource = enc, "http.jwt.encoding_secret"
	default:
		t.keySource = "http.jwt secrets"
	}
	var err error
	if t.encKey, err = secretBytes(enc, cfg.UseBase64Secret); err != nil {
		return nil, &config.SettingError{Setting: "http.jwt.encoding_secret", Value: "(hidden)", Reason: err.Error()}
	}
	if t.decKey, err = secretBytes(dec, cfg.UseBase64Secret); err != nil {
		return nil, &config.SettingError{Setting: "http.jwt.decoding_secret", Value: "(hidden)", Reason: err.Error()}
	}
	return t, nil
}

func secretBytes(s string, base64Secret bool) ([]byte, error) {
	if !base64Secret {
		return []byte(s), nil
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, errors.New("not standard base64 (use_base64_secret is true)")
	}
	return b, nil
}

// randomAlphanumeric is a secret of 32 to 63 letters and digits, as the reference
// makes one when nothing is configured.
func randomAlphanumeric() string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	n, _ := rand.Int(rand.Reader, big.NewInt(32))
	b := make([]byte, 32+n.Int64())
	for i := range b {
		k, _ := rand.Int(rand.Reader, big.NewInt(int64(len(alphabet))))
		b[i] = alphabet[k.Int64()]
	}
	return string(b)
}

// audience is aud: written as one string, read as a string or an array.
type audience []string

func (a audience) MarshalJSON() ([]byte, error) {
	if len(a) == 1 {
		return json.Marshal(a[0])
	}
	return json.Marshal([]string(a))
}

func (a *audience) UnmarshalJSON(b []byte) error {
	var cs jwt.ClaimStrings
	if err := cs.UnmarshalJSON(b); err != nil {
		return err
	}
	*a = audience(cs)
	return nil
}

// claims are the token's claims in the reference's order.
type claims struct {
	JTI string           `json:"jti"`
	Iss string           `json:"iss"`
	Aud audience         `json:"aud"`
	Sub string           `json:"sub"`
	Iat *jwt.NumericDate `json:"iat"`
	Exp *jwt.NumericDate `json:"exp"`
	Nbf *jwt.NumericDate `json:"nbf"`
}

func (c *claims) GetExpirationTime() (*jwt.NumericDate, error) { return c.Exp, nil }
func (c *claims) GetIssuedAt() (*jwt.NumericDate, error)       { return c.Iat, nil }
func (c *claims) GetNotBefore() (*jwt.NumericDate, error)      { return c.Nbf, nil }
func (c *claims) GetIssuer() (string, error)                   { return c.Iss, nil }
func (c *claims) GetSubject() (string, error)                  { return c.Sub, nil }
func (c *claims) GetAudience() (jwt.ClaimStrings, error)       { return jwt.ClaimStrings(c.Aud), nil }

// issued is a new access token.
type issued struct {
	token     string
	jti       string
	expirySec int64
}

// issue signs a token for userID.
func (t *tokens) issue(userID uint32) (issued, error) {
	now := t.now()
	iat := now.Unix()
	lifetime := int64(t.cfg.AccessTokenExpiry / time.Second)
	if t.cfg.AccessTokenNeverExpires {
		lifetime = neverExpiresSeconds
	}
	c := &claims{
		JTI: uuidV7(now),
		Iss: t.cfg.Issuer,
		Aud: audience{t.cfg.Audience},
		Sub: strconv.FormatUint(uint64(userID), 10),
		Iat: jwt.NewNumericDate(time.Unix(iat, 0)),
		Exp: jwt.NewNumericDate(time.Unix(iat+lifetime, 0)),
		Nbf: jwt.NewNumericDate(time.Unix(iat+int64(t.cfg.NotBefore/time.Second), 0)),
	}
	s, err := jwt.NewWithClaims(t.method, c).SignedString(t.encKey)
	if err != nil {
		return issued{}, err
	}
	return issued{token: s, jti: c.JTI, expirySec: c.Exp.Unix()}, nil
}

// revocationClockMargin is how much longer than a token's own life (its exp and
// the verifier's leeway) its revocation is kept: the nodes of a cluster read
// their own clocks, and a revocation dropped by the primary's clock must not
// leave the token valid on a node whose clock runs behind it.
const revocationClockMargin = time.Minute

// revokedUntil is the instant from which no node accepts the token anyway: its
// revocation need not be kept past it.
func (t *tokens) revokedUntil(v verified) time.Time {
	return v.exp.Add(t.cfg.ClockSkew + revocationClockMargin)
}

// verified is what a valid token says.
type verified struct {
	userID uint32
	jti    string
	exp    time.Time
}

var errBadToken = errors.New("httpapi: token not valid")

// verify checks a token's signature (with the configured algorithm only), expiry
// (required), not-before, issuer and audience, within the clock skew, and that
// its subject is a user id.
func (t *tokens) verify(token string) (verified, error) {
	var c claims
	_, err := jwt.ParseWithClaims(token, &c, func(*jwt.Token) (any, error) { return t.decKey, nil },
		jwt.WithValidMethods([]string{t.method.Alg()}), jwt.WithExpirationRequired(),
		jwt.WithLeeway(t.cfg.ClockSkew), jwt.WithTimeFunc(t.now))
	if err != nil {
		return verified{}, errBadToken
	}
	if !slices.Contains(t.cfg.ValidIssuers, c.Iss) {
		return verified{}, errBadToken
	}
	if !slices.ContainsFunc(c.Aud, func(a string) bool { return slices.Contains(t.cfg.ValidAudiences, a) }) {
		return verified{}, errBadToken
	}
	id, err := strconv.ParseUint(c.Sub, 10, 32)
	if err != nil {
		return verified{}, errBadToken
	}
	return verified{userID: uint32(id), jti: c.JTI, exp: c.Exp.Time}, nil
}

// uuidV7 is an RFC 9562 version 7 UUID: the unix milliseconds, then randomness.
func uuidV7(now time.Time) string {
	var u [16]byte
	binary.BigEndian.PutUint64(u[0:8], uint64(now.UnixMilli())<<16)
	_, _ = rand.Read(u[6:])
	u[6] = u[6]&0x0f | 0x70
	u[8] = u[8]&0x3f | 0x80
	h := hex.EncodeToString(u[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
