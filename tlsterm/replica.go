package tlsterm

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// Replica connections over TLS ([cluster.tls], iggy.apache.org/docs/clustering/security):
// every connection on the tcp_replica port is TLS 1.3 with the ALPN protocol
// "iggy-replica", and the replica handshake that follows binds its MACs to the
// session's exporter value. One Replica serves one node: a Terminator on the node's
// tcp_replica address for the peers that dial it, and a dialer for the peers it dials
// (the runtime calls Dial; shard.ReplicaConfig.Dial). Both hand their sessions,
// bridged to socketpairs, to the runtime with the exporter (shard.Runtime.AdoptReplica).
//
// What each side verifies, as the security page prescribes: the acceptor presents its
// certificate and asks for none (replica TLS authenticates the acceptor only; the PSK
// handshake authenticates the dialer, which is why TLS requires cluster.auth). The
// dialer verifies the acceptor's certificate against the CA file's trust anchors and
// the peer's roster ip, which must be an IP SAN (CA mode), or accepts any certificate
// (self-signed mode: encryption without acceptor authentication, and the PSK
// handshake, bound to this very session by the exporter, authenticates both ends; a
// relay that terminates TLS on each side sees two sessions with two exporters, and
// the MACs of one do not verify in the other).

// ReplicaALPN is the application protocol replica connections negotiate.
const ReplicaALPN = "iggy-replica"

// ReplicaExporterBytes is the length of the exporter value the replica handshake
// binds (the context is empty).
const ReplicaExporterBytes = 32

// ReplicaDialTimeoutDefault bounds one dial when ReplicaConfig.DialTimeout is 0: the
// reference's message_bus.reconnect_period, after which the runtime dials again.
const ReplicaDialTimeoutDefault = 5 * time.Second

// ReplicaRuntime is what the replica TLS layer needs of the runtime
// (shard.Runtime): a place for each session, and word of a dial that failed.
type ReplicaRuntime interface {
	AdoptReplica(fd int, remote netip.AddrPort, dialedPeer int, exporter *[ReplicaExporterBytes]byte) error
	EndReplicaDial(peer uint8)
}

// ReplicaConfig configures a Replica.
type ReplicaConfig struct {
	// Certificate is what the node presents to the peers that dial it.
	Certificate tls.Certificate
	// RootCAs are the trust anchors of the peers' certificates (CA mode); required
	// unless AcceptAnyPeerCertificate.
	RootCAs *x509.CertPool
	// AcceptAnyPeerCertificate is self-signed mode: the dialer accepts whatever
	// certificate a peer presents, and the peer is authenticated by the PSK handshake
	// alone.
	AcceptAnyPeerCertificate bool
	// PeerNames are, by replica id, the names the dialer verifies the peers'
	// certificates against: the roster's ip strings.
	PeerNames []string
	// ExporterLabel is the exporter label of the handshake's channel binding
	// (wire.HandshakeLabelTLSExporter).
	ExporterLabel string
	// DialTimeout bounds one dial, TCP connect and TLS handshake (the runtime's
	// ReconnectPeriod); 0 means ReplicaDialTimeoutDefault.
	DialTimeout time.Duration
	// HandshakeTimeout, HandshakesInFlightMax and WriteTimeout are the terminator's
	// (Config); 0 means their defaults. WriteTimeout bounds the dialed sessions'
	// writes too.
	HandshakeTimeout      time.Duration
	HandshakesInFlightMax int
	WriteTimeout          time.Duration
	// Logger: default slog.Default().
	Logger *slog.Logger
}

// ReplicaStats are a Replica's counters: its terminator's and its dials'.
type ReplicaStats struct {
	Terminator Stats
	// DialsStarted counts the dials the runtime asked for; DialsFailed those that
	// ended without a session delivered (connect, TLS handshake, ALPN, or the
	// runtime refusing it); DialedOpen the dialed sessions delivered and not ended.
	DialsStarted, DialsFailed uint64
	DialedOpen                int64
}

