package tlsterm

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of Config.
const (
	// HandshakeTimeoutDefault bounds a handshake, as Apache Iggy's handshake_grace:
	// a client that opens connections and never finishes a handshake holds a slot
	// for at most this long.
	HandshakeTimeoutDefault = 10 * time.Second
	// HandshakesInFlightMaxDefault bounds the handshakes running at once (memory and
	// goroutines). A connection accepted past it cuts the oldest handshake still
	// running, so a flood of handshakes that never finish cannot lock out a client
	// whose handshake takes milliseconds: a slow one keeps its place only until this
	// many newer connections have arrived (or its deadline).
	HandshakesInFlightMaxDefault = 256
)

// Config configures a Terminator.
type Config struct {
	// TLS is the server's configuration: certificates, versions (the crypto/tls
	// defaults, TLS 1.2 and 1.3, when unset), ALPN protocols offered.
	TLS *tls.Config
	// RequiredALPN, when set, refuses a session that did not negotiate this
	// application protocol (the replica plane's "iggy-replica"); clients of the
	// client plane send none, so it stays empty there.
	RequiredALPN string
	// HandshakeTimeout bounds each handshake; 0 means HandshakeTimeoutDefault.
	HandshakeTimeout time.Duration
	// HandshakesInFlightMax bounds concurrent handshakes; 0 means
	// HandshakesInFlightMaxDefault.
	HandshakesInFlightMax int
	// WriteTimeout bounds each write to a client (Bridge); 0 means
	// WriteTimeoutDefault.
	WriteTimeout time.Duration
	// Deliver hands a session's plaintext socket (the runtime's end of its bridge)
	// and the client's address to the runtime, e.g. shard.Runtime.Adopt. On success
	// the runtime owns fd; on an error the terminator closes it and the session.
	Deliver func(fd int, peer netip.AddrPort) error
	// DeliverState is Deliver for a runtime that needs the session itself too: the
	// replica plane binds its handshake to the session's exporter value
	// (tls.ConnectionState.ExportKeyingMaterial). Set Deliver or DeliverState.
	DeliverState func(fd int, peer netip.AddrPort, state *tls.ConnectionState) error
	// DeliverSession hands a session over whole to a runtime that runs its record
	// layer itself (shard.Runtime.AdoptTLS), with no bridge: the socket (out of the
	// netpoller, blocking), the client's address, the session and its transport,
	// which the runtime attaches to its own record buffers (Transport.Attach) and
	// closes when the session ends. On an error the terminator closes fd and the
	// session is dropped. Set one of Deliver, DeliverState and DeliverSession.
	DeliverSession func(fd int, peer netip.AddrPort, session *tls.Conn, transport *Transport) error
	// Logger receives debug lines for failed handshakes (they are counted in Stats,
	// not logged at info: an SDK's retry loop would fill the log); default
	// slog.Default().
	Logger *slog.Logger
}

// Stats are a terminator's counters since it started.
type Stats struct {
	Accepted           uint64 // TCP connections accepted
	Handshakes         uint64 // handshakes completed
	HandshakesFailed   uint64 // failed handshakes: not TLS, bad versions, ALPN, ...
	HandshakesTimedOut uint64 // handshakes cut at HandshakeTimeout
	HandshakesCut      uint64 // oldest handshakes cut for a newer connection (HandshakesInFlightMax)
	SessionsOpen       int64  // sessions delivered and not ended yet
}

// Terminator accepts TCP connections, runs their TLS handshakes and bridges each
// session to the runtime.
type Terminator struct {
	cfg Config
	ln  net.Listener
	log *slog.Logger

	// mu guards conns, handshaking, nextSeq and closed, and the sessions' state. It
	// is the terminator's own: taken by its goroutines a few times per connection,
	// never by a shard.
	mu          sync.Mutex
	conns       map[*session]struct{}
	handshaking int // sessions whose handshake runs
	nextSeq     uint64
	closed      bool

	wg         sync.WaitGroup // the accept loop and every connection's goroutine
	stop       chan struct{}  // closed by Close
	acceptDone chan struct{}

	accepted, handshakes, failed, timedOut, cut atomic.Uint64
	open                                        atomic.Int64
}

// session is one accepted connection: handshaking, then bridged.
type session struct {
	conn   net.Conn
	seq    uint64  // accept order: the lowest handshaking one is cut first
	shaken bool    // the handshake has ended, one way or the other
	cut    bool    // closed to make room for a newer connection
	bridge *Bridge // set once delivered
}

