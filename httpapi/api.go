package httpapi

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/netip"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/iggy-shard/iggy-shard/config"
	"github.com/iggy-shard/iggy-shard/wire"
)

// Options configure an API.
type Options struct {
	HTTP    config.HTTP
	Backend Backend
	Log     *slog.Logger
	// ClusterSecret is cluster.auth.shared_secret when cluster.enabled and
	// cluster.auth.enabled, else empty: the JWT key is derived from it when
	// [http.jwt] configures none (jwt.go).
	ClusterSecret string
	// PrimaryHTTPAddress is the primary's host:port as a node reaches it (the
	// roster's ip and ports.http): forwarding relays to it. Nil or false when
	// unknown.
	PrimaryHTTPAddress func(primaryIndex int) (string, bool)
	// PrimaryHTTPAddressFor is the primary's host:port as a client at client is
	// told it (the node's host chosen for the client's IP, as GET
	// /cluster/metadata names it: config.ClusterNode.AdvertisedFor, and
	// ports.http): a linearizable read on a backup is redirected there. Nil:
	// PrimaryHTTPAddress is named instead. False when unknown, and the read is
	// answered 503 not_primary.
	PrimaryHTTPAddressFor func(primaryIndex int, client netip.Addr) (string, bool)
	// Forwarding relays the control-plane requests that reach a backup to the primary
	// (forward.go). Set it when bearers verify on every node: in a cluster with
	// cluster.auth's shared secret, or with [http.jwt] secrets configured (apache/iggy
	// core/server/src/http/forward.rs). ForwardTLS, when this node serves HTTPS, is
	// the client side of the relay (ForwardTLSConfig).
	Forwarding bool
	ForwardTLS *tls.Config
	// PollBudgetBytes bounds a poll's JSON reply, counted after base64 (a third
	// larger than the records): a poll whose reply would exceed it is answered
	// with the messages that fit. 0 = unbounded.
	PollBudgetBytes int
	// Metrics, when [http.metrics] is enabled, serves the metrics scrape at its
	// endpoint behind the bearer check (apache/iggy core/server/src/http/metrics.rs).
	Metrics http.Handler
	// TrustedIssuers are the external issuers whose bearers are accepted
	// ([[http.jwt.trusted_issuers]], trusted.go); JWKSClient fetches their keys,
	// nil = a plain client (every fetch is bounded by jwksFetchTimeout).
	TrustedIssuers []TrustedIssuer
	JWKSClient     *http.Client
	// Now is the clock of tokens; nil = time.Now.
	Now func() time.Time
}

// API is the HTTP API's handler: an http.Handler over a Backend.
type API struct {
	opts    Options
	log     *slog.Logger
	routes  router
	tokens  *tokens
	trusted *trustedIssuers // nil: none configured
	cors    *corsPolicy
	forward *forwarder // nil: forwarding off
	writes  *writeGate
	webUI   *webUI // nil: [http] web_ui is off
	// readWait bounds a partition read (partitionReadWait).
	readWait time.Duration
	now      func() time.Time
}

// New builds the API. It fails on a configuration it cannot honour, naming the
// setting (config.SettingError).
func New(opts Options) (*API, error) {
	a := &API{opts: opts, log: opts.Log, now: opts.Now, writes: newWriteGate(), readWait: partitionReadWait}
	if a.log == nil {
		a.log = slog.Default()
	}
	if a.now == nil {
		a.now = time.Now
	}
	t, err := newTokens(opts.HTTP.JWT, opts.ClusterSecret, a.now)
	if err != nil {
		return nil, err
	}
	a.tokens = t
	if a.trusted, err = newTrustedIssuers(opts.TrustedIssuers, opts.HTTP.JWT.ClockSkew, a.now, opts.JWKSClient, a.log); err != nil {
		return nil, err
	}
	if opts.HTTP.CORS.Enabled {
		a.cors = newCORSPolicy(opts.HTTP.CORS)
	}
	if opts.HTTP.WebUI {
		if a.webUI, err = newWebUI(opts.HTTP.WebUIDir); err != nil {
			return nil, err
		}
	}
	if opts.Forwarding {
		a.forward = newForwarder(opts.ForwardTLS)
	}
	a.addRoutes()
	return a, nil
}

