package clustertest

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/wire"
)

// thousandPartitions is the protocol's largest partition count in one topic.
const thousandPartitions = 1000

// A healthy three-node cluster takes three topics of 1,000 partitions each (the
// protocol's maximum per topic) without losing its metadata primary or a control
// frame, and every new partition takes a send at once, on its first try, at the
// leader, and serves it from every node.
func TestClusterThousandsOfPartitions(t *testing.T) {
	if testing.Short() {
		t.Skip("3,000 partitions on a three-node cluster")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c := newCluster(t, 3)
	c.startAll()
	leader := c.awaitLeader(ctx, c.nodes)
	admin, err := leader.dial(ctx, client.WithLeaderRedirection(false))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.CreateStream(ctx, "wide"); err != nil {
		t.Fatal(err)
	}
	// No retry: a partition whose group is not formed yet answers 58, and the SDKs
	// would replay it for seconds.
	noRetry, err := leader.dial(ctx, client.WithLeaderRedirection(false),
		client.WithTransientRetry(client.TransientRetry{}))
	if err != nil {
		t.Fatal(err)
	}
	defer noRetry.Close()
	viewChangesBefore := metadataGroupLines(c)
	for topic := range 3 {
		name := fmt.Sprintf("t%d", topic)
		if _, err := admin.CreateTopic(ctx, client.NameID("wide"), name, thousandPartitions, nil); err != nil {
			t.Fatalf("create topic %s of %d partitions: %v", name, thousandPartitions, err)
		}
		for _, p := range []uint32{thousandPartitions - 1, 0, thousandPartitions / 2} {
			msgs := []client.Message{{Payload: []byte(fmt.Sprintf("%s/%d", name, p))}}
			if _, err := noRetry.SendMessages(ctx, client.NameID("wide"), client.NameID(name),
				wire.Partitioning{Kind: wire.PartitioningPartitionID, PartitionID: p}, msgs); err != nil {
				t.Fatalf("the first send to partition %d of the new topic %s: %v", p, name, err)
			}
		}
	}
	if got := metadataGroupLines(c); got != viewChangesBefore {
		t.Errorf("the metadata group changed its primary while topics were created:\n%s", got)
	}
	if now := c.awaitLeader(ctx, c.nodes); now != leader {
		t.Errorf("the leader moved from node %d to node %d", leader.id, now.id)
	}
	for _, n := range c.nodes {
		if strings.Contains(n.logText(), "replica frame dropped") {
			t.Errorf("node %d dropped replica frames:\n%s", n.id, grepLines(n.logText(), "replica frame dropped"))
		}
	}
	// Every node serves what the leader acknowledged.
	for _, n := range c.nodes {
		cl, err := n.adminClient(ctx)
		if err != nil {
			t.Fatal(err)
		}
		awaitPolled(ctx, t, cl, n, "t2", thousandPartitions-1, "t2/999")
	}
}

// awaitPolled waits (at most 30 s) until node n serves payload at offset 0 of the
// partition.
func awaitPolled(ctx context.Context, t *testing.T, cl *client.Client, n *node, topic string, partition uint32, payload string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		polled, err := cl.PollMessages(ctx, &wire.PollMessages{Consumer: client.SingleConsumer(client.ID(1)),
			StreamID: client.NameID("wide"), TopicID: client.NameID(topic), Partition: wire.SomePartition(partition),
			Strategy: wire.PollingStrategy{Kind: wire.PollingOffset, Value: 0}, Count: 1})
		if it := polled.Messages(); err == nil && it.Next() {
			if got := string(it.Message().Payload()); got != payload {
				t.Fatalf("node %d serves %q at %s/%d offset 0, want %q", n.id, got, topic, partition, payload)
			}
			return
		}
		if !waitCtx(ctx, 100*time.Millisecond) {
			t.Fatalf("node %d never served %s/%d: %v", n.id, topic, partition, err)
		}
	}
}

// metadataGroupLines are the lines each node logged when its metadata primary
// changed: a view change shows there.
func metadataGroupLines(c *cluster) string {
	var b strings.Builder
	for _, n := range c.nodes {
		fmt.Fprintf(&b, "node %d:\n%s", n.id, grepLines(n.logText(), `msg="metadata group"`))
	}
	return b.String()
}

