package shard

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/wire"
)

// largeTLSRequest is a 1 MiB GET_SNAPSHOT frame, which the test handler answers
// with its body, and that body.
func largeTLSRequest(seed uint64) (frame, body []byte) {
	body = make([]byte, 1<<20-256)
	fillRandom(body, seed)
	frame = requestHeader(len(body), wire.OperationNonReplicated, uint32(wire.CodeGetSnapshot), 1)
	copy(frame[256:], body)
	return frame, body
}

// arenaInUse is the buffers the shards of rt have out of their arenas.
func arenaInUse(t testing.TB, rt *Runtime) int {
	t.Helper()
	n := 0
	if err := rt.Inspect(context.Background(), func(s *Shard) { n += s.arena.InUseCount() }); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestTLSLargeFrameReadInLargeRecvs: once a large frame's body is awaited, a TLS
// connection reads its ciphertext in one-shot recvs into 64 KiB arena buffers
// (armRecvDirectTLS), and the frame, with a PING sealed into its last record,
// arrives whole, three times; once the connection is gone every buffer is back in
// its arena. Fails without the large recv: the recv it waits for is never armed.
func TestTLSLargeFrameReadInLargeRecvs(t *testing.T) {
	rt, s := startTLSRuntime(t, Config{})
	inUse := arenaInUse(t, rt)
	c := dialTLS(t, s, false)
	for i := range 3 {
		request, body := largeTLSRequest(uint64(i))
		records := c.records(append(request, pingFrame(uint64(i))...))
		head := 4 * (tlsRecordBytes + 22) // four records: the header is in, most of the body awaited
		c.write(records[:head])
		waitFor(t, 10*time.Second, "the large recv", func() bool { return recvDirectArmed(t, rt) })
		c.write(records[head:])
		header := c.readFrame()
		if size := binary.LittleEndian.Uint32(header[48:]); size != 256+uint32(len(body)) {
			t.Fatalf("reply %d size %d", i, size)
		}
		if got := c.readPlain(len(body)); !bytes.Equal(got, body) {
			t.Fatalf("reply %d: the body came back changed", i)
		}
		checkReply(t, c.readFrame(), uint64(i), 0)
	}
	c.conn.Close()
	waitFor(t, 10*time.Second, "the session ended", func() bool { return s.ended.Load() == 1 })
	waitFor(t, 10*time.Second, "the arena buffers back", func() bool { return arenaInUse(t, rt) == inUse })
}

// TestTLSPeerEndsDuringLargeRecv: a client that ends its connection in the middle
// of a record while the large recv waits for the rest, with a FIN or a reset, is
// closed (the FIN in order: the session reads an unexpected EOF), a bystander is
// served throughout, and the recv's buffer is back in its arena.
func TestTLSPeerEndsDuringLargeRecv(t *testing.T) {
	rt, s := startTLSRuntime(t, Config{ShardCount: 1})
	bystander := dialTLS(t, s, false)
	bystander.ping(100) // its standing buffers are out from here on
	inUse := arenaInUse(t, rt)
	for i, end := range []string{"FIN", "reset"} {
		t.Run(end, func(t *testing.T) {
			c := dialTLS(t, s, false)
			request, _ := largeTLSRequest(uint64(i))
			records := c.records(request)
			c.write(records[:4*(tlsRecordBytes+22)+100]) // four records and the start of a fifth
			waitFor(t, 10*time.Second, "the large recv", func() bool { return recvDirectArmed(t, rt) })
			tcp := c.conn.(*net.TCPConn)
			if end == "FIN" {
				tcp.CloseWrite()
				for { // bounded by the server's close (the read deadline fails the test)
					if _, _, err := c.readRecord(); err != nil {
						if !errors.Is(err, io.EOF) {
							t.Fatalf("after the FIN: %v, want the server's close", err)
						}
						break
					}
				}
			} else {
				tcp.SetLinger(0)
				tcp.Close()
			}
			waitFor(t, 10*time.Second, "the session ended", func() bool { return s.ended.Load() == int64(i+1) })
			bystander.ping(uint64(i))
			waitFor(t, 10*time.Second, "the arena buffers back", func() bool { return arenaInUse(t, rt) == inUse })
		})
	}
}

// TestTLSThrottledBeforeLargeFrame: a client that pipelines 64 requests for 1 MiB
// replies and then a 1 MiB frame, and reads nothing until the connection is
// throttled (its replies fill the send queue), gets every reply whole and in order
// once it reads: the ciphertext that came after the throttle waits, the
// connection resumes as the replies drain and reads the large frame in large
// recvs, and the buffers go back to the arena.
func TestTLSThrottledBeforeLargeFrame(t *testing.T) {
	rt, s := startTLSRuntime(t, Config{ShardCount: 1, SendQueueBytesMax: 2 << 20})
	inUse := arenaInUse(t, rt)
	c := dialTLS(t, s, false)
	const bigReplies = 64
	request, body := largeTLSRequest(5)
	plain := bytes.Repeat(requestHeader(0, wire.OperationNonReplicated, uint32(wire.CodeGetMe), 1), bigReplies)
	plain = append(append(plain, request...), pingFrame(9)...)
	records := c.records(plain)
	written := make(chan error, 1)
	go func() {
		c.conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
		_, err := c.conn.Write(records)
		written <- err
	}()
	waitFor(t, 10*time.Second, "the connection throttled", func() bool {
		throttled := false
		if err := rt.Inspect(context.Background(), func(s *Shard) {
			for _, conn := range s.clients.conns.items {
				if conn != nil && conn.tls != nil && conn.throttled {
					throttled = true
				}
			}
		}); err != nil {
			t.Fatal(err)
		}
		return throttled
	})
	for range bigReplies {
		c.readFrame()
		if got := c.readPlain(len(bigReplyBody)); !bytes.Equal(got, bigReplyBody) {
			t.Fatal("a GET_ME reply came back changed")
		}
	}
	header := c.readFrame()
	if size := binary.LittleEndian.Uint32(header[48:]); size != 256+uint32(len(body)) {
		t.Fatalf("the large frame's reply size %d", size)
	}
	if got := c.readPlain(len(body)); !bytes.Equal(got, body) {
		t.Fatal("the large frame's body came back changed")
	}
	checkReply(t, c.readFrame(), 9, 0)
	if err := <-written; err != nil {
		t.Fatal(err)
	}
	c.conn.Close()
	waitFor(t, 10*time.Second, "the session ended", func() bool { return s.ended.Load() == 1 })
	waitFor(t, 10*time.Second, "the arena buffers back", func() bool { return arenaInUse(t, rt) == inUse })
}
