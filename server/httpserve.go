package server

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/iggy-shard/iggy-shard/config"
	"github.com/iggy-shard/iggy-shard/httpapi"
	"github.com/iggy-shard/iggy-shard/metadata"
	"github.com/iggy-shard/iggy-shard/metaplane"
	"github.com/iggy-shard/iggy-shard/wire"
)

// The HTTP API (package httpapi) served beside the shards: net/http on its own
// goroutines, every command handed to the shards through Do (caller.go), the
// seam the binary protocol's requests take too.

// apiShutdownMax bounds how long Shutdown lets HTTP requests under way finish
// before it closes their connections.
const apiShutdownMax = 5 * time.Second

// serveAPI starts the HTTP API when [http] is enabled: at [http] address, or in
// a cluster at its host and this node's ports.http (the roster is the single
// source of ports, as for tcp), HTTPS under [http.tls].
func (s *Server) serveAPI() error {
	if !s.cfg.HTTP.Enabled {
		return nil
	}
	address := s.httpAddress()
	var cert *tls.Certificate
	if s.cfg.HTTP.TLS.Enabled {
		c, err := loadTLSCertificate(s.cfg.HTTP.TLS, "http.tls", s.log, time.Now())
		if err != nil {
			return err
		}
		cert = &c
	}
	backend := &httpBackend{s: s}
	j := &s.cfg.HTTP.JWT
	opts := httpapi.Options{
		HTTP:                  s.cfg.HTTP,
		Backend:               backend,
		Log:                   s.log,
		PrimaryHTTPAddress:    s.primaryHTTPAddress,
		PrimaryHTTPAddressFor: s.primaryHTTPAddressFor,
		TrustedIssuers:        trustedIssuers(s.cfg.HTTP.JWT.TrustedIssuers),
		PollBudgetBytes:       int(min(s.cfg.PollMemoryBytesMax, int64(1)<<31-1)),
	}
	if c := &s.cfg.Cluster; c.Enabled && c.Auth.Enabled {
		opts.ClusterSecret = c.Auth.SharedSecret
	}
	// Bearers verify on every node when the key is configured or derived from the
	// cluster's secret: then a backup may relay a write to the primary, which
	// accepts the bearer, and a logout is revoked through the replicated log. With
	// a key drawn at random by each process, only this node can verify its tokens
	// (and only until it stops): their revocations stay here.
	sharedKey := j.EncodingSecret != "" || j.DecodingSecret != "" || opts.ClusterSecret != ""
	opts.Forwarding = s.cluster != nil && sharedKey
	if opts.Forwarding && !s.rosterListsHTTP() {
		// A relay needs the primary's HTTP port: without it every write at a
		// backup would wait out the forward budget before its 503.
		opts.Forwarding = false
		s.log.Warn("HTTP API: a follower will not forward writes to the primary", "why", "a node of cluster.nodes has no ports.http")
	}
	if opts.Forwarding && cert != nil {
		opts.ForwardTLS = httpapi.ForwardTLSConfig(*cert)
	}
	if !sharedKey {
		backend.local = &localRevocations{}
	}
	if s.cfg.HTTP.MetricsEnabled {
		registry := prometheus.NewRegistry()
		registry.MustRegister(newCollector(s))
		opts.Metrics = promhttp.HandlerFor(registry, promhttp.HandlerOpts{})
	}
	api, err := httpapi.New(opts)
	if err != nil {
		return err
	}
	srv, err := httpapi.Listen(address, s.cfg.HTTP, cert, api, s.log)
	if err != nil {
		var se *config.SettingError
		if errors.As(err, &se) {
			return err
		}
		return &config.SettingError{Setting: "http.address", Value: address, Reason: err.Error()}
	}
	s.api = srv
	s.httpPort.Store(uint32(srv.Addr().(*net.TCPAddr).Port))
	s.log.Info("HTTP API", "address", srv.Addr().String(), "tls", cert != nil, "forwarding", opts.Forwarding)
	if s.cfg.HTTP.WebUI {
		s.log.Info("Web UI at /ui", "dir", s.cfg.HTTP.WebUIDir)
	}
	return nil
}

