package client

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/iggy-shard/iggy-shard/wire"
)

// FrameSizeMax is the largest frame the client sends or accepts, header included: the
// server's default message size max, and the Go SDK's limit.
const FrameSizeMax = wire.DefaultMessageSizeMax

// replyGrowMinBytes is the least a reply buffer grows by while a body arrives. A body
// is read into a buffer that at most doubles per step, so a server that announces a
// 64 MiB frame and then stalls costs memory in proportion to what it really sent.
const replyGrowMinBytes = 64 << 10

// aLongTimeAgo is a deadline in the past: setting it wakes a blocked read or write.
var aLongTimeAgo = time.Unix(1, 0)

// Client is one connection to a server. Its methods are safe for concurrent use but
// run one at a time (one request in flight). Views returned by SendMessages and
// PollMessages are valid until the next call on the Client.
type Client struct {
	mu sync.Mutex
	// conn is replaced only by a leader redirect, which holds mu and connMu; Close
	// reads it under connMu alone, everything else under mu.
	conn   net.Conn
	connMu sync.Mutex
	// addr is the address conn was dialed at (host:port as given, or a leader's
	// advertised address): what a leader's address is compared with.
	addr string
	opts options
	// rng draws message ids (UUID v4) for messages sent with a zero id. Seeded from
	// opts.random at Dial; it needs uniqueness, not secrecy.
	rng *rand.ChaCha8

	clientID wire.Uint128
	// session is the login's fence epoch, 0 while logged out.
	session uint64
	// requestNumber is what the next request carries; metadata writes and Logout
	// advance it after use.
	requestNumber uint64
	identity      Identity
	// relogin builds the body of the last successful login, replayed at a leader
	// a redirect moves to; nil before the first login.
	relogin loginBody
	// leaderRedirects counts the redirects in a row; reset when a leader check
	// finds the client on the leader (leader.go).
	leaderRedirects int

	// broken is set once the connection is unusable; every call then returns it.
	broken error
	// closed is set by Close, which does not wait for c.mu: it closes the
	// connection first, waking a request blocked on it.
	closed atomic.Bool

	// req holds the frame being built: header, then body.
	req []byte
	// reply holds the last reply frame, 16-byte aligned for wire's header views.
	reply []byte

	// watchMu and watchGen let a cancelled context's callback tell whether the
	// request it watched is still the one in flight.
	watchMu  sync.Mutex
	watchGen uint64

	// topologyGen changes whenever cached partition counts may be stale: after
	// CreatePartitions, DeletePartitions, DeleteTopic, DeleteStream and a broken
	// connection. Producers compare it with the generation they cached under.
	topologyGen uint64

	// batch builds SendMessages batches in req; polled is the last poll's view.
	batch  wire.BatchBuilder
	polled wire.PolledMessages

	// stopHeartbeat ends the heartbeat goroutine, if there is one.
	stopHeartbeat  chan struct{}
	heartbeats     sync.WaitGroup
	heartbeatReply []byte
}

// Identity is who a login made the connection.
type Identity struct {
	UserID                uint32
	Session               uint64
	ServerProtocolVersion wire.ProtocolVersion
	ServerVersion         string
}

