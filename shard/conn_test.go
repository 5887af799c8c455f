package shard

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/wire"
)

// waitFor polls cond until it holds, failing the test after timeout. For conditions no
// event signals to the test (a count inside the runtime); every poll is bounded.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestBadInputEndsOnlyTheOffendingConnection(t *testing.T) {
	const frameSizeMax = 1 << 20
	garbage := make([]byte, 512)
	fillRandom(garbage, 1)
	binary.LittleEndian.PutUint32(garbage[48:], 300) // a plausible size, a garbage command
	tests := []struct {
		name     string
		send     []byte
		eviction wire.EvictionReason // 0: closed without an eviction
	}{
		{"size below header", headerWithSize(pingFrame(1), 255), wire.EvictionInvalidRequestBodySize},
		{"size zero", headerWithSize(pingFrame(1), 0), wire.EvictionInvalidRequestBodySize},
		{"size above max", headerWithSize(pingFrame(1), frameSizeMax+1), wire.EvictionInvalidRequestBodySize},
		{"reply command", withByte(pingFrame(1), 60, byte(wire.CommandReply)), wire.EvictionInvalidRequestOperation},
		{"replica command", withByte(pingFrame(1), 60, byte(wire.CommandPrepare)), wire.EvictionInvalidRequestOperation},
		{"garbage", garbage, wire.EvictionInvalidRequestOperation},
		{"release non-zero", withByte(pingFrame(1), 56, 1), wire.EvictionClientReleaseTooHigh},
		{"internal operation", withByte(pingFrame(1), 176, 64), wire.EvictionInvalidRequestOperation},
		{"operation zero", withByte(pingFrame(1), 176, 0), wire.EvictionInvalidRequestOperation},
		{"client id zero", withU64(pingFrame(1), 128, 0), wire.EvictionNoSession},
		{"legacy login code", requestHeader(0, wire.OperationNonReplicated, uint32(wire.CodeLoginUser), 1), wire.EvictionMalformedLogin},
		{"replicated without session", withU64(requestHeader(0, wire.OperationCreateStream, 0, 1), 184, 0), wire.EvictionNoSession},
	}
	rt := startTestRuntime(t, Config{FrameSizeMax: frameSizeMax})
	bystander := dial(t, rt)
	bystander.ping(1)
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := dial(t, rt)
			c.ping(7) // the connection works before it misbehaves
			if _, err := c.conn.Write(tt.send); err != nil {
				t.Fatal(err)
			}
			if tt.eviction != 0 {
				c.expectEvictionThenClose(tt.eviction)
			} else {
				c.expectClose()
			}
			bystander.ping(uint64(100 + i))
		})
	}
}

func headerWithSize(frame []byte, size uint32) []byte {
	binary.LittleEndian.PutUint32(frame[48:], size)
	return frame
}

func withByte(frame []byte, offset int, v byte) []byte {
	frame[offset] = v
	return frame
}

func withU64(frame []byte, offset int, v uint64) []byte {
	binary.LittleEndian.PutUint64(frame[offset:], v)
	return frame
}

// TestHeaderFaultsAnsweredWithStatus: faults that leave the session usable get a
// status reply echoing the request, and the connection keeps working.
func TestHeaderFaultsAnsweredWithStatus(t *testing.T) {
	rt := startTestRuntime(t, Config{})
	c := dial(t, rt)
	stamped := requestHeader(4, wire.OperationNonReplicated, uint32(wire.CodePing), 5)
	copy(stamped[256:], "body")
	binary.LittleEndian.PutUint64(stamped[144:], 12345) // a request_checksum that does not match
	tests := []struct {
		name   string
		frame  []byte
		status wire.ErrorCode
	}{
		{"reserved bytes", withByte(pingFrame(2), 220, 1), wire.ErrInvalidCommand},
		{"operation padding", withByte(pingFrame(3), 180, 1), wire.ErrInvalidCommand},
		// Unknown read codes are the handler's to answer after its session check;
		// this test's handler answers every non-PING read with 40.
		{"unknown code", requestHeader(0, wire.OperationNonReplicated, 9999, 4), wire.ErrUnauthenticated},
		{"replicated code as read", requestHeader(0, wire.OperationNonReplicated, uint32(wire.CodeCreateStream), 6), wire.ErrUnauthenticated},
		{"request checksum", stamped, wire.ErrInvalidFormat},
		{"not logged in", requestHeader(0, wire.OperationNonReplicated, uint32(wire.CodeGetStreams), 7), wire.ErrUnauthenticated},
	}
	for _, tt := range tests {
		if _, err := c.conn.Write(tt.frame); err != nil {
			t.Fatal(err)
		}
		request := binary.LittleEndian.Uint64(tt.frame[168:])
		checkReply(t, c.readFrame(), request, tt.status)
		c.ping(request + 100)
	}
}

