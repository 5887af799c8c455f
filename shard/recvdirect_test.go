package shard

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/wire"
)

// sumHandler answers every request with the CRC-32C of its body (a 4-byte reply
// body): a frame that lost, doubled or moved a byte on its way shows, without an
// echo that would need a second buffer of the frame's size.
type sumHandler struct{ testHandler }

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func (h *sumHandler) ServeRequest(c *Conn, req *Request) {
	h.replyHeader(c, req.Header.Request, 4)
	if b, err := c.Reserve(4); err == nil {
		binary.LittleEndian.PutUint32(b, crc32.Checksum(req.Body, castagnoli))
	}
}

func startSumRuntime(t testing.TB, cfg Config) *Runtime {
	cfg.ShardCount = 1
	cfg.NewHandler = func(s *Shard) Handler { return &sumHandler{testHandler{shard: s}} }
	return startTestRuntime(t, cfg)
}

// sumFrame is a request whose body is a pattern seeded by request.
func sumFrame(bodyBytes int, request uint64) []byte {
	f := requestHeader(bodyBytes, wire.OperationNonReplicated, uint32(wire.CodePing), request)
	fillRandom(f[headerSizeBytes:], request)
	return f
}

// readSum reads the reply to frame and checks that the server saw its body whole.
func readSum(t testing.TB, conn net.Conn, frame []byte) {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	reply := make([]byte, headerSizeBytes+4)
	if _, err := io.ReadFull(conn, reply); err != nil {
		t.Fatalf("reading the reply to a %d-byte frame: %v", len(frame), err)
	}
	if got, want := binary.LittleEndian.Uint64(reply[200:]), binary.LittleEndian.Uint64(frame[168:]); got != want {
		t.Fatalf("reply to request %d, want %d", got, want)
	}
	if got, want := binary.LittleEndian.Uint32(reply[headerSizeBytes:]), crc32.Checksum(frame[headerSizeBytes:], castagnoli); got != want {
		t.Fatalf("the server's CRC-32C of a %d-byte frame's body is %#x, want %#x", len(frame), got, want)
	}
}

// TestLargeFrameBodiesAreReceivedIntoTheirBuffers: a frame whose body is
// recvDirectBytesMinDefault or more is read (partly) straight into its buffer, and
// arrives whole: at sizes around the threshold, at the largest frame, and with small
// requests pipelined right behind it in the same write (the recv into the frame
// never reads past it). Smaller frames go through the receive ring as before.
func TestLargeFrameBodiesAreReceivedIntoTheirBuffers(t *testing.T) {
	rt := startSumRuntime(t, Config{})
	const threshold = recvDirectBytesMinDefault
	for _, bc := range []struct {
		bodyBytes int
		direct    bool // must go (partly) straight into the frame buffer; else must not
		// maybe: either, by how the bytes arrive: the multishot recv may have taken
		// all of a body into the receive ring before its cancel is seen.
		maybe bool
	}{
		{bodyBytes: threshold / 2},
		{bodyBytes: threshold - 1},
		{bodyBytes: threshold, maybe: true},
		{bodyBytes: threshold + recvBufferBytes, maybe: true},
		{bodyBytes: threshold + 4*recvBufferBytes + 1, maybe: true},
		{bodyBytes: 1_048_538, direct: true},
		{bodyBytes: FrameSizeMaxDefault - headerSizeBytes, direct: true},
	} {
		t.Run(fmt.Sprint(bc.bodyBytes), func(t *testing.T) {
			before := shardStats(t, rt)
			c := dial(t, rt)
			frame := sumFrame(bc.bodyBytes, uint64(bc.bodyBytes))
			pipelined := append(append(append([]byte(nil), frame...), pingFrame(1)...), pingFrame(2)...)
			if bc.direct {
				// Of the first frame of a connection, written at once, the multishot
				// recv may take most (~780 KiB of 1 MiB was seen with the machine
				// loaded), or all, into the receive ring before the shard's cancel of
				// it takes effect. So the header goes first, and the rest once the
				// recv into the frame buffer is armed: that recv is bound to read some
				// of it.
				head := headerSizeBytes + 16<<10
				if _, err := c.conn.Write(pipelined[:head]); err != nil {
					t.Fatal(err)
				}
				waitFor(t, 10*time.Second, "the recv into the frame buffer", func() bool { return recvDirectArmed(t, rt) })
				pipelined = pipelined[head:]
			}
			go c.conn.Write(pipelined)
			readSum(t, c.conn, frame)
			readSum(t, c.conn, pingFrame(1))
			readSum(t, c.conn, pingFrame(2))
			direct := shardStats(t, rt).BytesReceivedIntoFrames - before.BytesReceivedIntoFrames
			t.Logf("%d of %d body bytes received straight into the frame buffer", direct, bc.bodyBytes)
			switch {
			case bc.maybe:
			case bc.direct && direct == 0:
				t.Errorf("no byte of a %d-byte body received straight into its frame buffer", bc.bodyBytes)
			case !bc.direct && direct != 0:
				t.Errorf("%d bytes of a %d-byte body received straight into its frame buffer, below the threshold", direct, bc.bodyBytes)
			}
		})
	}
}