// Dial connects to a server at addr (host:port) over TCP with TCP_NODELAY, and logs
// in when WithCredentials or WithPersonalAccessToken is given. ctx bounds the dial,
// the TLS handshake and the login.
func Dial(ctx context.Context, addr string, opts ...Option) (*Client, error) {
	o := defaultOptions()
	for _, opt := range opts {
		opt(&o)
	}
	conn, err := dialConn(ctx, addr, &o)
	if err != nil {
		return nil, err
	}
	c, err := newClient(conn, o)
	if err != nil {
		conn.Close()
		return nil, err
	}
	c.addr = addr
	if o.heartbeatInterval > 0 {
		c.startHeartbeat(o.heartbeatInterval)
	}
	if cred := o.login; cred != nil {
		if cred.withToken {
			_, err = c.LoginWithPersonalAccessToken(ctx, cred.token)
		} else {
			_, err = c.Login(ctx, cred.username, cred.password)
		}
		if err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// dialConn opens a connection to addr as o says: TCP with TCP_NODELAY, then TLS
// when o.tls is set.
func dialConn(ctx context.Context, addr string, o *options) (net.Conn, error) {
	var dialer net.Dialer
	conn, err := dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, &ConnectionError{Op: "dial", Code: wire.ErrCannotEstablishConnection, Err: err}
	}
	if tcp, ok := conn.(*net.TCPConn); ok {
		if err := tcp.SetNoDelay(true); err != nil {
			conn.Close()
			return nil, &ConnectionError{Op: "dial", Code: wire.ErrTcpError, Err: err}
		}
	}
	if o.tls != nil {
		tc, err := handshakeTLS(ctx, conn, addr, o.tls)
		if err != nil {
			conn.Close()
			return nil, err
		}
		conn = tc
	}
	return conn, nil
}

func newClient(conn net.Conn, o options) (*Client, error) {
	var seed [32]byte
	if _, err := io.ReadFull(o.random, seed[:]); err != nil {
		return nil, err
	}
	c := &Client{
		conn:          conn,
		opts:          o,
		rng:           rand.NewChaCha8(seed),
		requestNumber: 1,
		req:           make([]byte, wire.HeaderSize, 64<<10),
		reply:         alignedBuffer(max(o.replyBufferBytes, wire.HeaderSize)),
	}
	if err := c.mintClientID(); err != nil {
		return nil, err
	}
	return c, nil
}

// alignedBuffer returns n bytes whose first byte is 16-byte aligned (the alignment
// wire's header views require), with no spare capacity.
func alignedBuffer(n int) []byte {
	b := make([]byte, n+wire.HeaderAlignment)
	skew := int(uintptr(unsafe.Pointer(unsafe.SliceData(b))) % wire.HeaderAlignment)
	off := (wire.HeaderAlignment - skew) % wire.HeaderAlignment
	return b[off : off+n : off+n]
}

// errZeroRandom is a random source that keeps producing zero ids.
var errZeroRandom = errors.New("client: the random source produced only zero client ids")

// mintClientID draws a fresh non-zero client id, as the SDKs do for every login. A
// real random source draws zero with probability 2^-128; one that keeps doing so is
// broken, and the loop is bounded for it.
func (c *Client) mintClientID() error {
	var b [16]byte
	for range 8 {
		if _, err := io.ReadFull(c.opts.random, b[:]); err != nil {
			return err
		}
		if id := wire.GetUint128(b[:]); !id.IsZero() {
			c.clientID = id
			return nil
		}
	}
	return errZeroRandom
}

// ClientID is the client id the next request carries.
func (c *Client) ClientID() wire.Uint128 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.clientID
}

// Identity is the current login, and false while logged out.
func (c *Client) Identity() (Identity, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.identity, c.session != 0
}

// Close closes the connection at once, without waiting for a request in flight
// (which then fails with a *ConnectionError). Calls after Close fail with
// wire.ErrNotConnected.
func (c *Client) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	c.connMu.Lock()
	conn := c.conn
	c.connMu.Unlock()
	err := conn.Close()
	if c.stopHeartbeat != nil {
		close(c.stopHeartbeat)
		c.heartbeats.Wait()
	}
	return err
}

// heartbeat sends one Ping whose reply lands in a buffer of its own, so that a
// PolledMessages or SendConfirmations view the user is still reading is never
// overwritten from the heartbeat's goroutine.
func (c *Client) heartbeat(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.heartbeatReply == nil {
		c.heartbeatReply = alignedBuffer(wire.HeaderSize)
	}
	c.reply, c.heartbeatReply = c.heartbeatReply, c.reply
	_, err := c.do(ctx, c.frame(), wire.OperationNonReplicated, wire.CodePing)
	c.reply, c.heartbeatReply = c.heartbeatReply, c.reply
	return err
}

