package shard

import (
	"encoding/binary"
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

// TestRepliesLeaveInRequestOrder: one connection pipelines requests of which every
// other one is answered by another shard (GetStats hops there and back) and the
// rest at once (PING): the replies come back in the order of the requests, and the
// connection is never closed, though it owes more replies than it may (the
// throttle holds it).
func TestRepliesLeaveInRequestOrder(t *testing.T) {
	rt := startTestRuntime(t, Config{ShardCount: 2})
	c := dial(t, rt)
	const requestCount = 4 * owedRepliesMax
	var pipelined []byte
	for i := range requestCount {
		code := wire.CodePing
		if i%2 == 0 {
			code = wire.CodeGetStats
		}
		pipelined = append(pipelined, requestHeader(0, wire.OperationNonReplicated, uint32(code), uint64(i))...)
	}
	written := make(chan error, 1)
	go func() {
		_, err := c.conn.Write(pipelined)
		written <- err
	}()
	for i := range requestCount {
		frame := c.readFrame()
		if got := binary.LittleEndian.Uint64(frame[200:]); got != uint64(i) {
			t.Fatalf("reply %d answers request %d", i, got)
		}
	}
	if err := <-written; err != nil {
		t.Fatal(err)
	}
}

// TestEvictionAfterEarlierReplies: an eviction caused by request k leaves after the
// replies of the requests before k (some still on another shard when it is decided)
// and nothing follows it.
func TestEvictionAfterEarlierReplies(t *testing.T) {
	rt := startTestRuntime(t, Config{ShardCount: 2})
	c := dial(t, rt)
	var pipelined []byte
	for i := range 10 {
		pipelined = append(pipelined, requestHeader(0, wire.OperationNonReplicated, uint32(wire.CodeGetStats), uint64(i))...)
	}
	// testHandler evicts on GetPersonalAccessTokens (reason 14).
	pipelined = append(pipelined, requestHeader(0, wire.OperationNonReplicated, uint32(wire.CodeGetPersonalAccessTokens), 10)...)
	for i := 11; i < 20; i++ {
		pipelined = append(pipelined, requestHeader(0, wire.OperationNonReplicated, uint32(wire.CodeGetStats), uint64(i))...)
	}
	if _, err := c.conn.Write(pipelined); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		frame := c.readFrame()
		if frame[60] != byte(wire.CommandReply) || binary.LittleEndian.Uint64(frame[200:]) != uint64(i) {
			t.Fatalf("frame %d: command %d request %d, want the reply to request %d", i, frame[60],
				binary.LittleEndian.Uint64(frame[200:]), i)
		}
	}
	c.expectEvictionThenClose(wire.EvictionIncompatibleProtocol)
}
