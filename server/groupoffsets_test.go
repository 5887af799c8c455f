package server

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/partition"
	"github.com/iggy-shard/iggy-shard/shard"
	"github.com/iggy-shard/iggy-shard/wire"
)

// groupOffsetAt reports whether s holds group's stored offset on k.
func groupOffsetAt(t *testing.T, s *Server, k partition.Key, group uint32) bool {
	t.Helper()
	held := false
	err := s.rt.Inspect(testContext(t), func(sh *shard.Shard) {
		if sh.Index() == s.ownerOf(k) {
			_, held, _ = s.handlers[sh.Index()].owned.Store.ConsumerOffset(k, partition.Consumer{Kind: wire.ConsumerGroup, ID: group})
		}
	})
	if err != nil {
		t.Fatalf("Inspect: %v", err)
	}
	return held
}

// TestClusterDeletedGroupOffsetsGoQuietly: a consumer group with stored offsets
// is deleted in a 3-node cluster: every node drops its offsets, the backups by
// the primary's replicated deletion, and no node logs an error (each backup's
// store refuses the deletion it cannot propose, 58, which used to be logged as
// a failed effect).
func TestClusterDeletedGroupOffsetsGoQuietly(t *testing.T) {
	cfgs := clusterConfigs(t, 3, testClusterSecret)
	servers := make([]*Server, len(cfgs))
	logs := make([]*lockedBuffer, len(cfgs))
	for i := range cfgs {
		logs[i] = &lockedBuffer{}
		s, err := start(cfgs[i], slog.New(slog.NewTextHandler(io.MultiWriter(logs[i]), nil)))
		if err != nil {
			t.Fatal(err)
		}
		servers[i] = s
		t.Cleanup(func() { stopServer(t, s) })
	}
	waitUntil(t, "the cluster forms", func() bool { l, ok := agreedLeader(servers); return ok && l == 0 })
	ctx := testContext(t)
	pc := dialCluster(t, servers[0])
	st, err := pc.CreateStream(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	topic, err := pc.CreateTopic(ctx, client.NameID("orders"), "events", 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	group, err := pc.CreateConsumerGroup(ctx, client.NameID("orders"), client.NameID("events"), "readers")
	if err != nil {
		t.Fatal(err)
	}
	if err := pc.JoinConsumerGroup(ctx, client.NameID("orders"), client.NameID("events"), client.NameID("readers")); err != nil {
		t.Fatal(err)
	}
	keys := []partition.Key{{StreamID: st.ID, TopicID: topic.ID, PartitionID: 0}, {StreamID: st.ID, TopicID: topic.ID, PartitionID: 1}}
	for _, k := range keys {
		to := wire.Partitioning{Kind: wire.PartitioningPartitionID, PartitionID: k.PartitionID}
		if _, err := pc.SendMessages(ctx, client.NameID("orders"), client.NameID("events"), to, messages(5, "m")); err != nil {
			t.Fatal(err)
		}
		err := pc.StoreConsumerOffset(ctx, &wire.StoreConsumerOffset{Consumer: client.GroupConsumer(client.NameID("readers")),
			StreamID: client.NameID("orders"), TopicID: client.NameID("events"), Partition: wire.SomePartition(k.PartitionID), Offset: 3, Ack: wire.AckQuorum})
		if err != nil {
			t.Fatalf("StoreConsumerOffset on %v: %v", k, err)
		}
		for i, s := range servers {
			waitUntil(t, fmt.Sprintf("node %d holds the group's offset on %v", i, k), func() bool { return groupOffsetAt(t, s, k, group.ID) })
		}
	}
	if err := pc.DeleteConsumerGroup(ctx, client.NameID("orders"), client.NameID("events"), client.NameID("readers")); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		for i, s := range servers {
			waitUntil(t, fmt.Sprintf("node %d drops the group's offset on %v", i, k), func() bool { return !groupOffsetAt(t, s, k, group.ID) })
		}
	}
	// Only the partitions' primary (node 0, of view 0) proposed the deletions:
	// the backups waited for them.
	for i, s := range servers {
		var proposals atomic.Int64
		if err := s.rt.Inspect(ctx, func(sh *shard.Shard) {
			proposals.Add(int64(s.handlers[sh.Index()].owned.GroupOffsetProposals()))
		}); err != nil {
			t.Fatal(err)
		}
		if want := map[bool]int{true: len(keys), false: 0}[i == 0]; int(proposals.Load()) != want {
			t.Errorf("node %d proposed %d deletions, want %d", i, proposals.Load(), want)
		}
	}
	for i, l := range logs {
		for _, line := range strings.Split(l.String(), "\n") {
			if strings.Contains(line, "level=ERROR") {
				t.Errorf("node %d: %s", i, line)
			}
		}
	}
}

// A deleted group's offset deletion asked again (a store refused it with 58)
// after its topic was deleted and created again under the same ids leaves the new
// topic's group of the same id alone: it was for the old partition, and is over with
// it. The deletion is put in the retry list directly, with its op's revision before
// the partition's creation.
func TestGroupOffsetDeleteAskedAgainSparesARecreatedTopic(t *testing.T) {
	s := testServer(t, t.TempDir(), 2)
	c := dialRoot(t, s)
	ctx := testContext(t)
	st, err := c.CreateStream(ctx, "orders")
	mustOK(t, "CreateStream", err)
	topic, err := c.CreateTopic(ctx, client.NameID("orders"), "events", 1, nil)
	mustOK(t, "CreateTopic", err)
	g, err := c.CreateConsumerGroup(ctx, client.NameID("orders"), client.NameID("events"), "readers")
	mustOK(t, "CreateConsumerGroup", err)
	mustOK(t, "JoinConsumerGroup", c.JoinConsumerGroup(ctx, client.NameID("orders"), client.NameID("events"), client.NameID("readers")))
	sendTo(t, c, "orders", "events", 0, messages(1, "m"))
	mustOK(t, "StoreConsumerOffset", c.StoreConsumerOffset(ctx, &wire.StoreConsumerOffset{Consumer: client.GroupConsumer(client.ID(g.ID)),
		StreamID: client.NameID("orders"), TopicID: client.NameID("events"), Partition: wire.SomePartition(0), Offset: 0}))
	k := partition.Key{StreamID: st.ID, TopicID: topic.ID, PartitionID: 0}
	if !groupOffsetAt(t, s, k, g.ID) {
		t.Fatal("the group's offset is not stored")
	}
	onOwner := func(fn func(h *handler)) {
		t.Helper()
		err := s.rt.Inspect(ctx, func(sh *shard.Shard) {
			if sh.Index() == s.ownerOf(k) {
				fn(s.handlers[sh.Index()])
			}
		})
		mustOK(t, "Inspect", err)
	}
	// The deletion of an older partition of the same ids, due now.
	onOwner(func(h *handler) {
		createdAt, _ := h.owned.OpenCreatedAt(k)
		h.owned.QueueGroupOffsetDelete(k, g.ID, createdAt-1)
	})
	waitUntil(t, "the deletion is asked again", func() (asked bool) {
		onOwner(func(h *handler) { asked = h.owned.GroupOffsetDeletes() == 0 })
		return asked
	})
	if !groupOffsetAt(t, s, k, g.ID) {
		t.Fatal("a deletion meant for an older partition of the same ids deleted the new group's offset")
	}
}