// addRoutes is the reference's route table (apache/iggy core/server/src/http.rs and
// the route files beside it).
func (a *API) addRoutes() {
	rt := &a.routes
	get := func(path string, auth authMode, cons bool, h func(*reqCtx) error) {
		rt.add(http.MethodGet, path, auth, cons, h)
	}
	post := func(path string, auth authMode, h func(*reqCtx) error) { rt.add(http.MethodPost, path, auth, false, h) }
	put := func(path string, h func(*reqCtx) error) { rt.add(http.MethodPut, path, authBearer, false, h) }
	del := func(path string, h func(*reqCtx) error) { rt.add(http.MethodDelete, path, authBearer, false, h) }
	const s, t = "/streams/{stream_id}", "/streams/{stream_id}/topics/{topic_id}"

	get("/ping", authPublic, false, ping)
	post("/users/login", authPublic, a.loginUser)
	post("/users/refresh-token", authPublic, a.refreshToken)
	post("/personal-access-tokens/login", authPublic, a.loginWithPAT)
	del("/users/logout", a.logout)
	get("/users", authBearer, true, getUsers)
	post("/users", authBearer, createUser)
	get("/users/{user_id}", authBearer, true, getUser)
	put("/users/{user_id}", updateUser)
	del("/users/{user_id}", deleteUser)
	put("/users/{user_id}/password", changePassword)
	put("/users/{user_id}/permissions", updatePermissions)
	get("/personal-access-tokens", authBearer, true, getPATs)
	post("/personal-access-tokens", authBearer, createPAT)
	del("/personal-access-tokens/{name}", deletePAT)
	get("/streams", authBearer, true, getStreams)
	post("/streams", authBearer, createStream)
	get(s, authBearer, true, getStream)
	put(s, updateStream)
	del(s, deleteStream)
	del(s+"/purge", purgeStream)
	get(s+"/topics", authBearer, true, getTopics)
	post(s+"/topics", authBearer, createTopic)
	get(t, authBearer, true, getTopic)
	put(t, updateTopic)
	del(t, deleteTopic)
	del(t+"/purge", purgeTopic)
	post(t+"/partitions", authBearer, createPartitions)
	del(t+"/partitions", deletePartitions)
	del(t+"/partitions/{partition_id}", deleteSegments)
	get(t+"/consumer-groups", authBearer, true, getGroups)
	post(t+"/consumer-groups", authBearer, createGroup)
	get(t+"/consumer-groups/{group_id}", authBearer, true, getGroup)
	del(t+"/consumer-groups/{group_id}", deleteGroup)
	get(t+"/messages", authBearer, true, a.pollMessages)
	post(t+"/messages", authBearer, sendMessages)
	get(t+"/consumer-offsets", authBearer, true, getOffset)
	put(t+"/consumer-offsets", storeOffset)
	del(t+"/consumer-offsets/{consumer_id}", deleteOffset)
	get("/stats", authBearer, true, getStats)
	get("/options/{scope}", authBearer, false, describeOptions)
	rt.add(http.MethodPost, "/snapshot", authBearer, true, getSnapshot)
	get("/cluster/metadata", authBearer, false, getClusterMetadata)
	get("/clients", authBearer, true, getClients)
	get("/clients/{client_id}", authBearer, true, getClient)
	if a.opts.HTTP.MetricsEnabled && a.opts.Metrics != nil {
		get(a.opts.HTTP.MetricsEndpoint, authBearer, false, func(rc *reqCtx) error {
			a.opts.Metrics.ServeHTTP(rc.w, rc.r)
			return nil
		})
	}
}

// reqCtx is one request on its way through a route.
type reqCtx struct {
	api      *API
	w        http.ResponseWriter
	r        *http.Request
	route    string
	names    []string
	captures []string
	caller   Caller
}

