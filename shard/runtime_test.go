package shard

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/arena"
	"github.com/iggy-shard/iggy-shard/fdpass"
	"github.com/iggy-shard/iggy-shard/wire"
)

// testHandler answers PING (operation 2, code 1) and refuses every other code with
// status Unauthenticated, like a server nobody logged in to, except for a few read
// codes it borrows to exercise the runtime's reply paths:
//
//	GetStats (10)           reply from this shard after a round trip through the next
//	                        shard (Post, MSG_RING wake-up, Conn lookup by ID)
//	GetSnapshot (11)        vectored reply: the request body, sent from three lent parts
//	GetClusterMetadata (12) retain the frame, reply with its body on the next iteration
//	GetMe (20)              a 1 MiB vectored reply from a shared buffer
//	GetClients (22)         64 KiB blocks until the send queue refuses one
//	GetPersonalAccessTokens (41)  eviction 14 with the accepted protocol window
type testHandler struct {
	shard    *Shard
	closed   int
	released int // Releaser calls for lent parts
}

// retainedFrames is a test connection's Conn.Value: frames kept past ServeRequest.
type retainedFrames struct {
	lent  []Frame // frames whose bytes were lent to a vectored send
	later []Frame // frames to answer on the next iteration
}

func retained(c *Conn) *retainedFrames {
	if c.Value == nil {
		c.Value = &retainedFrames{}
	}
	return c.Value.(*retainedFrames)
}

const (
	msgHop   = 1 // to the next shard: bounce back to m.Conn's shard
	msgReply = 2 // back on the connection's shard: reply to m.Value's request
	msgLater = 3 // to itself: reply from retained frames
)

var bigReplyBody = make([]byte, 1<<20)

func (h *testHandler) Release() { h.released++ }

func (h *testHandler) ServeRequest(c *Conn, req *Request) {
	hdr := req.Header
	if hdr.Operation != wire.OperationNonReplicated {
		c.ReplyStatus(hdr, wire.ErrUnauthenticated)
		return
	}
	switch hdr.NonReplicatedCode {
	case wire.CodePing:
		c.ReplyStatus(hdr, 0)
	case wire.CodeGetStats:
		next := (h.shard.Index() + 1) % h.shard.Count()
		if !h.shard.Post(next, Message{Kind: msgHop, Conn: c.ID(), Value: hdr.Request, Payload: req.Defer()}) {
			c.ReplyStatus(hdr, wire.ErrTransientNotAccepted)
		}
	case wire.CodeGetSnapshot:
		body := req.Body
		third := len(body) / 3
		h.replyHeader(c, hdr.Request, len(body))
		c.SendVectored([][]byte{body[:third], body[third : 2*third], body[2*third:]}, h)
		// The parts alias the request frame: keep it until the connection closes.
		r := retained(c)
		r.lent = append(r.lent, req.Retain())
	case wire.CodeGetClusterMetadata:
		r := retained(c)
		r.later = append(r.later, req.Retain())
		req.Defer()
		h.shard.Post(h.shard.Index(), Message{Kind: msgLater, Conn: c.ID()})
	case wire.CodeGetMe:
		h.replyHeader(c, hdr.Request, len(bigReplyBody))
		c.SendVectored([][]byte{bigReplyBody}, h)
	case wire.CodeGetPersonalAccessTokens:
		c.EvictIncompatibleProtocol(hdr.Client, wire.AcceptedProtocolWindow)
	case wire.CodeGetClients:
		// One reply of oversizedReplyBytes in 64 KiB pieces, four times the send
		// queue's bound in TestOversizedReplyIsSent: the queue must take it whole.
		h.replyHeader(c, hdr.Request, oversizedReplyBytes)
		for i := range oversizedReplyBytes / (64 << 10) {
			b, err := c.Reserve(64 << 10)
			if err != nil {
				panic(err)
			}
			for k := range b {
				b[k] = byte(i)
			}
		}
	default:
		c.ReplyStatus(hdr, wire.ErrUnauthenticated)
	}
}

