package shard

import (
	"encoding/binary"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/fdpass"
	"github.com/iggy-shard/iggy-shard/wire"
)

// facilityHandler answers every request with the connection's RemoteAddr and its
// shard as the reply body, and counts its turns (Ticker) and its stop (Stopper).
type facilityHandler struct {
	shard     *Shard
	wakeAtNs  int64
	woke      *atomic.Bool // a Tick ran at or after wakeAtNs
	ticks     int
	stopCount *atomic.Int32
}

func (h *facilityHandler) ServeRequest(c *Conn, req *Request) {
	body := []byte{byte(c.Shard().Index())}
	body = append(body, c.RemoteAddr().String()...)
	b, err := c.Reserve(256 + len(body))
	if err != nil {
		return
	}
	var r wire.ReplyHeader
	r.Size = uint32(256 + len(body))
	r.Command = wire.CommandReply
	r.Request = req.Header.Request
	r.Operation = wire.OperationNonReplicated
	r.Put(b)
	copy(b[256:], body)
}

func (h *facilityHandler) ServeMessage(*Shard, Message) {}
func (h *facilityHandler) ConnClosed(*Conn)             {}

func (h *facilityHandler) Tick(s *Shard) bool {
	h.ticks++
	if s.NowNs() >= h.wakeAtNs {
		h.woke.Store(true)
	}
	return false
}

func (h *facilityHandler) Stop(*Shard) { h.stopCount.Add(1) }

// Every connection, whichever shard it was handed to and however, knows its peer's
// address: the client's own local address.
func TestConnRemoteAddr(t *testing.T) {
	for _, mode := range []fdpass.Mode{fdpass.ModeMsgRing, fdpass.ModeQueue} {
		t.Run(mode.String(), func(t *testing.T) {
			var woke atomic.Bool
			var stops atomic.Int32
			rt := startTestRuntime(t, Config{ShardCount: 3, FdPass: mode, NewHandler: func(s *Shard) Handler {
				return &facilityHandler{shard: s, woke: &woke, stopCount: &stops, wakeAtNs: 1 << 62}
			}})
			shardsSeen := map[byte]bool{}
			for i := range 9 {
				c := dial(t, rt)
				if _, err := c.conn.Write(pingFrame(uint64(i))); err != nil {
					t.Fatal(err)
				}
				c.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
				if _, err := io.ReadFull(c.conn, c.buf[:]); err != nil {
					t.Fatal(err)
				}
				body := make([]byte, binary.LittleEndian.Uint32(c.buf[48:])-256)
				if _, err := io.ReadFull(c.conn, body); err != nil {
					t.Fatal(err)
				}
				shardsSeen[body[0]] = true
				if got, want := string(body[1:]), c.conn.LocalAddr().String(); got != want {
					t.Fatalf("connection %d on shard %d: RemoteAddr %q, client is %q", i, body[0], got, want)
				}
			}
			if len(shardsSeen) != 3 {
				t.Fatalf("connections landed on shards %v, want all three", shardsSeen)
			}
		})
	}
}

// An idle shard takes a turn when its handler asked for one with WakeAt, and every
// handler is told of the stop on its shard.
func TestWakeAtAndStop(t *testing.T) {
	var woke atomic.Bool
	var stops atomic.Int32
	cfg := Config{TCPAddress: "127.0.0.1:0", ShardCount: 2, Arena: testArenaConfig(), Logger: testLogger(t),
		NewHandler: func(s *Shard) Handler {
			h := &facilityHandler{shard: s, woke: &woke, stopCount: &stops, wakeAtNs: 1 << 62}
			if s.Index() == 1 {
				h.wakeAtNs = s.NowNs() + int64(20*time.Millisecond)
				s.WakeAt(h.wakeAtNs)
			}
			return h
		}}
	rt, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "a turn at the WakeAt deadline", woke.Load)
	if err := rt.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := stops.Load(); got != 2 {
		t.Fatalf("Stop called %d times, want once per shard (2)", got)
	}
}