// ServeHTTP answers one request: the Web UI (webui.go) apart, then CORS, the
// route, the body limit, the bearer, the handler; a panic in any of them is
// answered 500 and logged with the route.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	vw := &viewWriter{ResponseWriter: w, api: a, view: r.URL.Path != "/ping"}
	route := r.Method + " " + r.URL.EscapedPath()
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			a.log.Error("http: handler panicked", "route", route, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			if !vw.wroteHeader {
				vw.Header().Set("Content-Type", "text/plain; charset=utf-8")
				vw.WriteHeader(http.StatusInternalServerError)
				_, _ = vw.Write([]byte("Internal Server Error"))
			}
		}
	}()
	if a.webUI != nil && isWebUIPath(r.URL.EscapedPath()) {
		// Outside the API, as the reference merges it: no CORS, no iggy-view.
		vw.view = false
		a.webUI.ServeHTTP(vw, r)
		return
	}
	if a.cors != nil {
		if r.Method == http.MethodOptions {
			vw.view = false
			a.cors.preflight(vw.Header(), r.Header)
			vw.WriteHeader(http.StatusOK)
			return
		}
		a.cors.decorate(vw.Header(), r.Header)
	}
	p, captures, ok := a.routes.match(r.URL.EscapedPath())
	if !ok {
		vw.WriteHeader(http.StatusNotFound)
		return
	}
	e, ok := p.endpoint(r.Method)
	if !ok {
		vw.Header().Set("Allow", p.allow())
		vw.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	route = r.Method + " " + p.text
	r.Body = http.MaxBytesReader(vw, r.Body, int64(a.opts.HTTP.RequestSizeMaxBytes))
	rc := &reqCtx{api: a, w: vw, r: r, route: route, names: p.captureNames(), captures: captures}
	if addr, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
		rc.caller.Addr = addr
	}
	err := error(nil)
	if e.auth == authBearer {
		rc.caller, err = a.authenticate(r.Context(), r.Header, rc.caller.Addr)
	}
	switch {
	case err != nil:
	case e.forward && a.shouldForward(r):
		err = a.forwardRequest(rc)
	default:
		if e.consistency {
			err = rc.checkConsistency()
		}
		if err == nil {
			err = e.handle(rc)
		}
	}
	if err != nil && err != errAnswered {
		writeError(vw, a.log, route, err)
	}
}

// viewWriter adds iggy-view to 2xx and 3xx answers (apache/iggy
// core/server/src/http/state.rs) unless a relayed answer carries one.
type viewWriter struct {
	http.ResponseWriter
	api         *API
	view        bool
	wroteHeader bool
}