func grepLines(text, substr string) string {
	var b strings.Builder
	for line := range strings.Lines(text) {
		if strings.Contains(line, substr) {
			b.WriteString(line)
		}
	}
	return b.String()
}

// procStat is a process's CPU time and resident size from /proc.
type procStat struct {
	cpu      time.Duration
	rssBytes int64
}

// clockTicksPerSecond is USER_HZ, 100 on every Linux the server supports.
const clockTicksPerSecond = 100

func readProcStat(pid int) (procStat, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, err
	}
	// The command name may hold spaces: the fields start after its ')'.
	s := string(raw)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	// utime and stime are fields 14 and 15 of the whole line (state is 3).
	utime, err1 := strconv.ParseInt(fields[14-3], 10, 64)
	stime, err2 := strconv.ParseInt(fields[15-3], 10, 64)
	rssPages, err3 := strconv.ParseInt(fields[24-3], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return procStat{}, fmt.Errorf("/proc/%d/stat: %q", pid, s)
	}
	return procStat{
		cpu:      time.Duration(utime+stime) * time.Second / clockTicksPerSecond,
		rssBytes: rssPages * int64(os.Getpagesize()),
	}, nil
}

func (n *node) stat() (procStat, error) {
	if !n.running() {
		return procStat{}, fmt.Errorf("node %d is not running", n.id)
	}
	return readProcStat(n.proc.cmd.Process.Pid)
}

// idleCPU rests rest, then returns each node's share of one core over window, as
// the issue of idle clusters judges it (/proc/PID/stat).
func idleCPU(b testing.TB, nodes []*node, rest, window time.Duration) []float64 {
	time.Sleep(rest) // a measurement window, not a synchronisation
	before := make([]procStat, len(nodes))
	for i, n := range nodes {
		s, err := n.stat()
		if err != nil {
			b.Fatal(err)
		}
		before[i] = s
	}
	start := time.Now()
	time.Sleep(window)
	elapsed := time.Since(start)
	shares := make([]float64, len(nodes))
	for i, n := range nodes {
		s, err := n.stat()
		if err != nil {
			b.Fatal(err)
		}
		shares[i] = float64(s.cpu-before[i].cpu) / float64(elapsed)
	}
	return shares
}

// BenchmarkThousandsOfPartitions creates three topics of 1,000 partitions each on a
// three-node cluster at the production consensus timings, and reports how long
// each creation took (create-s, the slowest), how long the first send to the last
// partition of each took (first-send-ms, the slowest) against a send to a partition
// of an older topic in the same run (warm-send-ms), each node's share of a core
// while the 3,000 partitions sit idle (idle-cpu-%, the busiest node, over 10 s after
// 5 s of rest) and the largest resident size (rss-MB) with the memory per idle
// partition it implies (rss-per-partition-KB, above the same cluster's size with one
// partition).
func BenchmarkThousandsOfPartitions(b *testing.B) {
	for range b.N {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		c := newCluster(b, 3)
		c.productionTimings = true
		c.startAll()
		leader := c.awaitLeader(ctx, c.nodes)
		admin, err := leader.dial(ctx, client.WithLeaderRedirection(false))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := admin.CreateStream(ctx, "wide"); err != nil {
			b.Fatal(err)
		}
		if _, err := admin.CreateTopic(ctx, client.NameID("wide"), "warm", 1, nil); err != nil {
			b.Fatal(err)
		}
		send := func(topic string, p uint32) time.Duration {
			start := time.Now()
			msgs := []client.Message{{Payload: []byte("x")}}
			if _, err := admin.SendMessages(ctx, client.NameID("wide"), client.NameID(topic),
				wire.Partitioning{Kind: wire.PartitioningPartitionID, PartitionID: p}, msgs); err != nil {
				b.Fatalf("send to %s/%d: %v", topic, p, err)
			}
			return time.Since(start)
		}
		send("warm", 0)
		var rssBase int64
		for _, n := range c.nodes {
			s, err := n.stat()
			if err != nil {
				b.Fatal(err)
			}
			rssBase = max(rssBase, s.rssBytes)
		}
		var createMax, firstSendMax, warmSendMax time.Duration
		for topic := range 3 {
			name := fmt.Sprintf("t%d", topic)
			start := time.Now()
			if _, err := admin.CreateTopic(ctx, client.NameID("wide"), name, thousandPartitions, nil); err != nil {
				b.Fatal(err)
			}
			created := time.Since(start)
			firstSend := send(name, thousandPartitions-1)
			warmSend := send("warm", 0)
			b.Logf("topic %s: created in %v, first send to partition 999 in %v, a send to a warm partition in %v",
				name, created.Round(time.Millisecond), firstSend.Round(time.Millisecond), warmSend.Round(time.Millisecond))
			createMax, firstSendMax, warmSendMax = max(createMax, created), max(firstSendMax, firstSend), max(warmSendMax, warmSend)
		}
		admin.Close()
		shares := idleCPU(b, c.nodes, 5*time.Second, 10*time.Second)
		var idleMax float64
		var rssMax int64
		for i, n := range c.nodes {
			s, err := n.stat()
			if err != nil {
				b.Fatal(err)
			}
			b.Logf("node %d: idle %.2f%% of a core, %d MB resident", n.id, 100*shares[i], s.rssBytes>>20)
			idleMax, rssMax = max(idleMax, shares[i]), max(rssMax, s.rssBytes)
		}
		for _, n := range c.nodes {
			if lines := grepLines(n.logText(), "replica frame dropped"); lines != "" {
				b.Logf("node %d dropped replica frames:\n%s", n.id, lines)
			}
		}
		b.Logf("metadata primary changes:\n%s", metadataGroupLines(c))
		b.ReportMetric(createMax.Seconds(), "create-s")
		b.ReportMetric(float64(firstSendMax)/1e6, "first-send-ms")
		b.ReportMetric(float64(warmSendMax)/1e6, "warm-send-ms")
		b.ReportMetric(100*idleMax, "idle-cpu-%")
		b.ReportMetric(float64(rssMax)/(1<<20), "rss-MB")
		b.ReportMetric(float64(rssMax-rssBase)/1024/(3*thousandPartitions), "rss-per-partition-KB")
		c.stop()
		cancel()
	}
}

