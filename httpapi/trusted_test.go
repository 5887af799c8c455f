package httpapi

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/iggy-shard/iggy-shard/config"
	"github.com/iggy-shard/iggy-shard/wire"
)

// An identity provider for the tests: its keys, and the JWKS server publishing
// them.
type testIssuer struct {
	rsaKey *rsa.PrivateKey
	ecKey  *ecdsa.PrivateKey

	mu      sync.Mutex
	jwks    []byte // what the server answers; nil: 503
	hang    bool   // the server answers nothing for 3 s
	fetches int
	srv     *httptest.Server
}

const (
	testIssuerURL   = "https://idp.example.com/tenant-1"
	testIssuerUser  = 9
	testAudience    = "iggy-cluster"
	unauthenticated = `{"id":40,"code":"unauthenticated","reason":"Unauthenticated","field":null}`
)

func newTestIssuer(t *testing.T) *testIssuer {
	t.Helper()
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ti := &testIssuer{rsaKey: rsaKey, ecKey: ecKey}
	ti.publish(t, map[string]any{"kty": "RSA", "kid": "rsa-1", "use": "sig", "alg": "RS256",
		"n": b64(rsaKey.N.Bytes()), "e": b64(big.NewInt(int64(rsaKey.E)).Bytes())},
		ti.ecJWK("ec-1"))
	ti.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ti.mu.Lock()
		ti.fetches++
		body, hang := ti.jwks, ti.hang
		ti.mu.Unlock()
		if hang {
			// Bounded, so that a fetch without its own timeout fails the test
			// rather than hanging it.
			select {
			case <-r.Context().Done():
			case <-time.After(3 * time.Second):
				w.WriteHeader(http.StatusServiceUnavailable)
			}
			return
		}
		if body == nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}))
	t.Cleanup(ti.srv.Close)
	return ti
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func (ti *testIssuer) ecJWK(kid string) map[string]any {
	x, y := make([]byte, 32), make([]byte, 32)
	ti.ecKey.X.FillBytes(x)
	ti.ecKey.Y.FillBytes(y)
	return map[string]any{"kty": "EC", "kid": kid, "crv": "P-256", "x": b64(x), "y": b64(y)}
}

// publish makes keys the JWKS the server answers.
func (ti *testIssuer) publish(t *testing.T, keys ...map[string]any) {
	t.Helper()
	b, err := json.Marshal(map[string]any{"keys": keys})
	if err != nil {
		t.Fatal(err)
	}
	ti.mu.Lock()
	ti.jwks = b
	ti.mu.Unlock()
}

func (ti *testIssuer) fetchCount() int {
	ti.mu.Lock()
	defer ti.mu.Unlock()
	return ti.fetches
}

// sign is a bearer signed with key under kid and alg.
func sign(t *testing.T, method jwt.SigningMethod, kid string, key any, c jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(method, c)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return "Bearer " + s
}

