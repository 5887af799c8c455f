package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/config"
	"github.com/iggy-shard/iggy-shard/wire"
)

// call is one command the fake backend ran.
type call struct {
	caller Caller
	code   wire.CommandCode
	body   []byte
}

// fakeBackend answers commands from a table and records them.
type fakeBackend struct {
	mu      sync.Mutex
	calls   []call
	replies map[wire.CommandCode]func(c Caller, body []byte) ([]byte, error)
	cluster ClusterState
	// revoked are the tokens RevokeToken revoked, each until its instant;
	// revokeErr, when set, is what RevokeToken answers instead.
	revoked   map[string]time.Time
	revokeErr error
}

func newFake() *fakeBackend {
	f := &fakeBackend{replies: map[wire.CommandCode]func(Caller, []byte) ([]byte, error){}, cluster: ClusterState{View: 7, Primary: true},
		revoked: map[string]time.Time{}}
	// A password login accepts iggy/iggy as user 0; a PAT login accepts "pat-of-5" as
	// user 5.
	f.replies[wire.CodeLoginRegister] = func(_ Caller, body []byte) ([]byte, error) {
		var r wire.LoginRegister
		if err := r.Decode(body); err != nil || string(r.Username) != "iggy" || string(r.Password) != "iggy" {
			return nil, wire.ErrInvalidCredentials
		}
		return []byte{0, 0, 0, 0}, nil
	}
	f.replies[wire.CodeLoginRegisterWithPAT] = func(_ Caller, body []byte) ([]byte, error) {
		var r wire.LoginRegisterWithPAT
		if err := r.Decode(body); err != nil || string(r.Token) != "pat-of-5" {
			return nil, wire.ErrInvalidPersonalAccessToken
		}
		return []byte{5, 0, 0, 0}, nil
	}
	return f
}

func (f *fakeBackend) on(code wire.CommandCode, reply []byte, err error) {
	f.replies[code] = func(Caller, []byte) ([]byte, error) { return reply, err }
}

func (f *fakeBackend) Do(_ context.Context, c Caller, code wire.CommandCode, body []byte) ([]byte, error) {
	f.mu.Lock()
	f.calls = append(f.calls, call{c, code, append([]byte(nil), body...)})
	h := f.replies[code]
	f.mu.Unlock()
	if h == nil {
		return nil, nil
	}
	return h(c, body)
}

func (f *fakeBackend) Cluster() ClusterState { return f.cluster }

func (f *fakeBackend) RevokeToken(_ context.Context, _ Caller, jti string, until time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.revokeErr != nil {
		return f.revokeErr
	}
	if until.After(f.revoked[jti]) {
		f.revoked[jti] = until
	}
	return nil
}

func (f *fakeBackend) TokenRevoked(jti string, now time.Time) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	until, ok := f.revoked[jti]
	return ok && now.Before(until)
}

// last is the last command run with code.
func (f *fakeBackend) last(t *testing.T, code wire.CommandCode) call {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := len(f.calls) - 1; i >= 0; i-- {
		if f.calls[i].code == code {
			return f.calls[i]
		}
	}
	t.Fatalf("command %d never ran", code)
	return call{}
}

// testClock is a settable clock.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

var testStart = time.Date(2024, 12, 5, 12, 0, 0, 0, time.UTC)

func testConfig() config.HTTP {
	c := config.DefaultHTTP()
	c.JWT.EncodingSecret, c.JWT.DecodingSecret = "test-secret", "test-secret"
	return c
}

// testAPI is an API over a fake backend with a fixed clock.
func testAPI(t *testing.T, mutate ...func(*Options)) (*API, *fakeBackend, *testClock) {
	t.Helper()
	f := newFake()
	clock := &testClock{now: testStart}
	opts := Options{HTTP: testConfig(), Backend: f, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: clock.Now}
	for _, m := range mutate {
		m(&opts)
	}
	a, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return a, f, clock
}

// bearer is a valid token for user.
func bearer(t *testing.T, a *API, user uint32) string {
	t.Helper()
	tok, err := a.tokens.issue(user)
	if err != nil {
		t.Fatal(err)
	}
	return "Bearer " + tok.token
}

// serve runs one request through a.
func serve(a *API, method, target, auth, body string, header ...string) *httptest.ResponseRecorder {
	var r *http.Request
	if body == "" {
		r = httptest.NewRequest(method, target, nil)
	} else {
		r = httptest.NewRequest(method, target, strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
	}
	if auth != "" {
		r.Header.Set("Authorization", auth)
	}
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	a.ServeHTTP(w, r)
	return w
}

// compact is a hand-written golden without its layout.
func compact(t *testing.T, golden string) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(golden)); err != nil {
		t.Fatalf("golden is not JSON: %v\n%s", err, golden)
	}
	return b.String()
}

func mustAppend(t *testing.T, b []byte, err error) []byte {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	return b
}
