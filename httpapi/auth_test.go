package httpapi

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/wire"
)

// login logs in as iggy and returns the access token.
func login(t *testing.T, a *API) string {
	t.Helper()
	w := serve(a, "POST", "/users/login", "", `{"username":"iggy","password":"iggy"}`)
	var id identityInfo
	if w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &id) != nil || id.AccessToken == nil {
		t.Fatalf("login: %d %s", w.Code, w.Body)
	}
	return id.AccessToken.Token
}

const unauthenticatedBody = `{"id":40,"code":"unauthenticated","reason":"Unauthenticated","field":null}`

// TestLogoutRevokesTheToken: a JWT logged out is refused on the next request and
// cannot be refreshed, until it would have expired; the user's other tokens are
// untouched.
func TestLogoutRevokesTheToken(t *testing.T) {
	a, f, clock := testAPI(t)
	token, other := login(t, a), login(t, a)
	if w := serve(a, "GET", "/streams", "Bearer "+token, ""); w.Code != 200 {
		t.Fatalf("before logout: %d", w.Code)
	}
	w := serve(a, "DELETE", "/users/logout", "Bearer "+token, "")
	checkAnswer(t, "logout", w.Code, w.Body.String(), 204, "")
	v, err := a.tokens.verify(token)
	if err != nil {
		t.Fatal(err)
	}
	// Kept past the token's life: its exp, the 5 s of leeway, the clock margin.
	if until := f.revoked[v.jti]; !until.Equal(testStart.Add(time.Hour + 5*time.Second + time.Minute)) {
		t.Fatalf("revoked until %v", until)
	}
	w = serve(a, "GET", "/streams", "Bearer "+token, "")
	checkAnswer(t, "a request with the logged-out token", w.Code, w.Body.String(), 401, unauthenticatedBody)
	w = serve(a, "DELETE", "/users/logout", "Bearer "+token, "")
	checkAnswer(t, "a second logout", w.Code, w.Body.String(), 401, unauthenticatedBody)
	w = serve(a, "POST", "/users/refresh-token", "", `{"token":"`+token+`"}`)
	checkAnswer(t, "refresh of the logged-out token", w.Code, w.Body.String(), 401, unauthenticatedBody)
	if w := serve(a, "GET", "/streams", "Bearer "+other, ""); w.Code != 200 {
		t.Fatalf("another token of the user: %d", w.Code)
	}
	if w := serve(a, "POST", "/users/refresh-token", "", `{"token":"`+other+`"}`); w.Code != 200 {
		t.Fatalf("refresh of another token: %d %s", w.Code, w.Body)
	}
	// Within the leeway the token still verifies, and is still refused.
	clock.advance(time.Hour + 4*time.Second)
	if _, err := a.tokens.verify(token); err != nil {
		t.Fatal("the test's clock left the leeway")
	}
	w = serve(a, "GET", "/streams", "Bearer "+token, "")
	checkAnswer(t, "within the leeway", w.Code, w.Body.String(), 401, unauthenticatedBody)
}

// TestLogoutThatCannotRevoke: a revocation the backend refuses is the logout's
// answer, and the token keeps working (the client knows it is not logged out).
func TestLogoutThatCannotRevoke(t *testing.T) {
	a, f, _ := testAPI(t)
	token := login(t, a)
	cases := []struct {
		name   string
		err    error
		status int
		body   string
	}{
		{"table full", ErrRevokedTokensFull, 503,
			`{"id":503,"code":"revoked_tokens_full","reason":"the cluster holds as many revoked tokens as it may; the token was not revoked and stays valid until it expires; retry later","field":null}`},
		{"not the primary", wire.ErrTransientNotAccepted, 503,
			`{"id":58,"code":"transient_not_accepted","reason":"Request transiently not accepted; retry, on any replica","field":null}`},
		{"outcome unknown", wire.ErrTransientNotCommitted, 503,
			`{"id":57,"code":"transient_not_committed","reason":"Request transiently not committed; retry, on any replica","field":null}`},
	}
	for _, c := range cases {
		f.revokeErr = c.err
		w := serve(a, "DELETE", "/users/logout", "Bearer "+token, "")
		checkAnswer(t, c.name, w.Code, w.Body.String(), c.status, c.body)
		if w.Header().Get("Retry-After") != "1" {
			t.Errorf("%s: no retry-after", c.name)
		}
		if w := serve(a, "GET", "/streams", "Bearer "+token, ""); w.Code != 200 {
			t.Fatalf("%s: the token after a logout that failed: %d", c.name, w.Code)
		}
	}
	// The retry, once the cluster takes it, logs out.
	f.revokeErr = nil
	if w := serve(a, "DELETE", "/users/logout", "Bearer "+token, ""); w.Code != 204 {
		t.Fatalf("retried logout: %d %s", w.Code, w.Body)
	}
	if w := serve(a, "GET", "/streams", "Bearer "+token, ""); w.Code != 401 {
		t.Fatalf("after the retried logout: %d", w.Code)
	}
}

// TestLogoutOrder: a logout whose session logout fails revokes nothing (the
// client retries with a token that still works); a personal access token's
// logout ends its session and revokes nothing (deleting it ends it).
func TestLogoutOrder(t *testing.T) {
	a, f, _ := testAPI(t)
	token := login(t, a)
	f.on(wire.CodeLogoutUser, nil, wire.ErrTransientNotAccepted)
	if w := serve(a, "DELETE", "/users/logout", "Bearer "+token, ""); w.Code != 503 || len(f.revoked) != 0 {
		t.Fatalf("a failed session logout: %d, %d revoked", w.Code, len(f.revoked))
	}
	f.on(wire.CodeLogoutUser, nil, nil)
	if w := serve(a, "DELETE", "/users/logout", "Bearer pat-of-5", ""); w.Code != 204 || len(f.revoked) != 0 {
		t.Fatalf("a PAT's logout: %d, %d revoked", w.Code, len(f.revoked))
	}
	if c := f.last(t, wire.CodeLogoutUser).caller; !strings.HasPrefix(c.Credential, "pat:") {
		t.Fatalf("the PAT's session logout ran as %+v", c)
	}
	if w := serve(a, "GET", "/streams", "Bearer pat-of-5", ""); w.Code != 200 {
		t.Fatalf("the PAT after its logout: %d", w.Code)
	}
}
