package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/partition"
	"github.com/iggy-shard/iggy-shard/shard"
	"github.com/iggy-shard/iggy-shard/vsr"
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
// a failed effect). The user follows the leader (clusterUser): a stall of the
// test process may move it, and the partitions' groups with it.
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
	awaitAgreedLeader(t, servers)
	u := dialClusterUser(t, servers[0])
	st := u.createStream("orders")
	topic := u.createTopic("orders", "events", 2, nil)
	var group *wire.ConsumerGroupDetails
	u.must("CreateConsumerGroup", func(ctx context.Context, c *client.Client) (err error) {
		group, err = c.CreateConsumerGroup(ctx, client.NameID("orders"), client.NameID("events"), "readers")
		return err
	})
	u.join(client.NameID("orders"), client.NameID("events"), client.NameID("readers"))
	keys := []partition.Key{{StreamID: st.ID, TopicID: topic.ID, PartitionID: 0}, {StreamID: st.ID, TopicID: topic.ID, PartitionID: 1}}
	for _, k := range keys {
		u.sendTo("orders", "events", k.PartitionID, messages(5, "m"))
		u.storeOffsetOf(client.GroupConsumer(client.NameID("readers")), "orders", "events", k.PartitionID, 3)
		for i, s := range servers {
			waitUntil(t, fmt.Sprintf("node %d holds the group's offset on %v", i, k), func() bool { return groupOffsetAt(t, s, k, group.ID) })
		}
	}
	before := awaitPartitionViews(t, servers, keys)
	u.deleteGroup(client.NameID("orders"), client.NameID("events"), client.NameID("readers"))
	for _, k := range keys {
		for i, s := range servers {
			waitUntil(t, fmt.Sprintf("node %d drops the group's offset on %v", i, k), func() bool { return !groupOffsetAt(t, s, k, group.ID) })
		}
	}
	// Only the partitions' primaries proposed the deletions: the backups waited
	// for them. Where a group changed views meanwhile (a stall), each primary
	// of a view it went through may have proposed it, some more than once (a
	// proposal a view change cancelled is asked again).
	proposals := make([]int, len(servers))
	for i, s := range servers {
		var n atomic.Int64
		if err := s.rt.Inspect(testContext(t), func(sh *shard.Shard) {
			n.Add(int64(s.handlers[sh.Index()].owned.GroupOffsetProposals()))
		}); err != nil {
			t.Fatal(err)
		}
		proposals[i] = int(n.Load())
	}
	after := partitionViews(t, servers, keys) // read after the proposals: no later view proposed them
	want := make([]int, len(servers))
	mayPropose := make([]bool, len(servers))
	moved := false
	for j := range keys {
		if after[j] != before[j] {
			moved = true
			t.Logf("partition %v changed views while its offsets went: %+v, then %+v", keys[j], before[j], after[j])
		}
		want[before[j].primary]++
		for v := before[j].view; v <= after[j].view; v++ {
			mayPropose[v%uint32(len(servers))] = true
		}
	}
	for i, got := range proposals {
		switch {
		case !moved && got != want[i]:
			t.Errorf("node %d proposed %d deletions, want %d (the partitions' primaries: %+v)", i, got, want[i], before)
		case moved && got > 0 && !mayPropose[i]:
			t.Errorf("node %d proposed %d deletions, led no partition meanwhile (views %+v, then %+v)", i, got, before, after)
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

// partitionView is where a partition's group is: the view every node holds it in
// and the node that leads it (-1 when they disagree, or one is changing views).
type partitionView struct {
	view    uint32
	primary int
}

// partitionViews reads each key's group on every node.
func partitionViews(t *testing.T, servers []*Server, keys []partition.Key) []partitionView {
	t.Helper()
	views := make([]partitionView, len(keys))
	for j, k := range keys {
		views[j].primary = -1
		for i, s := range servers {
			var view uint32
			var normal, primary bool
			err := s.rt.Inspect(testContext(t), func(sh *shard.Shard) {
				if sh.Index() == s.ownerOf(k) {
					if core := s.handlers[sh.Index()].owned.Store.SimCore(k); core != nil {
						view, normal, primary = core.View(), core.Status() == vsr.StatusNormal, core.IsPrimary()
					}
				}
			})
			if err != nil {
				t.Fatalf("Inspect: %v", err)
			}
			if i > 0 && view != views[j].view || !normal {
				views[j] = partitionView{view: max(view, views[j].view), primary: -1}
				break
			}
			views[j].view = view
			if primary {
				views[j].primary = i
			}
		}
	}
	return views
}

// awaitPartitionViews waits until every node holds each key's group in one view
// in normal status, and returns the views.
func awaitPartitionViews(t *testing.T, servers []*Server, keys []partition.Key) []partitionView {
	t.Helper()
	var views []partitionView
	waitUntil(t, "the partitions' groups settle in a view", func() bool {
		views = partitionViews(t, servers, keys)
		for _, v := range views {
			if v.primary < 0 {
				return false
			}
		}
		return true
	})
	return views
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