// BenchmarkMemoryAfterWrites writes 10 MB to each of 40 partitions of a three-node
// cluster (1,000-message batches of 1,000 B) and reports the largest resident size
// of a node after the writes (rss-MB) and after 5 s of rest (rss-idle-MB).
func BenchmarkMemoryAfterWrites(b *testing.B) {
	const partitions, perPartitionBytes = 40, 10 << 20
	for range b.N {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		c := newCluster(b, 3)
		c.productionTimings = true
		c.startAll()
		leader := c.awaitLeader(ctx, c.nodes)
		admin, err := leader.dial(ctx, client.WithLeaderRedirection(false))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := admin.CreateStream(ctx, loadStream); err != nil {
			b.Fatal(err)
		}
		if _, err := admin.CreateTopic(ctx, client.NameID(loadStream), loadTopic, partitions, nil); err != nil {
			b.Fatal(err)
		}
		msgs := make([]client.Message, benchBatchMessages)
		payload := make([]byte, benchMessageBytes)
		for i := range msgs {
			msgs[i].Payload = payload
		}
		batches := perPartitionBytes / (benchBatchMessages * benchMessageBytes)
		start := time.Now()
		for batch := range batches + 1 {
			for p := range uint32(partitions) {
				if _, err := admin.SendMessages(ctx, client.NameID(loadStream), client.NameID(loadTopic),
					wire.Partitioning{Kind: wire.PartitioningPartitionID, PartitionID: p}, msgs); err != nil {
					b.Fatalf("batch %d to partition %d: %v", batch, p, err)
				}
			}
		}
		written := time.Since(start)
		admin.Close()
		rss := func() (worst int64) {
			for _, n := range c.nodes {
				s, err := n.stat()
				if err != nil {
					b.Fatal(err)
				}
				b.Logf("node %d: %d MB resident", n.id, s.rssBytes>>20)
				worst = max(worst, s.rssBytes)
			}
			return worst
		}
		b.Logf("wrote %d MB in %v", (batches+1)*partitions*benchBatchMessages*benchMessageBytes>>20, written.Round(time.Millisecond))
		afterWrites := rss()
		time.Sleep(5 * time.Second) // the rest being measured, not a synchronisation
		afterRest := rss()
		b.ReportMetric(float64(afterWrites)/(1<<20), "rss-MB")
		b.ReportMetric(float64(afterRest)/(1<<20), "rss-idle-MB")
		c.stop()
		cancel()
	}
}
