package server

import (
	"fmt"
	"sync"
	"testing"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/shard"
	"github.com/iggy-shard/iggy-shard/wire"
)

// lentBodies sums the frames a node's stores hold on loan now and have taken.
func lentBodies(t *testing.T, s *Server) (out int, taken uint64) {
	t.Helper()
	var mu sync.Mutex
	err := s.rt.Inspect(testContext(t), func(sh *shard.Shard) {
		o, k := s.handlers[sh.Index()].owned.Store.LentBodies()
		mu.Lock()
		out, taken = out+o, taken+k
		mu.Unlock()
	})
	mustOK(t, "inspect", err)
	return out, taken
}

// TestClusterBackupsJournalLentFrames: the backups of a 3-node cluster journal
// the prepares of 1000-message batches in the frames they arrived in (lent to
// their stores, on the shard that received them or the one they were posted
// to), give every frame back once written, and hold the same messages as the
// primary, checksums intact (and the same state at the end:
// checkReplicatedStateAtEnd).
func TestClusterBackupsJournalLentFrames(t *testing.T) {
	servers := startCluster(t, clusterConfigs(t, 3, testClusterSecret))
	pc := dialCluster(t, servers[0])
	ctx := testContext(t)
	_, err := pc.CreateStream(ctx, "lend")
	mustOK(t, "create stream", err)
	const partitions, batches, perBatch = 4, 3, 1000
	_, err = pc.CreateTopic(ctx, client.NameID("lend"), "t", partitions, nil)
	mustOK(t, "create topic", err)
	backups := []*client.Client{dialCluster(t, servers[1]), dialCluster(t, servers[2])}
	poll := func(c *client.Client, p uint32) (wire.PolledMessages, error) {
		return c.PollMessagesCopy(ctx, &wire.PollMessages{Consumer: client.SingleConsumer(client.ID(1)), StreamID: client.NameID("lend"),
			TopicID: client.NameID("t"), Partition: wire.SomePartition(p), Strategy: wire.PollingStrategy{Kind: wire.PollingFirst},
			Count: batches * perBatch}, nil)
	}
	for _, c := range backups {
		waitUntil(t, "the topic reaches a backup", func() bool { _, err := poll(c, 0); return err == nil })
	}
	for p := range uint32(partitions) {
		for b := range batches {
			_, err := pc.SendMessages(ctx, client.NameID("lend"), client.NameID("t"),
				wire.Partitioning{Kind: wire.PartitioningPartitionID, PartitionID: p}, messagesOf(perBatch, 1000, fmt.Sprintf("p%d-b%d-", p, b)))
			mustOK(t, "send", err)
		}
	}
	for i, c := range backups {
		for p := range uint32(partitions) {
			var m wire.PolledMessages
			waitUntil(t, fmt.Sprintf("node %d holds partition %d", i+1, p), func() bool {
				m, err = poll(c, p)
				return err == nil && m.MessagesCount == batches*perBatch
			})
			mustOK(t, "checksums at a backup", m.Verify())
		}
	}
	for i, s := range servers[1:] {
		waitUntil(t, fmt.Sprintf("node %d gives every frame back", i+1), func() bool { out, _ := lentBodies(t, s); return out == 0 })
		if _, taken := lentBodies(t, s); taken == 0 {
			t.Fatalf("node %d journaled no prepare in its frame", i+1)
		} else {
			t.Logf("node %d: %d prepares journaled in their frames", i+1, taken)
		}
	}
}

// messagesOf is n messages of size bytes, each starting with prefix and its
// index.
func messagesOf(n, size int, prefix string) []client.Message {
	out := make([]client.Message, n)
	for i := range out {
		payload := make([]byte, size)
		copy(payload, fmt.Sprintf("%s%d", prefix, i))
		out[i] = client.Message{Payload: payload}
	}
	return out
}