// Replica is one node's replica TLS: the terminator of its tcp_replica port and its
// dialer.
type Replica struct {
	cfg       ReplicaConfig
	log       *slog.Logger
	ln        net.Listener
	serverTLS *tls.Config
	clientTLS *tls.Config // without ServerName: each dial clones it with the peer's

	// rt is set once by Start; started is closed then. Dials the runtime starts
	// before Start (it dials as soon as its shards run) wait for it.
	rt      ReplicaRuntime
	started chan struct{}
	term    *Terminator

	// ctx ends at Close: dials in flight give up.
	ctx    context.Context
	cancel context.CancelFunc

	// mu guards closed, dialed and failureLogged, and Start against Close; taken by the dial goroutines a few
	// times per dial and by the runtime's shard 0 once per Dial call, briefly.
	mu            sync.Mutex
	closed        bool
	dialed        map[*Bridge]struct{}
	failureLogged map[uint8]string // the last dial failure logged at warn, by peer
	dials         sync.WaitGroup

	dialsStarted, dialsFailed atomic.Uint64
	dialedOpen                atomic.Int64
}

// ListenReplica binds address (the node's ip and tcp_replica port) and prepares the
// node's replica TLS; nothing is accepted until Start. Binding first lets the start
// fail on a busy port before the runtime starts, and the kernel queues the peers'
// connections meanwhile.
func ListenReplica(address string, cfg ReplicaConfig) (*Replica, error) {
	if len(cfg.Certificate.Certificate) == 0 {
		return nil, errors.New("tlsterm: ReplicaConfig.Certificate is required")
	}
	if (cfg.RootCAs == nil) != cfg.AcceptAnyPeerCertificate {
		return nil, errors.New("tlsterm: ReplicaConfig needs RootCAs (CA mode) or AcceptAnyPeerCertificate (self-signed mode), not both")
	}
	if cfg.ExporterLabel == "" {
		return nil, errors.New("tlsterm: ReplicaConfig.ExporterLabel is required")
	}
	if cfg.DialTimeout < 0 {
		return nil, errors.New("tlsterm: negative ReplicaConfig.DialTimeout")
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = ReplicaDialTimeoutDefault
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	ln, err := net.Listen("tcp", address)
	if err != nil {
		return nil, fmt.Errorf("tlsterm: replica listener: %w", err)
	}
	r := &Replica{cfg: cfg, log: cfg.Logger, ln: ln, started: make(chan struct{}),
		dialed: map[*Bridge]struct{}{}, failureLogged: map[uint8]string{}}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	r.serverTLS = &tls.Config{
		Certificates: []tls.Certificate{cfg.Certificate},
		MinVersion:   tls.VersionTLS13,
		NextProtos:   []string{ReplicaALPN},
		// The dialers keep no session cache (each connection is long-lived and
		// redialed rarely): tickets would be sealed for nobody.
		SessionTicketsDisabled: true,
	}
	r.clientTLS = &tls.Config{
		RootCAs:    cfg.RootCAs,
		MinVersion: tls.VersionTLS13,
		NextProtos: []string{ReplicaALPN},
		// Self-signed mode, as the security page has it: any certificate, and no
		// acceptor authentication from TLS; the exporter-bound PSK handshake is what
		// authenticates the peer.
		InsecureSkipVerify: cfg.AcceptAnyPeerCertificate,
		// Full-size records from the first byte, as the terminator's.
		DynamicRecordSizingDisabled: true,
	}
	return r, nil
}

// Certificate is the certificate the node presents.
func (r *Replica) Certificate() tls.Certificate { return r.cfg.Certificate }

// Addr is the replica listener's address.
func (r *Replica) Addr() *net.TCPAddr { return r.ln.Addr().(*net.TCPAddr) }

// Start begins accepting for rt and lets the dials waiting for it go on. Call it
// once, after the runtime has started.
func (r *Replica) Start(rt ReplicaRuntime) error {
	// Under mu, so that a Close meanwhile finds the terminator either not there (and
	// closes the listener) or serving (and closes it).
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return errors.New("tlsterm: Replica started after Close")
	}
	select {
	case <-r.started:
		return errors.New("tlsterm: Replica started twice")
	default:
	}
	term, err := Serve(r.ln, Config{
		TLS:                   r.serverTLS,
		RequiredALPN:          ReplicaALPN,
		HandshakeTimeout:      r.cfg.HandshakeTimeout,
		HandshakesInFlightMax: r.cfg.HandshakesInFlightMax,
		WriteTimeout:          r.cfg.WriteTimeout,
		DeliverState: func(fd int, peer netip.AddrPort, state *tls.ConnectionState) error {
			exporter, err := r.exporter(state)
			if err != nil {
				return err
			}
			return rt.AdoptReplica(fd, peer, -1, exporter)
		},
		Logger: r.log,
	})
	if err != nil {
		return err
	}
	r.rt, r.term = rt, term
	close(r.started)
	return nil
}