// oversizedReplyBytes is the body of the GetClients reply of testHandler.
const oversizedReplyBytes = 1 << 20

// replyHeader queues a status-0 reply header announcing bodyBytes.
func (h *testHandler) replyHeader(c *Conn, request uint64, bodyBytes int) {
	b, err := c.Reserve(256)
	if err != nil {
		return
	}
	var r wire.ReplyHeader
	r.Size = uint32(256 + bodyBytes)
	r.Command = wire.CommandReply
	r.Request = request
	r.Operation = wire.OperationNonReplicated
	r.Put(b)
}

func (h *testHandler) ServeMessage(s *Shard, m Message) {
	switch m.Kind {
	case msgHop:
		s.Post(m.Conn.Shard(), Message{Kind: msgReply, Conn: m.Conn, Value: m.Value, Payload: m.Payload})
	case msgReply:
		if c := s.Conn(m.Conn); c != nil {
			c.Answer(m.Payload.(Ticket))
			h.replyHeader(c, m.Value, 0)
			c.Answered()
		}
	case msgLater:
		c := s.Conn(m.Conn)
		if c == nil {
			return // ConnClosed released its frames
		}
		r := retained(c)
		for i := range r.later {
			f := &r.later[i]
			c.Answer(f.Ticket)
			h.replyHeader(c, f.Header.Request, len(f.Body))
			if b, err := c.Reserve(len(f.Body)); err == nil {
				copy(b, f.Body)
			}
			c.Answered()
			f.Release()
		}
		r.later = r.later[:0]
	}
}

func (h *testHandler) ConnClosed(c *Conn) {
	h.closed++
	// Lent parts are released by now; the frames they aliased can go.
	if r, ok := c.Value.(*retainedFrames); ok {
		for _, frames := range [][]Frame{r.lent, r.later} {
			for i := range frames {
				frames[i].Release()
			}
		}
	}
}

func testLogger(t testing.TB) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// startTestRuntime starts a runtime on a random loopback port with cfg's non-zero fields
// and stops it when the test ends, checking that the shutdown is clean.
func startTestRuntime(t testing.TB, cfg Config) *Runtime {
	t.Helper()
	cfg.TCPAddress = "127.0.0.1:0"
	if cfg.ShardCount == 0 {
		cfg.ShardCount = 2
	}
	if cfg.NewHandler == nil {
		cfg.NewHandler = func(s *Shard) Handler { return &testHandler{shard: s} }
	}
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	if len(cfg.Arena.Classes) == 0 {
		cfg.Arena = testArenaConfig()
	}
	rt, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := rt.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return rt
}

// testArenaConfig keeps test runtimes small: tests start many.
func testArenaConfig() arenaConfig {
	const kib, mib = 1 << 10, 1 << 20
	return arenaConfig{Classes: []arenaClass{
		{BufferSizeBytes: 4 * kib, BufferCount: 2048},
		{BufferSizeBytes: 8 * kib, BufferCount: 256},
		{BufferSizeBytes: 64 * kib, BufferCount: 64},
		{BufferSizeBytes: 1 * mib, BufferCount: 8},
		{BufferSizeBytes: 64 * mib, BufferCount: 1},
	}}
}

// requestHeader builds a valid request header: operation 2 with code, or another
// operation with session and request 1.
func requestHeader(bodyBytes int, op wire.Operation, code uint32, request uint64) []byte {
	h := make([]byte, 256+bodyBytes)
	binary.LittleEndian.PutUint32(h[48:], uint32(256+bodyBytes))
	h[60] = byte(wire.CommandRequest)
	binary.LittleEndian.PutUint64(h[128:], 0xC11E47) // client id
	binary.LittleEndian.PutUint64(h[168:], request)
	h[176] = byte(op)
	if op == wire.OperationNonReplicated {
		binary.LittleEndian.PutUint32(h[196:], code)
	} else {
		binary.LittleEndian.PutUint64(h[184:], 1) // session
	}
	return h
}

func pingFrame(request uint64) []byte {
	return requestHeader(0, wire.OperationNonReplicated, 1, request)
}