// httpAddress is where the HTTP API binds.
func (s *Server) httpAddress() string {
	address := s.cfg.HTTP.Address
	if s.cluster == nil {
		return address
	}
	host, _, _ := net.SplitHostPort(address)
	port := 0
	if n := s.cfg.Cluster.Self(); n != nil {
		port = int(n.Ports.HTTP)
	}
	return net.JoinHostPort(host, strconv.Itoa(port))
}

// HTTPAddr is where the HTTP API is served, nil when it is not.
func (s *Server) HTTPAddr() *net.TCPAddr {
	if s.api == nil {
		return nil
	}
	return s.api.Addr().(*net.TCPAddr)
}

// stopAPI stops the HTTP API: no new connection, the requests under way
// answered within apiShutdownMax (or ctx), then their connections closed.
func (s *Server) stopAPI(ctx context.Context) {
	if s.api == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, apiShutdownMax)
	defer cancel()
	if err := s.api.Shutdown(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		s.log.Warn("HTTP API stopped", "err", err)
	}
}

// rosterListsHTTP tells whether every node of the roster lists ports.http.
func (s *Server) rosterListsHTTP() bool {
	for _, n := range s.cfg.Cluster.Nodes {
		if n.Ports.HTTP == 0 {
			return false
		}
	}
	return true
}

// primaryHTTPAddress is the roster's HTTP endpoint of the node at index: its
// ip and ports.http (none without a port).
func (s *Server) primaryHTTPAddress(index int) (string, bool) {
	nodes := s.cfg.Cluster.Nodes
	if index < 0 || index >= len(nodes) || nodes[index].Ports.HTTP == 0 {
		return "", false
	}
	n := &nodes[index]
	return net.JoinHostPort(n.IP, strconv.Itoa(int(n.Ports.HTTP))), true
}

// primaryHTTPAddressFor is the primary's HTTP address as a client at the given
// address is told it (a linearizable read's redirect): the host its
// advertised_addresses selectors choose for that client, as GET_CLUSTER_METADATA
// names it, with the roster's HTTP port. primaryHTTPAddress, the roster ip, is
// what a backup dials itself to forward.
func (s *Server) primaryHTTPAddressFor(index int, client netip.Addr) (string, bool) {
	nodes := s.cfg.Cluster.Nodes
	if index < 0 || index >= len(nodes) || nodes[index].Ports.HTTP == 0 {
		return "", false
	}
	n := &nodes[index]
	return net.JoinHostPort(n.AdvertisedFor(client), strconv.Itoa(int(n.Ports.HTTP))), true
}

// trustedIssuers are [[http.jwt.trusted_issuers]] as httpapi takes them.
func trustedIssuers(c []config.TrustedIssuer) []httpapi.TrustedIssuer {
	if len(c) == 0 {
		return nil
	}
	out := make([]httpapi.TrustedIssuer, len(c))
	for i, t := range c {
		out[i] = httpapi.TrustedIssuer{Issuer: t.Issuer, Audience: t.Audience, JWKSURL: t.JWKSURL, UserID: t.UserID}
	}
	return out
}

// httpBackend is the server as the HTTP API sees it (httpapi.Backend).
//
// Sessions: a caller's metadata writes run under a session of its bearer
// (Caller.Credential), as the reference binds them (apache/iggy
// core/server/src/http/session.rs): registered on first use, at most half the
// client table's entries (metahost/callers.go), so that HTTP logins cannot crowd
// the binary clients out of the table they share.
type httpBackend struct {
	s *Server
	// local holds the revocations when bearers verify on this node only (a key
	// drawn at random per process); nil when they are replicated.
	local *localRevocations
}