func TestFrameTimeoutClosesHalfAHeader(t *testing.T) {
	rt := startTestRuntime(t, Config{FrameTimeout: 200 * time.Millisecond})
	bystander := dial(t, rt)
	c := dial(t, rt)
	start := time.Now()
	if _, err := c.conn.Write(pingFrame(1)[:100]); err != nil {
		t.Fatal(err)
	}
	c.expectClose()
	if elapsed := time.Since(start); elapsed < 200*time.Millisecond {
		t.Fatalf("closed after %v, before the 200ms frame timeout", elapsed)
	}
	bystander.ping(1)
}

// TestFrameTimeoutBoundsATrickle: a peer that sends one byte at a time keeps the
// connection active but never finishes its frame; the frame timeout counts from the
// frame's first byte.
func TestFrameTimeoutBoundsATrickle(t *testing.T) {
	rt := startTestRuntime(t, Config{FrameTimeout: 200 * time.Millisecond})
	c := dial(t, rt)
	frame := pingFrame(1)
	deadline := time.Now().Add(5 * time.Second)
	for i := 0; ; i++ {
		if time.Now().After(deadline) {
			t.Fatal("trickling connection still open after 5 s")
		}
		if _, err := c.conn.Write(frame[i%256 : i%256+1]); err != nil {
			return // closed by the server
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestIdleTimeout(t *testing.T) {
	rt := startTestRuntime(t, Config{IdleTimeout: 200 * time.Millisecond})
	c := dial(t, rt)
	start := time.Now()
	c.ping(1)
	c.expectClose()
	if elapsed := time.Since(start); elapsed < 200*time.Millisecond {
		t.Fatalf("closed after %v, before the 200ms idle timeout", elapsed)
	}
	waitFor(t, 5*time.Second, "no connections", func() bool { return rt.ConnectionCount() == 0 })
}

func TestConnectDisconnectLoop(t *testing.T) {
	rt := startTestRuntime(t, Config{})
	bystander := dial(t, rt)
	for i := range 300 {
		conn, err := net.DialTimeout("tcp", rt.Addr().String(), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		switch i % 3 {
		case 1: // half a header, then gone
			conn.Write(pingFrame(1)[:10])
		case 2: // a request, gone before the reply
			conn.Write(pingFrame(1))
		}
		conn.Close()
	}
	bystander.ping(1)
	waitFor(t, 5*time.Second, "only the bystander connected", func() bool { return rt.ConnectionCount() == 1 })
}

func TestCrossShardReply(t *testing.T) {
	rt := startTestRuntime(t, Config{ShardCount: 3})
	for i := range 6 { // connections land evenly on every shard
		c := dial(t, rt)
		for r := range uint64(5) {
			request := uint64(i)*100 + r
			if _, err := c.conn.Write(requestHeader(0, wire.OperationNonReplicated, uint32(wire.CodeGetStats), request)); err != nil {
				t.Fatal(err)
			}
			checkReply(t, c.readFrame(), request, 0)
		}
	}
}

func TestVectoredAndRetainedReplies(t *testing.T) {
	rt := startTestRuntime(t, Config{})
	c := dial(t, rt)
	for _, code := range []wire.CommandCode{wire.CodeGetSnapshot, wire.CodeGetClusterMetadata} {
		for _, bodyBytes := range []int{3, 1000, 100_000} {
			body := make([]byte, bodyBytes)
			fillRandom(body, uint64(bodyBytes))
			frame := requestHeader(bodyBytes, wire.OperationNonReplicated, uint32(code), 9)
			copy(frame[256:], body)
			if _, err := c.conn.Write(frame); err != nil {
				t.Fatal(err)
			}
			header := c.readFrame()
			if size := binary.LittleEndian.Uint32(header[48:]); size != uint32(256+bodyBytes) {
				t.Fatalf("code %v: reply size %d, want %d", code, size, 256+bodyBytes)
			}
			got := make([]byte, bodyBytes)
			if _, err := io.ReadFull(c.conn, got); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, body) {
				t.Fatalf("code %v, %d bytes: reply body differs", code, bodyBytes)
			}
		}
	}
	c.ping(1)
}

// TestSlowConsumerIsCutOff: a client pipelines requests for 1 MiB replies and never
// reads. The server stops serving its requests once its queue is past half the bound
// (memory stays bounded: one reply queued), closes the connection when the replies
// make no progress for SendTimeout, and serves a second client throughout. (Requests
// with small replies would show the same, but the kernel's socket buffers absorb
// megabytes of them first, and TCP's zero-window probing then sets the pace.)
func TestSlowConsumerIsCutOff(t *testing.T) {
	rt := startTestRuntime(t, Config{ShardCount: 1, SendQueueBytesMax: 2 << 20, SendTimeout: 300 * time.Millisecond})
	bystander := dial(t, rt)
	c := dial(t, rt)
	// 64 MiB of replies asked for: more than the kernel's socket buffers absorb.
	const requestCount = 64
	batch := bytes.Repeat(requestHeader(0, wire.OperationNonReplicated, uint32(wire.CodeGetMe), 1), requestCount)
	if _, err := c.conn.Write(batch); err != nil {
		t.Fatal(err)
	}
	bystander.ping(1)
	// Never read; keep writing until the server's close makes a write fail.
	c.conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	for {
		_, err := c.conn.Write(pingFrame(2))
		if isTimeout(err) {
			t.Fatal("connection not closed")
		}
		if err != nil {
			break
		}
	}
	bystander.ping(2)
}

// TestOversizedReplyIsSent: a reply the handler built, four times the send queue's
// bound, is sent whole: the bound limits what a connection is owed, never one reply.
func TestOversizedReplyIsSent(t *testing.T) {
	rt := startTestRuntime(t, Config{ShardCount: 1, SendQueueBytesMax: oversizedReplyBytes / 4})
	bystander := dial(t, rt)
	c := dial(t, rt)
	if _, err := c.conn.Write(requestHeader(0, wire.OperationNonReplicated, uint32(wire.CodeGetClients), 1)); err != nil {
		t.Fatal(err)
	}
	frame := c.readFrame()
	if size := binary.LittleEndian.Uint32(frame[48:]); size != 256+oversizedReplyBytes {
		t.Fatalf("reply size %d, want %d", size, 256+oversizedReplyBytes)
	}
	body := make([]byte, oversizedReplyBytes)
	c.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(c.conn, body); err != nil {
		t.Fatalf("reading the body: %v", err)
	}
	for i, b := range body {
		if b != byte(i/(64<<10)) {
			t.Fatalf("body byte %d is %d, want %d", i, b, byte(i/(64<<10)))
		}
	}
	c.ping(2)
	bystander.ping(1)
}

func fillRandom(b []byte, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 3))
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
}

// TestPipelinedRequestsUnderBackPressure: a client that pipelines many requests and
// reads its replies slowly is throttled (its recv cancelled) and resumed (re-armed) as
// it reads; every reply arrives, in order. The bound leaves room for what one receive
// delivers after the throttle (the kernel's multishot recv loops up to 32 buffers).
func TestPipelinedRequestsUnderBackPressure(t *testing.T) {
	rt := startTestRuntime(t, Config{ShardCount: 1, SendQueueBytesMax: 1 << 20})
	c := dial(t, rt)
	// All requests in one write, replies read one by one: the server produces faster
	// than the client consumes. (A tiny client receive buffer would make this
	// deterministic, but then TCP's zero-window probes, not the server, set the pace.)
	const requestCount = 40000
	requests := make([]byte, 0, requestCount*256)
	for i := range uint64(requestCount) {
		requests = append(requests, pingFrame(i)...)
	}
	go c.conn.Write(requests)
	reply := make([]byte, 256)
	c.conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	for i := range uint64(requestCount) {
		if _, err := io.ReadFull(c.conn, reply); err != nil {
			t.Fatalf("reply %d: %v", i, err)
		}
		checkReply(t, reply, i, 0)
	}
}

// TestHalfCloseAfterPipelining: a client that pipelines many requests and half-closes
// gets every reply before the server closes.
func TestHalfCloseAfterPipelining(t *testing.T) {
	rt := startTestRuntime(t, Config{ShardCount: 1, SendQueueBytesMax: 64 << 10})
	c := dial(t, rt)
	const requestCount = 20000
	requests := make([]byte, 0, requestCount*256)
	for i := range uint64(requestCount) {
		requests = append(requests, pingFrame(i)...)
	}
	go func() {
		c.conn.Write(requests)
		c.conn.(*net.TCPConn).CloseWrite()
	}()
	reply := make([]byte, 256)
	c.conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	for i := range uint64(requestCount) {
		if _, err := io.ReadFull(c.conn, reply); err != nil {
			t.Fatalf("reply %d: %v", i, err)
		}
		checkReply(t, reply, i, 0)
	}
	c.expectClose()
}

func TestEvictIncompatibleProtocolCarriesTheWindow(t *testing.T) {
	rt := startTestRuntime(t, Config{})
	c := dial(t, rt)
	if _, err := c.conn.Write(requestHeader(0, wire.OperationNonReplicated, uint32(wire.CodeGetPersonalAccessTokens), 1)); err != nil {
		t.Fatal(err)
	}
	frame := c.readFrame()
	if frame[60] != byte(wire.CommandEviction) || wire.EvictionReason(frame[255]) != wire.EvictionIncompatibleProtocol {
		t.Fatalf("command %d reason %d, want an IncompatibleProtocol eviction", frame[60], frame[255])
	}
	versionMax, versionMin := binary.LittleEndian.Uint32(frame[144:]), binary.LittleEndian.Uint32(frame[148:])
	if versionMax != uint32(wire.AcceptedProtocolWindow.Max) || versionMin != uint32(wire.AcceptedProtocolWindow.Min) {
		t.Fatalf("window [%d, %d], want %+v", versionMin, versionMax, wire.AcceptedProtocolWindow)
	}
	c.expectClose()
}

// TestCrossShardWakeupsUnderLoad hunts lost wake-ups: connections on every shard
// pipeline requests that each hop to the next shard and back (two Posts, two MSG_RING
// wake-ups) while other connections PING, with busy polling off so that every idle
// shard sleeps in io_uring_enter. A lost wake-up leaves a shard asleep until its next
// timer (seconds away), which the 2 s read deadline turns into a failure. Set
// IGGY_SHARD_STRESS to a duration (e.g. 5m) to run it for that long.
func TestCrossShardWakeupsUnderLoad(t *testing.T) {
	duration := 1500 * time.Millisecond
	if v := os.Getenv("IGGY_SHARD_STRESS"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("IGGY_SHARD_STRESS=%q: %v", v, err)
		}
		duration = d
	}
	rt := startTestRuntime(t, Config{ShardCount: 3, BusyPoll: -1})
	const connCount, pipelineDepth = 9, 4
	deadline := time.Now().Add(duration)
	var wg sync.WaitGroup
	var served atomic.Int64
	errs := make(chan error, connCount)
	for i := range connCount {
		conn, err := net.DialTimeout("tcp", rt.Addr().String(), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		code := wire.CodeGetStats
		if i%3 == 2 {
			code = wire.CodePing
		}
		wg.Go(func() {
			reply := make([]byte, 256)
			sent, received := uint64(0), uint64(0)
			for received < sent || time.Now().Before(deadline) {
				for sent-received < pipelineDepth && time.Now().Before(deadline) {
					if _, err := conn.Write(requestHeader(0, wire.OperationNonReplicated, uint32(code), sent)); err != nil {
						errs <- err
						return
					}
					sent++
				}
				if received == sent {
					break
				}
				conn.SetReadDeadline(time.Now().Add(2 * time.Second))
				if _, err := io.ReadFull(conn, reply); err != nil {
					errs <- fmt.Errorf("connection %d, request %d of %d (a lost wake-up?): %w", i, received, sent, err)
					return
				}
				if got := binary.LittleEndian.Uint64(reply[200:]); got != received {
					errs <- fmt.Errorf("connection %d: reply to request %d, want %d", i, got, received)
					return
				}
				received++
			}
			served.Add(int64(received))
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	t.Logf("%d requests in %v, six connections of nine hopping across shards", served.Load(), duration)
}