// exporter is the session's channel-binding value. Its own array per session: the
// runtime keeps the pointer for the connection's handshake.
func (r *Replica) exporter(state *tls.ConnectionState) (*[ReplicaExporterBytes]byte, error) {
	b, err := state.ExportKeyingMaterial(r.cfg.ExporterLabel, nil, ReplicaExporterBytes)
	if err != nil {
		return nil, fmt.Errorf("tlsterm: replica exporter: %w", err)
	}
	return (*[ReplicaExporterBytes]byte)(b), nil
}

// Dial opens a session to peer at address, as shard.ReplicaConfig.Dial: it returns at
// once, and a goroutine dials within DialTimeout, then hands the session to the
// runtime as dialed (or tells it the dial failed, EndReplicaDial, so that it dials
// again at its next reconnect).
func (r *Replica) Dial(peer uint8, address netip.AddrPort) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.dials.Add(1)
	r.mu.Unlock()
	r.dialsStarted.Add(1)
	go func() {
		defer r.dials.Done()
		r.dial(peer, address)
	}()
}

func (r *Replica) dial(peer uint8, address netip.AddrPort) {
	ctx, cancel := context.WithTimeout(r.ctx, r.cfg.DialTimeout)
	defer cancel()
	conn, exporter, err := r.dialTLS(ctx, peer, address)
	// The runtime started before it could call Dial, but Start may not have been
	// called on this Replica yet: a moment, at most. Waited for until Close, not
	// within the dial's own time, which may be spent already: the runtime must hear
	// of every dial's end (EndReplicaDial), or it would not dial the peer again for
	// twice its handshake timeout.
	select {
	case <-r.started:
	case <-r.ctx.Done():
		if conn != nil {
			conn.Close()
		}
		r.dialsFailed.Add(1)
		return
	}
	if err != nil {
		r.dialFailed(peer, address, err)
		return
	}
	b, fd, err := NewBridge(conn, r.cfg.WriteTimeout)
	if err != nil {
		conn.Close()
		r.dialFailed(peer, address, err)
		return
	}
	if !r.track(b) {
		b.Close()
		closeFd(fd)
		r.dialsFailed.Add(1)
		return
	}
	defer r.untrack(b)
	if err := r.rt.AdoptReplica(fd, address, int(peer), exporter); err != nil {
		closeFd(fd)
		b.Close()
		r.dialFailed(peer, address, err)
		return
	}
	r.dialSucceeded(peer, address)
	r.dialedOpen.Add(1)
	b.Run()
	r.dialedOpen.Add(-1)
}