// recvDirectArmed reports whether a connection of rt has its recv into a frame buffer
// in flight.
func recvDirectArmed(t testing.TB, rt *Runtime) bool {
	t.Helper()
	armed := false
	if err := rt.Inspect(context.Background(), func(s *Shard) {
		for _, c := range s.clients.conns.items {
			if c != nil && c.state == linkOpen && c.recvDirect && c.recvInFlight {
				armed = true
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	return armed
}

// TestLargeFrameDribbledByteByByte: a large frame sent one byte per write (a recv
// into the frame buffer may bring as few as one) arrives whole.
func TestLargeFrameDribbledByteByByte(t *testing.T) {
	rt := startSumRuntime(t, Config{})
	c := dial(t, rt)
	frame := sumFrame(recvDirectBytesMinDefault+4*recvBufferBytes, 7)
	errs := make(chan error, 1)
	go func() {
		for i := range frame {
			if _, err := c.conn.Write(frame[i : i+1]); err != nil {
				errs <- err
				return
			}
		}
		errs <- nil
	}()
	readSum(t, c.conn, frame)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	if shardStats(t, rt).BytesReceivedIntoFrames == 0 {
		t.Error("no byte received straight into the frame buffer")
	}
}

// TestLargeFrameCutShortReleasesItsBuffers: a client that closes halfway through a
// large frame's body, and one that goes silent there until the frame timeout, while
// the recv into its buffer is in flight: the connection closes and every arena
// buffer it held is back.
func TestLargeFrameCutShortReleasesItsBuffers(t *testing.T) {
	for _, end := range []string{"peer closes", "frame timeout"} {
		t.Run(end, func(t *testing.T) {
			rt := startSumRuntime(t, Config{FrameTimeout: time.Second})
			before := shardStats(t, rt)
			c := dial(t, rt)
			frame := sumFrame(1<<20, 9)
			// Until a recv into the frame buffer took some: what is sent at once may
			// all go through the receive ring before the recv changes.
			sent := 0
			for shardStats(t, rt).BytesReceivedIntoFrames == 0 {
				if sent == len(frame)/2 {
					t.Fatal("half a body sent, none received straight into the frame buffer")
				}
				n := min(16<<10, len(frame)/2-sent)
				if _, err := c.conn.Write(frame[sent : sent+n]); err != nil {
					t.Fatal(err)
				}
				sent += n
			}
			if end == "peer closes" {
				c.conn.Close()
			} else {
				c.expectClose()
			}
			waitFor(t, 5*time.Second, "the connection closed", func() bool { return rt.ConnectionCount() == 0 })
			after := shardStats(t, rt)
			if after.ArenaBuffersInUse != before.ArenaBuffersInUse {
				t.Errorf("%d arena buffers in use after the connection closed, %d before it opened",
					after.ArenaBuffersInUse, before.ArenaBuffersInUse)
			}
		})
	}
}

// lateReplyHandler defers the first GetStats request of a connection and answers it
// with lateReplyBody when the test says so (on its next turn); every other request
// gets a status reply, counted in served.
type lateReplyHandler struct {
	testHandler
	deferredConn   ConnID
	deferredTicket Ticket
	deferred       bool
	answer         *atomic.Bool
	served         int // requests answered at once; read on the shard's goroutine
}

var lateReplyBody = make([]byte, 32<<20)

func (h *lateReplyHandler) ServeRequest(c *Conn, req *Request) {
	if req.Header.NonReplicatedCode == wire.CodeGetStats && !h.deferred {
		h.deferred, h.deferredConn, h.deferredTicket = true, c.ID(), req.Defer()
		return
	}
	h.served++
	c.ReplyStatus(req.Header, 0)
}

func (h *lateReplyHandler) Tick(s *Shard) bool {
	if !h.deferred || !h.answer.Load() {
		return false
	}
	h.deferred = false
	if c := s.Conn(h.deferredConn); c != nil {
		c.Answer(h.deferredTicket)
		h.replyHeader(c, 1, len(lateReplyBody))
		c.SendVectored([][]byte{lateReplyBody}, h)
		c.Answered()
	}
	return false
}

// TestRecvIntoFrameStopsWhenRepliesPileUp: a connection receiving a large frame
// straight into its buffer whose replies pile up (a 32 MiB reply its client does not
// read) is throttled at its next recv, mid-frame, as one fed through the receive ring
// is: the rest of the frame waits in the socket, unserved, until the client reads;
// then the frame arrives whole.
func TestRecvIntoFrameStopsWhenRepliesPileUp(t *testing.T) {
	var answer atomic.Bool
	handlers := make(chan *lateReplyHandler, 1)
	rt := startTestRuntime(t, Config{ShardCount: 1, NewHandler: func(s *Shard) Handler {
		h := &lateReplyHandler{testHandler: testHandler{shard: s}, answer: &answer}
		handlers <- h
		return h
	}})
	h := <-handlers
	c := dial(t, rt)
	c.conn.(*net.TCPConn).SetReadBuffer(64 << 10)
	if _, err := c.conn.Write(requestHeader(0, wire.OperationNonReplicated, uint32(wire.CodeGetStats), 1)); err != nil {
		t.Fatal(err)
	}
	frame := requestHeader(1<<20, wire.OperationNonReplicated, uint32(wire.CodePing), 2)
	fillRandom(frame[headerSizeBytes:], 2)
	sent := 0
	write := func(n int) {
		t.Helper()
		if _, err := c.conn.Write(frame[sent : sent+n]); err != nil {
			t.Fatal(err)
		}
		sent += n
	}
	for shardStats(t, rt).BytesReceivedIntoFrames == 0 { // a recv into the frame is in flight
		if sent > len(frame)/2 {
			t.Fatal("half a frame sent, none received straight into its buffer")
		}
		write(16 << 10)
	}
	answer.Store(true)
	inspect := func(fn func(s *Shard)) {
		t.Helper()
		if err := rt.Inspect(context.Background(), fn); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 5*time.Second, "the late reply queued", func() bool {
		queued := false
		inspect(func(s *Shard) {
			if conn := s.Conn(h.deferredConn); conn != nil {
				queued = conn.out.bytes > s.cfg.SendQueueBytesMax/2
			}
		})
		return queued
	})
	// The recv in flight takes these; the next one finds the connection overloaded.
	write(64 << 10)
	waitFor(t, 5*time.Second, "the connection throttled mid-frame", func() bool {
		throttled := false
		inspect(func(s *Shard) {
			if conn := s.Conn(h.deferredConn); conn != nil {
				throttled = conn.throttled && !conn.recvInFlight && conn.framer.Partial()
			}
		})
		return throttled
	})
	write(len(frame) - sent)
	received := shardStats(t, rt).BytesReceived
	for range 20 {
		rt.WakeAll()
		if now := shardStats(t, rt).BytesReceived; now != received {
			t.Fatalf("%d bytes received while throttled", now-received)
		}
	}
	c.conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	late := make([]byte, headerSizeBytes+len(lateReplyBody))
	if _, err := io.ReadFull(c.conn, late); err != nil {
		t.Fatalf("reading the late reply: %v", err)
	}
	checkReply(t, c.readFrame(), 2, 0)
	served := 0
	inspect(func(*Shard) { served = h.served })
	if served != 1 {
		t.Fatalf("%d requests served at once, want 1 (the large frame)", served)
	}
}

// TestLargeAndSmallFramesPipelined: one connection pipelines a hundred frames of
// sizes on both sides of the threshold, large ones straight into their buffers and
// small ones through the receive ring, switching between the two recvs each time;
// every one arrives whole, in order, and the frame buffers all come back.
func TestLargeAndSmallFramesPipelined(t *testing.T) {
	rt := startSumRuntime(t, Config{Arena: ArenaConfigDefault()})
	before := shardStats(t, rt)
	c := dial(t, rt)
	rng := rand.New(rand.NewPCG(5, 23))
	frames := make([][]byte, 100)
	for i := range frames {
		body := rng.IntN(2 * recvBufferBytes)
		if i%2 == 0 {
			body = recvDirectBytesMinDefault + rng.IntN(batchBufferBytes-recvDirectBytesMinDefault)
		}
		frames[i] = sumFrame(body, uint64(i))
	}
	errs := make(chan error, 1)
	go func() {
		for _, f := range frames {
			if _, err := c.conn.Write(f); err != nil {
				errs <- err
				return
			}
		}
		errs <- nil
	}()
	for _, f := range frames {
		readSum(t, c.conn, f)
	}
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	c.conn.Close()
	waitFor(t, 5*time.Second, "the connection closed", func() bool { return rt.ConnectionCount() == 0 })
	after := shardStats(t, rt)
	if after.BytesReceivedIntoFrames == before.BytesReceivedIntoFrames {
		t.Error("no byte received straight into a frame buffer")
	}
	if after.ArenaBuffersInUse != before.ArenaBuffersInUse {
		t.Errorf("%d arena buffers in use after the connection closed, %d before it opened",
			after.ArenaBuffersInUse, before.ArenaBuffersInUse)
	}
}

// TestLargeFramesInARowAreReceivedWhollyIntoTheirBuffers: after a large frame, a
// connection reads the next header alone and every byte of the next large bodies
// straight into their frame buffers, each frame written at once: none goes through
// the receive ring, as it would if the multishot recv were armed between them (it
// takes up to a multishot round of each body before its cancel lands). Also when
// the first frame's body is just above the threshold, so that most of it, but not
// all, came with its header's multishot completion.
func TestLargeFramesInARowAreReceivedWhollyIntoTheirBuffers(t *testing.T) {
	const threshold = recvDirectBytesMinDefault
	for _, bodies := range [][]int{
		{1 << 20, 1 << 20, threshold, threshold + 1, 3 << 20, threshold + recvBufferBytes, 1 << 20},
		{threshold + 1, threshold + 1, threshold + 1, threshold + 1},
	} {
		t.Run(fmt.Sprint(bodies[0]), func(t *testing.T) {
			rt := startSumRuntime(t, Config{})
			c := dial(t, rt)
			for i, bodyBytes := range bodies {
				frame := sumFrame(bodyBytes, uint64(i))
				before := shardStats(t, rt)
				errs := make(chan error, 1)
				go func() { _, err := c.conn.Write(frame); errs <- err }()
				readSum(t, c.conn, frame)
				if err := <-errs; err != nil {
					t.Fatal(err)
				}
				if i == 0 {
					continue // it may go partly through the receive ring
				}
				after := shardStats(t, rt)
				received := after.BytesReceived - before.BytesReceived
				direct := after.BytesReceivedIntoFrames - before.BytesReceivedIntoFrames
				if received != uint64(len(frame)) || direct != uint64(bodyBytes) {
					t.Errorf("frame %d: %d of its %d bytes received, %d of its %d body bytes straight into its buffer",
						i, received, len(frame), direct, bodyBytes)
				}
			}
		})
	}
}

// TestSmallFramesAfterLargeOnesGoBackToTheMultishotRecv: a connection that sent large
// frames and then pipelines a thousand PINGs in one write has them read through the
// multishot recv, many to a completion, not one header recv each.
func TestSmallFramesAfterLargeOnesGoBackToTheMultishotRecv(t *testing.T) {
	rt := startSumRuntime(t, Config{})
	c := dial(t, rt)
	for i := range 3 {
		frame := sumFrame(1<<20, uint64(i))
		go c.conn.Write(frame)
		readSum(t, c.conn, frame)
	}
	const pings = 1000
	var pipelined []byte
	for i := range pings {
		pipelined = append(pipelined, pingFrame(uint64(i))...)
	}
	before := shardStats(t, rt)
	go c.conn.Write(pipelined)
	for i := range pings {
		readSum(t, c.conn, pingFrame(uint64(i)))
	}
	after := shardStats(t, rt)
	t.Logf("%d completions for %d pipelined PINGs", after.CQEsReaped-before.CQEsReaped, pings)
	// A header recv a PING would reap a completion a PING, and its reply's send more.
	if cqes := after.CQEsReaped - before.CQEsReaped; cqes >= pings {
		t.Errorf("%d completions for %d pipelined PINGs after large frames", cqes, pings)
	}
	if direct := after.BytesReceivedIntoFrames - before.BytesReceivedIntoFrames; direct != 0 {
		t.Errorf("%d bytes of PINGs received straight into frame buffers", direct)
	}
}

// TestHeaderAfterLargeFrameCutShortReleasesItsBuffers: a connection that sent a
// large frame, so that its next header is read alone, and then sends part of a
// header and closes, or goes silent there until the frame timeout: it is closed and
// every arena buffer it held is back.
func TestHeaderAfterLargeFrameCutShortReleasesItsBuffers(t *testing.T) {
	for _, end := range []string{"peer closes", "frame timeout", "peer closes between frames"} {
		t.Run(end, func(t *testing.T) {
			rt := startSumRuntime(t, Config{FrameTimeout: time.Second})
			before := shardStats(t, rt)
			c := dial(t, rt)
			for i := range 2 {
				frame := sumFrame(1<<20, uint64(i))
				go c.conn.Write(frame)
				readSum(t, c.conn, frame)
			}
			if end != "peer closes between frames" {
				if _, err := c.conn.Write(sumFrame(1<<20, 2)[:100]); err != nil {
					t.Fatal(err)
				}
				waitFor(t, 5*time.Second, "the header's first bytes received", func() bool {
					return shardStats(t, rt).BytesReceived > before.BytesReceived+2*(headerSizeBytes+1<<20)
				})
			}
			if end == "frame timeout" {
				c.expectClose()
			} else {
				c.conn.Close()
			}
			waitFor(t, 5*time.Second, "the connection closed", func() bool { return rt.ConnectionCount() == 0 })
			after := shardStats(t, rt)
			if after.ArenaBuffersInUse != before.ArenaBuffersInUse {
				t.Errorf("%d arena buffers in use after the connection closed, %d before it opened",
					after.ArenaBuffersInUse, before.ArenaBuffersInUse)
			}
		})
	}
}
