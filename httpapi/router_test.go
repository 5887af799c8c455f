package httpapi

import (
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/config"
	"github.com/iggy-shard/iggy-shard/wire"
)

// The goldens below are written by hand from the reference server's router, bearer
// extractor, error bodies and CORS layer (apache/iggy core/server/src/http.rs,
// core/server/src/http/extractor.rs, core/server/src/http/error.rs).

func TestRouterPathsAndMethods(t *testing.T) {
	a, f, _ := testAPI(t)
	auth := bearer(t, a, 0)
	for _, tt := range []struct {
		method, path string
		status       int
		allow        string // the 405's allow header
	}{
		{"GET", "/nothing", 404, ""},
		{"GET", "/streams/", 404, ""}, // no trailing-slash normalisation
		{"GET", "/streams//topics", 404, ""},
		{"GET", "/streams/0/topics/0/messages/flush/0/fsync=true", 404, ""}, // not routed at cc269ef7
		{"GET", "/users/logout", 405, "DELETE"},                             // the static segment wins over {user_id}
		{"GET", "/users/login", 405, "POST"},
		{"DELETE", "/personal-access-tokens/login", 405, "POST"},
		{"PATCH", "/streams", 405, "GET,HEAD,POST"},
		{"POST", "/ping", 405, "GET,HEAD"},
		{"PUT", "/streams/1/topics/2/consumer-offsets", 204, ""},
		{"HEAD", "/streams", 200, ""},
	} {
		w := serve(a, tt.method, tt.path, auth, map[bool]string{true: `{"offset":0}`}[tt.method == "PUT"])
		if w.Code != tt.status || w.Header().Get("Allow") != tt.allow {
			t.Errorf("%s %s: %d allow %q, want %d allow %q", tt.method, tt.path, w.Code, w.Header().Get("Allow"), tt.status, tt.allow)
		}
		if (w.Code == 404 || w.Code == 405) && w.Body.Len() != 0 {
			t.Errorf("%s %s: body %q, want none", tt.method, tt.path, w.Body)
		}
	}
	// Captures are percent-decoded; u32 text is an id, other text a name.
	serve(a, "GET", "/streams/my%20stream%2Fx", auth, "")
	var gs wire.GetStream
	if err := gs.Decode(f.last(t, wire.CodeGetStream).body); err != nil || !gs.StreamID.Equal(wire.StringIdentifier([]byte("my stream/x"))) {
		t.Fatalf("GET /streams/my%%20stream%%2Fx ran GetStream %#v (%v)", gs.StreamID, err)
	}
	serve(a, "GET", "/streams/42", auth, "")
	if err := gs.Decode(f.last(t, wire.CodeGetStream).body); err != nil || !gs.StreamID.Equal(wire.NumericIdentifier(42)) {
		t.Fatalf("GET /streams/42 ran GetStream %#v (%v)", gs.StreamID, err)
	}
	// A name over 255 bytes is 400 invalid_identifier.
	w := serve(a, "GET", "/streams/"+strings.Repeat("n", 256), auth, "")
	if want := compact(t, `{"id":6,"code":"invalid_identifier","reason":"Invalid identifier","field":null}`); w.Code != 400 || w.Body.String() != want {
		t.Fatalf("a 256-byte stream name: %d %s, want 400 %s", w.Code, w.Body, want)
	}
	// HEAD has no body.
	f.on(wire.CodeGetStreams, nil, nil)
	if w := serve(a, "HEAD", "/streams", auth, ""); w.Body.Len() != 0 && w.Body.String() != "[]" {
		t.Fatalf("HEAD /streams: body %q", w.Body)
	}
}

