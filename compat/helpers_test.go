// Package compat checks the server against what the official Iggy SDKs send and expect,
// byte for byte, independently of wire/ and client/: every request frame is built here
// by hand as the Go SDK builds it (apache/iggy foreign/go) and every reply decoded by
// hand from the reference's layouts (apache/iggy core/binary_protocol/src/responses/,
// core/common/src/error/iggy_error.rs), so a layout mistake shared by our codec and our
// client cannot pass unnoticed.
//
// A request as the Go SDK writes it (apache/iggy foreign/go/internal/vsr); every other
// byte of the 256-byte header is zero:
//
//	offset  48  size u32 (256 + body)     168  request u64
//	        60  command u8 = 5            176  operation u8
//	       128  client u128               184  session u64
//	       144  request_checksum u128     196  command code u32 (operation 2 only)
//	            (Rust SDK only)
//
// and a reply (iggy.apache.org/docs/binary-protocol/framing): request echoed at 200,
// operation at 208, status at 216; a non-zero status has an empty body; the operation
// byte decides whether the body starts with a result section [count u32]([index
// u32][code u32]).
//
// Each test starts its own server on 127.0.0.1:0 with a temporary data directory.
// Server behaviour that disagrees with the reference is kept out of the committed
// tests and reported to the server's owner.
package compat

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/zeebo/xxh3"

	"github.com/iggy-shard/iggy-shard/config"
	"github.com/iggy-shard/iggy-shard/server"
)

// Values the Go SDK puts on the wire (apache/iggy foreign/go/internal/vsr).
const (
	headerSize          = 256
	commandRequest      = 5
	commandReply        = 8
	commandEviction     = 13
	protocolVersion0110 = 11264 // 0<<20 + 11<<10 + 0
	sdkName             = "go-sdk"
	sdkVersion          = "0.9.0-edge.4"
	frameSizeMaxBytes   = 64 << 20
	readDeadline        = 10 * time.Second
)

// Operation bytes (iggy.apache.org/docs/binary-protocol/framing, "Operation
// discriminants").
const (
	opRegister             = 1
	opNonReplicated        = 2
	opLogout               = 3
	opCreateStream         = 128
	opUpdateStream         = 129
	opDeleteStream         = 130
	opCreateTopic          = 132
	opUpdateTopic          = 133
	opDeleteTopic          = 134
	opCreatePartitions     = 136
	opDeletePartitions     = 137
	opDeleteSegments       = 138
	opCreateConsumerGroup  = 139
	opDeleteConsumerGroup  = 140
	opJoinConsumerGroup    = 148
	opLeaveConsumerGroup   = 149
	opSendMessages         = 160
	opStoreConsumerOffset  = 161
	opDeleteConsumerOffset = 162
)

// Command codes of the non-replicated requests
// (iggy.apache.org/docs/binary-protocol/commands).
const (
	codePing               = 1
	codeGetStats           = 10
	codeGetSnapshot        = 11
	codeGetClusterMetadata = 12
	codeDescribeOptions    = 13
	codeLogin              = 40
	codePollMessages       = 100
	codeGetConsumerOffset  = 120
	codeGetStream          = 200
	codeGetStreams         = 201
	codeGetTopic           = 300
	codeGetTopics          = 301
	codeGetConsumerGroup   = 600
	codeSyncConsumerGroup  = 606
)

