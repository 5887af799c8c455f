package server

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/partition"
	"github.com/iggy-shard/iggy-shard/partitiondir"
	"github.com/iggy-shard/iggy-shard/partitionhost"
	"github.com/iggy-shard/iggy-shard/shard"
	"github.com/iggy-shard/iggy-shard/wire"
)

// A full restart of a cluster applies the committed metadata ops above each node's
// snapshot again, with their partition effects (partitionhost/record.go): none of them
// may lose or take away what the partitions held. Each test below runs a 3-node
// cluster at the production snapshot interval (960 ops), so that everything it does
// lies above the snapshots, restarts every node at once, and then asks every node
// alone for what it serves: the messages and the stored consumer offsets.

// startEffectsCluster starts a 3-node cluster that snapshots its metadata every
// snapshotIntervalOps ops.
func startEffectsCluster(t *testing.T, snapshotIntervalOps uint64) ([]setup, []*Server) {
	t.Helper()
	cfgs := clusterConfigs(t, 3, testClusterSecret)
	for i := range cfgs {
		cfgs[i].SnapshotIntervalOps = snapshotIntervalOps
	}
	return cfgs, startCluster(t, cfgs)
}

// restartAllAtOnce stops every node together (a SIGTERM to each) and starts them
// again on their data directories; it returns the primary they agree on.
func restartAllAtOnce(t *testing.T, cfgs []setup, servers []*Server) uint8 {
	t.Helper()
	var wg sync.WaitGroup
	for _, s := range servers {
		wg.Go(func() { stopServer(t, s) })
	}
	wg.Wait()
	for i := range cfgs {
		servers[i] = startTestServer(t, cfgs[i])
	}
	var leader uint8
	waitUntil(t, "the restarted cluster elects", func() (ok bool) { leader, ok = agreedLeader(servers); return ok })
	return leader
}

// heldPartition names a partition, and the consumer group whose offset is read
// with consumer 7's ("" for none).
type heldPartition struct {
	stream, topic string
	partition     uint32
	group         string
}

// heldAt is what c's node serves of p, asked there alone: every message (offset and
// payload) and the stored offsets.
func heldAt(t *testing.T, c *client.Client, p heldPartition) (string, error) {
	ctx := testContext(t)
	polled, err := c.PollMessages(ctx, &wire.PollMessages{Consumer: client.SingleConsumer(client.ID(1)),
		StreamID: client.NameID(p.stream), TopicID: client.NameID(p.topic), Partition: wire.SomePartition(p.partition),
		Strategy: wire.PollingStrategy{Kind: wire.PollingOffset}, Count: 1000})
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString("messages")
	for it := polled.Messages(); it.Next(); {
		m := it.Message()
		fmt.Fprintf(&b, " %d=%q", m.Offset, m.Frame.Payload())
	}
	consumers := []wire.Consumer{client.SingleConsumer(client.ID(7))}
	if p.group != "" {
		consumers = append(consumers, client.GroupConsumer(client.NameID(p.group)))
	}
	for _, consumer := range consumers {
		off, ok, err := c.GetConsumerOffset(ctx, &wire.GetConsumerOffset{Consumer: consumer, StreamID: client.NameID(p.stream),
			TopicID: client.NameID(p.topic), Partition: wire.SomePartition(p.partition)})
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "; %v stored", consumer.Kind)
		if ok {
			fmt.Fprintf(&b, " %d", off.StoredOffset)
		} else {
			b.WriteString(" none")
		}
	}
	return b.String(), nil
}

