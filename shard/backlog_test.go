package shard

import (
	"encoding/binary"
	"io"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/wire"
)

// backlogHandler throttles its connection on a GetStats and stashes what a kernel
// could still deliver before the cancel landed: pingsLanded PING frames, 2 MiB,
// more than the 1 MiB the backlog used to be capped at.
type backlogHandler struct{ testHandler }

const pingsLanded = 8192

func (h *backlogHandler) ServeRequest(c *Conn, req *Request) {
	if req.Header.NonReplicatedCode == wire.CodeGetStats {
		c.throttled = true
		c.cancelRecv()
		var landed []byte
		for r := range uint64(pingsLanded) {
			landed = append(landed, requestHeader(0, wire.OperationNonReplicated, uint32(wire.CodePing), 1000+r)...)
		}
		c.stash(landed)
	}
	h.testHandler.ServeRequest(c, req)
}

// TestBacklogHoldsWhatTheKernelDelivered: a throttled connection's receive backlog
// takes every byte the kernel delivered before the throttle's cancel took effect, up
// to the receive ring's size: the connection is not reset, and once its reply has
// drained the stashed requests are served, in order.
func TestBacklogHoldsWhatTheKernelDelivered(t *testing.T) {
	rt := startTestRuntime(t, Config{ShardCount: 1, NewHandler: func(s *Shard) Handler {
		return &backlogHandler{testHandler{shard: s}}
	}})
	c := dial(t, rt)
	if _, err := c.conn.Write(requestHeader(0, wire.OperationNonReplicated, uint32(wire.CodeGetStats), 1)); err != nil {
		t.Fatal(err)
	}
	// testHandler answers GetStats from the next shard, here itself; then the pings.
	frame := make([]byte, 256)
	c.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	for i := range 1 + pingsLanded {
		if _, err := io.ReadFull(c.conn, frame); err != nil {
			t.Fatalf("reply %d: %v (the connection was reset)", i, err)
		}
		want := uint64(1)
		if i > 0 {
			want = uint64(1000 + i - 1)
		}
		if got := binary.LittleEndian.Uint64(frame[200:]); got != want {
			t.Fatalf("reply %d answers request %d, want %d", i, got, want)
		}
	}
}
