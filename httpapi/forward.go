package httpapi

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/iggy-shard/iggy-shard/wire"
)

// Follower forwarding (apache/iggy core/server/src/http/forward.rs): on a node that is
// not the metadata primary, a control-plane request is relayed to the primary's HTTP
// listener and its answer relayed back, so that a client may talk to any node. It is
// active only when bearers verify on every node (Options.Forwarding says so).

// The forwarding bounds of the reference (forward.rs).
const (
	forwardsMax            = 128
	forwardRetryInterval   = 50 * time.Millisecond
	forwardBudget          = 30 * time.Second
	forwardAttemptTimeout  = 35 * time.Second
	forwardRelayedBytesMax = 64 << 20
	forwardedHeader        = "Iggy-Forwarded"
)

var (
	errForwardBusy = &apiError{status: http.StatusServiceUnavailable, ID: 503, Code: "forward_busy",
		Reason: "node is at its forward budget; retry with backoff", retryAfter: true}
	errNoReachablePrimary = &apiError{status: http.StatusServiceUnavailable, ID: 503, Code: "no_reachable_primary",
		Reason: "no primary accepted the request within the forward budget; retry", retryAfter: true}
	errForwardTimeout = &apiError{status: http.StatusGatewayTimeout, ID: 504, Code: "forward_timeout",
		Reason: "the primary did not answer the forwarded request in time; the outcome is unknown"}
	errForwardFailed = &apiError{status: http.StatusBadGateway, ID: 502, Code: "forward_failed",
		Reason: "forwarding to the primary failed after the request was sent; the outcome is unknown"}
	errPayloadTooLarge = &apiError{status: http.StatusRequestEntityTooLarge, ID: 413, Code: "payload_too_large",
		Reason: "request body exceeds http.max_request_size"}
)

// forwarder relays requests to the primary.
type forwarder struct {
	client  *http.Client
	scheme  string
	slots   chan struct{}
	retry   time.Duration
	budget  time.Duration
	attempt time.Duration
}

func newForwarder(tlsConfig *tls.Config) *forwarder {
	f := &forwarder{scheme: "http", slots: make(chan struct{}, forwardsMax), retry: forwardRetryInterval,
		budget: forwardBudget, attempt: forwardAttemptTimeout}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	if tlsConfig != nil {
		f.scheme = "https"
		transport.TLSClientConfig = tlsConfig
	}
	// A 307 from the target is retried, not followed.
	f.client = &http.Client{Transport: transport, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return f
}

// ForwardTLSConfig is the client side of forwarding over HTTPS: the primary must
// present the very certificate this node serves (every node of a cluster is
// given the same one), as the reference checks.
func ForwardTLSConfig(own tls.Certificate) *tls.Config {
	leaf := own.Certificate[0]
	return &tls.Config{
		MinVersion:         tls.VersionTLS12,
		InsecureSkipVerify: true, // replaced by the pin below
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			if len(raw) == 0 || !bytes.Equal(raw[0], leaf) {
				return errors.New("httpapi: the primary's certificate is not this node's")
			}
			return nil
		},
	}
}

// shouldForward tells whether a control-plane request goes to the primary: the
// node is not it, and the request is a write or a GET asking for a linearizable
// answer (the exact pair consistency=linearizable).
func (a *API) shouldForward(r *http.Request) bool {
	if a.forward == nil || a.opts.Backend.Cluster().Primary {
		return false
	}
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		for _, v := range r.URL.Query()["consistency"] {
			if v == "linearizable" {
				return true
			}
		}
		return false
	}
	return true
}

