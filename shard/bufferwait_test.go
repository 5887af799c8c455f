package shard

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/wire"
)

// holdingHandler retains every request's frame for a turn, as a server holds a send
// while the owner shard writes it, then checks the body's pattern and answers with a
// status: 0 intact, InvalidCommand damaged.
type holdingHandler struct {
	testHandler
	held map[ConnID][]Frame
}

func (h *holdingHandler) ServeRequest(c *Conn, req *Request) {
	h.held[c.ID()] = append(h.held[c.ID()], req.Retain())
	req.Defer()
	h.shard.Post(h.shard.Index(), Message{Kind: msgLater, Conn: c.ID()})
}

func (h *holdingHandler) ServeMessage(s *Shard, m Message) {
	frames := h.held[m.Conn]
	delete(h.held, m.Conn)
	c := s.Conn(m.Conn)
	for i := range frames {
		f := &frames[i]
		if c != nil {
			status := wire.ErrorCode(0)
			for j, b := range f.Body {
				if b != patternByte(j) {
					status = wire.ErrInvalidCommand
					break
				}
			}
			c.Answer(f.Ticket)
			c.ReplyStatus(f.Header, status)
			c.Answered()
		}
		f.Release()
	}
}

func (h *holdingHandler) ConnClosed(c *Conn) {
	for i := range h.held[c.ID()] {
		h.held[c.ID()][i].Release()
	}
	delete(h.held, c.ID())
}

func patternByte(i int) byte { return byte(i*31 + i>>8) }

