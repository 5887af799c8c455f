package httpapi

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/iggy-shard/iggy-shard/config"
)

func newTestTokens(t *testing.T, clock *testClock, mutate func(*config.JWT), clusterSecret string) *tokens {
	t.Helper()
	cfg := config.DefaultHTTP().JWT
	if mutate != nil {
		mutate(&cfg)
	}
	tk, err := newTokens(cfg, clusterSecret, clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

func TestTokenClaims(t *testing.T) {
	clock := &testClock{now: testStart}
	tk := newTestTokens(t, clock, func(c *config.JWT) { c.EncodingSecret = "s"; c.NotBefore = 0 }, "")
	is, err := tk.issue(3)
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(is.token, ".")
	if len(parts) != 3 {
		t.Fatalf("token %q", is.token)
	}
	header, _ := base64.RawURLEncoding.DecodeString(parts[0])
	payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
	var h map[string]string
	if err := json.Unmarshal(header, &h); err != nil || h["alg"] != "HS256" || h["typ"] != "JWT" {
		t.Fatalf("header %s", header)
	}
	iat := testStart.Unix()
	var c map[string]any
	if err := json.Unmarshal(payload, &c); err != nil {
		t.Fatal(err)
	}
	if c["iss"] != "iggy.apache.org" || c["aud"] != "iggy.apache.org" || c["sub"] != "3" || c["iat"] != float64(iat) ||
		c["exp"] != float64(iat+3600) || c["nbf"] != float64(iat) || len(c["jti"].(string)) != 36 || c["jti"].(string)[14] != '7' {
		t.Fatalf("claims %s", payload)
	}
	if !strings.HasPrefix(string(payload), `{"jti":"`) || is.expirySec != iat+3600 {
		t.Fatalf("claims out of the reference's order or expiry %d: %s", is.expirySec, payload)
	}
	v, err := tk.verify(is.token)
	if err != nil || v.userID != 3 || v.jti != c["jti"] {
		t.Fatalf("verify: %+v %v", v, err)
	}
	never := newTestTokens(t, clock, func(c *config.JWT) { c.EncodingSecret = "s"; c.AccessTokenNeverExpires = true }, "")
	if is, _ := never.issue(1); is.expirySec != iat+1_000_000_000 {
		t.Fatalf(`access_token_expiry "none": exp %d`, is.expirySec)
	}
}

func TestTokenValidation(t *testing.T) {
	clock := &testClock{now: testStart}
	secret := func(c *config.JWT) { c.EncodingSecret = "s" }
	tk := newTestTokens(t, clock, secret, "")
	sign := func(method jwt.SigningMethod, key any, c *claims) string {
		s, err := jwt.NewWithClaims(method, c).SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	at := func(offsetSec int64) *jwt.NumericDate {
		return jwt.NewNumericDate(testStart.Add(time.Duration(offsetSec) * time.Second))
	}
	good := func() *claims {
		return &claims{JTI: "x", Iss: "iggy.apache.org", Aud: audience{"iggy.apache.org"}, Sub: "1", Iat: at(0), Exp: at(60), Nbf: at(0)}
	}
	for _, tt := range []struct {
		name  string
		token func() string
		ok    bool
	}{
		{"good", func() string { return sign(jwt.SigningMethodHS256, []byte("s"), good()) }, true},
		{"audience as an array", func() string {
			c := good()
			c.Aud = audience{"other", "iggy.apache.org"}
			return sign(jwt.SigningMethodHS256, []byte("s"), c)
		}, true},
		{"wrong key", func() string { return sign(jwt.SigningMethodHS256, []byte("t"), good()) }, false},
		{"another algorithm", func() string { return sign(jwt.SigningMethodHS512, []byte("s"), good()) }, false},
		{"alg none", func() string { return sign(jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, good()) }, false},
		{"wrong issuer", func() string { c := good(); c.Iss = "evil"; return sign(jwt.SigningMethodHS256, []byte("s"), c) }, false},
		{"wrong audience", func() string {
			c := good()
			c.Aud = audience{"evil"}
			return sign(jwt.SigningMethodHS256, []byte("s"), c)
		}, false},
		{"no expiry", func() string { c := good(); c.Exp = nil; return sign(jwt.SigningMethodHS256, []byte("s"), c) }, false},
		{"expired 6 s ago", func() string { c := good(); c.Exp = at(-6); return sign(jwt.SigningMethodHS256, []byte("s"), c) }, false},
		{"expired 4 s ago (skew 5 s)", func() string { c := good(); c.Exp = at(-4); return sign(jwt.SigningMethodHS256, []byte("s"), c) }, true},
		{"not before in 6 s", func() string { c := good(); c.Nbf = at(6); return sign(jwt.SigningMethodHS256, []byte("s"), c) }, false},
		{"not before in 4 s", func() string { c := good(); c.Nbf = at(4); return sign(jwt.SigningMethodHS256, []byte("s"), c) }, true},
		{"subject not a user id", func() string { c := good(); c.Sub = "root"; return sign(jwt.SigningMethodHS256, []byte("s"), c) }, false},
		{"subject over u32", func() string { c := good(); c.Sub = "4294967296"; return sign(jwt.SigningMethodHS256, []byte("s"), c) }, false},
	} {
		_, err := tk.verify(tt.token())
		if (err == nil) != tt.ok {
			t.Errorf("%s: verify error %v, want ok=%v", tt.name, err, tt.ok)
		}
	}
}

func TestTokenKeys(t *testing.T) {
	clock := &testClock{now: testStart}
	const psk = "0123456789abcdef0123456789abcdef-shared"
	crossVerifies := func(a, b *tokens) bool {
		is, err := a.issue(1)
		if err != nil {
			t.Fatal(err)
		}
		_, err = b.verify(is.token)
		return err == nil
	}
	nodeA := newTestTokens(t, clock, nil, psk)
	nodeB := newTestTokens(t, clock, nil, psk)
	if !crossVerifies(nodeA, nodeB) || len(nodeA.encKey) != 64 || strings.Trim(string(nodeA.encKey), "0123456789abcdef") != "" {
		t.Fatalf("two nodes with one shared secret: keys %q and %q do not agree or are not 64 hex digits", nodeA.encKey, nodeB.encKey)
	}
	if crossVerifies(nodeA, newTestTokens(t, clock, nil, psk+"x")) {
		t.Fatal("another shared secret verifies the tokens")
	}
	if crossVerifies(newTestTokens(t, clock, nil, ""), newTestTokens(t, clock, nil, "")) {
		t.Fatal("two processes without secrets share a key")
	}
	if r := newTestTokens(t, clock, nil, ""); len(r.encKey) < 32 || len(r.encKey) > 63 {
		t.Fatalf("random key of %d characters, want 32..63", len(r.encKey))
	}
	configured := newTestTokens(t, clock, func(c *config.JWT) { c.DecodingSecret = "mine" }, psk)
	if string(configured.encKey) != "mine" || string(configured.decKey) != "mine" {
		t.Fatalf("one configured secret serves both and wins over the cluster's: %q %q", configured.encKey, configured.decKey)
	}
	b64 := newTestTokens(t, clock, func(c *config.JWT) {
		c.UseBase64Secret, c.EncodingSecret, c.DecodingSecret = true, "c2VjcmV0", "c2VjcmV0"
	}, "")
	if string(b64.encKey) != "secret" {
		t.Fatalf("use_base64_secret: key %q", b64.encKey)
	}
	if _, err := newTokens(config.JWT{Algorithm: "RS256"}, "", clock.Now); err == nil {
		t.Fatal("RS256 accepted")
	}
}