// forwardRequest relays rc's request to the primary and its answer back.
func (a *API) forwardRequest(rc *reqCtx) error {
	if rc.r.Header.Get(forwardedHeader) != "" {
		return wire.ErrTransientNotAccepted // already relayed once: never again
	}
	select {
	case a.forward.slots <- struct{}{}:
		defer func() { <-a.forward.slots }()
	default:
		return errForwardBusy
	}
	body, err := readBody(rc.r, errPayloadTooLarge)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(a.forward.budget)
	for {
		resp, err := a.forwardOnce(rc, body)
		if err == nil && !retryable(resp) {
			return relay(rc.w, resp)
		}
		if err != nil && !errors.Is(err, errNotSent) {
			return err
		}
		if time.Now().Add(a.forward.retry).After(deadline) {
			return errNoReachablePrimary
		}
		select {
		case <-rc.r.Context().Done():
			return rc.r.Context().Err()
		case <-time.After(a.forward.retry):
		}
	}
}

// errNotSent is an attempt that never reached a primary: it may be retried.
var errNotSent = errors.New("httpapi: the request did not reach a primary")

// forwardedResponse is an answer read whole.
type forwardedResponse struct {
	status int
	header http.Header
	body   []byte
}

func (a *API) forwardOnce(rc *reqCtx, body []byte) (*forwardedResponse, error) {
	cs := a.opts.Backend.Cluster()
	if cs.Primary || cs.PrimaryIndex < 0 || a.opts.PrimaryHTTPAddress == nil {
		return nil, errNotSent
	}
	addr, ok := a.opts.PrimaryHTTPAddress(cs.PrimaryIndex)
	if !ok {
		return nil, errNotSent
	}
	ctx, cancel := context.WithTimeout(rc.r.Context(), a.forward.attempt)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, rc.r.Method, a.forward.scheme+"://"+addr+rc.r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	for _, h := range []string{"Authorization", "Content-Type"} {
		if v := rc.r.Header.Get(h); v != "" {
			req.Header.Set(h, v)
		}
	}
	req.Header.Set(forwardedHeader, "1")
	resp, err := a.forward.client.Do(req)
	if err != nil {
		if ctx.Err() != nil && rc.r.Context().Err() == nil {
			return nil, errForwardTimeout
		}
		var opErr interface{ Timeout() bool }
		if isDialError(err) {
			return nil, errNotSent
		}
		if errors.As(err, &opErr) && opErr.Timeout() {
			return nil, errForwardTimeout
		}
		return nil, errForwardFailed
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, forwardRelayedBytesMax+1))
	if err != nil || len(out) > forwardRelayedBytesMax {
		if ctx.Err() != nil && rc.r.Context().Err() == nil {
			return nil, errForwardTimeout
		}
		return nil, errForwardFailed
	}
	return &forwardedResponse{status: resp.StatusCode, header: resp.Header, body: out}, nil
}

// retryable is an answer that says the target was not the primary: a redirect,
// or a 503 transient_not_accepted (id 58).
func retryable(r *forwardedResponse) bool {
	if r.status == http.StatusTemporaryRedirect {
		return true
	}
	if r.status != http.StatusServiceUnavailable {
		return false
	}
	var e struct {
		ID uint32 `json:"id"`
	}
	return json.Unmarshal(r.body, &e) == nil && e.ID == 58
}

// relay writes the primary's answer: its status, body and the headers that
// matter to a client.
func relay(w http.ResponseWriter, r *forwardedResponse) error {
	for _, h := range []string{"Content-Type", "Retry-After", "Iggy-View"} {
		if v := r.header.Get(h); v != "" {
			w.Header().Set(h, v)
		}
	}
	w.WriteHeader(r.status)
	_, _ = w.Write(r.body)
	return nil
}

// isDialError reports a connection that was never made: nothing was sent.
func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// controlPlane reports the routes a backup forwards (the routes
// forward.rs's layer is put on): the
// users, tokens, streams, topics, partitions and groups routes, not the logins,
// messages or offsets.
func controlPlane(pattern string) bool {
	switch {
	case pattern == "/users/login" || pattern == "/users/refresh-token" || pattern == "/personal-access-tokens/login":
		return false
	case strings.HasPrefix(pattern, "/users") || strings.HasPrefix(pattern, "/personal-access-tokens"):
		return true
	case strings.HasPrefix(pattern, "/streams"):
		return !strings.Contains(pattern, "/messages") && !strings.Contains(pattern, "/consumer-offsets")
	}
	return false
}
