package httpapi

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/iggy-shard/iggy-shard/config"
	"github.com/iggy-shard/iggy-shard/wire"
)

// Trusted issuers (the reference's optional A2A bearers, apache/iggy
// core/server/src/http/jwt.rs): a JWT signed by an external identity provider is
// accepted when its iss names a configured issuer and it verifies with a key of
// that issuer's JWKS, fetched over HTTP when a token names a key not yet known.
// It acts as the entry's user, whatever its sub says.

// TrustedIssuer is one [[http.jwt.trusted_issuers]] entry.
type TrustedIssuer struct {
	// Issuer is the iss the issuer's tokens carry, exactly (a token is matched
	// to its entry with the scheme and host lower-cased, then checked against
	// it as written).
	Issuer string
	// Audience is the aud its tokens must carry; empty: they must carry none.
	Audience string
	// JWKSURL is where its public keys are published (RFC 7517), http or https.
	JWKSURL string
	// UserID is the user its tokens act as; never 0 (the root user).
	UserID uint32
}

// The bounds of what a remote issuer can make this node hold or wait for.
const (
	// jwksFetchInterval is the least time between two fetches of one issuer's
	// JWKS, as the reference bounds them: a stream of tokens naming unknown keys
	// costs the issuer one request per interval, not one per token.
	jwksFetchInterval = 10 * time.Second
	// jwksFetchTimeout bounds one fetch, connection to last byte.
	jwksFetchTimeout = 5 * time.Second
	// jwksBytesMax bounds a JWKS document; jwksKeysMax the keys taken from it (a
	// provider publishes a handful: the current keys and the next).
	jwksBytesMax = 256 << 10
	jwksKeysMax  = 64
	// rsaModulusBitsMax bounds an RSA key: a verification costs with the
	// modulus, and no provider signs with more than 8192 bits.
	rsaModulusBitsMax = 8192
)

// errTrustedNotRefreshable answers a refresh of a trusted issuer's token: it is
// the issuer's to renew (401 invalid_access_token, as the reference answers).
var errTrustedNotRefreshable = errorFromCode(wire.ErrInvalidAccessToken)

// trustedIssuers verifies the bearers of the configured external issuers.
type trustedIssuers struct {
	byIssuer map[string]*issuerKeys // by normalized issuer
	leeway   time.Duration
	// fetchTimeout bounds one fetch (jwksFetchTimeout).
	fetchTimeout time.Duration
	now          func() time.Time
	client       *http.Client
	log          *slog.Logger
}

// issuerKeys is one issuer's entry and the keys fetched from its JWKS.
type issuerKeys struct {
	entry TrustedIssuer
	// fetch serializes the fetches; mu guards the fields below it, and is never
	// held across a fetch, so a known key verifies while another is fetched.
	fetch       sync.Mutex
	mu          sync.Mutex
	keys        map[string]*jwk
	lastAttempt time.Time // zero: never fetched
}

// jwk is one usable key of a JWKS: its public key and the algorithms it may
// verify.
type jwk struct {
	key  any // *rsa.PublicKey or *ecdsa.PublicKey
	algs []string
}

// newTrustedIssuers checks the entries (as the reference refuses them at boot).
// client nil is a client of its own; every fetch is bounded by jwksFetchTimeout.
func newTrustedIssuers(entries []TrustedIssuer, leeway time.Duration, now func() time.Time, client *http.Client, log *slog.Logger) (*trustedIssuers, error) {
	if len(entries) == 0 {
		return nil, nil
	}
	if client == nil {
		client = &http.Client{}
	}
	t := &trustedIssuers{byIssuer: map[string]*issuerKeys{}, leeway: leeway, fetchTimeout: jwksFetchTimeout, now: now, client: client, log: log}
	for i, e := range entries {
		key := func(field string) string { return fmt.Sprintf("http.jwt.trusted_issuers[%d].%s", i, field) }
		switch {
		case e.Issuer == "":
			return nil, &config.SettingError{Setting: key("issuer"), Value: "", Reason: "must not be empty"}
		case e.JWKSURL == "":
			return nil, &config.SettingError{Setting: key("jwks_url"), Value: "", Reason: "must not be empty"}
		case e.UserID == 0:
			return nil, &config.SettingError{Setting: key("user_id"), Value: "0", Reason: "must not be 0 (the root user)"}
		}
		if u, err := url.Parse(e.JWKSURL); err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
			return nil, &config.SettingError{Setting: key("jwks_url"), Value: e.JWKSURL, Reason: "must be an http or https URL"}
		}
		iss := normalizeIssuer(e.Issuer)
		if _, dup := t.byIssuer[iss]; dup {
			return nil, &config.SettingError{Setting: key("issuer"), Value: e.Issuer, Reason: "named by an earlier entry"}
		}
		t.byIssuer[iss] = &issuerKeys{entry: e}
	}
	return t, nil
}