// Serve starts serving ln; it owns ln from then on.
func Serve(ln net.Listener, cfg Config) (*Terminator, error) {
	if cfg.TLS == nil || (len(cfg.TLS.Certificates) == 0 && cfg.TLS.GetCertificate == nil && cfg.TLS.GetConfigForClient == nil) {
		return nil, errors.New("tlsterm: Config.TLS has no certificate")
	}
	if delivers := btoi(cfg.Deliver != nil) + btoi(cfg.DeliverState != nil) + btoi(cfg.DeliverSession != nil); delivers != 1 {
		return nil, errors.New("tlsterm: set one of Config.Deliver, Config.DeliverState and Config.DeliverSession")
	}
	if cfg.HandshakeTimeout == 0 {
		cfg.HandshakeTimeout = HandshakeTimeoutDefault
	}
	if cfg.HandshakesInFlightMax == 0 {
		cfg.HandshakesInFlightMax = HandshakesInFlightMaxDefault
	}
	if cfg.HandshakeTimeout < 0 || cfg.HandshakesInFlightMax < 0 || cfg.WriteTimeout < 0 {
		return nil, errors.New("tlsterm: negative timeout or bound")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	tlsCfg := cfg.TLS.Clone()
	// Full-size records from the first byte: the protocol's frames are not web pages
	// whose first bytes should render early, and smaller records cost more per byte.
	tlsCfg.DynamicRecordSizingDisabled = true
	cfg.TLS = tlsCfg
	t := &Terminator{cfg: cfg, ln: ln, log: cfg.Logger,
		conns: map[*session]struct{}{}, stop: make(chan struct{}), acceptDone: make(chan struct{})}
	t.wg.Add(1)
	go t.acceptLoop()
	return t, nil
}

// Addr is the listener's address.
func (t *Terminator) Addr() net.Addr { return t.ln.Addr() }

// Stats returns the counters; safe from any goroutine.
func (t *Terminator) Stats() Stats {
	return Stats{Accepted: t.accepted.Load(), Handshakes: t.handshakes.Load(), HandshakesFailed: t.failed.Load(),
		HandshakesTimedOut: t.timedOut.Load(), HandshakesCut: t.cut.Load(), SessionsOpen: t.open.Load()}
}

// acceptBackoffMin and acceptBackoffMax pace accepts that fail for want of
// descriptors or memory: the connection waits in the kernel's queue meanwhile.
const (
	acceptBackoffMin = 10 * time.Millisecond
	acceptBackoffMax = time.Second
)

func (t *Terminator) acceptLoop() {
	defer t.wg.Done()
	defer close(t.acceptDone)
	var backoff time.Duration
	for {
		conn, err := t.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			if backoff == 0 { // once per episode, not per retry
				t.log.Warn("TLS accept failed, backing off", "err", err)
			}
			backoff = min(max(2*backoff, acceptBackoffMin), acceptBackoffMax)
			select {
			case <-time.After(backoff):
			case <-t.stop:
				return
			}
			continue
		}
		if backoff > 0 {
			t.log.Info("TLS accept recovered")
			backoff = 0
		}
		t.accepted.Add(1)
		s := &session{conn: conn}
		if !t.track(s) {
			conn.Close()
			return
		}
		t.wg.Add(1)
		go t.serve(s)
	}
}

// track records a new session; when HandshakesInFlightMax handshakes run already,
// it cuts the oldest of them.
func (t *Terminator) track(s *session) bool {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return false
	}
	var oldest *session
	if t.handshaking >= t.cfg.HandshakesInFlightMax {
		for o := range t.conns { // at most HandshakesInFlightMax handshaking, and only in a flood
			if !o.shaken && !o.cut && (oldest == nil || o.seq < oldest.seq) {
				oldest = o
			}
		}
	}
	if oldest != nil {
		oldest.cut = true
		oldest.shaken = true
		t.handshaking--
	}
	t.nextSeq++
	s.seq = t.nextSeq
	t.conns[s] = struct{}{}
	t.handshaking++
	t.mu.Unlock()
	if oldest != nil {
		t.cut.Add(1)
		oldest.conn.Close() // its handshake fails at once and its goroutine ends
	}
	return true
}

// handshakeEnded takes s out of the handshakes in flight; false when it was cut
// meanwhile (it is not to be served).
func (t *Terminator) handshakeEnded(s *session) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s.cut {
		return false
	}
	s.shaken = true
	t.handshaking--
	return true
}

func (t *Terminator) untrack(s *session) {
	t.mu.Lock()
	delete(t.conns, s)
	t.mu.Unlock()
}

