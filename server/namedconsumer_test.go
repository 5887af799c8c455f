package server

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/wire"
)

// A plain consumer named by a string (Consumer{Kind: single, ID: "orders-reader"},
// as the official SDKs allow) stores, reads and auto-commits its offset by name,
// under the id the reference gives the name (XXH32, seed 0): the same offsets answer
// to the number, they lie in offsets/consumers/{id}, and a restart finds them.
func TestNamedPlainConsumer(t *testing.T) {
	dir := t.TempDir()
	s := testServer(t, dir, 2)
	c := dialRoot(t, s)
	ctx := testContext(t)
	st, err := c.CreateStream(ctx, "orders")
	mustOK(t, "CreateStream", err)
	topic, err := c.CreateTopic(ctx, client.NameID("orders"), "events", 1, nil)
	mustOK(t, "CreateTopic", err)
	sendTo(t, c, "orders", "events", 0, messages(6, "m"))

	named := client.SingleConsumer(client.NameID("orders-reader"))
	hashed := client.SingleConsumer(client.ID(wire.XXH32([]byte("orders-reader"), 0)))
	storedOf := func(c *client.Client, consumer wire.Consumer) (uint64, bool) {
		t.Helper()
		off, ok, err := c.GetConsumerOffset(ctx, &wire.GetConsumerOffset{Consumer: consumer, StreamID: client.NameID("orders"),
			TopicID: client.NameID("events"), Partition: wire.SomePartition(0)})
		mustOK(t, "GetConsumerOffset", err)
		return off.StoredOffset, ok
	}
	pollNext := func(c *client.Client, count uint32) []uint64 {
		t.Helper()
		polled, err := c.PollMessages(ctx, &wire.PollMessages{Consumer: named, StreamID: client.NameID("orders"),
			TopicID: client.NameID("events"), Partition: wire.SomePartition(0), Strategy: wire.PollingStrategy{Kind: wire.PollingNext},
			Count: count, AutoCommit: true})
		mustOK(t, "PollMessages", err)
		var offsets []uint64
		for it := polled.Messages(); it.Next(); {
			offsets = append(offsets, it.Message().Offset)
		}
		return offsets
	}

	if _, ok := storedOf(c, named); ok {
		t.Fatal("a named consumer has an offset before it stored one")
	}
	storeOffsetOf(t, c, named, "orders", "events", 0, 1)
	if off, ok := storedOf(c, named); !ok || off != 1 {
		t.Fatalf("the named consumer reads %d (%v), want the 1 it stored", off, ok)
	}
	if off, ok := storedOf(c, hashed); !ok || off != 1 {
		t.Fatalf("consumer %d (the name's XXH32) reads %d (%v), want the name's 1", hashed.ID.Numeric, off, ok)
	}
	if _, ok := storedOf(c, client.SingleConsumer(client.NameID("another-reader"))); ok {
		t.Fatal("another name reads the named consumer's offset")
	}
	if got := pollNext(c, 2); len(got) != 2 || got[0] != 2 || got[1] != 3 {
		t.Fatalf("the named consumer's next poll gave offsets %v, want 2 and 3", got)
	}
	if off, ok := storedOf(c, named); !ok || off != 3 {
		t.Fatalf("after an auto-committed poll the named consumer reads %d (%v), want 3", off, ok)
	}
	file := filepath.Join(dir, "streams", strconv.Itoa(int(st.ID)), "topics", strconv.Itoa(int(topic.ID)), "partitions", "0",
		"offsets", "consumers", strconv.FormatUint(uint64(hashed.ID.Numeric), 10))
	if _, err := os.Stat(file); err != nil {
		t.Fatalf("the named consumer's offset is not where the reference keeps it: %v", err)
	}

	c.Close()
	stopServer(t, s)
	s = testServer(t, dir, 1)
	c = dialRoot(t, s)
	if off, ok := storedOf(c, named); !ok || off != 3 {
		t.Fatalf("after a restart the named consumer reads %d (%v), want 3", off, ok)
	}
	if got := pollNext(c, 10); len(got) != 2 || got[0] != 4 {
		t.Fatalf("after a restart the named consumer's next poll gave offsets %v, want 4 and 5", got)
	}
}