// awaitEveryNodeHolds waits until every node, asked alone, serves want of each
// partition (held).
func awaitEveryNodeHolds(t *testing.T, servers []*Server, what string, want []string, held func(*client.Client, int) (string, error)) {
	t.Helper()
	for n, s := range servers {
		c := dialCluster(t, s)
		for i := range want {
			var got string
			var err error
			deadline := time.Now().Add(clusterWait)
			for {
				if got, err = held(c, i); err == nil && got == want[i] {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s: node %d serves\n%s (%v)\nwant\n%s", what, n, got, err, want[i])
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
	}
}

// openAsViewed reports how s's partitions differ from what each shard's view of
// the metadata names: every partition it names open on its owner, in the
// incarnation it names (created_at), and no other; "" when they agree.
func openAsViewed(t *testing.T, s *Server) string {
	t.Helper()
	var mu sync.Mutex
	var diffs []string
	err := s.rt.Inspect(testContext(t), func(sh *shard.Shard) {
		h := s.handlers[sh.Index()]
		h.catchUpView()
		named := make(map[partition.Key]bool)
		partitionhost.EachPartition(h.view.State, func(k partition.Key, _ partition.Config, createdAt, _ uint64) {
			if s.ownerOf(k) != h.index {
				return
			}
			named[k] = true
			if got, _ := h.owned.OpenCreatedAt(k); got != createdAt {
				mu.Lock()
				diffs = append(diffs, fmt.Sprintf("%v open as created at %d, the view's was created at %d", k, got, createdAt))
				mu.Unlock()
			}
		})
		for _, k := range h.owned.Store.Keys(nil) {
			if !named[k] {
				mu.Lock()
				diffs = append(diffs, fmt.Sprintf("%v open, not in the view", k))
				mu.Unlock()
			}
		}
	})
	if err != nil {
		t.Fatalf("Inspect: %v", err)
	}
	return strings.Join(diffs, "; ")
}

// awaitOpenAsViewed waits until every node's partitions are open as its views
// name them (openAsViewed).
func awaitOpenAsViewed(t *testing.T, servers []*Server) {
	t.Helper()
	for i, s := range servers {
		var diff string
		deadline := time.Now().Add(clusterWait)
		for diff = openAsViewed(t, s); diff != ""; diff = openAsViewed(t, s) {
			if time.Now().After(deadline) {
				t.Fatalf("node %d: %s", i, diff)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// heldOnEveryNode is awaitEveryNodeHolds for partitions read with heldAt.
func heldOnEveryNode(t *testing.T, servers []*Server, what string, parts []heldPartition, want []string) {
	t.Helper()
	awaitEveryNodeHolds(t, servers, what, want, func(c *client.Client, i int) (string, error) { return heldAt(t, c, parts[i]) })
}

// heldNow reads what the primary serves of each partition.
func heldNow(t *testing.T, c *client.Client, parts []heldPartition) []string {
	t.Helper()
	held := make([]string, len(parts))
	for i, p := range parts {
		var err error
		if held[i], err = heldAt(t, c, p); err != nil {
			t.Fatalf("read %v: %v", p, err)
		}
	}
	return held
}

func sendTo(t *testing.T, c *client.Client, stream, topic string, partition uint32, msgs []client.Message) {
	t.Helper()
	mustOK(t, "SendMessages", sendToPartition(testContext(t), c, stream, topic, partition, msgs))
}

func sendToPartition(ctx context.Context, c *client.Client, stream, topic string, partition uint32, msgs []client.Message) error {
	_, err := c.SendMessages(ctx, client.NameID(stream), client.NameID(topic),
		wire.Partitioning{Kind: wire.PartitioningPartitionID, PartitionID: partition}, msgs)
	return err
}

func storeOffsetOf(t *testing.T, c *client.Client, consumer wire.Consumer, stream, topic string, partition uint32, offset uint64) {
	t.Helper()
	mustOK(t, "StoreConsumerOffset", storeOffset(testContext(t), c, consumer, stream, topic, partition, offset))
}

func storeOffset(ctx context.Context, c *client.Client, consumer wire.Consumer, stream, topic string, partition uint32, offset uint64) error {
	return c.StoreConsumerOffset(ctx, &wire.StoreConsumerOffset{Consumer: consumer, StreamID: client.NameID(stream),
		TopicID: client.NameID(topic), Partition: wire.SomePartition(partition), Offset: offset, Ack: wire.AckQuorum})
}

// A topic created, written to and read from (stored offsets) keeps every message
// and offset: the creation applied again opens its partitions, never clears them.
func TestClusterFullRestartKeepsANewTopic(t *testing.T) {
	cfgs, servers := startEffectsCluster(t, defaultSetup().SnapshotIntervalOps)
	u := dialClusterUser(t, servers[0])
	u.createStream("orders")
	u.createTopic("orders", "events", 3, nil)
	var parts []heldPartition
	for p := uint32(0); p < 3; p++ {
		u.sendTo("orders", "events", p, messages(int(p)+2, fmt.Sprintf("partition %d", p)))
		u.storeOffsetOf(client.SingleConsumer(client.ID(7)), "orders", "events", p, uint64(p))
		parts = append(parts, heldPartition{stream: "orders", topic: "events", partition: p})
	}
	want := heldNow(t, u.c, parts)
	heldOnEveryNode(t, servers, "before the restart", parts, want)

	restartAllAtOnce(t, cfgs, servers)
	heldOnEveryNode(t, servers, "after a full restart", parts, want)
	awaitOpenAsViewed(t, servers)
}

// A purge applied again does not purge the messages written after it.
func TestClusterFullRestartDoesNotPurgeAgain(t *testing.T) {
	cfgs, servers := startEffectsCluster(t, defaultSetup().SnapshotIntervalOps)
	u := dialClusterUser(t, servers[0])
	u.createStream("orders")
	u.createTopic("orders", "events", 2, nil)
	for p := uint32(0); p < 2; p++ {
		u.sendTo("orders", "events", p, messages(3, "purged"))
	}
	u.must("PurgeTopic", func(ctx context.Context, c *client.Client) error {
		return c.PurgeTopic(ctx, client.NameID("orders"), client.NameID("events"))
	})
	// And a purge of the whole stream, a second generation.
	for p := uint32(0); p < 2; p++ {
		u.sendTo("orders", "events", p, messages(2, "purged too"))
	}
	u.must("PurgeStream", func(ctx context.Context, c *client.Client) error { return c.PurgeStream(ctx, client.NameID("orders")) })
	var parts []heldPartition
	for p := uint32(0); p < 2; p++ {
		u.sendTo("orders", "events", p, messages(4, "kept"))
		u.storeOffsetOf(client.SingleConsumer(client.ID(7)), "orders", "events", p, 2)
		parts = append(parts, heldPartition{stream: "orders", topic: "events", partition: p})
	}
	want := heldNow(t, u.c, parts)
	if !strings.Contains(want[0], `"kept 3"`) || strings.Contains(want[0], "purged") {
		t.Fatalf("before the restart partition 0 holds %s", want[0])
	}
	heldOnEveryNode(t, servers, "before the restart", parts, want)

	restartAllAtOnce(t, cfgs, servers)
	heldOnEveryNode(t, servers, "after a full restart", parts, want)
	awaitOpenAsViewed(t, servers)
}

// segmentsAt is what c's node serves of partition 0 of orders/events: its
// segments, messages and current offset (GetTopic), and the first message a poll
// from offset 0 finds.
func segmentsAt(t *testing.T, c *client.Client) (string, error) {
	ctx := testContext(t)
	topic, err := c.GetTopic(ctx, client.NameID("orders"), client.NameID("events"))
	if err != nil {
		return "", err
	}
	p := topic.Partitions[0]
	polled, err := c.PollMessages(ctx, &wire.PollMessages{Consumer: client.SingleConsumer(client.ID(1)),
		StreamID: client.NameID("orders"), TopicID: client.NameID("events"), Partition: wire.SomePartition(0),
		Strategy: wire.PollingStrategy{Kind: wire.PollingOffset}, Count: 1})
	if err != nil {
		return "", err
	}
	first := "none"
	if it := polled.Messages(); it.Next() {
		first = fmt.Sprint(it.Message().Offset)
	}
	off, ok, err := c.GetConsumerOffset(ctx, &wire.GetConsumerOffset{Consumer: client.SingleConsumer(client.ID(7)),
		StreamID: client.NameID("orders"), TopicID: client.NameID("events"), Partition: wire.SomePartition(0)})
	if err != nil || !ok {
		return "", fmt.Errorf("consumer 7's offset: %v %v", ok, err)
	}
	return fmt.Sprintf("segments=%d messages=%d current=%d first=%s stored=%d", p.SegmentsCount, p.MessagesCount,
		p.CurrentOffset, first, off.StoredOffset), nil
}

// A DeleteSegments applied again does not delete the next oldest segments.
func TestClusterFullRestartDoesNotDeleteSegmentsAgain(t *testing.T) {
	cfgs, servers := startEffectsCluster(t, defaultSetup().SnapshotIntervalOps)
	u := dialClusterUser(t, servers[0])
	u.createStream("orders")
	options, err := client.TopicOptions{SegmentSizeBytes: wire.TopicSegmentSizeBytesMin}.Block()
	mustOK(t, "TopicOptions", err)
	u.createTopic("orders", "events", 1, options)
	// Five segments of 1 MiB and a bit, and the open one.
	payload := strings.Repeat("x", 100<<10)
	for range 6 {
		batch := make([]client.Message, 11)
		for i := range batch {
			batch[i] = client.Message{Payload: []byte(payload)}
		}
		u.sendTo("orders", "events", 0, batch)
	}
	u.storeOffsetOf(client.SingleConsumer(client.ID(7)), "orders", "events", 0, 40)
	u.must("DeleteSegments", func(ctx context.Context, c *client.Client) error {
		return c.DeleteSegments(ctx, client.NameID("orders"), client.NameID("events"), 0, 2)
	})
	held := func(c *client.Client, _ int) (string, error) { return segmentsAt(t, c) }
	// The reply leaves once the metadata op commits; the segments go when the
	// partition's own op, which the primary proposes then, applies
	// (partition/deletesegments.go): a round trip later.
	// segmentsAt reads the topic, then polls: the two can straddle the
	// deletion (the topic's counts from before, the first offset from after),
	// so the state is the one read twice alike once the first ones are gone.
	var want, last string
	for deadline := time.Now().Add(clusterWait); ; time.Sleep(20 * time.Millisecond) {
		want, err = segmentsAt(t, u.c)
		mustOK(t, "segments at the primary", err)
		if !strings.Contains(want, "first=0 ") && want == last || time.Now().After(deadline) {
			break
		}
		last = want
	}
	if strings.HasPrefix(want, "segments=1 ") || strings.Contains(want, "first=0 ") {
		t.Fatalf("the primary's partition after DeleteSegments: %s, want sealed segments left and the first ones gone", want)
	}
	awaitEveryNodeHolds(t, servers, "before the restart", []string{want}, held)

	restartAllAtOnce(t, cfgs, servers)
	awaitEveryNodeHolds(t, servers, "after a full restart", []string{want}, held)
	awaitOpenAsViewed(t, servers)
}

// A topic deleted and created again under the same ids (the lowest free ones)
// keeps the new one's messages and offsets: the old one's creation, consumer
// group deletion and deletion, applied again, touch nothing of the new one.
func TestClusterFullRestartKeepsARecreatedTopic(t *testing.T) {
	cfgs, servers := startEffectsCluster(t, defaultSetup().SnapshotIntervalOps)
	u := dialClusterUser(t, servers[0])
	u.createStream("orders")
	old, recreated := recreateTopic(u, nil)
	if old.ID != recreated.ID {
		t.Fatalf("the topic came back as %d, was %d: the test needs the same ids", recreated.ID, old.ID)
	}
	parts := []heldPartition{
		{stream: "orders", topic: "events", partition: 0, group: "readers"},
		{stream: "orders", topic: "events", partition: 1, group: "readers"},
	}
	want := heldNow(t, u.c, parts)
	if strings.Contains(want[0], "old") || !strings.Contains(want[0], `"new 2"`) || !strings.Contains(want[0], "group stored 1") {
		t.Fatalf("before the restart partition 0 holds %s", want[0])
	}
	heldOnEveryNode(t, servers, "before the restart", parts, want)

	restartAllAtOnce(t, cfgs, servers)
	heldOnEveryNode(t, servers, "after a full restart", parts, want)
	awaitOpenAsViewed(t, servers)
}

// recreateTopic makes orders/events (2 partitions) with messages, offsets and a
// consumer group, deletes the group and then the topic, and makes it again with
// other messages and offsets and a group of the same id. Between the two,
// between(old) runs when it is set.
func recreateTopic(u *clusterUser, between func(*wire.TopicDetails)) (old, recreated *wire.TopicDetails) {
	t := u.t
	t.Helper()
	stream, topic, readers := client.NameID("orders"), client.NameID("events"), client.NameID("readers")
	createGroup := func() (g *wire.ConsumerGroupDetails) {
		u.must("CreateConsumerGroup", func(ctx context.Context, c *client.Client) (err error) {
			g, err = c.CreateConsumerGroup(ctx, stream, topic, "readers")
			return err
		})
		return g
	}
	old = u.createTopic("orders", "events", 2, nil)
	g := createGroup()
	u.join(stream, topic, readers)
	for p := uint32(0); p < 2; p++ {
		u.sendTo("orders", "events", p, messages(3, "old"))
		u.storeOffsetOf(client.SingleConsumer(client.ID(7)), "orders", "events", p, 2)
		u.storeOffsetOf(client.GroupConsumer(readers), "orders", "events", p, 2)
	}
	if between != nil {
		between(old)
	}
	u.deleteGroup(stream, topic, readers)
	u.must("DeleteTopic", func(ctx context.Context, c *client.Client) error { return c.DeleteTopic(ctx, stream, topic) })

	recreated = u.createTopic("orders", "events", 2, nil)
	if g2 := createGroup(); g2.ID != g.ID {
		t.Fatalf("the group came back as %d, was %d: the test needs the same ids", g2.ID, g.ID)
	}
	u.join(stream, topic, readers)
	for p := uint32(0); p < 2; p++ {
		u.sendTo("orders", "events", p, messages(4, "new"))
		u.storeOffsetOf(client.SingleConsumer(client.ID(7)), "orders", "events", p, 3)
		u.storeOffsetOf(client.GroupConsumer(readers), "orders", "events", p, 1)
	}
	return old, recreated
}

// snapshotOpsOf is the op of each node's last metadata snapshot.
func snapshotOpsOf(t *testing.T, servers []*Server) []uint64 {
	t.Helper()
	ops := make([]uint64, len(servers))
	for i, s := range servers {
		onMetaShard(t, s, func(p *metaPlane) { ops[i] = p.SnapshotOp() })
	}
	return ops
}

// The snapshot holds a topic that an op above it deleted and another created
// again under the same ids: at start, each node finds the new one's directories
// where its snapshot names the old one, and neither purges them as stale nor opens
// them as the old topic; the ops applied again then open them as the new one.
func TestClusterFullRestartFindsANewerTopicThanItsSnapshot(t *testing.T) {
	const interval = 16
	cfgs, servers := startEffectsCluster(t, interval)
	u := dialClusterUser(t, servers[0])
	u.createStream("orders")
	var deleteAfterOp uint64
	recreateTopic(u, func(old *wire.TopicDetails) {
		// Until every node snapshots with the old topic, and has room for the
		// ops to come before its next snapshot.
		for i := 0; ; i++ {
			op := sameMetadata(t, servers)
			snapshots := snapshotOpsOf(t, servers)
			if slicesAll(snapshots, func(s uint64) bool { return s >= op-2 && s > 0 }) {
				deleteAfterOp = op
				break
			}
			if i == 4*interval {
				t.Fatalf("no snapshot at every node near op %d in %d ops: %v", op, i, snapshots)
			}
			u.must("UpdateStream", func(ctx context.Context, c *client.Client) error {
				return c.UpdateStream(ctx, client.NameID("orders"), "orders")
			})
		}
	})
	parts := []heldPartition{
		{stream: "orders", topic: "events", partition: 0, group: "readers"},
		{stream: "orders", topic: "events", partition: 1, group: "readers"},
	}
	want := heldNow(t, u.c, parts)
	heldOnEveryNode(t, servers, "before the restart", parts, want)
	for i, op := range snapshotOpsOf(t, servers) {
		if op > deleteAfterOp {
			t.Fatalf("node %d snapshotted at op %d, after the deletion (op %d on): the snapshot must hold the old topic", i, op, deleteAfterOp+1)
		}
	}

	restartAllAtOnce(t, cfgs, servers)
	heldOnEveryNode(t, servers, "after a full restart", parts, want)
	awaitOpenAsViewed(t, servers)
}

func slicesAll[T any](s []T, f func(T) bool) bool {
	for _, v := range s {
		if !f(v) {
			return false
		}
	}
	return true
}

// A node that was down while a topic was deleted and created again under the same
// ids, and catches up by a state transfer, serves the new topic's messages and
// offsets: the transferred state names another incarnation than the partitions it
// opened at start (its own snapshot's), which go, and the new ones take their place.
func TestClusterStateTransferReplacesARecreatedTopic(t *testing.T) {
	cfgs := clusterConfigs(t, 3, testClusterSecret)
	for i := range cfgs {
		cfgs[i].metaJournalSlots = 128 // see TestClusterStateTransfer
	}
	servers := startCluster(t, cfgs)
	u := dialClusterUser(t, servers[0])
	u.createStream("orders")
	old := []heldPartition{{stream: "orders", topic: "events", partition: 0}, {stream: "orders", topic: "events", partition: 1}}
	lagging := 2
	recreateTopic(u, func(*wire.TopicDetails) {
		heldOnEveryNode(t, servers, "the old topic", old, heldNow(t, u.c, old))
		// Past a snapshot, so that the lagging node opens the old topic at start.
		for range 20 {
			u.must("UpdateStream", func(ctx context.Context, c *client.Client) error {
				return c.UpdateStream(ctx, client.NameID("orders"), "orders")
			})
		}
		sameMetadata(t, servers)
		if u.c.Addr() == servers[lagging].Addr().String() {
			lagging = 1 // the user followed the leader there: another lags
		}
		stopServer(t, servers[lagging])
	})
	for i := range 200 {
		u.createStream(fmt.Sprintf("s-%d", i))
	}
	parts := []heldPartition{
		{stream: "orders", topic: "events", partition: 0, group: "readers"},
		{stream: "orders", topic: "events", partition: 1, group: "readers"},
	}
	want := heldNow(t, u.c, parts)
	servers[lagging] = startTestServer(t, cfgs[lagging])
	waitUntil(t, "the lagging node installs a state", func() bool { return servers[lagging].meta.TransfersInstalled() > 0 })
	heldOnEveryNode(t, servers, "after the state transfer", parts, want)
	awaitOpenAsViewed(t, servers)
}

// A partition state transfer replaces the partition plane's own files only
// (partition/transfer.go, installReplaces), so the partition's record survives it;
// a full restart then applies the topic's creation again over directories that
// hold what the transfers installed, and keeps it. Every node catches up so, in
// turn, the first primary last.
func TestClusterFullRestartAfterPartitionStateTransfers(t *testing.T) {
	cfgs, servers := startEffectsCluster(t, defaultSetup().SnapshotIntervalOps)
	u := dialClusterUser(t, servers[0])
	st := u.createStream("orders")
	topic := u.createTopic("orders", "events", 1, nil)
	u.sendTo("orders", "events", 0, messages(1, "first"))
	parts := []heldPartition{{stream: "orders", topic: "events", partition: 0}}
	heldOnEveryNode(t, servers, "the first message", parts, heldNow(t, u.c, parts))
	var want []string
	for _, down := range []int{2, 1, 0} {
		stopServer(t, servers[down])
		running := slices.Delete(slices.Clone(servers), down, down+1)
		var leader uint8
		waitUntil(t, "the others agree on a primary", func() (ok bool) {
			leader, ok = agreedLeader(running)
			return ok && int(leader) != down
		})
		// The SDKs' retries of 58 (a second or two): the partition's group follows
		// the new primary a heartbeat timeout after it took over.
		u := dialClusterUser(t, servers[leader])
		// More batches than the partition group keeps for repair: the node that
		// was down catches up by a state transfer.
		for i := range 100 {
			u.sendTo("orders", "events", 0, messages(1, fmt.Sprintf("while %d was down %d", down, i)))
		}
		u.storeOffsetOf(client.SingleConsumer(client.ID(7)), "orders", "events", 0, uint64(20+down))
		want = heldNow(t, u.c, parts)
		servers[down] = startTestServer(t, cfgs[down])
		heldOnEveryNode(t, servers, fmt.Sprintf("after node %d caught up", down), parts, want)
		if partitionStatesInstalled(t, servers[down]) == 0 {
			t.Fatalf("node %d caught up without a partition state transfer, which the test needs", down)
		}
		record := filepath.Join(cfgs[down].SystemPath, "streams", strconv.Itoa(int(st.ID)), "topics", strconv.Itoa(int(topic.ID)),
			"partitions", "0", partitiondir.RecordFileName)
		if _, err := os.Stat(record); err != nil {
			t.Fatalf("node %d lost its partition record in the state transfer: %v", down, err)
		}
	}

	restartAllAtOnce(t, cfgs, servers)
	heldOnEveryNode(t, servers, "after a full restart", parts, want)
	awaitOpenAsViewed(t, servers)
}

// partitionStatesInstalled counts the partition states s's shards installed by
// state transfer since it started.
func partitionStatesInstalled(t *testing.T, s *Server) int64 {
	t.Helper()
	var installed atomic.Int64
	if err := s.rt.Inspect(testContext(t), func(sh *shard.Shard) {
		installed.Add(int64(s.handlers[sh.Index()].owned.Store.StatesInstalled()))
	}); err != nil {
		t.Fatalf("Inspect: %v", err)
	}
	return installed.Load()
}