type testClient struct {
	t    testing.TB
	conn net.Conn
	buf  [256]byte
}

func dial(t testing.TB, rt *Runtime) *testClient {
	t.Helper()
	conn, err := net.DialTimeout("tcp", rt.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &testClient{t: t, conn: conn}
}

// readFrame reads one 256-byte header-only frame from the server, or fails the test.
func (c *testClient) readFrame() []byte {
	c.t.Helper()
	c.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(c.conn, c.buf[:]); err != nil {
		c.t.Fatalf("reading a frame: %v", err)
	}
	return c.buf[:]
}

// ping sends a PING and checks the reply: command Reply, request echoed, status 0,
// operation 2, empty body.
func (c *testClient) ping(request uint64) {
	c.t.Helper()
	if _, err := c.conn.Write(pingFrame(request)); err != nil {
		c.t.Fatalf("writing a ping: %v", err)
	}
	checkReply(c.t, c.readFrame(), request, 0)
}

func checkReply(t testing.TB, frame []byte, request uint64, status wire.ErrorCode) {
	t.Helper()
	if frame[60] != byte(wire.CommandReply) {
		t.Fatalf("reply command %d, want %d", frame[60], wire.CommandReply)
	}
	if size := binary.LittleEndian.Uint32(frame[48:]); size != 256 {
		t.Fatalf("reply size %d, want 256", size)
	}
	if got := binary.LittleEndian.Uint64(frame[200:]); got != request {
		t.Fatalf("reply request %d, want %d", got, request)
	}
	if got := wire.ErrorCode(binary.LittleEndian.Uint32(frame[216:])); got != status {
		t.Fatalf("reply status %v, want %v", got, status)
	}
}

// expectEvictionThenClose reads an Eviction frame with reason, then EOF.
func (c *testClient) expectEvictionThenClose(reason wire.EvictionReason) {
	c.t.Helper()
	frame := c.readFrame()
	if frame[60] != byte(wire.CommandEviction) {
		c.t.Fatalf("frame command %d, want Eviction (%d)", frame[60], wire.CommandEviction)
	}
	if got := wire.EvictionReason(frame[255]); got != reason {
		c.t.Fatalf("eviction reason %v, want %v", got, reason)
	}
	c.expectClose()
}

// expectClose reads until EOF (or a reset), failing on any byte or a timeout.
func (c *testClient) expectClose() {
	c.t.Helper()
	c.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	var one [1]byte
	n, err := c.conn.Read(one[:])
	if n != 0 || err == nil {
		c.t.Fatalf("read %d bytes after the end, err %v; want the connection closed", n, err)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		c.t.Fatal("connection still open after 5 s")
	}
}

// TestPing serves PINGs on connections spread over every shard, with each way of
// handing connections over.
func TestPing(t *testing.T) {
	for _, mode := range []fdpass.Mode{0, fdpass.ModeQueue} {
		t.Run(map[fdpass.Mode]string{0: "probed", fdpass.ModeQueue: "queue"}[mode], func(t *testing.T) {
			rt := startTestRuntime(t, Config{PinCPUs: true, ShardCount: 3, FdPass: mode})
			clients := make([]*testClient, 9)
			for i := range clients {
				clients[i] = dial(t, rt)
			}
			for r := range uint64(3) {
				for i, c := range clients {
					c.ping(uint64(i)*10 + r)
				}
			}
			waitFor(t, 5*time.Second, "9 connections", func() bool { return rt.ConnectionCount() == 9 })
			for i := range rt.connCounts {
				if n := rt.connCounts[i].Load(); n != 3 {
					t.Errorf("shard %d serves %d connections, want 3 (least loaded, ties in turn)", i, n)
				}
			}
		})
	}
}

type (
	arenaConfig = arena.Config
	arenaClass  = arena.ClassConfig
)

// TestShutdownFinishesRepliesInFlight: Shutdown stops accepting, lets a connection
// receive the rest of a 1 MiB reply it is still reading, then closes it and returns.
func TestShutdownFinishesRepliesInFlight(t *testing.T) {
	cfg := Config{TCPAddress: "127.0.0.1:0", ShardCount: 2, Logger: testLogger(t), Arena: testArenaConfig(),
		NewHandler: func(s *Shard) Handler { return &testHandler{shard: s} }}
	rt, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	idle := dial(t, rt)
	idle.ping(1)
	busy := dial(t, rt)
	if _, err := busy.conn.Write(requestHeader(0, wire.OperationNonReplicated, uint32(wire.CodeGetMe), 2)); err != nil {
		t.Fatal(err)
	}
	header := busy.readFrame() // the request was served; most of the body is still queued
	if size := binary.LittleEndian.Uint32(header[48:]); size != 256+1<<20 {
		t.Fatalf("reply size %d", size)
	}
	shutdownDone := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		shutdownDone <- rt.Shutdown(ctx)
	}()
	busy.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := io.Copy(io.Discard, busy.conn)
	if err != nil || n != 1<<20 {
		t.Fatalf("read %d body bytes then %v; want the whole 1 MiB body then EOF", n, err)
	}
	idle.expectClose()
	if err := <-shutdownDone; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	if _, err := net.DialTimeout("tcp", rt.Addr().String(), time.Second); err == nil {
		t.Fatal("a connection was accepted after shutdown")
	}
	if rt.Err() != nil {
		t.Fatal(rt.Err())
	}
}