// TestFramesWaitForBuffers: more clients send large requests at once than the shard's
// arena has large buffers for. The connections whose frames find none are not closed:
// they wait, unread, until the requests in flight give their buffers back, and every
// request is answered, intact, in order.
func TestFramesWaitForBuffers(t *testing.T) {
	const kib, mib = 1 << 10, 1 << 20
	rt := startTestRuntime(t, Config{ShardCount: 1, FrameSizeMax: mib, NewHandler: func(s *Shard) Handler {
		return &holdingHandler{testHandler: testHandler{shard: s}, held: map[ConnID][]Frame{}}
	}, Arena: arenaConfig{Classes: []arenaClass{
		{BufferSizeBytes: 4 * kib, BufferCount: 64},
		{BufferSizeBytes: 8 * kib, BufferCount: 256},
		{BufferSizeBytes: 64 * kib, BufferCount: 4},
		{BufferSizeBytes: 1 * mib, BufferCount: 2},
	}}})
	const clientCount, requestsPerClient, bodyBytes = 8, 3, 700_000
	frames := make([][]byte, requestsPerClient)
	for r := range frames {
		frames[r] = requestHeader(bodyBytes, wire.OperationNonReplicated, uint32(wire.CodeGetStats), uint64(r))
		for j := range bodyBytes {
			frames[r][256+j] = patternByte(j)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, clientCount)
	for i := range clientCount {
		conn, err := net.DialTimeout("tcp", rt.Addr().String(), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		wg.Go(func() {
			conn.SetDeadline(time.Now().Add(20 * time.Second))
			go func() { // all requests at once: the arena cannot hold them all
				for _, f := range frames {
					if _, err := conn.Write(f); err != nil {
						return
					}
				}
			}()
			reply := make([]byte, 256)
			for r := range uint64(requestsPerClient) {
				if _, err := io.ReadFull(conn, reply); err != nil {
					errs <- fmt.Errorf("client %d, reply %d: %w", i, r, err)
					return
				}
				if err := replyMatches(reply, r, 0); err != nil {
					errs <- fmt.Errorf("client %d: %w", i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := rt.ConnectionCount(); n != clientCount {
		t.Errorf("%d connections open after the burst, want all %d", n, clientCount)
	}
	var waited uint64
	if err := rt.Inspect(context.Background(), func(s *Shard) { waited = s.Stats().FramesWaitedForBuffer }); err != nil {
		t.Fatal(err)
	}
	if waited == 0 {
		t.Error("no frame waited for a buffer: the burst did not cross the arena's bound")
	}
}

// replyMatches is checkReply for goroutines that are not the test's: it returns what
// differs instead of failing the test.
func replyMatches(frame []byte, request uint64, status wire.ErrorCode) error {
	switch {
	case frame[60] != byte(wire.CommandReply):
		return fmt.Errorf("reply command %d, want %d", frame[60], wire.CommandReply)
	case binary.LittleEndian.Uint32(frame[48:]) != 256:
		return fmt.Errorf("reply size %d, want 256", binary.LittleEndian.Uint32(frame[48:]))
	case binary.LittleEndian.Uint64(frame[200:]) != request:
		return fmt.Errorf("reply to request %d, want %d", binary.LittleEndian.Uint64(frame[200:]), request)
	case wire.ErrorCode(binary.LittleEndian.Uint32(frame[216:])) != status:
		return fmt.Errorf("reply status %v, want %v", wire.ErrorCode(binary.LittleEndian.Uint32(frame[216:])), status)
	}
	return nil
}

// retainingHandler keeps every request's frame until the test lets them go (release),
// then answers them all on its next turn. It reports from the shard's goroutine what
// the test waits for: each turn (turns), and the first turn that finds the
// connection throttled, with how many frames were held then (throttled).
type retainingHandler struct {
	testHandler
	held     []Frame
	heldConn ConnID
	release  *atomic.Bool

	turns          chan struct{} // one value per turn, dropped when the test is not waiting
	throttled      chan int      // frames held when the connection was first seen throttled
	sawThrottle    bool
	heldAtRelease  atomic.Int64 // written on the shard's goroutine, read by the test
	releasedFrames bool
}

func (h *retainingHandler) ServeRequest(c *Conn, req *Request) {
	h.held = append(h.held, req.Retain())
	req.Defer()
	h.heldConn = c.ID()
}

func (h *retainingHandler) Tick(s *Shard) bool {
	defer func() {
		select {
		case h.turns <- struct{}{}:
		default:
		}
	}()
	c := s.Conn(h.heldConn)
	if c != nil && c.throttled && !h.sawThrottle {
		h.sawThrottle = true
		h.throttled <- len(h.held) // buffered: never blocks
	}
	if !h.release.Load() || len(h.held) == 0 {
		return false
	}
	if !h.releasedFrames {
		h.releasedFrames = true
		h.heldAtRelease.Store(int64(len(h.held)))
	}
	for i := range h.held {
		if c != nil {
			c.Answer(h.held[i].Ticket)
			c.ReplyStatus(h.held[i].Header, 0)
			c.Answered()
		}
		h.held[i].Release()
	}
	h.held = h.held[:0]
	return false
}

func (h *retainingHandler) ConnClosed(*Conn) {
	for i := range h.held {
		h.held[i].Release()
	}
	h.held = nil
}

// TestRetainedFramesThrottleTheConnection: a client pipelines large requests that the
// handler keeps. Past retainedBytesMax the connection is throttled (not read), holding
// five 1 MiB buffers, not all ten it sent, and fifty shard turns later it still holds
// five; once they are released it is read again and every request is answered.
func TestRetainedFramesThrottleTheConnection(t *testing.T) {
	const kib, mib = 1 << 10, 1 << 20
	var release atomic.Bool
	shards := make(chan *Shard, 1)
	handlers := make(chan *retainingHandler, 1)
	rt := startTestRuntime(t, Config{ShardCount: 1, FrameSizeMax: mib, BusyPoll: -1, NewHandler: func(s *Shard) Handler {
		h := &retainingHandler{testHandler: testHandler{shard: s}, release: &release,
			turns: make(chan struct{}, 1), throttled: make(chan int, 1)}
		shards <- s
		handlers <- h
		return h
	}, Arena: arenaConfig{Classes: []arenaClass{
		{BufferSizeBytes: 4 * kib, BufferCount: 64},
		{BufferSizeBytes: 8 * kib, BufferCount: 256},
		{BufferSizeBytes: 64 * kib, BufferCount: 16},
		{BufferSizeBytes: 1 * mib, BufferCount: 16},
	}}})
	s, h := <-shards, <-handlers
	conn, err := net.DialTimeout("tcp", rt.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	const requests = 10
	go func() {
		for r := range uint64(requests) {
			if _, err := conn.Write(requestHeader(900_000, wire.OperationNonReplicated, uint32(wire.CodeGetStats), r)); err != nil {
				return
			}
		}
	}()
	// 900 KB frames take 1 MiB buffers: the fifth puts the connection past the 4 MiB
	// bound, and the shard throttles it before serving a sixth.
	timeout := time.After(10 * time.Second)
	select {
	case n := <-h.throttled:
		if n != 5 {
			t.Fatalf("throttled holding %d frames, want 5 (retainedBytesMax %d)", n, retainedBytesMax)
		}
	case <-timeout:
		t.Fatal("the connection was never throttled while its frames were retained")
	}
	// Fifty turns of the shard, each waited for: a throttled connection is not read.
	for range 50 {
		s.Wake()
		select {
		case <-h.turns:
		case <-timeout:
			t.Fatal("the shard stopped turning")
		}
	}
	release.Store(true)
	reply := make([]byte, 256)
	for r := range uint64(requests) {
		s.Wake()
		if _, err := io.ReadFull(conn, reply); err != nil {
			t.Fatalf("reply %d: %v", r, err)
		}
		if err := replyMatches(reply, r, 0); err != nil {
			t.Fatal(err)
		}
	}
	// Read on the shard's goroutine before it answered the first five; the replies
	// above happen after it (the handler answers only what it released).
	if n := h.heldAtRelease.Load(); n != 5 {
		t.Fatalf("%d frames held when released, want 5: the connection was read while throttled", n)
	}
}

// releasingHandler holds every frame until the test sets release, then answers
// each on its connection and gives it back, on its next turn.
type releasingHandler struct {
	testHandler
	held    []Frame
	release *atomic.Bool
}

func (h *releasingHandler) ServeRequest(c *Conn, req *Request) {
	h.held = append(h.held, req.Retain())
	req.Defer()
}

func (h *releasingHandler) Tick(s *Shard) bool {
	if !h.release.Load() {
		return false
	}
	for i := range h.held {
		f := &h.held[i]
		if c := s.Conn(f.conn); c != nil {
			c.Answer(f.Ticket)
			c.ReplyStatus(f.Header, 0)
			c.Answered()
		}
		f.Release()
	}
	h.held = h.held[:0]
	return false
}

func (h *releasingHandler) ConnClosed(*Conn) {}

// TestBufferWaitersForDifferentSizesDoNotBlockEachOther: the first connection in
// line waits for a 64 KiB buffer that a frame behind it holds, which itself waits
// for the one 1 MiB buffer. When that comes back, the frame behind takes it (and
// so frees its 64 KiB one): the line is first come, first served for each size,
// not across sizes, which would leave both waiting for ever.
func TestBufferWaitersForDifferentSizesDoNotBlockEachOther(t *testing.T) {
	const kib, mib = 1 << 10, 1 << 20
	var release atomic.Bool
	rt := startTestRuntime(t, Config{ShardCount: 1, FrameSizeMax: mib, NewHandler: func(s *Shard) Handler {
		return &releasingHandler{testHandler: testHandler{shard: s}, release: &release}
	}, Arena: arenaConfig{Classes: []arenaClass{
		{BufferSizeBytes: 4 * kib, BufferCount: 64},
		{BufferSizeBytes: 8 * kib, BufferCount: 256},
		{BufferSizeBytes: 64 * kib, BufferCount: 1},
		{BufferSizeBytes: 1 * mib, BufferCount: 1},
	}}})
	inUse := func(class int) (n, waiting int) {
		if err := rt.Inspect(context.Background(), func(s *Shard) {
			n, waiting = s.arena.ClassStats(class).InUseCount, len(s.clients.bufferWaiters)
		}); err != nil {
			t.Fatal(err)
		}
		return n, waiting
	}
	const bodyBytes = 700_000
	holder, behind, front := dial(t, rt), dial(t, rt), dial(t, rt)
	frames := map[*testClient][]byte{}
	for i, c := range []*testClient{holder, behind, front} {
		frames[c] = requestHeader(bodyBytes, wire.OperationNonReplicated, uint32(wire.CodePing), uint64(i+1))
	}
	if _, err := holder.conn.Write(frames[holder]); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the 1 MiB buffer held", func() bool { n, _ := inUse(3); return n == 1 })
	if _, err := behind.conn.Write(frames[behind][:32*kib]); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the 64 KiB buffer held", func() bool { n, _ := inUse(2); return n == 1 })
	if _, err := front.conn.Write(frames[front]); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "a connection waiting for 64 KiB", func() bool { _, w := inUse(2); return w == 1 })
	if _, err := behind.conn.Write(frames[behind][32*kib:]); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "a connection waiting for 1 MiB behind it", func() bool { _, w := inUse(2); return w == 2 })
	release.Store(true)
	rt.WakeAll()
	for i, c := range []*testClient{holder, behind, front} {
		c.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		reply := make([]byte, 256)
		if _, err := io.ReadFull(c.conn, reply); err != nil {
			t.Fatalf("reply %d: %v", i+1, err)
		}
		if err := replyMatches(reply, uint64(i+1), 0); err != nil {
			t.Fatal(err)
		}
	}
}

// TestWaitingConnectionHoldsNoBacklogBuffer: a connection that begins to wait for a
// frame buffer gives back the arena buffer its backlog held (the bytes move to the
// heap), and what it stashes while it waits goes to the heap too: otherwise its
// backlog could hold the very buffer its frame waits for, and wait for ever.
func TestWaitingConnectionHoldsNoBacklogBuffer(t *testing.T) {
	rt := startTestRuntime(t, Config{ShardCount: 1})
	c := dial(t, rt)
	c.ping(1)
	stashed := make([]byte, 100<<10)
	fillRandom(stashed[headerSizeBytes:], 7) // after a header of zeros: size 0
	var failures []string
	fail := func(format string, args ...any) { failures = append(failures, fmt.Sprintf(format, args...)) }
	if err := rt.Inspect(context.Background(), func(s *Shard) {
		var conn *Conn
		for _, cc := range s.clients.conns.items {
			if cc.state == linkOpen {
				conn = cc
			}
		}
		conn.stash(stashed[:60<<10])
		if conn.in.buffer.IsZero() {
			fail("a backlog of an open connection on the heap with the arena not dry")
			return
		}
		inUse := s.arena.InUseCount()
		conn.waitForBuffer()
		if !conn.in.buffer.IsZero() {
			fail("the backlog of a connection waiting for a frame buffer still holds an arena buffer")
		}
		if n := s.arena.InUseCount(); n != inUse-1 {
			fail("%d arena buffers in use after the wait began, want %d", n, inUse-1)
		}
		conn.stash(stashed[60<<10:])
		if !conn.in.buffer.IsZero() {
			fail("a waiting connection's backlog took an arena buffer as it grew")
		}
		if !bytes.Equal(conn.in.data[:conn.in.bytes], stashed) {
			fail("the backlog's bytes changed as they moved")
		}
	}); err != nil {
		t.Fatal(err)
	}
	for _, f := range failures {
		t.Error(f)
	}
	// The stashed bytes are no frame: once it reads again, the connection is evicted.
	c.expectEvictionThenClose(wire.EvictionInvalidRequestBodySize)
}
