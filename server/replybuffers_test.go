package server

import (
	"testing"
	"unsafe"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/wire"
)

// TestReplyBuffersBounded: the free list keeps at most replyBuffersKept buffers,
// none over replyBufferKeptMaxBytes, hands a kept one out again when it is large
// enough, and allocates otherwise.
func TestReplyBuffersBounded(t *testing.T) {
	r := newReplyBuffers()
	for range 3 * replyBuffersKept {
		r.giveBack(make([]byte, 10, 1<<20))
	}
	if n := len(r.free); n != replyBuffersKept {
		t.Fatalf("%d buffers kept, want %d", n, replyBuffersKept)
	}
	r = newReplyBuffers()
	r.giveBack(make([]byte, 0, replyBufferKeptMaxBytes+1))
	if n := len(r.free); n != 0 {
		t.Fatal("a buffer over the size kept was kept")
	}

	kept := make([]byte, 5, 1<<20)
	r.giveBack(kept)
	again := r.take(1000)
	if len(again) != 0 || unsafe.SliceData(again) != unsafe.SliceData(kept) {
		t.Fatal("a kept buffer large enough was not handed out again, empty")
	}
	r.giveBack(make([]byte, 0, 100))
	if b := r.take(1000); cap(b) < 1000 {
		t.Fatalf("a buffer too small handed out: cap %d", cap(b))
	}
	if b := r.take(replyBufferKeptMaxBytes + 1); cap(b) < replyBufferKeptMaxBytes+1 {
		t.Fatalf("cap %d for a reply over the size kept", cap(b))
	}
}

// TestDoPollReplyBufferReused: a poll's reply given back is the buffer the next
// poll's reply is written into.
func TestDoPollReplyBufferReused(t *testing.T) {
	s := testServer(t, t.TempDir(), 2)
	c := dialRoot(t, s)
	ctx := testContext(t)
	if _, err := c.CreateStream(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateTopic(ctx, client.NameID("s"), "t", 1, nil); err != nil {
		t.Fatal(err)
	}
	var bb wire.BatchBuilder
	bb.Reset(nil)
	for i := range 100 {
		if err := bb.Append(wire.Uint128{Lo: uint64(i + 1)}, 1, make([]byte, 1000), nil); err != nil {
			t.Fatal(err)
		}
	}
	batch, err := bb.Finish()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.SendBatch(ctx, client.NameID("s"), client.NameID("t"), wire.Partitioning{Kind: wire.PartitioningPartitionID}, batch); err != nil {
		t.Fatal(err)
	}
	req := wire.PollMessages{Consumer: client.SingleConsumer(client.ID(1)), StreamID: client.NameID("s"), TopicID: client.NameID("t"),
		Partition: wire.SomePartition(0), Count: 100, Strategy: wire.PollingStrategy{Kind: wire.PollingOffset}}
	body := appendBody(t, &req)
	first, err := s.Do(ctx, rootCaller(), wire.CodePollMessages, body)
	if err != nil || len(first) < 100*1000 {
		t.Fatalf("the first poll: %d bytes, %v", len(first), err)
	}
	s.GiveBack(first)
	second, err := s.Do(ctx, rootCaller(), wire.CodePollMessages, body)
	if err != nil || len(second) != len(first) {
		t.Fatalf("the second poll: %d bytes, %v", len(second), err)
	}
	if unsafe.SliceData(second) != unsafe.SliceData(first) {
		t.Fatal("the second poll's reply is not in the buffer the first gave back")
	}
}