// normalizeIssuer is the key an issuer is looked up by (the reference's
// normalize_issuer_url): a URL's scheme and host lower-cased, the rest as
// written; an issuer that is not a URL lower-cased without a trailing slash.
func normalizeIssuer(iss string) string {
	scheme, rest, ok := strings.Cut(iss, "://")
	if !ok {
		return strings.ToLower(strings.TrimRight(iss, "/"))
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	return strings.ToLower(scheme) + "://" + strings.ToLower(rest[:end]) + rest[end:]
}

// externalClaims are the claims read from a trusted issuer's token.
type externalClaims struct {
	jwt.RegisteredClaims
}

// issuerOf reads a token's iss without verifying it, and the issuer it names;
// nil when it names none configured.
func (t *trustedIssuers) issuerOf(token string) (*issuerKeys, *jwt.Token) {
	if t == nil {
		return nil, nil
	}
	var c externalClaims
	parsed, _, err := jwt.NewParser().ParseUnverified(token, &c)
	if err != nil {
		return nil, nil
	}
	return t.byIssuer[normalizeIssuer(c.Issuer)], parsed
}

// verify checks a bearer as a trusted issuer's: its kid names a key of the
// issuer's JWKS that allows the token's alg, and it verifies with it, carries
// the entry's iss and aud, and is within exp (required) and nbf, with the
// leeway. ok is false when the token names no trusted issuer at all.
func (t *trustedIssuers) verify(token string) (v verified, ok bool, err error) {
	ik, parsed := t.issuerOf(token)
	if ik == nil {
		return verified{}, false, errBadToken
	}
	kid, _ := parsed.Header["kid"].(string)
	if kid == "" {
		return verified{}, true, errBadToken
	}
	k := ik.key(kid, t)
	if k == nil || !slices.Contains(k.algs, parsed.Method.Alg()) {
		return verified{}, true, errBadToken
	}
	opts := []jwt.ParserOption{jwt.WithValidMethods([]string{parsed.Method.Alg()}), jwt.WithExpirationRequired(),
		jwt.WithLeeway(t.leeway), jwt.WithTimeFunc(t.now)}
	if ik.entry.Audience != "" {
		opts = append(opts, jwt.WithAudience(ik.entry.Audience))
	}
	var c externalClaims
	if _, err := jwt.ParseWithClaims(token, &c, func(*jwt.Token) (any, error) { return k.key, nil }, opts...); err != nil {
		return verified{}, true, errBadToken
	}
	// The lookup forgives case in the scheme and host; the check, as the
	// reference's, is of the entry's issuer exactly.
	if c.Issuer != ik.entry.Issuer {
		return verified{}, true, errBadToken
	}
	if ik.entry.Audience == "" && len(c.Audience) > 0 {
		return verified{}, true, errBadToken
	}
	return verified{userID: ik.entry.UserID, jti: c.ID, exp: c.ExpiresAt.Time}, true, nil
}

// key is the issuer's key kid, fetching the JWKS when kid is not known and the
// last fetch is at least jwksFetchInterval old; nil when there is none.
func (ik *issuerKeys) key(kid string, t *trustedIssuers) *jwk {
	known := func() (k *jwk, mayFetch bool) {
		ik.mu.Lock()
		defer ik.mu.Unlock()
		if k := ik.keys[kid]; k != nil {
			return k, false
		}
		return nil, ik.lastAttempt.IsZero() || t.now().Sub(ik.lastAttempt) >= jwksFetchInterval
	}
	k, mayFetch := known()
	if !mayFetch {
		return k
	}
	ik.fetch.Lock()
	defer ik.fetch.Unlock()
	// Another request may have fetched while this one waited.
	if k, mayFetch = known(); !mayFetch {
		return k
	}
	// The attempt is recorded once over: a request arriving meanwhile must
	// queue for this fetch's keys, not be refused for the fetch being recent.
	started := t.now()
	keys, err := fetchJWKS(t.client, ik.entry.JWKSURL, t.fetchTimeout)
	ik.mu.Lock()
	ik.lastAttempt = started
	if err == nil {
		// The set fetched replaces the one before (apache/iggy's JwksClient
		// adds to its cache and never drops a key): a key the issuer has
		// withdrawn, perhaps because it leaked, stops verifying at the next
		// fetch.
		ik.keys = keys
	}
	ik.mu.Unlock()
	if err != nil {
		// The keys fetched before stay: an issuer's outage does not end the
		// tokens it signed with them.
		t.log.Warn("http: a trusted issuer's JWKS could not be fetched", "issuer", ik.entry.Issuer, "jwks_url", ik.entry.JWKSURL, "err", err)
		k, _ = known()
		return k
	}
	return keys[kid]
}

// fetchJWKS reads a JWKS and keeps its usable signing keys, by kid.
func fetchJWKS(client *http.Client, jwksURL string, timeout time.Duration) (map[string]*jwk, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, jwksURL, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("answered %d", resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, jwksBytesMax+1))
	if err != nil {
		return nil, err
	}
	if len(body) > jwksBytesMax {
		return nil, fmt.Errorf("larger than %d bytes", jwksBytesMax)
	}
	return parseJWKS(body)
}