func (w *viewWriter) WriteHeader(status int) {
	if w.wroteHeader {
		return
	}
	w.wroteHeader = true
	if w.view && status >= 200 && status < 400 && w.Header().Get("Iggy-View") == "" {
		w.Header().Set("Iggy-View", strconv.FormatUint(uint64(w.api.opts.Backend.Cluster().View), 10))
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *viewWriter) Write(b []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

func (w *viewWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// path returns a capture by name.
func (rc *reqCtx) path(name string) string {
	for i, n := range rc.names {
		if n == name {
			return rc.captures[i]
		}
	}
	panic("httpapi: route " + rc.route + " has no capture " + name)
}

// identifier reads an id capture (apache/iggy core/server/src/http/extractor.rs): a
// u32 is a numeric id, other text a name of 1..255 bytes, else 400 invalid_identifier.
func (rc *reqCtx) identifier(name string) (wire.Identifier, error) {
	return parseIdentifier(rc.path(name))
}

func parseIdentifier(s string) (wire.Identifier, error) {
	if n, err := strconv.ParseUint(s, 10, 32); err == nil {
		return wire.NumericIdentifier(uint32(n)), nil
	}
	if len(s) == 0 || len(s) > 255 {
		return wire.Identifier{}, wire.ErrInvalidIdentifier
	}
	return wire.StringIdentifier([]byte(s)), nil
}

// u32Path reads a u32-only capture; text that is not one is a 400 rejection.
func (rc *reqCtx) u32Path(name string) (uint32, error) {
	n, err := strconv.ParseUint(rc.path(name), 10, 32)
	if err != nil {
		return 0, rejectPath(fmt.Sprintf("Cannot parse `%s` with value `%s` to a `u32`", name, rc.path(name)))
	}
	return uint32(n), nil
}

// streamTopic reads the {stream_id} and {topic_id} captures.
func (rc *reqCtx) streamTopic() (stream, topic wire.Identifier, err error) {
	if stream, err = rc.identifier("stream_id"); err != nil {
		return
	}
	topic, err = rc.identifier("topic_id")
	return
}

// decodeJSON reads the body into v: 415 without a JSON content type, 413 over the
// body limit, 400 for bad syntax, 422 for the wrong shape.
func (rc *reqCtx) decodeJSON(v any) error {
	if !isJSONContentType(rc.r.Header.Get("Content-Type")) {
		return errUnsupportedMediaType
	}
	body, err := readBody(rc.r, errBodyTooLarge)
	if err != nil {
		return err
	}
	return unmarshalBody(body, v)
}

// readBody reads a request's body whole; tooLarge is the answer past the body
// limit.
func readBody(r *http.Request, tooLarge error) ([]byte, error) {
	body, err := io.ReadAll(r.Body)
	var overLimit *http.MaxBytesError
	if errors.As(err, &overLimit) {
		return nil, tooLarge
	}
	return body, err
}

// unmarshalBody is decodeJSON after the body is read.
func unmarshalBody(body []byte, v any) error {
	if err := json.Unmarshal(body, v); err != nil {
		var syntax *json.SyntaxError
		var typeErr *json.UnmarshalTypeError
		var shape *shapeError
		switch {
		case errors.As(err, &syntax), errors.Is(err, io.ErrUnexpectedEOF):
			return rejectJSONSyntax(err)
		case errors.As(err, &typeErr), errors.As(err, &shape):
			return rejectJSONShape(err.Error())
		}
		if !json.Valid(body) {
			return rejectJSONSyntax(err)
		}
		return rejectJSONShape(err.Error())
	}
	if c, ok := v.(interface{ check() error }); ok {
		if err := c.check(); err != nil {
			return rejectJSONShape(err.Error())
		}
	}
	return nil
}

// shapeError is a JSON value of the right syntax and the wrong meaning.
type shapeError struct{ msg string }

func (e *shapeError) Error() string { return e.msg }

func isJSONContentType(v string) bool {
	mt, _, err := mime.ParseMediaType(v)
	if err != nil {
		return false
	}
	return mt == "application/json" || strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")
}

// appender is a wire request.
type appender interface {
	Append(b []byte) ([]byte, error)
}

// do encodes req and runs it as the caller.
func (rc *reqCtx) do(code wire.CommandCode, req appender) ([]byte, error) {
	body, err := req.Append(nil)
	if err != nil {
		return nil, err
	}
	return rc.api.opts.Backend.Do(rc.r.Context(), rc.caller, code, body)
}

// doEmpty runs a command whose request body is empty.
func (rc *reqCtx) doEmpty(code wire.CommandCode) ([]byte, error) {
	return rc.api.opts.Backend.Do(rc.r.Context(), rc.caller, code, nil)
}

// noContent answers 204.
func (rc *reqCtx) noContent() error {
	rc.w.WriteHeader(http.StatusNoContent)
	return nil
}

// json answers 200 with v.
func (rc *reqCtx) json(v any) error {
	writeJSON(rc.w, http.StatusOK, v)
	return nil
}

// checkConsistency reads ?consistency= (apache/iggy core/server/src/http/reads.rs):
// serializable (the default) serves this node's committed state; linearizable on a
// node that is not the primary is sent to the primary (307) or refused (503
// not_primary).
func (rc *reqCtx) checkConsistency() error {
	q := rc.r.URL.Query()
	if !q.Has("consistency") {
		return nil
	}
	switch q.Get("consistency") {
	case "serializable":
		return nil
	case "linearizable":
	default:
		return rejectQuery("consistency: unknown variant `" + q.Get("consistency") + "`, expected `serializable` or `linearizable`")
	}
	cs := rc.api.opts.Backend.Cluster()
	if cs.Primary {
		return nil
	}
	addr, ok := rc.api.primaryAddressFor(cs.PrimaryIndex, rc.caller.Addr.Addr())
	if !ok {
		return errNotPrimary
	}
	scheme := "http"
	if rc.api.opts.HTTP.TLS.Enabled {
		scheme = "https"
	}
	rc.w.Header().Set("Location", scheme+"://"+addr+rc.r.URL.RequestURI())
	rc.w.WriteHeader(http.StatusTemporaryRedirect)
	return errAnswered
}

// primaryAddressFor is the primary's HTTP host:port as the caller at client is to
// reach it (Options.PrimaryHTTPAddressFor), false when unknown.
func (a *API) primaryAddressFor(primaryIndex int, client netip.Addr) (string, bool) {
	switch {
	case primaryIndex < 0:
		return "", false
	case a.opts.PrimaryHTTPAddressFor != nil:
		return a.opts.PrimaryHTTPAddressFor(primaryIndex, client.Unmap())
	case a.opts.PrimaryHTTPAddress != nil:
		return a.opts.PrimaryHTTPAddress(primaryIndex)
	}
	return "", false
}

// errAnswered stops a route whose answer is already written.
var errAnswered = errors.New("httpapi: answered")

// ping is GET /ping.
func ping(rc *reqCtx) error {
	rc.w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	rc.w.WriteHeader(http.StatusOK)
	_, _ = rc.w.Write([]byte("pong"))
	return nil
}