// dialTLS connects and runs the TLS handshake as the peer's client: TLS 1.3, ALPN
// iggy-replica, the peer's certificate verified as the mode says.
func (r *Replica) dialTLS(ctx context.Context, peer uint8, address netip.AddrPort) (*tls.Conn, *[ReplicaExporterBytes]byte, error) {
	cfg := r.clientTLS
	if !r.cfg.AcceptAnyPeerCertificate {
		if int(peer) >= len(r.cfg.PeerNames) || r.cfg.PeerNames[peer] == "" {
			return nil, nil, fmt.Errorf("no name to verify replica %d's certificate against", peer)
		}
		cfg = cfg.Clone()
		cfg.ServerName = r.cfg.PeerNames[peer]
	}
	d := tls.Dialer{Config: cfg}
	c, err := d.DialContext(ctx, "tcp", address.String())
	if err != nil {
		return nil, nil, err
	}
	conn := c.(*tls.Conn)
	state := conn.ConnectionState()
	if state.NegotiatedProtocol != ReplicaALPN {
		conn.Close()
		return nil, nil, fmt.Errorf("ALPN %q negotiated, %q required", state.NegotiatedProtocol, ReplicaALPN)
	}
	exporter, err := r.exporter(&state)
	if err != nil {
		conn.Close()
		return nil, nil, err
	}
	return conn, exporter, nil
}

// dialFailed counts and logs a failed dial and tells the runtime. A peer that is down
// fails the same way every reconnect period: its first failure of a kind is a
// warning, the repeats are debug lines.
func (r *Replica) dialFailed(peer uint8, address netip.AddrPort, err error) {
	r.dialsFailed.Add(1)
	reason := err.Error()
	r.mu.Lock()
	repeated := r.failureLogged[peer] == reason
	r.failureLogged[peer] = reason
	r.mu.Unlock()
	if repeated {
		r.log.Debug("replica TLS dial failed", "peer", peer, "address", address.String(), "err", err)
	} else {
		r.log.Warn("replica TLS dial failed", "peer", peer, "address", address.String(), "err", err)
	}
	r.rt.EndReplicaDial(peer)
}

func (r *Replica) dialSucceeded(peer uint8, address netip.AddrPort) {
	r.mu.Lock()
	_, failedBefore := r.failureLogged[peer]
	delete(r.failureLogged, peer)
	r.mu.Unlock()
	if failedBefore {
		r.log.Info("replica TLS dial succeeded", "peer", peer, "address", address.String())
	}
}

func (r *Replica) track(b *Bridge) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	r.dialed[b] = struct{}{}
	return true
}

func (r *Replica) untrack(b *Bridge) {
	r.mu.Lock()
	delete(r.dialed, b)
	r.mu.Unlock()
}

// Stats returns the counters; safe from any goroutine.
func (r *Replica) Stats() ReplicaStats {
	st := ReplicaStats{DialsStarted: r.dialsStarted.Load(), DialsFailed: r.dialsFailed.Load(), DialedOpen: r.dialedOpen.Load()}
	select {
	case <-r.started:
		st.Terminator = r.term.Stats()
	default:
	}
	return st
}

// Close stops accepting and dialing: handshakes and dials in flight are cut, and the
// sessions delivered go on until the runtime ends them (see Wait). Call it before the
// runtime's Shutdown, so that no session arrives while it stops. Safe more than once.
func (r *Replica) Close() {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.closed = true
	var term *Terminator
	select {
	case <-r.started:
		term = r.term
	default:
	}
	r.mu.Unlock()
	r.cancel()
	if term != nil {
		term.Close()
	} else {
		r.ln.Close() // never served
	}
}

// Wait closes the Replica and waits for every session, accepted or dialed, to end,
// which they do once the runtime has closed its ends. When ctx ends first, the
// sessions left are cut and Wait returns ctx's error once they are gone.
func (r *Replica) Wait(ctx context.Context) error {
	r.Close()
	var termErr error
	select {
	case <-r.started:
		termErr = r.term.Wait(ctx)
	default:
	}
	done := make(chan struct{})
	go func() {
		r.dials.Wait()
		close(done)
	}()
	select {
	case <-done:
		return termErr
	case <-ctx.Done():
	}
	r.mu.Lock()
	for b := range r.dialed {
		b.Close()
	}
	r.mu.Unlock()
	<-done
	return ctx.Err()
}