func TestBearers(t *testing.T) {
	a, f, clock := testAPI(t)
	missing := compact(t, `{"id":77,"code":"access_token_missing","reason":"Access token is missing","field":null}`)
	unauthenticated := compact(t, `{"id":40,"code":"unauthenticated","reason":"Unauthenticated","field":null}`)
	valid := bearer(t, a, 3)
	for _, tt := range []struct {
		name, auth string
		status     int
		body       string
		user       uint32
	}{
		{"no header", "", 401, missing, 0},
		{"lower-case scheme", strings.Replace(valid, "Bearer", "bearer", 1), 401, missing, 0},
		{"no space", "Bearer" + strings.TrimPrefix(valid, "Bearer "), 401, missing, 0},
		{"not UTF-8", "Bearer \xff\xfe", 401, missing, 0},
		{"garbage", "Bearer garbage", 401, unauthenticated, 0},
		{"empty", "Bearer ", 401, unauthenticated, 0},
		{"jwt", valid, 200, "[]", 3},
		{"raw personal access token", "Bearer pat-of-5", 200, "[]", 5},
	} {
		w := serve(a, "GET", "/streams", tt.auth, "")
		if w.Code != tt.status || w.Body.String() != tt.body {
			t.Errorf("%s: %d %s, want %d %s", tt.name, w.Code, w.Body, tt.status, tt.body)
			continue
		}
		if tt.status == 200 {
			if c := f.last(t, wire.CodeGetStreams).caller; !c.LoggedIn || c.UserID != tt.user || c.Credential == "" {
				t.Errorf("%s: ran as %+v, want user %d", tt.name, c, tt.user)
			}
		} else if w.Header().Get("Iggy-View") != "" {
			t.Errorf("%s: iggy-view on a %d", tt.name, w.Code)
		}
	}
	// Expired beyond the clock skew: unauthenticated; within it: accepted.
	clock.advance(time.Hour + 4*time.Second)
	if w := serve(a, "GET", "/streams", valid, ""); w.Code != 200 {
		t.Fatalf("a token 4 s past its expiry (skew 5 s): %d", w.Code)
	}
	clock.advance(2 * time.Second)
	if w := serve(a, "GET", "/streams", valid, ""); w.Code != 401 || w.Body.String() != unauthenticated {
		t.Fatalf("a token 6 s past its expiry: %d %s", w.Code, w.Body)
	}
}

func TestErrorBodies(t *testing.T) {
	a, f, _ := testAPI(t)
	auth := bearer(t, a, 0)
	for _, tt := range []struct {
		code       wire.ErrorCode
		status     int
		body       string
		retryAfter bool
	}{
		{wire.ErrStreamIdNotFound, 404, `{"id":1009,"code":"stream_id_not_found","reason":"Stream with ID: 0 was not found.","field":"stream_id"}`, false},
		{wire.ErrResourceNotFound, 404, `{"id":20,"code":"resource_not_found","reason":"Resource with key:  was not found.","field":null}`, false},
		{wire.ErrStreamNameAlreadyExists, 400, `{"id":1012,"code":"stream_name_already_exists","reason":"Stream with name:  already exists.","field":"name"}`, false},
		{wire.ErrUserAlreadyExists, 400, `{"id":46,"code":"user_already_exists","reason":"User already exists","field":"username"}`, false},
		{wire.ErrUnauthorized, 403, `{"id":41,"code":"unauthorized","reason":"Unauthorized","field":null}`, false},
		{wire.ErrInvalidCredentials, 400, `{"id":42,"code":"invalid_credentials","reason":"Invalid credentials","field":null}`, false},
		{wire.ErrTransientNotAccepted, 503, `{"id":58,"code":"transient_not_accepted","reason":"Request transiently not accepted; retry, on any replica","field":null}`, true},
		{wire.ErrInvalidOffset, 400, `{"id":4100,"code":"invalid_offset","reason":"Invalid offset: 0","field":"offset"}`, false},
		{wire.ErrInvalidClientId, 409, `{"id":101,"code":"invalid_client_id","reason":"Invalid client ID","field":null}`, false},
	} {
		f.on(wire.CodeDeleteStream, nil, tt.code)
		w := serve(a, "DELETE", "/streams/0", auth, "")
		if w.Code != tt.status || w.Body.String() != tt.body || (w.Header().Get("Retry-After") == "1") != tt.retryAfter {
			t.Errorf("%v: %d %s retry-after %q, want %d %s", tt.code, w.Code, w.Body, w.Header().Get("Retry-After"), tt.status, tt.body)
		}
		if w.Header().Get("Content-Type") != "application/json" || w.Header().Get("Iggy-View") != "" {
			t.Errorf("%v: headers %v", tt.code, w.Header())
		}
	}
}