// serve runs one connection: the handshake within its deadline, then the bridge.
func (t *Terminator) serve(s *session) {
	defer t.wg.Done()
	defer t.untrack(s)
	if tcp, ok := s.conn.(*net.TCPConn); ok {
		tcp.SetNoDelay(true) // the Go default; said here because replies must not wait
	}
	peer := peerOf(s.conn)
	var transport *Transport
	var tc *tls.Conn
	if t.cfg.DeliverSession != nil {
		transport = &Transport{Conn: s.conn}
		tc = tls.Server(transport, t.cfg.TLS)
	} else {
		tc = tls.Server(s.conn, t.cfg.TLS)
	}
	ctx, cancel := context.WithTimeout(context.Background(), t.cfg.HandshakeTimeout)
	err := tc.HandshakeContext(ctx)
	cancel()
	if !t.handshakeEnded(s) {
		t.log.Debug("TLS handshake cut for a newer connection", "peer", peer.String())
		s.conn.Close()
		return
	}
	if err == nil && t.cfg.RequiredALPN != "" && tc.ConnectionState().NegotiatedProtocol != t.cfg.RequiredALPN {
		err = fmt.Errorf("ALPN %q negotiated, %q required", tc.ConnectionState().NegotiatedProtocol, t.cfg.RequiredALPN)
	}
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			t.timedOut.Add(1)
		} else {
			t.failed.Add(1)
		}
		t.log.Debug("TLS handshake failed", "peer", peer.String(), "err", err)
		s.conn.Close()
		return
	}
	t.handshakes.Add(1)
	if transport != nil {
		t.handOver(s, peer, tc, transport)
		return
	}
	b, fd, err := NewBridge(tc, t.cfg.WriteTimeout)
	if err != nil {
		t.log.Warn("TLS session dropped", "peer", peer.String(), "err", err)
		tc.Close()
		return
	}
	if !t.attach(s, b) {
		b.Close()
		closeFd(fd)
		return
	}
	if err := t.deliver(fd, peer, tc); err != nil {
		t.log.Debug("TLS session not delivered", "peer", peer.String(), "err", err)
		closeFd(fd)
		b.Close()
		return
	}
	t.open.Add(1)
	b.Run()
	t.open.Add(-1)
}

// handOver gives an established session to the runtime (Config.DeliverSession):
// its socket leaves the netpoller, and the session is the runtime's from then on.
func (t *Terminator) handOver(s *session, peer netip.AddrPort, tc *tls.Conn, transport *Transport) {
	if !t.attach(s, nil) {
		s.conn.Close()
		return
	}
	fd, err := detachSocket(s.conn)
	if err != nil {
		t.log.Warn("TLS session dropped", "peer", peer.String(), "err", err)
		s.conn.Close()
		return
	}
	transport.ended = func() { t.open.Add(-1) }
	t.open.Add(1)
	if err := t.cfg.DeliverSession(fd, peer, tc, transport); err != nil {
		t.log.Debug("TLS session not delivered", "peer", peer.String(), "err", err)
		closeFd(fd)
		t.open.Add(-1)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (t *Terminator) deliver(fd int, peer netip.AddrPort, tc *tls.Conn) error {
	if t.cfg.Deliver != nil {
		return t.cfg.Deliver(fd, peer)
	}
	state := tc.ConnectionState()
	return t.cfg.DeliverState(fd, peer, &state)
}

// attach records the bridge of a session, unless the terminator is closing (then
// the session is dropped before it is delivered).
func (t *Terminator) attach(s *session, b *Bridge) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	s.bridge = b
	return true
}

// Close stops accepting and cuts the handshakes in progress; delivered sessions go
// on until their runtime ends them (see Wait). Safe more than once.
func (t *Terminator) Close() {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return
	}
	t.closed = true
	close(t.stop)
	var handshaking []net.Conn
	for s := range t.conns {
		if s.bridge == nil { // handshaking, or between its handshake and delivery
			handshaking = append(handshaking, s.conn)
		}
	}
	t.mu.Unlock()
	t.ln.Close()
	for _, c := range handshaking {
		c.Close()
	}
	<-t.acceptDone
}

// Wait closes the terminator and waits for every session to end, which they do once
// the runtime has closed its ends and the last replies were written. When ctx ends
// first, the sessions left are cut and Wait returns ctx's error once they are gone.
func (t *Terminator) Wait(ctx context.Context) error {
	t.Close()
	done := make(chan struct{})
	go func() {
		t.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	t.mu.Lock()
	for s := range t.conns {
		if s.bridge != nil {
			s.bridge.Close()
		} else {
			s.conn.Close()
		}
	}
	t.mu.Unlock()
	<-done
	return ctx.Err()
}

func peerOf(c net.Conn) netip.AddrPort {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		ap := a.AddrPort()
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	}
	return netip.AddrPort{}
}
