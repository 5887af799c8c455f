package clustertest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
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
// leader, and serves it from every node. The leader staying put is a point of the
// test: it is checked while no node was stopped by a signal (stopWatch). A node
// frozen so may move the leader, rightly; the test then writes as an SDK user
// does, following the leader, and a send may take a few tries.
func TestClusterThousandsOfPartitions(t *testing.T) {
	if testing.Short() {
		t.Skip("3,000 partitions on a three-node cluster")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c := newCluster(t, 3)
	c.startAll()
	leader := c.awaitLeader(ctx, c.nodes)
	stops := c.watchStops(c.nodes)
	admin, err := leader.dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.CreateStream(ctx, "wide"); err != nil {
		t.Fatal(err)
	}
	// No retry: a partition whose group is not formed yet answers 58, and the SDKs
	// would replay it for seconds. The SDKs' request deadline: a send at a leader
	// a frozen node demoted waits for its fate.
	noRetry := func(at *node) *client.Client {
		t.Helper()
		cl, err := at.dial(ctx, client.WithLeaderRedirection(false), client.WithTransientRetry(client.TransientRetry{}),
			client.WithRequestTimeout(client.DefaultRequestTimeout))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cl.Close() })
		return cl
	}
	sender := noRetry(leader)
	viewChangesBefore := metadataGroupLines(c)
	for topic := range 3 {
		name := fmt.Sprintf("t%d", topic)
		if _, err := admin.CreateTopic(ctx, client.NameID("wide"), name, thousandPartitions, nil); err != nil {
			// The SDK's replay at a new leader of a creation its old one committed.
			if stopped := stops.seen(); stopped == "" || !errors.Is(err, wire.ErrTopicNameAlreadyExists) {
				t.Fatalf("create topic %s of %d partitions: %v", name, thousandPartitions, err)
			}
		}
		for _, p := range []uint32{thousandPartitions - 1, 0, thousandPartitions / 2} {
			msgs := []client.Message{{Payload: []byte(fmt.Sprintf("%s/%d", name, p))}}
			for {
				_, err := sender.SendMessages(ctx, client.NameID("wide"), client.NameID(name),
					wire.Partitioning{Kind: wire.PartitioningPartitionID, PartitionID: p}, msgs)
				if err == nil {
					break
				}
				stopped := stops.seen()
				if stopped == "" || ctx.Err() != nil {
					t.Fatalf("the first send to partition %d of the new topic %s: %v", p, name, err)
				}
				t.Logf("a send to partition %d of %s with node(s) %s stopped meanwhile: %v; again, at the leader", p, name, stopped, err)
				if now := c.awaitLeader(ctx, c.nodes); now != leader || isConnectionLoss(err) {
					leader, sender = now, noRetry(now)
				}
				waitCtx(ctx, 20*time.Millisecond)
			}
		}
	}
	if stopped := stops.seen(); stopped != "" {
		t.Logf("node(s) %s stopped by a signal: the leader may have moved, rightly; not checked", stopped)
	} else {
		if got := metadataGroupLines(c); got != viewChangesBefore {
			t.Errorf("the metadata group changed its primary while topics were created:\n%s", got)
		}
		if now := c.awaitLeader(ctx, c.nodes); now != leader {
			t.Errorf("the leader moved from node %d to node %d", leader.id, now.id)
		}
	}
	for _, n := range c.nodes {
		if strings.Contains(n.logText(), "replica frame dropped") {
			t.Errorf("node %d dropped replica frames:\n%s", n.id, grepLines(n.logText(), "replica frame dropped"))
		}
	}
	// Every node serves what the leader acknowledged.
	for _, n := range c.nodes {
		awaitPolled(ctx, t, n, "t2", thousandPartitions-1, "t2/999")
	}
}

