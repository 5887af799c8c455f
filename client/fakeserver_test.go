package client

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/wire"
)

// The fake server: a goroutine on 127.0.0.1:0 that reads request frames with wire,
// checks each header the way a server's listener must (wire.DecodeRequestHeader), and
// writes what the test's handler returns. Every frame it received is recorded, so a
// test can compare the client's bytes with what the Go SDK sends.

// testTimeout bounds every test request so that a client bug fails a test instead of
// hanging it; no test waits for it to pass.
const testTimeout = 10 * time.Second

// recordedFrame is one request as the server received it.
type recordedFrame struct {
	header wire.RequestHeader
	body   []byte
	raw    []byte
}

// handlerFunc answers one request with the bytes to write back (whole frames, or a
// part of one), or close to drop the connection after writing them.
type handlerFunc func(req *wire.RequestHeader, body []byte) (reply []byte, close bool)

type fakeServer struct {
	t       testing.TB
	ln      net.Listener
	handler handlerFunc

	mu     sync.Mutex
	frames []recordedFrame
	// record is false for benchmarks, which must not grow memory per request.
	record bool
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

func newFakeServer(t testing.TB, handler handlerFunc) *fakeServer {
	t.Helper()
	return newFakeServerOn(t, listenLoopback(t), handler)
}

func listenLoopback(t testing.TB) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// newFakeServerOn serves on ln (a TLS listener, say).
func newFakeServerOn(t testing.TB, ln net.Listener, handler handlerFunc) *fakeServer {
	s := &fakeServer{t: t, ln: ln, handler: handler, record: true, conns: map[net.Conn]struct{}{}}
	s.wg.Add(1)
	go s.acceptLoop()
	t.Cleanup(s.shutdown)
	return s
}

func (s *fakeServer) addr() string { return s.ln.Addr().String() }

func (s *fakeServer) acceptLoop() {
	defer s.wg.Done()
	for {
		conn, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.closed {
			conn.Close()
		} else {
			s.conns[conn] = struct{}{}
			s.wg.Add(1)
			go s.serve(conn)
		}
		s.mu.Unlock()
	}
}

// shutdown stops accepting, drops every connection and waits for the goroutines.
func (s *fakeServer) shutdown() {
	s.ln.Close()
	s.mu.Lock()
	s.closed = true
	for conn := range s.conns {
		conn.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

func (s *fakeServer) serve(conn net.Conn) {
	defer s.wg.Done()
	defer conn.Close()
	buf := alignedBuffer(1 << 20)
	for {
		head := buf[:wire.HeaderSize]
		if _, err := io.ReadFull(conn, head); err != nil {
			return
		}
		h, err := wire.DecodeRequestHeader(head, wire.DefaultMessageSizeMax)
		var refused wire.ErrorCode
		if fault, _ := err.(wire.HeaderFault); fault == wire.FaultUnknownCommandCode {
			// A well-formed request for a code the server does not know: the
			// server answers status 3, as a real one must.
			h, _ = wire.ViewHeader[wire.RequestHeader](head)
			refused = fault.Status()
		} else if err != nil {
			s.t.Errorf("fake server: client sent an invalid request header: %v", err)
			return
		}
		size := int(h.Size)
		if size > cap(buf) {
			grown := alignedBuffer(size)
			copy(grown, head)
			buf = grown
		}
		frame := buf[:size]
		if _, err := io.ReadFull(conn, frame[wire.HeaderSize:]); err != nil {
			return
		}
		h, _ = wire.ViewHeader[wire.RequestHeader](frame)
		body := frame[wire.HeaderSize:]
		if s.record {
			s.mu.Lock()
			s.frames = append(s.frames, recordedFrame{header: *h, body: append([]byte(nil), body...),
				raw: append([]byte(nil), frame...)})
			s.mu.Unlock()
		}
		if refused != 0 {
			if _, err := conn.Write(denial(h, refused)); err != nil {
				return
			}
			continue
		}
		answer, closeConn := s.handler(h, body)
		if len(answer) > 0 {
			if _, err := conn.Write(answer); err != nil {
				return
			}
		}
		if closeConn {
			return
		}
	}
}

func (s *fakeServer) recorded() []recordedFrame {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]recordedFrame(nil), s.frames...)
}

// Reply builders.

// reply is a served reply to req: status 0, payload behind a success result
// section when the reply operation is result-framed, as a server sends it.
func reply(req *wire.RequestHeader, payload []byte) []byte {
	op := wire.ReplyOperation(req.Operation, true)
	body := payload
	if wire.ReplyResultFramed(op, wire.ResultSuccessBytes+len(payload)) {
		body = append(wire.AppendResultSuccess(nil), payload...)
	}
	h := wire.ReplyTo(req, 0, len(body), true)
	out := make([]byte, wire.HeaderSize, wire.HeaderSize+len(body))
	h.Put(out)
	return append(out, body...)
}

// denial is a status reply: code in the header, no body.
func denial(req *wire.RequestHeader, code wire.ErrorCode) []byte {
	h := wire.ReplyTo(req, code, 0, false)
	out := make([]byte, wire.HeaderSize)
	h.Put(out)
	return out
}

// rejection is a committed business rejection: status 0, [1][0][code].
func rejection(req *wire.RequestHeader, code wire.ErrorCode) []byte {
	body := wire.AppendResultRejection(nil, code)
	h := wire.ReplyTo(req, 0, len(body), true)
	out := make([]byte, wire.HeaderSize)
	h.Put(out)
	return append(out, body...)
}

// eviction is an Eviction frame.
func eviction(req *wire.RequestHeader, reason wire.EvictionReason, versionMax, versionMin uint32) []byte {
	out := make([]byte, wire.HeaderSize)
	wire.PutEviction(out, req.Client, reason, versionMax, versionMin)
	return out
}

const testSession = 0x5E55

// loginPayload is a LoginRegisterReply for user 0 with testSession.
func loginPayload() []byte {
	r := wire.LoginRegisterReply{UserID: 0, Session: testSession, ServerProtocolVersion: wire.ServerProtocolVersion,
		ServerVersion: []byte("0.11.0")}
	b, err := r.Append(nil)
	if err != nil {
		panic(err)
	}
	return b
}

// clusterPayload is one healthy leader node.
func clusterPayload() []byte {
	m := wire.ClusterMetadata{Name: []byte("single-node"), Nodes: []wire.ClusterNode{{
		Name: []byte("iggy-node"), IP: []byte("127.0.0.1"), TCPPort: 8090,
	}}}
	return m.Append(nil)
}

// session answers the session commands (login, cluster metadata, logout, ping) and
// passes everything else to next; a nil next answers status 3.
func session(next handlerFunc) handlerFunc {
	return func(req *wire.RequestHeader, body []byte) ([]byte, bool) {
		switch {
		case req.Operation == wire.OperationRegister:
			return reply(req, loginPayload()), false
		case req.Operation == wire.OperationLogout:
			return reply(req, nil), false
		case req.Operation == wire.OperationNonReplicated && req.NonReplicatedCode == wire.CodePing:
			return reply(req, nil), false
		case req.Operation == wire.OperationNonReplicated && req.NonReplicatedCode == wire.CodeGetClusterMetadata:
			return reply(req, clusterPayload()), false
		}
		if next == nil {
			return denial(req, wire.ErrInvalidCommand), false
		}
		return next(req, body)
	}
}

// countingReader is a deterministic WithRandom source: byte i is i+1 (mod 256).
type countingReader struct{ n byte }

func (r *countingReader) Read(p []byte) (int, error) {
	for i := range p {
		r.n++
		p[i] = r.n
	}
	return len(p), nil
}

func testContext(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// dialTest dials s and fails the test on error.
func dialTest(t testing.TB, s *fakeServer, opts ...Option) *Client {
	t.Helper()
	c, err := Dial(testContext(t), s.addr(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// loggedIn dials s and logs in.
func loggedIn(t testing.TB, s *fakeServer, opts ...Option) *Client {
	t.Helper()
	c := dialTest(t, s, opts...)
	if _, err := c.Login(testContext(t), "iggy", "iggy"); err != nil {
		t.Fatal(err)
	}
	return c
}

// mustCode fails unless err is (or wraps) code.
func mustCode(t testing.TB, err error, code wire.ErrorCode) {
	t.Helper()
	if !errors.Is(err, code) {
		t.Fatalf("err = %v, want %v", err, code)
	}
}