// startHeartbeat pings every interval until Close or a broken connection.
func (c *Client) startHeartbeat(interval time.Duration) {
	c.stopHeartbeat = make(chan struct{})
	c.heartbeats.Add(1)
	go func() {
		defer c.heartbeats.Done()
		ticker := time.NewTicker(interval)
		defer ticker.Stop()
		for {
			select {
			case <-c.stopHeartbeat:
				return
			case <-ticker.C:
			}
			// A ping slower than the interval is no broken connection (a loaded
			// machine, a busy server): it has the request timeout, as any call.
			timeout := interval
			if c.opts.requestTimeout > timeout {
				timeout = c.opts.requestTimeout
			}
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			err := c.heartbeat(ctx)
			cancel()
			var broken *ConnectionError
			if errors.As(err, &broken) || errors.Is(err, wire.ErrNotConnected) {
				return
			}
		}
	}()
}

// frame returns the request buffer holding only the (not yet written) header; a
// command appends its body to it.
func (c *Client) frame() []byte { return c.req[:wire.HeaderSize] }

// keep remembers the request buffer an encoder may have grown.
func (c *Client) keep(frame []byte) {
	if cap(frame) > cap(c.req) {
		c.req = frame[:wire.HeaderSize]
	}
}

// usable reports the error a call must fail with before touching the connection.
func (c *Client) usable() error {
	if c.closed.Load() {
		return wire.ErrNotConnected
	}
	return c.broken
}

// do sends frame (header space and body) as a request with op and code, and returns
// the reply payload: the body with its result section stripped, aliasing c.reply.
// The caller holds c.mu.
func (c *Client) do(ctx context.Context, frame []byte, op wire.Operation, code wire.CommandCode) ([]byte, error) {
	c.keep(frame)
	if err := c.usable(); err != nil {
		return nil, err
	}
	if len(frame) > FrameSizeMax {
		return nil, wire.ErrInvalidConfiguration
	}
	request, err := c.stamp(frame, op, code)
	if err != nil {
		return nil, err
	}
	deadline := c.requestDeadline(ctx)
	// budget bounds the leader checks of a request answered 58: its deadline or,
	// without one, NotCommittedWindow from the first check.
	budget := deadline
	for {
		watching := c.arm(ctx, deadline)
		payload, windowEnded, err := c.exchange(ctx, frame, request, op, deadline)
		if watching {
			c.disarm()
		}
		if !windowEnded || !c.followsLeaderOn(err, op) {
			return payload, err
		}
		// 58 for a whole NotAcceptedWindow: this node does not take the write.
		// Look for the leader, as the Go SDK does, until the request's budget is
		// spent; a redirect logs in again, so the frame is stamped afresh.
		if budget.IsZero() {
			budget = time.Now().Add(c.opts.transientRetry.NotCommittedWindow)
		}
		if time.Until(budget) < replayLeadMin {
			// Too close to the deadline to ask for the leader (a request on
			// this connection too): the 58 it is.
			return payload, err
		}
		moved, followErr := c.followLeaderLocked(ctx, budget, &frame)
		if followErr != nil {
			return nil, followErr
		}
		if !time.Now().Add(c.opts.transientRetry.NotAcceptedWindow + c.opts.transientRetry.Interval).Before(budget) {
			// No time left for another window of retries: the 58 it is. An exchange
			// started closer to the deadline would end in the middle of a write and
			// break the connection instead.
			return payload, err
		}
		if moved {
			if request, err = c.stamp(frame, op, code); err != nil {
				return nil, err
			}
		}
	}
}

// stamp writes the request header into frame[:256] and returns the request number it
// carries (request numbering as in the package comment).
func (c *Client) stamp(frame []byte, op wire.Operation, code wire.CommandCode) (uint64, error) {
	var h wire.RequestHeader
	h.Size = uint32(len(frame))
	h.Command = wire.CommandRequest
	h.Client = c.clientID
	h.Operation = op
	switch {
	case op == wire.OperationRegister:
		// request 0, session 0: a login starts the session.
	case op == wire.OperationNonReplicated:
		h.Request = c.requestNumber
		h.Session = c.session
		h.NonReplicatedCode = code
	default:
		// Replicated and partition operations need a session: refused here, never
		// sent, as the Go SDK does.
		if c.session == 0 {
			return 0, wire.ErrUnauthenticated
		}
		h.Request = c.requestNumber
		h.Session = c.session
		metadata := op.Plane() == wire.PlaneMetadata
		if metadata && c.opts.stampRequestChecksums {
			h.RequestChecksum = wire.RequestChecksum(frame[wire.HeaderSize:])
		}
		if metadata || op == wire.OperationLogout {
			c.requestNumber++
		}
	}
	h.Put(frame)
	return h.Request, nil
}