func (b *httpBackend) Do(ctx context.Context, caller httpapi.Caller, code wire.CommandCode, body []byte) ([]byte, error) {
	c := Caller{UserID: caller.UserID, LoggedIn: caller.LoggedIn, Addr: caller.Addr, Credential: caller.Credential}
	if !caller.Expiry.IsZero() {
		c.ExpiryMicros = uint64(caller.Expiry.UnixMicro())
	}
	return b.s.Do(ctx, c, code, body)
}

// GiveBack takes back a reply Do answered once the API wrote it out
// (Server.GiveBack): a poll's buffer serves the next poll.
func (b *httpBackend) GiveBack(reply []byte) { b.s.GiveBack(reply) }

func (b *httpBackend) Cluster() httpapi.ClusterState {
	r := b.s.MetadataRole()
	cs := httpapi.ClusterState{View: r.View, Primary: r.Primary, PrimaryIndex: -1}
	if b.s.cluster == nil {
		cs.PrimaryIndex = 0
		return cs
	}
	if r.PrimaryKnown {
		for i, n := range b.s.cfg.Cluster.Nodes {
			if n.ReplicaID == int(r.PrimaryID) {
				cs.PrimaryIndex = i
			}
		}
	}
	return cs
}

// RevokeToken proposes the revocation on shard 0's loop, where the metadata
// plane lives, and waits for its answer (metaplane.Plane.RevokeTokens).
func (b *httpBackend) RevokeToken(ctx context.Context, _ httpapi.Caller, jti string, until time.Time) error {
	tokens := []metadata.Revocation{{JTI: jti, ExpiryMicros: uint64(until.UnixMicro())}}
	if b.local != nil {
		return b.local.revoke(tokens, b.s.nowMicros())
	}
	answer := make(chan error, 1)
	if b.s.transport.metaTasks.push(func(h *handler) {
		h.meta.RevokeTokens(tokens, func(err error) { answer <- err })
	}) != pushQueued {
		return ErrStopped
	}
	select {
	case err := <-answer:
		return revocationError(err)
	case <-ctx.Done():
		return ctx.Err()
	case <-b.s.rt.Done():
		return ErrStopped
	}
}

// revocationError is the answer to give for metaplane.Plane.RevokeTokens's.
func revocationError(err error) error {
	var code wire.ErrorCode
	switch {
	case err == nil:
		return nil
	case errors.Is(err, metaplane.ErrRevokedTokensFull):
		return httpapi.ErrRevokedTokensFull
	case errors.Is(err, metaplane.ErrNotPrimary), errors.Is(err, metaplane.ErrWritesBusy):
		return wire.ErrTransientNotAccepted
	case errors.As(err, &code) && code == wire.ErrInvalidCommand:
		return code
	}
	return wire.ErrTransientNotCommitted
}

func (b *httpBackend) TokenRevoked(jti string, now time.Time) bool {
	nowMicros := uint64(now.UnixMicro())
	if b.local != nil {
		return b.local.revoked(jti, nowMicros)
	}
	return b.s.meta.RevokedTokens().Revoked(jti, nowMicros)
}

// localRevocations are the revoked tokens of a node whose bearers no other node
// verifies: bounded as the replicated table, and gone with the process, as the
// key that signed them.
type localRevocations struct {
	mu    sync.Mutex
	table metadata.RevocationTable
}

func (l *localRevocations) revoke(tokens []metadata.Revocation, nowMicros uint64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.table.Prune(nowMicros)
	switch code := l.table.Revoke(tokens, nowMicros); code {
	case 0:
		return nil
	case metadata.RevokedTokensFullCode:
		return httpapi.ErrRevokedTokensFull
	default:
		return code
	}
}

func (l *localRevocations) revoked(jti string, nowMicros uint64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.table.Revoked(jti, nowMicros)
}

// metaTaskInbox holds work for shard 0's loop from other goroutines (the HTTP
// API's revocations), taken in its turn as the calls are (caller.go). It has no
// bound of its own: a task is an HTTP logout, and shard 0 takes them all each
// turn.
type metaTaskInbox = wakeInbox[func(h *handler)]