// jwkJSON is a key of a JWKS as published (RFC 7517, RFC 7518 §6).
type jwkJSON struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Use string `json:"use"`
	Alg string `json:"alg"`
	N   string `json:"n"`
	E   string `json:"e"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Y   string `json:"y"`
}

// parseJWKS keeps the RSA and EC signing keys that have a kid; a key of another
// type or use, or one that does not parse, is skipped (a provider may publish
// encryption keys beside its signing keys). More than jwksKeysMax keys refuse the
// whole set.
func parseJWKS(body []byte) (map[string]*jwk, error) {
	var set struct {
		Keys []jwkJSON `json:"keys"`
	}
	if err := json.Unmarshal(body, &set); err != nil {
		return nil, fmt.Errorf("not a JWKS: %w", err)
	}
	if len(set.Keys) > jwksKeysMax {
		return nil, fmt.Errorf("%d keys, more than %d", len(set.Keys), jwksKeysMax)
	}
	keys := make(map[string]*jwk, len(set.Keys))
	for i := range set.Keys {
		j := &set.Keys[i]
		if j.Kid == "" || j.Use != "" && j.Use != "sig" || keys[j.Kid] != nil {
			continue
		}
		k, err := j.parse()
		if err != nil {
			continue
		}
		if j.Alg != "" {
			if !slices.Contains(k.algs, j.Alg) {
				continue
			}
			k.algs = []string{j.Alg}
		}
		keys[j.Kid] = k
	}
	return keys, nil
}

var errUnusableKey = errors.New("httpapi: unusable JWK")

func (j *jwkJSON) parse() (*jwk, error) {
	switch j.Kty {
	case "RSA":
		n, err := base64URLInt(j.N)
		if err != nil || n.BitLen() < 1024 || n.BitLen() > rsaModulusBitsMax {
			return nil, errUnusableKey
		}
		e, err := base64URLInt(j.E)
		if err != nil || !e.IsInt64() || e.Int64() < 3 || e.Int64() > 1<<31-1 || e.Bit(0) == 0 {
			return nil, errUnusableKey
		}
		return &jwk{key: &rsa.PublicKey{N: n, E: int(e.Int64())},
			algs: []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"}}, nil
	case "EC":
		var curve elliptic.Curve
		var alg string
		switch j.Crv {
		case "P-256":
			curve, alg = elliptic.P256(), "ES256"
		case "P-384":
			curve, alg = elliptic.P384(), "ES384"
		case "P-521":
			curve, alg = elliptic.P521(), "ES512"
		default:
			return nil, errUnusableKey
		}
		size := (curve.Params().BitSize + 7) / 8
		x, errX := base64.RawURLEncoding.DecodeString(j.X)
		y, errY := base64.RawURLEncoding.DecodeString(j.Y)
		if errX != nil || errY != nil || len(x) != size || len(y) != size {
			return nil, errUnusableKey
		}
		// The point is checked to be on the curve.
		pub, err := ecdsa.ParseUncompressedPublicKey(curve, slices.Concat([]byte{4}, x, y))
		if err != nil {
			return nil, errUnusableKey
		}
		return &jwk{key: pub, algs: []string{alg}}, nil
	}
	return nil, errUnusableKey
}

// base64URLInt is a JWK's unsigned big-endian integer (RFC 7518 §2, Base64urlUInt).
func base64URLInt(s string) (*big.Int, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) == 0 {
		return nil, errUnusableKey
	}
	return new(big.Int).SetBytes(b), nil
}