func TestSnakeCase(t *testing.T) {
	for name, want := range map[string]string{
		"StreamIdNotFound": "stream_id_not_found", "TcpError": "tcp_error", "InvalidJwtAlgorithm": "invalid_jwt_algorithm",
		"Unauthenticated": "unauthenticated", "InvalidClientId": "invalid_client_id", "CannotCreateBaseDirectory": "cannot_create_base_directory",
	} {
		if got := snakeCase(name); got != want {
			t.Errorf("snakeCase(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestFrameworkRejections(t *testing.T) {
	a, _, _ := testAPI(t, func(o *Options) { o.HTTP.RequestSizeMaxBytes = 100 })
	auth := bearer(t, a, 0)
	for _, tt := range []struct {
		name, method, path, body string
		header                   []string
		status                   int
		prefix                   string
	}{
		{"bad syntax", "POST", "/streams", `{"name":`, nil, 400, "Failed to parse the request body as JSON: "},
		{"wrong type", "POST", "/streams", `{"name":5}`, nil, 422, "Failed to deserialize the JSON body into the target type: "},
		{"missing field", "POST", "/streams", `{}`, nil, 422, "Failed to deserialize the JSON body into the target type: "},
		{"not json", "POST", "/streams", `{"name":"a"}`, []string{"Content-Type", "text/plain"}, 415, "Expected request with `Content-Type: application/json`"},
		{"too large", "POST", "/streams", `{"name":"` + strings.Repeat("a", 200) + `"}`, nil, 413, "Failed to buffer the request body: length limit exceeded"},
		{"missing query", "DELETE", "/streams/0/topics/0/partitions", "", nil, 400, "Failed to deserialize query string: "},
		{"bad query", "DELETE", "/streams/0/topics/0/partitions?partitions_count=x", "", nil, 400, "Failed to deserialize query string: "},
		{"bad consistency", "GET", "/streams?consistency=eventual", "", nil, 400, "Failed to deserialize query string: "},
		{"bad ack", "POST", "/streams/0/topics/0/messages?ack=all", `{}`, nil, 400, "Failed to deserialize query string: "},
		{"bad client id", "GET", "/clients/abc", "", nil, 400, "Invalid URL: "},
		{"bad partition id", "DELETE", "/streams/0/topics/0/partitions/x?segments_count=1", "", nil, 400, "Invalid URL: "},
	} {
		w := serve(a, tt.method, tt.path, auth, tt.body, tt.header...)
		if w.Code != tt.status || !strings.HasPrefix(w.Body.String(), tt.prefix) || !strings.HasPrefix(w.Header().Get("Content-Type"), "text/plain") {
			t.Errorf("%s: %d %q (%s), want %d %q", tt.name, w.Code, w.Body, w.Header().Get("Content-Type"), tt.status, tt.prefix)
		}
		if tt.status == 413 && (w.Body.String() != tt.prefix || w.Header().Get("Connection") != "close") {
			t.Errorf("%s: body %q connection %q", tt.name, w.Body, w.Header().Get("Connection"))
		}
	}
	// Unauthenticated requests never reach the body.
	if w := serve(a, "POST", "/streams", "", `{"name":`); w.Code != 401 {
		t.Fatalf("a bad body without a bearer: %d, want 401", w.Code)
	}
}

func TestViewHeaderAndCORS(t *testing.T) {
	a, _, _ := testAPI(t)
	auth := bearer(t, a, 0)
	w := serve(a, "GET", "/streams", auth, "", "Origin", "https://ui.example")
	h := w.Header()
	if h.Get("Iggy-View") != "7" || h.Get("Access-Control-Allow-Origin") != "*" || h.Get("Access-Control-Expose-Headers") != "iggy-view" ||
		h.Get("Vary") != "origin, access-control-request-method, access-control-request-headers" {
		t.Fatalf("GET /streams headers: %v", h)
	}
	if w := serve(a, "GET", "/ping", "", ""); w.Header().Get("Iggy-View") != "" || w.Body.String() != "pong" ||
		w.Header().Get("Content-Type") != "text/plain; charset=utf-8" {
		t.Fatalf("GET /ping: %v %q", w.Header(), w.Body)
	}
	// Every OPTIONS is the CORS layer's: 200, empty, no auth, any path.
	for _, path := range []string{"/streams", "/nowhere"} {
		w := serve(a, "OPTIONS", path, "", "", "Origin", "https://ui.example", "Access-Control-Request-Method", "POST")
		h := w.Header()
		if w.Code != 200 || w.Body.Len() != 0 || h.Get("Access-Control-Allow-Origin") != "*" ||
			h.Get("Access-Control-Allow-Methods") != "GET,POST,PUT,DELETE" || h.Get("Access-Control-Allow-Headers") != "content-type,authorization" ||
			h.Get("Access-Control-Expose-Headers") != "" || h.Get("Iggy-View") != "" {
			t.Fatalf("OPTIONS %s: %d %v", path, w.Code, h)
		}
	}
	// An explicit origin list echoes a listed origin only; CORS off leaves OPTIONS to
	// the router.
	b, _, _ := testAPI(t, func(o *Options) { o.HTTP.CORS.AllowedOrigins = []string{"https://ok.example"} })
	if got := serve(b, "GET", "/ping", "", "", "Origin", "https://ok.example").Header().Get("Access-Control-Allow-Origin"); got != "https://ok.example" {
		t.Fatalf("listed origin: allow-origin %q", got)
	}
	if got := serve(b, "GET", "/ping", "", "", "Origin", "https://evil.example").Header().Get("Access-Control-Allow-Origin"); got != "" {
		t.Fatalf("unlisted origin: allow-origin %q", got)
	}
	c, _, _ := testAPI(t, func(o *Options) { o.HTTP.CORS.Enabled = false })
	if w := serve(c, "OPTIONS", "/streams", "", ""); w.Code != 405 {
		t.Fatalf("OPTIONS without CORS: %d, want 405", w.Code)
	}
	if w := serve(c, "OPTIONS", "/nowhere", "", ""); w.Code != 404 {
		t.Fatalf("OPTIONS of an unknown path without CORS: %d, want 404", w.Code)
	}
}

func TestPanicIsRecovered(t *testing.T) {
	a, f, _ := testAPI(t)
	auth := bearer(t, a, 0)
	f.replies[wire.CodeGetStats] = func(Caller, []byte) ([]byte, error) { panic("boom") }
	if w := serve(a, "GET", "/stats", auth, ""); w.Code != http.StatusInternalServerError {
		t.Fatalf("a panicking handler: %d, want 500", w.Code)
	}
	if w := serve(a, "GET", "/ping", "", ""); w.Code != 200 {
		t.Fatalf("after a panic: %d", w.Code)
	}
}

func TestLinearizableReads(t *testing.T) {
	a, f, _ := testAPI(t, func(o *Options) {
		o.PrimaryHTTPAddress = func(i int) (string, bool) { return "10.0.0.2:3000", i == 1 }
	})
	auth := bearer(t, a, 0)
	f.cluster = ClusterState{View: 3, Primary: false, PrimaryIndex: 1}
	w := serve(a, "GET", "/streams?consistency=linearizable", auth, "")
	if w.Code != 307 || w.Header().Get("Location") != "http://10.0.0.2:3000/streams?consistency=linearizable" || w.Header().Get("Iggy-View") != "3" {
		t.Fatalf("linearizable on a backup: %d %v", w.Code, w.Header())
	}
	if w := serve(a, "GET", "/streams?consistency=serializable", auth, ""); w.Code != 200 {
		t.Fatalf("serializable on a backup: %d", w.Code)
	}
	f.cluster.PrimaryIndex = -1
	w = serve(a, "GET", "/streams?consistency=linearizable", auth, "")
	want := `{"id":503,"code":"not_primary","reason":"linearizable read requires the primary; retry against the leader","field":null}`
	if w.Code != 503 || w.Body.String() != want || w.Header().Get("Retry-After") != "1" {
		t.Fatalf("linearizable without a known primary: %d %s", w.Code, w.Body)
	}
	f.cluster.Primary = true
	if w := serve(a, "GET", "/streams?consistency=linearizable", auth, ""); w.Code != 200 {
		t.Fatalf("linearizable on the primary: %d", w.Code)
	}
}

func TestMetricsScrapeNeedsABearer(t *testing.T) {
	scrape := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("streams 1\n# EOF\n")) })
	a, _, _ := testAPI(t, func(o *Options) { o.Metrics = scrape })
	if w := serve(a, "GET", "/metrics", "", ""); w.Code != 401 {
		t.Fatalf("GET /metrics without a bearer: %d", w.Code)
	}
	if w := serve(a, "GET", "/metrics", bearer(t, a, 0), ""); w.Code != 200 || w.Body.String() != "streams 1\n# EOF\n" {
		t.Fatalf("GET /metrics: %d %q", w.Code, w.Body)
	}
	off, _, _ := testAPI(t, func(o *Options) { o.Metrics = scrape; o.HTTP.MetricsEnabled = false })
	if w := serve(off, "GET", "/metrics", bearer(t, off, 0), ""); w.Code != 404 {
		t.Fatalf("GET /metrics when disabled: %d", w.Code)
	}
}