// requestDeadline is the deadline of a request starting now: ctx's, or the client's
// request timeout when that comes first; zero for none.
func (c *Client) requestDeadline(ctx context.Context) time.Time {
	var deadline time.Time
	if d, ok := ctx.Deadline(); ok {
		deadline = d
	}
	if c.opts.requestTimeout > 0 {
		if t := time.Now().Add(c.opts.requestTimeout); deadline.IsZero() || t.Before(deadline) {
			deadline = t
		}
	}
	return deadline
}

// arm sets the socket deadline for a request and, for a context that can be
// cancelled, wakes the connection when it is. It returns whether a watch must be
// disarmed.
func (c *Client) arm(ctx context.Context, deadline time.Time) bool {
	// An error here means the connection is closed; the write reports it.
	_ = c.conn.SetDeadline(deadline)
	if ctx.Done() == nil {
		return false
	}
	c.watchMu.Lock()
	gen := c.watchGen
	c.watchMu.Unlock()
	context.AfterFunc(ctx, func() {
		c.watchMu.Lock()
		defer c.watchMu.Unlock()
		if c.watchGen == gen {
			_ = c.conn.SetDeadline(aLongTimeAgo)
		}
	})
	return true
}

// disarm makes a pending context callback of the finished request harmless.
func (c *Client) disarm() {
	c.watchMu.Lock()
	c.watchGen++
	c.watchMu.Unlock()
}

// exchange writes the frame and reads its reply, replaying it on transient answers.
// windowEnded reports a transient code returned because its window closed before
// the deadline.
func (c *Client) exchange(ctx context.Context, frame []byte, request uint64, op wire.Operation, deadline time.Time) (payload []byte, windowEnded bool, err error) {
	var firstTransient time.Time
	policy := &c.opts.transientRetry
	for {
		if _, err := c.conn.Write(frame); err != nil {
			return nil, false, c.breakIO(ctx, "write", err)
		}
		payload, err := c.readReply(ctx, request)
		// readReply returns a reply's code unwrapped. (errors.As would move code
		// to the heap, an allocation per request.)
		code, _ := err.(wire.ErrorCode)
		if code != wire.ErrTransientNotCommitted && code != wire.ErrTransientNotAccepted {
			return payload, false, err
		}
		now := time.Now()
		if firstTransient.IsZero() {
			firstTransient = now
		}
		window := policy.NotCommittedWindow
		if code == wire.ErrTransientNotAccepted && op != wire.OperationRegister {
			window = policy.NotAcceptedWindow
		}
		wake := now.Add(policy.Interval)
		if !deadline.IsZero() && wake.Add(replayLeadMin).After(deadline) {
			return nil, false, err
		}
		if wake.Sub(firstTransient) >= window {
			return nil, true, err
		}
		if !sleepCtx(ctx, policy.Interval) {
			// Between a reply and the next replay nothing is in flight: the
			// connection stays usable.
			return nil, false, errors.Join(ctx.Err(), err)
		}
		if !deadline.IsZero() && time.Until(deadline) < replayLeadMin {
			// The sleep overran (a loaded machine): too close to the deadline
			// to replay, and the transient code is the answer.
			return nil, false, err
		}
	}
}

// replayLeadMin is how much of a request's deadline must be left to replay it
// after a transient code. The connection's write deadline is the request's, and
// a write it cuts midway breaks the connection; on a loaded machine the time from
// the check to the write is milliseconds, so a replay just before the deadline
// could break a connection that returning the transient code leaves usable.
const replayLeadMin = 10 * time.Millisecond

