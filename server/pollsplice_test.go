package server

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/partition"
	"github.com/iggy-shard/iggy-shard/shard"
	"github.com/iggy-shard/iggy-shard/wire"
)

// spliceServer starts a 2-shard server whose polls of at least minBytes are
// planned (trust: TrustWrites), with a stream "s" and its topic "t" of one
// partition, and a root client.
func spliceServer(t *testing.T, minBytes int64, trust bool) (*Server, *client.Client) {
	t.Helper()
	cfg := testConfig(t.TempDir(), 2)
	cfg.pollPlans = &partition.PlanConfig{ReplyBytesMin: minBytes, TrustWrites: trust}
	s := startTestServer(t, cfg)
	c := dialRoot(t, s)
	ctx := testContext(t)
	_, err := c.CreateStream(ctx, "s")
	mustOK(t, "create stream", err)
	// enforce_fsync: a batch is durable once acknowledged, and only durable
	// batches are planned (with the default save thresholds, one fdatasync a MiB).
	fsync, err := wire.AppendOption(nil, "enforce_fsync", wire.HeaderBool, []byte{1})
	mustOK(t, "options", err)
	_, err = c.CreateTopic(ctx, client.NameID("s"), "t", 1, fsync)
	mustOK(t, "create topic", err)
	return s, c
}

// sendSpliceBatches sends n batches of perBatch messages of size bytes, each
// payload telling its batch and message apart.
func sendSpliceBatches(t *testing.T, ctx context.Context, c *client.Client, n, perBatch, size int) {
	t.Helper()
	batch := make([]client.Message, perBatch)
	for b := range n {
		for i := range batch {
			payload := make([]byte, size)
			for k := range payload {
				payload[k] = byte(b*31 + i*7 + k)
			}
			batch[i] = client.Message{Payload: payload}
		}
		_, err := c.SendMessages(ctx, client.NameID("s"), client.NameID("t"), wire.Partitioning{Kind: wire.PartitioningPartitionID}, batch)
		mustOK(t, "send", err)
	}
}

// splicedReplies is the node's count of replies sent whole by splices.
func splicedReplies(t *testing.T, s *Server) uint64 {
	t.Helper()
	var n uint64
	ch := make(chan uint64, 8)
	err := s.rt.Inspect(testContext(t), func(sh *shard.Shard) { ch <- sh.Stats().SplicedReplies })
	mustOK(t, "inspect", err)
	close(ch)
	for v := range ch {
		n += v
	}
	return n
}

func pollFrom(offset uint64, count uint32) *wire.PollMessages {
	return &wire.PollMessages{Consumer: client.SingleConsumer(client.ID(1)), StreamID: client.NameID("s"), TopicID: client.NameID("t"),
		Partition: wire.SomePartition(0), Strategy: wire.PollingStrategy{Kind: wire.PollingOffset, Value: offset}, Count: count}
}

// TestPollSplicedEqualsCopied: with batches verified only when first read, a
// poll's first reply is copied (the read verifies them) and the same poll again
// is spliced from the segment file; the client decodes both, their checksums
// hold, and they are the same bytes.
func TestPollSplicedEqualsCopied(t *testing.T) {
	s, c := spliceServer(t, 4096, false)
	ctx := testContext(t)
	sendSpliceBatches(t, ctx, c, 8, 100, 1000)
	for _, tc := range []struct {
		offset uint64
		count  uint32
	}{{0, 800}, {100, 300}, {0, 10_000}, {700, 100}} {
		copied, err := c.PollMessagesCopy(ctx, pollFrom(tc.offset, tc.count), nil)
		mustOK(t, "first poll", err)
		mustOK(t, "first poll's checksums", copied.Verify())
		before := splicedReplies(t, s)
		spliced, err := c.PollMessagesCopy(ctx, pollFrom(tc.offset, tc.count), nil)
		mustOK(t, "second poll", err)
		mustOK(t, "spliced poll's checksums", spliced.Verify())
		if after := splicedReplies(t, s); after != before+1 {
			t.Fatalf("poll %d+%d: %d replies spliced, want 1 (%s)", tc.offset, tc.count, after-before, planStats(t, s))
		}
		if copied.PartitionID != spliced.PartitionID || copied.CurrentOffset != spliced.CurrentOffset ||
			copied.MessagesCount != spliced.MessagesCount || !bytes.Equal(copied.Records, spliced.Records) {
			t.Fatalf("poll %d+%d: spliced reply (%d messages, %d bytes) differs from the copy (%d messages, %d bytes)",
				tc.offset, tc.count, spliced.MessagesCount, len(spliced.Records), copied.MessagesCount, len(copied.Records))
		}
	}
	mustOK(t, "the connection goes on", c.Ping(ctx))
}

func planStats(t *testing.T, s *Server) string {
	var out []string
	var mu sync.Mutex
	s.rt.Inspect(testContext(t), func(sh *shard.Shard) {
		st := s.handlers[sh.Index()].owned.Store.PlanStats()
		mu.Lock()
		out = append(out, fmt.Sprintf("%+v", st))
		mu.Unlock()
	})
	return strings.Join(out, " ")
}