// claimsAt are a trusted token's claims, valid at now for a minute.
func claimsAt(now time.Time, edit ...func(jwt.MapClaims)) jwt.MapClaims {
	c := jwt.MapClaims{"iss": testIssuerURL, "aud": testAudience, "sub": "agent-7", "jti": "ext-1",
		"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(time.Minute).Unix()}
	for _, e := range edit {
		e(c)
	}
	return c
}

func trustedAPI(t *testing.T, ti *testIssuer) (*API, *fakeBackend, *testClock) {
	return testAPI(t, func(o *Options) {
		o.TrustedIssuers = []TrustedIssuer{{Issuer: testIssuerURL, Audience: testAudience, JWKSURL: ti.srv.URL + "/jwks.json", UserID: testIssuerUser}}
	})
}

// TestTrustedIssuerBearers: a trusted issuer's token acts as the entry's user when
// its kid names a key of the issuer's JWKS that allows its alg, its iss and aud
// are the entry's, and it is within exp and nbf (with the leeway); every other
// token is 401.
func TestTrustedIssuerBearers(t *testing.T) {
	ti := newTestIssuer(t)
	a, f, clock := trustedAPI(t, ti)
	now := clock.Now()
	hmacKey := []byte("a secret the issuer never had")
	for _, tc := range []struct {
		name string
		auth string
		ok   bool
	}{
		{"RS256 by the RSA key", sign(t, jwt.SigningMethodRS256, "rsa-1", ti.rsaKey, claimsAt(now)), true},
		{"ES256 by the EC key", sign(t, jwt.SigningMethodES256, "ec-1", ti.ecKey, claimsAt(now)), true},
		{"iss with its scheme and host in capitals (matched to the entry, not equal to it)", sign(t, jwt.SigningMethodRS256, "rsa-1", ti.rsaKey, claimsAt(now, func(c jwt.MapClaims) {
			c["iss"] = "HTTPS://IdP.Example.com/tenant-1"
		})), false},
		{"aud as an array", sign(t, jwt.SigningMethodES256, "ec-1", ti.ecKey, claimsAt(now, func(c jwt.MapClaims) {
			c["aud"] = []string{"other", testAudience}
		})), true},
		{"expired within the leeway (5 s)", sign(t, jwt.SigningMethodES256, "ec-1", ti.ecKey, claimsAt(now, func(c jwt.MapClaims) {
			c["exp"] = now.Add(-3 * time.Second).Unix()
		})), true},
		{"wrong kid", sign(t, jwt.SigningMethodRS256, "rsa-2", ti.rsaKey, claimsAt(now)), false},
		{"no kid", sign(t, jwt.SigningMethodRS256, "", ti.rsaKey, claimsAt(now)), false},
		{"kid of the other key", sign(t, jwt.SigningMethodRS256, "ec-1", ti.rsaKey, claimsAt(now)), false},
		{"an alg the key does not allow (its JWK says RS256)", sign(t, jwt.SigningMethodRS384, "rsa-1", ti.rsaKey, claimsAt(now)), false},
		{"PS256 where the JWK says RS256", sign(t, jwt.SigningMethodPS256, "rsa-1", ti.rsaKey, claimsAt(now)), false},
		{"HS256 with a kid of the issuer", sign(t, jwt.SigningMethodHS256, "rsa-1", hmacKey, claimsAt(now)), false},
		{"signed by another key", sign(t, jwt.SigningMethodES256, "ec-1", mustECKey(t), claimsAt(now)), false},
		{"expired", sign(t, jwt.SigningMethodRS256, "rsa-1", ti.rsaKey, claimsAt(now, func(c jwt.MapClaims) {
			c["exp"] = now.Add(-10 * time.Second).Unix()
		})), false},
		{"no exp", sign(t, jwt.SigningMethodRS256, "rsa-1", ti.rsaKey, claimsAt(now, func(c jwt.MapClaims) { delete(c, "exp") })), false},
		{"not yet valid", sign(t, jwt.SigningMethodRS256, "rsa-1", ti.rsaKey, claimsAt(now, func(c jwt.MapClaims) {
			c["nbf"] = now.Add(time.Minute).Unix()
		})), false},
		{"wrong audience", sign(t, jwt.SigningMethodRS256, "rsa-1", ti.rsaKey, claimsAt(now, func(c jwt.MapClaims) { c["aud"] = "iggy.apache.org" })), false},
		{"no audience", sign(t, jwt.SigningMethodRS256, "rsa-1", ti.rsaKey, claimsAt(now, func(c jwt.MapClaims) { delete(c, "aud") })), false},
		{"another path of the issuer's host", sign(t, jwt.SigningMethodRS256, "rsa-1", ti.rsaKey, claimsAt(now, func(c jwt.MapClaims) {
			c["iss"] = "https://idp.example.com/tenant-2"
		})), false},
	} {
		f.mu.Lock()
		f.calls = nil
		f.mu.Unlock()
		w := serve(a, "GET", "/streams", tc.auth, "")
		if !tc.ok {
			checkAnswer(t, tc.name, w.Code, w.Body.String(), 401, unauthenticated)
			continue
		}
		if w.Code != 200 {
			t.Errorf("%s: %d %s, want 200", tc.name, w.Code, w.Body)
			continue
		}
		if c := f.last(t, wire.CodeGetStreams).caller; c.UserID != testIssuerUser || !c.LoggedIn || !strings.HasPrefix(c.Credential, "trusted:") {
			t.Errorf("%s: ran as %+v, want the entry's user %d", tc.name, c, testIssuerUser)
		}
	}
	// The bearers this node issues are unaffected.
	if w := serve(a, "GET", "/streams", bearer(t, a, 3), ""); w.Code != 200 || f.last(t, wire.CodeGetStreams).caller.UserID != 3 {
		t.Fatalf("a self-issued bearer beside trusted issuers: %d", w.Code)
	}
}

func mustECKey(t *testing.T) *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestTrustedIssuerFetchesAreBounded: the JWKS is fetched when a token first
// needs it, then at most once per 10 s however many tokens name unknown keys; a
// key published since is found at the next allowed fetch.
func TestTrustedIssuerFetchesAreBounded(t *testing.T) {
	ti := newTestIssuer(t)
	a, _, clock := trustedAPI(t, ti)
	if n := ti.fetchCount(); n != 0 {
		t.Fatalf("%d fetches before any token: the JWKS is to be fetched lazily", n)
	}
	good := sign(t, jwt.SigningMethodRS256, "rsa-1", ti.rsaKey, claimsAt(clock.Now(), func(c jwt.MapClaims) { c["exp"] = clock.Now().Add(time.Hour).Unix() }))
	unknown := sign(t, jwt.SigningMethodES256, "ec-2", ti.ecKey, claimsAt(clock.Now(), func(c jwt.MapClaims) { c["exp"] = clock.Now().Add(time.Hour).Unix() }))
	for range 20 {
		if w := serve(a, "GET", "/streams", good, ""); w.Code != 200 {
			t.Fatalf("a known key: %d", w.Code)
		}
		if w := serve(a, "GET", "/streams", unknown, ""); w.Code != 401 {
			t.Fatalf("an unknown kid: %d", w.Code)
		}
	}
	if n := ti.fetchCount(); n != 1 {
		t.Fatalf("%d fetches for 40 tokens within 10 s, want 1", n)
	}
	// The issuer rotates: ec-2 is published. Within the interval it is not seen.
	ti.publish(t, ti.ecJWK("ec-2"))
	clock.advance(jwksFetchInterval - time.Second)
	if w := serve(a, "GET", "/streams", unknown, ""); w.Code != 401 || ti.fetchCount() != 1 {
		t.Fatalf("within the interval: %d, %d fetches", w.Code, ti.fetchCount())
	}
	clock.advance(time.Second)
	if w := serve(a, "GET", "/streams", unknown, ""); w.Code != 200 || ti.fetchCount() != 2 {
		t.Fatalf("after the interval: %d, %d fetches", w.Code, ti.fetchCount())
	}
	// The set fetched replaces the old: rsa-1 is gone, and its absence is not
	// asked again before the interval ends.
	for range 5 {
		if w := serve(a, "GET", "/streams", good, ""); w.Code != 401 {
			t.Fatalf("a key the issuer withdrew: %d", w.Code)
		}
	}
	if n := ti.fetchCount(); n != 2 {
		t.Fatalf("%d fetches, want 2", n)
	}
	// Over many intervals, one fetch per interval at most.
	for i := range 30 {
		clock.advance(jwksFetchInterval / 3)
		serve(a, "GET", "/streams", good, "")
		if max := 2 + (i+1)/3; ti.fetchCount() > max {
			t.Fatalf("after %d thirds of an interval: %d fetches, more than %d", i+1, ti.fetchCount(), max)
		}
	}
}

// TestTrustedIssuerJWKSDown: an issuer whose JWKS cannot be had (refusing, hung,
// too large, too many keys, not JSON) verifies nothing new, and the keys fetched
// before its outage keep verifying.
func TestTrustedIssuerJWKSDown(t *testing.T) {
	ti := newTestIssuer(t)
	a, _, clock := trustedAPI(t, ti)
	a.trusted.fetchTimeout = 50 * time.Millisecond
	long := func(c jwt.MapClaims) { c["exp"] = clock.Now().Add(time.Hour).Unix() }
	rsaToken := sign(t, jwt.SigningMethodRS256, "rsa-1", ti.rsaKey, claimsAt(clock.Now(), long))
	newKid := sign(t, jwt.SigningMethodES256, "ec-9", ti.ecKey, claimsAt(clock.Now(), long))

	ti.mu.Lock()
	ti.jwks = nil
	ti.mu.Unlock()
	if w := serve(a, "GET", "/streams", rsaToken, ""); w.Code != 401 {
		t.Fatalf("the JWKS answering 503: %d", w.Code)
	}
	ti.publish(t, map[string]any{"kty": "RSA", "kid": "rsa-1", "n": b64(ti.rsaKey.N.Bytes()), "e": b64(big.NewInt(int64(ti.rsaKey.E)).Bytes())})
	clock.advance(jwksFetchInterval)
	if w := serve(a, "GET", "/streams", rsaToken, ""); w.Code != 200 {
		t.Fatalf("the JWKS back: %d", w.Code)
	}
	tooMany := make([]map[string]any, jwksKeysMax+1)
	for i := range tooMany {
		tooMany[i] = ti.ecJWK("ec-" + strings.Repeat("9", i+1))
	}
	tooLarge, _ := json.Marshal(map[string]any{"keys": []any{ti.ecJWK("ec-9")}, "padding": strings.Repeat("x", jwksBytesMax)})
	for _, outage := range []struct {
		name string
		set  func()
	}{
		{"refusing", func() { ti.jwks = nil }},
		{"hung", func() { ti.hang = true }},
		{"over 256 KiB", func() { ti.jwks = tooLarge }},
		{"not JSON", func() { ti.jwks = []byte("<html>") }},
		{"more keys than 64", func() {
			b, _ := json.Marshal(map[string]any{"keys": tooMany})
			ti.jwks = b
		}},
	} {
		ti.mu.Lock()
		ti.hang = false
		outage.set()
		ti.mu.Unlock()
		clock.advance(jwksFetchInterval)
		before := ti.fetchCount()
		start := time.Now()
		if w := serve(a, "GET", "/streams", newKid, ""); w.Code != 401 {
			t.Fatalf("%s: a key it would publish: %d", outage.name, w.Code)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("%s: the request waited %v for the JWKS", outage.name, d)
		}
		if ti.fetchCount() != before+1 {
			t.Fatalf("%s: %d fetches, want 1", outage.name, ti.fetchCount()-before)
		}
		if w := serve(a, "GET", "/streams", rsaToken, ""); w.Code != 200 {
			t.Fatalf("%s: a key fetched before the outage: %d", outage.name, w.Code)
		}
	}
}

// TestTrustedIssuerTokensAreNotRefreshed: a refresh of a trusted issuer's token
// is 401 invalid_access_token, and fetches nothing.
func TestTrustedIssuerTokensAreNotRefreshed(t *testing.T) {
	ti := newTestIssuer(t)
	a, _, clock := trustedAPI(t, ti)
	tok := strings.TrimPrefix(sign(t, jwt.SigningMethodRS256, "rsa-1", ti.rsaKey, claimsAt(clock.Now())), "Bearer ")
	w := serve(a, "POST", "/users/refresh-token", "", `{"token":"`+tok+`"}`)
	checkAnswer(t, "a refresh of a trusted token", w.Code, w.Body.String(), 401,
		`{"id":78,"code":"invalid_access_token","reason":"Invalid access token","field":null}`)
	if n := ti.fetchCount(); n != 0 {
		t.Fatalf("the refresh fetched the JWKS %d times", n)
	}
	// A token of no trusted issuer is refused as any bad token.
	other := strings.TrimPrefix(sign(t, jwt.SigningMethodES256, "ec-1", ti.ecKey, claimsAt(clock.Now(), func(c jwt.MapClaims) { c["iss"] = "https://elsewhere" })), "Bearer ")
	w = serve(a, "POST", "/users/refresh-token", "", `{"token":"`+other+`"}`)
	checkAnswer(t, "a refresh of an unknown issuer's token", w.Code, w.Body.String(), 401, unauthenticated)
}

// TestTrustedIssuerEntriesAreChecked: an entry the reference refuses at boot is
// refused by New, naming its setting.
func TestTrustedIssuerEntriesAreChecked(t *testing.T) {
	good := TrustedIssuer{Issuer: testIssuerURL, Audience: testAudience, JWKSURL: "https://idp.example.com/jwks.json", UserID: 9}
	for _, tc := range []struct {
		setting string
		edit    func(*TrustedIssuer)
	}{
		{"http.jwt.trusted_issuers[1].issuer", func(e *TrustedIssuer) { e.Issuer = "" }},
		{"http.jwt.trusted_issuers[1].jwks_url", func(e *TrustedIssuer) { e.JWKSURL = "" }},
		{"http.jwt.trusted_issuers[1].jwks_url", func(e *TrustedIssuer) { e.JWKSURL = "file:///etc/jwks.json" }},
		{"http.jwt.trusted_issuers[1].user_id", func(e *TrustedIssuer) { e.UserID = 0 }},
		{"http.jwt.trusted_issuers[1].issuer", func(e *TrustedIssuer) { e.Issuer = "HTTPS://IDP.example.com/tenant-1" }},
	} {
		bad := good
		tc.edit(&bad)
		_, err := New(Options{HTTP: testConfig(), Backend: newFake(), TrustedIssuers: []TrustedIssuer{good, bad}})
		var se *config.SettingError
		if !errors.As(err, &se) || se.Setting != tc.setting {
			t.Errorf("entry %+v: %v, want a SettingError naming %s", bad, err, tc.setting)
		}
	}
}

// TestTrustedIssuerConcurrentFirstUse: many requests naming a key not yet fetched
// at once cost the issuer one fetch, and all verify with its answer.
func TestTrustedIssuerConcurrentFirstUse(t *testing.T) {
	ti := newTestIssuer(t)
	a, _, clock := trustedAPI(t, ti)
	tok := sign(t, jwt.SigningMethodES256, "ec-1", ti.ecKey, claimsAt(clock.Now()))
	const requests = 32
	codes := make(chan int, requests)
	var wg sync.WaitGroup
	for range requests {
		wg.Go(func() { codes <- serve(a, "GET", "/streams", tok, "").Code })
	}
	wg.Wait()
	close(codes)
	for c := range codes {
		if c != 200 {
			t.Fatalf("a concurrent first use: %d", c)
		}
	}
	if n := ti.fetchCount(); n != 1 {
		t.Fatalf("%d fetches for %d concurrent first uses, want 1", n, requests)
	}
}

// TestTrustedIssuerLogout: a logout with a trusted issuer's token ends its
// session and answers 204; the token is the issuer's and is not revoked here.
func TestTrustedIssuerLogout(t *testing.T) {
	ti := newTestIssuer(t)
	a, f, clock := trustedAPI(t, ti)
	tok := sign(t, jwt.SigningMethodES256, "ec-1", ti.ecKey, claimsAt(clock.Now()))
	if w := serve(a, "DELETE", "/users/logout", tok, ""); w.Code != 204 {
		t.Fatalf("logout: %d %s", w.Code, w.Body)
	}
	if c := f.last(t, wire.CodeLogoutUser).caller; c.UserID != testIssuerUser {
		t.Fatalf("logout ran as %+v", c)
	}
	if len(f.revoked) != 0 {
		t.Fatalf("revoked %v", f.revoked)
	}
}

func TestNormalizeIssuer(t *testing.T) {
	for in, want := range map[string]string{
		"HTTPS://Example.COM/MyPath/Sub": "https://example.com/MyPath/Sub",
		"https://example.com":            "https://example.com",
		"HTTPS://Example.COM?x=Y":        "https://example.com?x=Y",
		"Example.COM/":                   "example.com",
		"my-Issuer":                      "my-issuer",
	} {
		if got := normalizeIssuer(in); got != want {
			t.Errorf("normalizeIssuer(%q) = %q, want %q", in, got, want)
		}
	}
}