// sleepCtx waits d or until ctx is done, reporting whether it waited the whole d.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// readReply reads one frame and turns it into a payload or an error.
func (c *Client) readReply(ctx context.Context, sent uint64) ([]byte, error) {
	head := c.reply[:wire.HeaderSize]
	if _, err := io.ReadFull(c.conn, head); err != nil {
		return nil, c.breakIO(ctx, "read", err)
	}
	if command, _ := wire.PeekCommand(head); command == wire.CommandEviction {
		h, err := wire.DecodeEvictionHeader(head)
		if err != nil {
			return nil, c.breakProtocol(err)
		}
		ev := newEvictionError(h)
		c.breakWith(&ConnectionError{Op: "reply", Code: wire.ErrDisconnected, Err: ev})
		return nil, ev
	}
	h, err := wire.DecodeReplyHeader(head, FrameSizeMax)
	if err != nil {
		return nil, c.breakProtocol(err)
	}
	// The body read may move c.reply, so keep what is needed of the header.
	bodySize := h.BodySizeBytes()
	status, op, echoed := h.Status, h.Operation, h.Request
	var body []byte
	c.reply, body, err = readBody(c.conn, c.reply, bodySize)
	if err != nil {
		return nil, c.breakIO(ctx, "read", err)
	}
	if echoed != sent {
		return nil, c.breakWith(&ConnectionError{Op: "reply", Code: wire.ErrDisconnected,
			Err: echoMismatch{sent: sent, got: echoed}})
	}
	return replyPayload(status, op, body)
}

// replyPayload turns a reply's status, operation and body into its payload, or the
// error code its status or result section carries.
func replyPayload(status wire.ErrorCode, op wire.Operation, body []byte) ([]byte, error) {
	if status != 0 {
		return nil, status
	}
	if !wire.ReplyResultFramed(op, len(body)) {
		return body, nil
	}
	payload, result, err := wire.SplitResult(body)
	if err != nil {
		return nil, err
	}
	if result != 0 {
		return nil, result
	}
	return payload, nil
}

// readBody reads n body bytes from r behind the header in buf, growing buf as the
// bytes arrive rather than all at once. It returns the buffer (grown or not) and the
// body, which aliases it.
func readBody(r io.Reader, buf []byte, n int) (grownBuf, body []byte, err error) {
	total := wire.HeaderSize + n
	got := wire.HeaderSize
	for got < total {
		if got == cap(buf) {
			grown := alignedBuffer(min(total, max(2*cap(buf), replyGrowMinBytes)))
			copy(grown, buf[:got])
			buf = grown
		}
		end := min(total, cap(buf))
		m, err := io.ReadFull(r, buf[got:end])
		got += m
		if err != nil {
			return buf, nil, err
		}
	}
	return buf, buf[wire.HeaderSize:total:total], nil
}

// breakIO closes the connection after an I/O failure; a done context is the cause
// when there is one.
func (c *Client) breakIO(ctx context.Context, op string, err error) error {
	ctxErr := ctx.Err()
	if d, ok := ctx.Deadline(); ok && ctxErr == nil && !time.Now().Before(d) {
		// The socket deadline is the context's; its timer may not have fired yet.
		ctxErr = context.DeadlineExceeded
	}
	if ctxErr != nil {
		err = errors.Join(ctxErr, err)
	}
	return c.breakWith(&ConnectionError{Op: op, Code: wire.ErrDisconnected, Err: err})
}

// breakProtocol closes the connection after a frame that breaks the protocol.
func (c *Client) breakProtocol(err error) error {
	code := wire.ErrInvalidCommand
	var fault wire.HeaderFault
	if errors.As(err, &fault) && fault.Status() != 0 {
		code = fault.Status()
	}
	return c.breakWith(&ConnectionError{Op: "reply", Code: code, Err: err})
}

func (c *Client) breakWith(e *ConnectionError) error {
	if c.broken == nil {
		c.broken = e
		c.session = 0
		c.identity = Identity{}
		c.topologyGen++
		_ = c.conn.Close()
		// The next Dial's requests must not look like this client's.
		_ = c.mintClientID()
	}
	return e
}

// randomUUID draws a version-4 UUID as the u128 a message id is.
func randomUUID(rng *rand.ChaCha8) wire.Uint128 {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[0:], rng.Uint64())
	binary.LittleEndian.PutUint64(b[8:], rng.Uint64())
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return wire.GetUint128(b[:])
}