// TestAcceptBurstKeepsEveryConnection: a burst of connections larger than the handoffs
// that can be in flight is served in full (shard 0 keeps the overflow).
func TestAcceptBurstKeepsEveryConnection(t *testing.T) {
	for _, mode := range []fdpass.Mode{0, fdpass.ModeQueue} {
		rt := startTestRuntime(t, Config{ShardCount: 2, FdPass: mode, InboxCapacity: 16})
		const connCount = 300
		clients := make([]*testClient, connCount)
		for i := range clients {
			clients[i] = dial(t, rt)
			if _, err := clients[i].conn.Write(pingFrame(uint64(i))); err != nil {
				t.Fatal(err)
			}
		}
		for i, c := range clients {
			checkReply(t, c.readFrame(), uint64(i), 0)
		}
	}
}

// openerHandler reports each ConnOpened and ConnClosed on events.
type openerHandler struct {
	testHandler
	events chan string
}

func (h *openerHandler) ConnOpened(c *Conn) { h.events <- "opened " + c.RemoteAddr().String() }
func (h *openerHandler) ConnClosed(c *Conn) {
	h.testHandler.ConnClosed(c)
	h.events <- "closed " + c.RemoteAddr().String()
}

// TestOpenerSeesSilentConnections: a handler that implements Opener hears of a
// connection that never sends a byte, on whichever shard adopts it, and then of its end.
func TestOpenerSeesSilentConnections(t *testing.T) {
	events := make(chan string, 16)
	rt := startTestRuntime(t, Config{ShardCount: 2, NewHandler: func(s *Shard) Handler {
		return &openerHandler{testHandler: testHandler{shard: s}, events: events}
	}})
	next := func() string {
		select {
		case e := <-events:
			return e
		case <-time.After(5 * time.Second):
			t.Fatal("no connection event within 5 s")
			return ""
		}
	}
	for range 2 { // one connection on each shard: the least loaded, ties in turn
		conn, err := net.Dial("tcp", rt.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		local := conn.LocalAddr().String()
		if got, want := next(), "opened "+local; got != want {
			t.Fatalf("event %q, want %q", got, want)
		}
		conn.Close()
		if got, want := next(), "closed "+local; got != want {
			t.Fatalf("event %q, want %q", got, want)
		}
	}
}

// TestBusyPollSetting: a shard serves with busy polling off (every wait sleeps) as with
// it on, and a poll budget longer than a second is refused at start.
func TestBusyPollSetting(t *testing.T) {
	rt := startTestRuntime(t, Config{ShardCount: 2, BusyPoll: -1})
	for i := range uint64(2) {
		c := dial(t, rt)
		c.ping(i)
		c.ping(i + 10)
	}
	_, err := Start(Config{TCPAddress: "127.0.0.1:0", BusyPoll: 2 * time.Second,
		NewHandler: func(s *Shard) Handler { return &testHandler{shard: s} }})
	if err == nil || !strings.Contains(err.Error(), "busy poll") {
		t.Fatalf("Start with a 2 s busy poll: err %v, want a busy poll error", err)
	}
}

// wakeHandler counts the turns it is given after the test asks for one (wanted) and
// leaves a message in its own inbox as it stops, for DropMessage to see.
type wakeHandler struct {
	testHandler
	wanted  *[2]atomic.Bool // by shard index
	woken   chan int
	dropped *atomic.Int64
}

func (h *wakeHandler) Tick(s *Shard) bool {
	if h.wanted[s.Index()].CompareAndSwap(true, false) {
		h.woken <- s.Index()
	}
	return false
}

func (h *wakeHandler) Stop(s *Shard) {
	// Posted after the last drain of the inbox: only the runtime's close sees it.
	s.Post(s.Index(), Message{Kind: 99, Value: uint64(s.Index())})
}

func (h *wakeHandler) DropMessage(m Message) {
	if m.Kind == 99 {
		h.dropped.Add(1)
	}
}

// TestWakeFromAnyGoroutine: Shard.Wake from a goroutine that is not a shard gives an
// idle shard a turn; after Shutdown it is harmless. Messages left in inboxes when the
// shards have exited go to the handler's DropMessage.
func TestWakeFromAnyGoroutine(t *testing.T) {
	var wanted [2]atomic.Bool
	var dropped atomic.Int64
	woken := make(chan int, 4)
	shards := make(chan *Shard, 2)
	rt, err := Start(Config{TCPAddress: "127.0.0.1:0", ShardCount: 2, Logger: testLogger(t), Arena: testArenaConfig(),
		BusyPoll: -1, NewHandler: func(s *Shard) Handler {
			shards <- s
			return &wakeHandler{testHandler: testHandler{shard: s}, wanted: &wanted, woken: woken, dropped: &dropped}
		}})
	if err != nil {
		t.Fatal(err)
	}
	s0, s1 := <-shards, <-shards
	for _, s := range []*Shard{s0, s1} {
		wanted[s.Index()].Store(true)
		s.Wake()
		select {
		case i := <-woken:
			if i != s.Index() {
				t.Fatalf("Wake of shard %d woke shard %d", s.Index(), i)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("shard %d took no turn within 5 s of Wake", s.Index())
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := rt.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	s0.Wake() // the eventfd is closed: nothing happens
	if n := dropped.Load(); n != 2 {
		t.Fatalf("%d messages dropped at close, want 2 (one per shard)", n)
	}
}

// TestConnectionsGoToTheLeastLoadedShard: after the connections of one shard close,
// new ones go there, not round-robin.
func TestConnectionsGoToTheLeastLoadedShard(t *testing.T) {
	rt := startTestRuntime(t, Config{ShardCount: 2})
	counts := func() [2]int64 { return [2]int64{rt.connCounts[0].Load(), rt.connCounts[1].Load()} }
	clients := make([]*testClient, 4)
	for i := range clients {
		clients[i] = dial(t, rt)
		clients[i].ping(uint64(i))
	}
	if got := counts(); got != [2]int64{2, 2} {
		t.Fatalf("connections per shard %v, want [2 2]", got)
	}
	// Ties go round-robin from shard 0: clients 1 and 3 are on shard 1.
	clients[1].conn.Close()
	clients[3].conn.Close()
	waitFor(t, 5*time.Second, "shard 1 empty", func() bool { return counts() == [2]int64{2, 0} })
	for i := range 2 {
		c := dial(t, rt)
		c.ping(uint64(10 + i))
	}
	if got := counts(); got != [2]int64{2, 2} {
		t.Fatalf("connections per shard %v after two new ones, want [2 2]: both to the emptied shard", got)
	}
}