// awaitPolled waits (at most 30 s) until node n serves payload at offset 0 of the
// partition, through its admin connection, dialed again after a connection loss
// (a poll unanswered for the request deadline on a starved or frozen node).
func awaitPolled(ctx context.Context, t *testing.T, n *node, topic string, partition uint32, payload string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		cl, err := n.adminClient(ctx)
		if err == nil {
			var polled wire.PolledMessages
			polled, err = cl.PollMessages(ctx, &wire.PollMessages{Consumer: client.SingleConsumer(client.ID(1)),
				StreamID: client.NameID("wide"), TopicID: client.NameID(topic), Partition: wire.SomePartition(partition),
				Strategy: wire.PollingStrategy{Kind: wire.PollingOffset, Value: 0}, Count: 1})
			if it := polled.Messages(); err == nil && it.Next() {
				if got := string(it.Message().Payload()); got != payload {
					t.Fatalf("node %d serves %q at %s/%d offset 0, want %q", n.id, got, topic, partition, payload)
				}
				return
			}
			if isConnectionLoss(err) {
				n.dropAdmin()
			}
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
// 5 s of rest), the largest resident size then (rss-MB) and at rest (rss-at-rest-MB,
// memoryAtRest), and the resident size a partition adds at rest
// (rss-per-partition-KB, the largest of the nodes, against its own size at rest
// with one partition).
func BenchmarkThousandsOfPartitions(b *testing.B) {
	b.Setenv("IGGY_PPROF_ADDRESS", "127.0.0.1:0")
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
		// At rest, not as read after the login: a new node's password checks
		// leave garbage that the partitions' pages would take the place of
		// (partition/doc.go "Memory").
		base := memoryAtRest(ctx, b, c, "one partition")
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
		idle := memoryAtRest(ctx, b, c, "3,000 partitions")
		var restMax, perPartitionMax int64
		for i := range c.nodes {
			restMax, perPartitionMax = max(restMax, idle[i].rssBytes), max(perPartitionMax, idle[i].rssBytes-base[i].rssBytes)
		}
		b.ReportMetric(float64(rssMax)/(1<<20), "rss-MB")
		b.ReportMetric(float64(restMax)/(1<<20), "rss-at-rest-MB")
		b.ReportMetric(float64(perPartitionMax)/1024/(3*thousandPartitions), "rss-per-partition-KB")
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

// memStat is what /proc/PID/status says of a node's memory, and what its Go
// runtime says after a collection (runtime.MemStats, read from its pprof endpoint).
type memStat struct {
	rssBytes, anonBytes, fileBytes int64
	// naturalRSSBytes is the resident size before the collections that bring the
	// node to rest.
	naturalRSSBytes int64
	// After a collection: the live heap (HeapAlloc), the heap's spans in use and
	// idle, what of them went back to the system, the goroutine stacks, and all the
	// runtime holds from the system (Sys).
	heapLiveBytes, heapInuseBytes, heapIdleBytes, heapReleasedBytes, stackBytes, sysBytes int64
}

// readRSS reads the resident sizes of /proc/PID/status.
func (n *node) readRSS(m *memStat) error {
	if !n.running() {
		return fmt.Errorf("node %d is not running", n.id)
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", n.proc.cmd.Process.Pid))
	if err != nil {
		return err
	}
	for line := range strings.Lines(string(raw)) {
		name, value, ok := strings.Cut(line, ":")
		fields := strings.Fields(value)
		if !ok || len(fields) != 2 || fields[1] != "kB" {
			continue
		}
		kb, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			return fmt.Errorf("/proc/%d/status: %q", n.proc.cmd.Process.Pid, line)
		}
		switch name {
		case "VmRSS":
			m.rssBytes = kb << 10
		case "RssAnon":
			m.anonBytes = kb << 10
		case "RssFile":
			m.fileBytes = kb << 10
		}
	}
	return nil
}

// pprofAddress is where the node serves net/http/pprof (IGGY_PPROF_ADDRESS), from
// the line its server logged.
func (n *node) pprofAddress() (string, error) {
	for line := range strings.Lines(n.logText()) {
		if !strings.Contains(line, `msg="pprof endpoint"`) {
			continue
		}
		if _, addr, ok := strings.Cut(line, "address="); ok {
			return strings.TrimSpace(addr), nil
		}
	}
	return "", fmt.Errorf("node %d logged no pprof endpoint", n.id)
}

// readHeap runs a collection in the node (the pprof heap profile's gc=1) and reads
// its runtime.MemStats.
func (n *node) readHeap(ctx context.Context, m *memStat) error {
	addr, err := n.pprofAddress()
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/debug/pprof/heap?debug=1&gc=1", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	fields := map[string]*int64{"HeapAlloc": &m.heapLiveBytes, "HeapInuse": &m.heapInuseBytes, "HeapIdle": &m.heapIdleBytes,
		"HeapReleased": &m.heapReleasedBytes, "Stack": &m.stackBytes, "Sys": &m.sysBytes}
	found := 0
	for line := range strings.Lines(string(body)) {
		name, value, ok := strings.Cut(strings.TrimPrefix(line, "# "), " = ")
		if dst := fields[name]; ok && dst != nil {
			v, err := strconv.ParseInt(strings.Fields(value)[0], 10, 64) // Stack is "in use / sys"
			if err != nil {
				return fmt.Errorf("node %d: heap profile: %q", n.id, line)
			}
			*dst = v
			found++
		}
	}
	if found != len(fields) {
		return fmt.Errorf("node %d: the heap profile has %d of the %d MemStats fields wanted", n.id, found, len(fields))
	}
	return nil
}

// BenchmarkPartitionMemory checks the memory sum of partition/doc.go "Memory"
// against real nodes: a single node and a three-node cluster at the production
// timings take N partitions (topics of 1,000), then a batch of one 100-byte message
// in each, and each node's resident size at rest is compared with the sum's
// prediction, R0 + N x the resident size of a partition created (then written) for
// the node's role. At rest means the groups parked (restBeforeMemory) and the
// node's garbage collected and the pages freed returned to the system: the sum's
// floor, which the benchmark brings each node to with collections through its
// pprof endpoint (the runtime's scavenger returns freed pages by itself only past
// about a tenth over its heap goal, so a node left alone may keep its garbage:
// the password checks' and its last bursts'). It reports, for the node furthest from its prediction, the resident
// sizes measured and predicted once created and once written (MB); the largest
// error of all nodes in % of the prediction, at rest (error-%) and as read before
// the forced collections (error-before-collections-%); and the resident and heap
// size a partition adds (KB, the largest of the nodes). Run with -benchtime 1x:
// each run takes about a minute.
func BenchmarkPartitionMemory(b *testing.B) {
	for _, nodes := range []int{1, 3} {
		for _, partitions := range []int{1000, 3000} {
			b.Run(fmt.Sprintf("nodes=%d/partitions=%d", nodes, partitions), func(b *testing.B) {
				for range b.N {
					partitionMemory(b, nodes, partitions)
				}
			})
		}
	}
}

// The sum's terms (partition/doc.go "Memory"): a node's resident size at rest
// before its partitions (R0, the same for every role), and what each partition
// adds, created and written once, on a single node, on the cluster's leader (the
// metadata primary, which leads every partition's group) and on a backup.
const (
	restingNodeBytes            = 18.5 * (1 << 20)
	partitionCreatedSingleBytes = 8 << 10
	partitionWrittenSingleBytes = 27 << 10
	partitionCreatedLeaderBytes = 9.5 * (1 << 10)
	partitionWrittenLeaderBytes = 34.5 * (1 << 10)
	partitionCreatedBackupBytes = 9 << 10
	partitionWrittenBackupBytes = 28.5 * (1 << 10)
)

func partitionMemory(b *testing.B, nodes, partitions int) {
	b.Setenv("IGGY_PPROF_ADDRESS", "127.0.0.1:0")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c := newCluster(b, nodes)
	c.single = nodes == 1
	c.productionTimings = true
	c.startAll()
	defer c.stop()
	leader := c.awaitLeader(ctx, c.nodes)
	admin, err := leader.dial(ctx, client.WithLeaderRedirection(false))
	if err != nil {
		b.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.CreateStream(ctx, "wide"); err != nil {
		b.Fatal(err)
	}
	send := func(topic string, p uint32) {
		msgs := []client.Message{{Payload: make([]byte, 100)}}
		if _, err := admin.SendMessages(ctx, client.NameID("wide"), client.NameID(topic),
			wire.Partitioning{Kind: wire.PartitioningPartitionID, PartitionID: p}, msgs); err != nil {
			b.Fatalf("send to %s/%d: %v", topic, p, err)
		}
	}
	if _, err := admin.CreateTopic(ctx, client.NameID("wide"), "warm", 1, nil); err != nil {
		b.Fatal(err)
	}
	send("warm", 0)
	base := memoryAtRest(ctx, b, c, "before")
	var topics []string
	for t := 0; t*thousandPartitions < partitions; t++ {
		name := fmt.Sprintf("t%d", t)
		count := min(thousandPartitions, partitions-t*thousandPartitions)
		if _, err := admin.CreateTopic(ctx, client.NameID("wide"), name, uint32(count), nil); err != nil {
			b.Fatal(err)
		}
		topics = append(topics, name)
	}
	created := memoryAtRest(ctx, b, c, "created")
	for t, name := range topics {
		for p := range uint32(min(thousandPartitions, partitions-t*thousandPartitions)) {
			send(name, p)
		}
	}
	written := memoryAtRest(ctx, b, c, "written")

	var worst struct {
		errorShare                                   float64
		created, createdPredicted, written, writtenP float64
	}
	var rssCreated, rssWritten, heapCreated, heapWritten, worstNatural float64
	perPartition := func(after, before int64) float64 { return float64(after-before) / 1024 / float64(partitions) }
	for i, n := range c.nodes {
		createdBytes, writtenBytes := int64(partitionCreatedBackupBytes), int64(partitionWrittenBackupBytes)
		switch {
		case nodes == 1:
			createdBytes, writtenBytes = partitionCreatedSingleBytes, partitionWrittenSingleBytes
		case n == leader:
			createdBytes, writtenBytes = partitionCreatedLeaderBytes, partitionWrittenLeaderBytes
		}
		predictedCreated := restingNodeBytes + int64(partitions)*createdBytes
		predictedWritten := restingNodeBytes + int64(partitions)*writtenBytes
		share := max(math.Abs(float64(created[i].rssBytes-predictedCreated))/float64(predictedCreated),
			math.Abs(float64(written[i].rssBytes-predictedWritten))/float64(predictedWritten))
		naturalShare := max(math.Abs(float64(created[i].naturalRSSBytes-predictedCreated))/float64(predictedCreated),
			math.Abs(float64(written[i].naturalRSSBytes-predictedWritten))/float64(predictedWritten))
		worstNatural = max(worstNatural, naturalShare)
		b.Logf("node %d (leader %v): %.1f MB resident before, created %.1f MB (%.1f predicted), written %.1f MB (%.1f predicted); a partition adds %.1f KB resident created, %.1f KB written; %.1f KB of heap created, %.1f KB written",
			n.id, n == leader, mb(base[i].rssBytes), mb(created[i].rssBytes), mb(predictedCreated), mb(written[i].rssBytes), mb(predictedWritten),
			perPartition(created[i].rssBytes, base[i].rssBytes), perPartition(written[i].rssBytes, base[i].rssBytes),
			perPartition(created[i].heapLiveBytes, base[i].heapLiveBytes), perPartition(written[i].heapLiveBytes, base[i].heapLiveBytes))
		if share >= worst.errorShare {
			worst.errorShare = share
			worst.created, worst.createdPredicted = mb(created[i].rssBytes), mb(predictedCreated)
			worst.written, worst.writtenP = mb(written[i].rssBytes), mb(predictedWritten)
		}
		rssCreated = max(rssCreated, perPartition(created[i].rssBytes, base[i].rssBytes))
		rssWritten = max(rssWritten, perPartition(written[i].rssBytes, base[i].rssBytes))
		heapCreated = max(heapCreated, perPartition(created[i].heapLiveBytes, base[i].heapLiveBytes))
		heapWritten = max(heapWritten, perPartition(written[i].heapLiveBytes, base[i].heapLiveBytes))
	}
	b.ReportMetric(worst.created, "rss-created-MB")
	b.ReportMetric(worst.createdPredicted, "predicted-created-MB")
	b.ReportMetric(worst.written, "rss-written-MB")
	b.ReportMetric(worst.writtenP, "predicted-written-MB")
	b.ReportMetric(100*worst.errorShare, "error-%")
	b.ReportMetric(100*worstNatural, "error-before-collections-%")
	b.ReportMetric(rssCreated, "rss-created-KB/partition")
	b.ReportMetric(rssWritten, "rss-written-KB/partition")
	b.ReportMetric(heapCreated, "heap-created-KB/partition")
	b.ReportMetric(heapWritten, "heap-written-KB/partition")
}

// memoryAtRest lets the nodes rest (restBeforeMemory), brings each to rest (its
// garbage collected, through its pprof endpoint, and the pages freed returned) and
// returns what each holds then, and held before the collections.
func memoryAtRest(ctx context.Context, b *testing.B, c *cluster, what string) []memStat {
	time.Sleep(restBeforeMemory) // the rest being measured, not a synchronisation
	out := make([]memStat, len(c.nodes))
	for i, n := range c.nodes {
		var natural memStat
		if err := n.readRSS(&natural); err != nil {
			b.Fatal(err)
		}
		// Collections until the runtime has returned what it will of the
		// pages they freed: its scavenger returns them in the background, a
		// collection or more later (seen: up to three).
		kept := int64(math.MaxInt64)
		for k := 0; ; k++ {
			if err := n.readHeap(ctx, &out[i]); err != nil {
				b.Fatal(err)
			}
			free := out[i].heapIdleBytes - out[i].heapReleasedBytes
			if k >= 3 && kept-free < 1<<20 {
				break
			}
			if k == restCollectionsMax {
				b.Fatalf("node %d: the runtime still returns pages after %d collections", n.id, k)
			}
			kept = free
			time.Sleep(time.Second) // the scavenger's pace, not a synchronisation
		}
		m := &out[i]
		if err := n.readRSS(m); err != nil {
			b.Fatal(err)
		}
		m.naturalRSSBytes = natural.rssBytes
		b.Logf("%s: node %d: %.1f MB resident at rest (anon %.1f, file %.1f; %.1f before the collections); heap live %.1f MB, in use %.1f, idle %.1f, released %.1f, stacks %.1f, runtime total %.1f",
			what, n.id, mb(m.rssBytes), mb(m.anonBytes), mb(m.fileBytes), mb(natural.rssBytes), mb(m.heapLiveBytes), mb(m.heapInuseBytes),
			mb(m.heapIdleBytes), mb(m.heapReleasedBytes), mb(m.stackBytes), mb(m.sysBytes))
	}
	return out
}

// restBeforeMemory is how long the nodes rest before their memory is read: past
// the groups' heartbeat timeout, so that they are parked.
const restBeforeMemory = 6 * time.Second

// restCollectionsMax bounds the collections that bring a node to rest.
const restCollectionsMax = 20

func mb(bytes int64) float64 { return float64(bytes) / (1 << 20) }