// startServer runs a server on a random loopback port with a temporary data
// directory and stops it when the test ends. Start returns once the listener is
// bound, so the address is ready to dial without waiting.
func startServer(t testing.TB) string {
	t.Helper()
	cfg := config.Default()
	cfg.TCPAddress = "127.0.0.1:0"
	cfg.HTTP.Address = "127.0.0.1:0"
	cfg.SystemPath = t.TempDir()
	cfg.ShardCount = 2
	cfg.PinCPUs = false
	trust := laneConfigure(t, &cfg)
	s, err := server.Start(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatalf("server.Start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	laneRegister(s.Addr().String(), trust)
	return s.Addr().String()
}

// rawConn is one TCP connection driven the way the Go SDK drives it: one request in
// flight, replies matched positionally and checked against the stamped request.
type rawConn struct {
	t    testing.TB
	conn net.Conn

	client         [16]byte // u128 on the wire: the 16 random bytes as they are
	requestCounter uint64   // starts at 1; advanced only by metadata writes and logout
	session        uint64   // 0 until a login binds it

	// requestChecksum, when set, stamps XxHash3-64(body) zero-extended to u128 at
	// header offset 144, as the Rust SDK does on metadata ops, Register and Logout.
	requestChecksum bool

	// replyTimeout bounds each read; 0 means readDeadline.
	replyTimeout time.Duration
}

func dial(t testing.TB, addr string) *rawConn {
	t.Helper()
	c := dialUnmanaged(t, addr)
	t.Cleanup(func() { c.conn.Close() })
	return c
}

// dialUnmanaged leaves closing the connection to the caller.
func dialUnmanaged(t testing.TB, addr string) *rawConn {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, readDeadline)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	c := &rawConn{t: t, conn: laneWrap(t, addr, conn), requestCounter: 1}
	c.mintClientID()
	return c
}

// dialRoot connects and logs in as iggy/iggy.
func dialRoot(t testing.TB, addr string) *rawConn {
	t.Helper()
	c := dial(t, addr)
	c.login("iggy", "iggy")
	return c
}

func (c *rawConn) mintClientID() {
	for c.client == [16]byte{} {
		if _, err := rand.Read(c.client[:]); err != nil {
			c.t.Fatalf("crypto/rand: %v", err)
		}
	}
}

// requestHeader writes the 256 bytes the SDK's vsr.EncodeRequestHeader writes:
// everything zero except size, command, client, request, operation, session and, for op
// 2 only, the command code at 196 (iggy.apache.org/docs/binary-protocol/framing).
func requestHeader(dst []byte, bodyLen int, client [16]byte, request uint64, operation uint8, session uint64, code uint32) {
	clear(dst[:headerSize])
	binary.LittleEndian.PutUint32(dst[48:], uint32(headerSize+bodyLen))
	dst[60] = commandRequest
	copy(dst[128:144], client[:])
	binary.LittleEndian.PutUint64(dst[168:], request)
	dst[176] = operation
	binary.LittleEndian.PutUint64(dst[184:], session)
	if operation == opNonReplicated {
		binary.LittleEndian.PutUint32(dst[196:], code)
	}
}

// frame is a stamped request, ready to write (and to write again unchanged).
type frame struct {
	bytes     []byte
	request   uint64
	operation uint8
}

// stamp numbers a request as the Go SDK does
// (iggy.apache.org/docs/binary-protocol/framing, "Request numbering"): Register carries
// request and session 0; reads and partition ops carry the current counter without
// advancing it; metadata writes and Logout use it and advance it.
func (c *rawConn) stamp(operation uint8, code uint32, body []byte) frame {
	var request, session uint64
	switch {
	case operation == opRegister:
		request, session = 0, 0
	case operation == opNonReplicated, operation >= opSendMessages:
		request, session = c.requestCounter, c.session
	default: // metadata writes (128..149) and Logout (3)
		request, session = c.requestCounter, c.session
		c.requestCounter++
	}
	b := make([]byte, headerSize+len(body))
	requestHeader(b, len(body), c.client, request, operation, session, code)
	copy(b[headerSize:], body)
	if c.requestChecksum && operation != opNonReplicated && operation < opSendMessages {
		binary.LittleEndian.PutUint64(b[144:], xxh3.Hash(body))
	}
	return frame{bytes: b, request: request, operation: operation}
}

// reply is one frame read back: a Reply (command 8) or an Eviction (command 13).
type reply struct {
	header    []byte
	body      []byte
	command   uint8
	operation uint8
	status    uint32
	reason    uint8 // eviction reason (byte 255)
}

func (r reply) String() string {
	if r.command == commandEviction {
		return fmt.Sprintf("eviction reason %d", r.reason)
	}
	return fmt.Sprintf("reply op %d status %d body % x", r.operation, r.status, r.body)
}

func (c *rawConn) write(f frame) {
	c.t.Helper()
	c.conn.SetWriteDeadline(time.Now().Add(readDeadline))
	if _, err := c.conn.Write(f.bytes); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// read reads one frame and applies the Go SDK's checks (apache/iggy
// foreign/go/internal/vsr): size within [256, 64 MiB], command 8 or 13, a reply's
// request echo equal to the stamped one, and a reply operation byte the SDK knows.
func (c *rawConn) read(f frame) reply {
	c.t.Helper()
	r, err := c.tryRead(f)
	if err != nil {
		c.t.Fatalf("request %d op %d: %v", f.request, f.operation, err)
	}
	return r
}

func (c *rawConn) tryRead(f frame) (reply, error) {
	header := make([]byte, headerSize)
	timeout := c.replyTimeout
	if timeout == 0 {
		timeout = readDeadline
	}
	c.conn.SetReadDeadline(time.Now().Add(timeout))
	if _, err := io.ReadFull(c.conn, header); err != nil {
		return reply{}, fmt.Errorf("read header: %w", err)
	}
	size := binary.LittleEndian.Uint32(header[48:])
	if size < headerSize || size > frameSizeMaxBytes {
		return reply{}, fmt.Errorf("frame size %d outside [256, 64 MiB]", size)
	}
	body := make([]byte, size-headerSize)
	if _, err := io.ReadFull(c.conn, body); err != nil {
		return reply{}, fmt.Errorf("read body of %d bytes: %w", len(body), err)
	}
	r := reply{header: header, body: body, command: header[60]}
	switch r.command {
	case commandEviction:
		if size != headerSize {
			return r, fmt.Errorf("eviction with a %d-byte body", size-headerSize)
		}
		r.reason = header[255]
		return r, nil
	case commandReply:
	default:
		return r, fmt.Errorf("command byte %d, want 8 or 13", r.command)
	}
	if echo := binary.LittleEndian.Uint64(header[200:]); echo != f.request {
		return r, fmt.Errorf("reply echoes request %d, sent %d (the SDK drops the connection)", echo, f.request)
	}
	r.operation = header[208]
	r.status = binary.LittleEndian.Uint32(header[216:])
	if !knownReplyOperation(r.operation) {
		return r, fmt.Errorf("reply operation byte %d unknown to the Go SDK", r.operation)
	}
	if r.status != 0 && len(body) != 0 {
		return r, fmt.Errorf("status %d with a %d-byte body (a denial's body must be empty)", r.status, len(body))
	}
	return r, nil
}

// knownReplyOperation is the Go SDK's accepted set (apache/iggy
// foreign/go/internal/vsr).
func knownReplyOperation(op uint8) bool {
	switch {
	case op <= 3, op >= 64 && op <= 68, op >= 128 && op <= 149, op >= 160 && op <= 162:
		return true
	}
	return false
}

// do sends one request and reads its reply.
func (c *rawConn) do(operation uint8, code uint32, body []byte) reply {
	c.t.Helper()
	f := c.stamp(operation, code, body)
	c.write(f)
	return c.read(f)
}

// get issues a non-replicated request (op 2, code at 196).
func (c *rawConn) get(code uint32, body []byte) reply {
	c.t.Helper()
	return c.do(opNonReplicated, code, body)
}

// outcome strips what the SDK strips (iggy.apache.org/docs/binary-protocol/framing,
// "Result section") and returns the typed payload and the error code the SDK would
// surface (0 on success). An eviction fails the test: no call site here expects one.
func (c *rawConn) outcome(r reply) (payload []byte, code uint32) {
	c.t.Helper()
	if r.command == commandEviction {
		c.t.Fatalf("unexpected %v", r)
	}
	if r.status != 0 {
		return nil, r.status
	}
	if !resultFramed(r.operation, r.body) {
		return r.body, 0
	}
	if len(r.body) < 4 {
		c.t.Fatalf("result-framed reply (op %d) of %d bytes: no result section", r.operation, len(r.body))
	}
	switch count := binary.LittleEndian.Uint32(r.body); count {
	case 0:
		return r.body[4:], 0
	case 1:
		if len(r.body) != 12 {
			c.t.Fatalf("rejection section of %d bytes, want exactly 12: % x", len(r.body), r.body)
		}
		if index := binary.LittleEndian.Uint32(r.body[4:]); index != 0 {
			c.t.Fatalf("rejection index %d, want 0", index)
		}
		code := binary.LittleEndian.Uint32(r.body[8:])
		if code == 0 {
			c.t.Fatalf("rejection section with result 0: % x", r.body)
		}
		return nil, code
	default:
		c.t.Fatalf("result section count %d: % x", count, r.body)
	}
	return nil, 0
}

// resultFramed is the SDKs' split_metadata_result rule (apache/iggy
// foreign/go/internal/vsr).
func resultFramed(op uint8, body []byte) bool {
	switch {
	case op == opRegister:
		return len(body) > 0
	case op >= 64 && op <= 68:
		return true
	case op >= 128 && op <= 149:
		return op != opDeleteSegments
	case op == opStoreConsumerOffset, op == opDeleteConsumerOffset:
		return true
	}
	return false
}

// ok runs a request and requires success, returning the payload.
func (c *rawConn) ok(what string, operation uint8, code uint32, body []byte) []byte {
	c.t.Helper()
	payload, errCode := c.outcome(c.do(operation, code, body))
	if errCode != 0 {
		c.t.Fatalf("%s: error code %d", what, errCode)
	}
	return payload
}

// fails runs a request and requires the SDK to surface wantCode.
func (c *rawConn) fails(what string, operation uint8, code uint32, body []byte, wantCode uint32) {
	c.t.Helper()
	r := c.do(operation, code, body)
	if _, got := c.outcome(r); got != wantCode {
		c.t.Fatalf("%s: got error code %d (%v), want %d", what, got, r, wantCode)
	}
}

// loginBody is the LoginRegister body byte for byte
// (iggy.apache.org/docs/binary-protocol/connection-lifecycle).
func loginBody(username, password string) []byte {
	b := binary.LittleEndian.AppendUint32(nil, protocolVersion0110)
	b = appendName(b, sdkName)
	b = appendName(b, sdkVersion)
	b = appendName(b, username)
	b = appendName(b, password)
	return binary.LittleEndian.AppendUint32(b, 0) // empty client context
}

// loginReply is LoginRegisterReply
// (iggy.apache.org/docs/binary-protocol/connection-lifecycle).
type loginReply struct {
	userID          uint32
	session         uint64
	protocolVersion uint32
	serverVersion   string
}

// login registers as the SDK does: a logout first when bound, then Register with
// request 0 and session 0 under a fresh client id, then bind the session.
func (c *rawConn) login(username, password string) loginReply {
	c.t.Helper()
	if c.session != 0 {
		c.ok("logout before login", opLogout, 0, nil)
		c.session = 0
	}
	c.client = [16]byte{}
	c.mintClientID()
	c.requestCounter = 1
	r := c.do(opRegister, codeLogin, loginBody(username, password))
	if r.command != commandReply || r.status != 0 || r.operation != opRegister {
		c.t.Fatalf("login %s: %v", username, r)
	}
	payload, code := c.outcome(r)
	if code != 0 {
		c.t.Fatalf("login %s: result %d", username, code)
	}
	d := decoder{t: c.t, what: "LoginRegisterReply", b: payload}
	lr := loginReply{userID: d.u32(), session: d.u64(), protocolVersion: d.u32(), serverVersion: d.name()}
	d.end()
	if lr.session == 0 {
		c.t.Fatalf("login reply carries session 0 (the SDK refuses it)")
	}
	c.session = lr.session
	return lr
}

// Request body pieces (iggy.apache.org/docs/binary-protocol/encodings).

func appendName(b []byte, s string) []byte { return append(append(b, byte(len(s))), s...) }

// numericID is Identifier kind 1: 01 04 <u32>.
func numericID(b []byte, id uint32) []byte {
	return binary.LittleEndian.AppendUint32(append(b, 1, 4), id)
}

// stringID is Identifier kind 2: 02 <len> <bytes>.
func stringID(b []byte, name string) []byte { return appendName(append(b, 2), name) }

func ids(values ...uint32) []byte {
	var b []byte
	for _, v := range values {
		b = numericID(b, v)
	}
	return b
}

func u32Body(b []byte, v uint32) []byte { return binary.LittleEndian.AppendUint32(b, v) }

// decoder reads a reply body by hand, failing the test on a short or long body.
type decoder struct {
	t    testing.TB
	what string
	b    []byte
	off  int
}

func (d *decoder) take(n int) []byte {
	d.t.Helper()
	if n < 0 || len(d.b)-d.off < n {
		d.t.Fatalf("%s: need %d bytes at offset %d of %d: % x", d.what, n, d.off, len(d.b), d.b)
	}
	s := d.b[d.off : d.off+n]
	d.off += n
	return s
}

func (d *decoder) u8() uint8   { d.t.Helper(); return d.take(1)[0] }
func (d *decoder) u16() uint16 { d.t.Helper(); return binary.LittleEndian.Uint16(d.take(2)) }
func (d *decoder) u32() uint32 { d.t.Helper(); return binary.LittleEndian.Uint32(d.take(4)) }
func (d *decoder) u64() uint64 { d.t.Helper(); return binary.LittleEndian.Uint64(d.take(8)) }

// name reads a u8-prefixed Name (1..255 bytes).
func (d *decoder) name() string {
	d.t.Helper()
	n := int(d.u8())
	if n == 0 {
		d.t.Fatalf("%s: empty Name at offset %d", d.what, d.off-1)
	}
	return string(d.take(n))
}

// str32 reads a u32-prefixed string.
func (d *decoder) str32() string { d.t.Helper(); return string(d.take(int(d.u32()))) }

func (d *decoder) done() bool { return d.off == len(d.b) }

func (d *decoder) end() {
	d.t.Helper()
	if !d.done() {
		d.t.Fatalf("%s: %d trailing bytes: % x", d.what, len(d.b)-d.off, d.b[d.off:])
	}
}
