package shard

import (
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
// then answers them all on its next turn.
type retainingHandler struct {
	testHandler
	held     []Frame
	heldConn ConnID
	count    *atomic.Int64 // frames held now
	release  *atomic.Bool
}

func (h *retainingHandler) ServeRequest(c *Conn, req *Request) {
	h.held = append(h.held, req.Retain())
	req.Defer()
	h.heldConn = c.ID()
	h.count.Store(int64(len(h.held)))
}

func (h *retainingHandler) Tick(s *Shard) bool {
	if !h.release.Load() || len(h.held) == 0 {
		return false
	}
	c := s.Conn(h.heldConn)
	for i := range h.held {
		if c != nil {
			c.Answer(h.held[i].Ticket)
			c.ReplyStatus(h.held[i].Header, 0)
			c.Answered()
		}
		h.held[i].Release()
	}
	h.held = h.held[:0]
	h.count.Store(0)
	return false
}

func (h *retainingHandler) ConnClosed(*Conn) {
	for i := range h.held {
		h.held[i].Release()
	}
	h.held = nil
}

// TestRetainedFramesThrottleTheConnection: a client pipelines large requests that the
// handler keeps. Past retainedBytesMax the connection is not read, so it holds five
// 1 MiB buffers, not all ten it sent; once they are released it is read again and
// every request is answered.
func TestRetainedFramesThrottleTheConnection(t *testing.T) {
	const kib, mib = 1 << 10, 1 << 20
	var count atomic.Int64
	var release atomic.Bool
	shards := make(chan *Shard, 1)
	rt := startTestRuntime(t, Config{ShardCount: 1, FrameSizeMax: mib, BusyPoll: -1, NewHandler: func(s *Shard) Handler {
		shards <- s
		return &retainingHandler{testHandler: testHandler{shard: s}, count: &count, release: &release}
	}, Arena: arenaConfig{Classes: []arenaClass{
		{BufferSizeBytes: 4 * kib, BufferCount: 64},
		{BufferSizeBytes: 8 * kib, BufferCount: 256},
		{BufferSizeBytes: 64 * kib, BufferCount: 16},
		{BufferSizeBytes: 1 * mib, BufferCount: 16},
	}}})
	s := <-shards
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
	waitFor(t, 10*time.Second, "five frames retained", func() bool { return count.Load() >= 5 })
	// Give the shard turns to read more, were it reading: it must not.
	for range 50 {
		s.Wake()
		time.Sleep(time.Millisecond)
	}
	if n := count.Load(); n != 5 {
		t.Fatalf("%d frames retained, want 5: the connection was read past %d retained bytes", n, retainedBytesMax)
	}
	reply := make([]byte, 256)
	for r := range uint64(requests) {
		release.Store(true)
		s.Wake()
		if _, err := io.ReadFull(conn, reply); err != nil {
			t.Fatalf("reply %d: %v", r, err)
		}
		if err := replyMatches(reply, r, 0); err != nil {
			t.Fatal(err)
		}
	}
}