// TestLinearizableRedirectNamesTheCallersHost: the 307 of a linearizable read on a
// backup names the primary by the host chosen for the caller's IP (its selectors,
// then advertised_address, then the roster ip), as GET /cluster/metadata does,
// not by the roster address the nodes reach each other at.
func TestLinearizableRedirectNamesTheCallersHost(t *testing.T) {
	roster := []config.ClusterNode{
		{Name: "a", IP: "10.0.0.1", Ports: config.NodePorts{HTTP: 3000}},
		{Name: "b", IP: "10.0.0.2", Ports: config.NodePorts{HTTP: 3001}, AdvertisedAddress: "iggy-b.example.com",
			AdvertisedAddresses: []config.AdvertisedSelector{
				{ClientCIDR: netip.MustParsePrefix("192.168.0.0/16"), Address: "192.168.7.2"},
				{ClientCIDR: netip.MustParsePrefix("2001:db8::/32"), Address: "2001:db8::2"},
			}},
	}
	// What the server passes: the roster node's host for the client, its HTTP port.
	hostFor := func(i int, client netip.Addr) (string, bool) {
		if i < 0 || i >= len(roster) || roster[i].Ports.HTTP == 0 {
			return "", false
		}
		return net.JoinHostPort(roster[i].AdvertisedFor(client), strconv.Itoa(int(roster[i].Ports.HTTP))), true
	}
	a, f, _ := testAPI(t, func(o *Options) {
		o.PrimaryHTTPAddress = func(i int) (string, bool) { return "10.0.0.2:3001", i == 1 }
		o.PrimaryHTTPAddressFor = hostFor
	})
	auth := bearer(t, a, 0)
	f.cluster = ClusterState{View: 3, Primary: false, PrimaryIndex: 1}
	for _, tc := range []struct{ client, location string }{
		{"192.168.1.5:40000", "http://192.168.7.2:3001/streams?consistency=linearizable"},
		{"[::ffff:192.168.1.5]:40000", "http://192.168.7.2:3001/streams?consistency=linearizable"},
		{"[2001:db8::99]:40000", "http://[2001:db8::2]:3001/streams?consistency=linearizable"},
		{"203.0.113.9:40000", "http://iggy-b.example.com:3001/streams?consistency=linearizable"},
	} {
		r := httptest.NewRequest("GET", "/streams?consistency=linearizable", nil)
		r.RemoteAddr = tc.client
		r.Header.Set("Authorization", auth)
		w := httptest.NewRecorder()
		a.ServeHTTP(w, r)
		if w.Code != 307 || w.Header().Get("Location") != tc.location {
			t.Errorf("from %s: %d location %q, want 307 %q", tc.client, w.Code, w.Header().Get("Location"), tc.location)
		}
	}
	// A primary with no HTTP port: nothing to name.
	roster[1].Ports.HTTP = 0
	if w := serve(a, "GET", "/streams?consistency=linearizable", auth, ""); w.Code != 503 {
		t.Fatalf("a primary without an HTTP port: %d", w.Code)
	}
}

// TestClusterMetadataRunsAsTheCaller: GET /cluster/metadata reaches the server with
// the caller's address, from which it chooses each node's host.
func TestClusterMetadataRunsAsTheCaller(t *testing.T) {
	a, f, _ := testAPI(t)
	f.on(wire.CodeGetClusterMetadata, (&wire.ClusterMetadata{Name: []byte("c")}).Append(nil), nil)
	r := httptest.NewRequest("GET", "/cluster/metadata", nil)
	r.RemoteAddr = "192.168.1.5:40000"
	r.Header.Set("Authorization", bearer(t, a, 0))
	w := httptest.NewRecorder()
	a.ServeHTTP(w, r)
	if w.Code != 200 {
		t.Fatalf("GET /cluster/metadata: %d %s", w.Code, w.Body)
	}
	if got := f.last(t, wire.CodeGetClusterMetadata).caller.Addr; got != netip.MustParseAddrPort("192.168.1.5:40000") {
		t.Fatalf("GET /cluster/metadata ran as %v, want the caller's 192.168.1.5:40000", got)
	}
}
