package clustertest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/wire"
)

// BenchmarkPinnedProduce is replicated produce as a new user measures it on this
// machine, with the server measured and not the oversubscription: every node runs
// --shards 1 with busy polling off (the harness's --busy-poll 0), a three-node
// cluster against a single node of the same settings, one after the other in each
// op, one producer at the leader sending pinnedBatches batches of 1000 x 1000 B
// (the SDK's default ack level, a quorum) one at a time, each waiting for its
// acknowledgement. It reports each setup's MB/s and batch latency (p50, p99) and
// the cluster's throughput as a fraction of the single node's, and the time its
// processes' threads spent waiting for a CPU per batch (runQueueWait: what of the
// latency is the scheduler's on a machine with fewer cores than nodes). Run it with
// -benchtime 1x (an op is both series, clusters started fresh); a few ops give the
// range.
//
// IGGY_CLUSTERTEST_BATCHES sets the series' length (default pinnedBatches),
// IGGY_CLUSTERTEST_MESSAGE_BYTES the messages' payload (default 1000: a smaller
// batch shows what a batch costs apart from its bytes), and
// IGGY_CLUSTERTEST_PROFILE_DIR, when set, serves pprof on every node and writes a
// CPU profile of each over the first IGGY_CLUSTERTEST_PROFILE_SECONDS (default 5)
// of each series to that directory (keep it out of the repository).
// IGGY_CLUSTERTEST_TRACE_DIR, when set, writes there for each series the batches'
// send times on CLOCK_MONOTONIC with their latencies and the nodes' pids
// (label-batches.txt), to line up with a `perf record -k CLOCK_MONOTONIC` of the
// run, and each node's log (label-node<id>.log: run the benchmark with
// GODEBUG=gctrace=1 and the nodes' GC cycles are in it).
func BenchmarkPinnedProduce(b *testing.B) { pinnedProduce(b, 1) }

// BenchmarkPinnedProduceTwoShards is BenchmarkPinnedProduce with every node run
// with --shards 2: the leader's partition (stream 1, topic 1, partition 0) is then
// owned by shard 0, and its replica connections by shard 1 (the runtime keeps
// shard 0 free of them), so each prepare crosses shards on its way to a backup.
// Six shards on this machine's two cores: it measures that crossing beside the
// one-shard series, not the server at its best.
func BenchmarkPinnedProduceTwoShards(b *testing.B) { pinnedProduce(b, 2) }

func pinnedProduce(b *testing.B, shards int) {
	batches := envInt(b, "IGGY_CLUSTERTEST_BATCHES", pinnedBatches)
	var ratios []float64
	for op := range b.N {
		single := startPinned(b, 1, shards)
		singleSeries := pinnedSeries(b, single, batches, fmt.Sprintf("op%d-single", op))
		discardPinned(b, single)
		three := startPinned(b, 3, shards)
		threeSeries := pinnedSeries(b, three, batches, fmt.Sprintf("op%d-cluster", op))
		discardPinned(b, three)
		ratio := threeSeries.mbps / singleSeries.mbps
		ratios = append(ratios, ratio)
		b.Logf("op %d: single %s; cluster %s; ratio %.3f", op, singleSeries, threeSeries, ratio)
		if op == b.N-1 {
			b.ReportMetric(singleSeries.mbps, "single-MB/s")
			b.ReportMetric(singleSeries.p50.Seconds()*1e3, "single-p50-ms")
			b.ReportMetric(singleSeries.p99.Seconds()*1e3, "single-p99-ms")
			b.ReportMetric(threeSeries.mbps, "cluster-MB/s")
			b.ReportMetric(threeSeries.p50.Seconds()*1e3, "cluster-p50-ms")
			b.ReportMetric(threeSeries.p99.Seconds()*1e3, "cluster-p99-ms")
			b.ReportMetric(singleSeries.leaderCPU.Seconds()*1e3, "single-cpu-ms/GB")
			b.ReportMetric(threeSeries.leaderCPU.Seconds()*1e3, "leader-cpu-ms/GB")
			b.ReportMetric(threeSeries.backupCPU.Seconds()*1e3, "backup-cpu-ms/GB")
			b.ReportMetric(threeSeries.runqWaitPerBatch.Seconds()*1e3, "cluster-runq-ms/batch")
			b.ReportMetric(singleSeries.runqWaitPerBatch.Seconds()*1e3, "single-runq-ms/batch")
			b.ReportMetric(median64(ratios), "x-single-node-median")
		}
	}
}

// pinnedBatches is BenchmarkPinnedProduce's series: 300,000 messages, as the issue
// measured with a load client.
const pinnedBatches = 300

// pinnedWarmupBatches are sent before each series and not counted: the segment's
// first pages, the connection's buffers.
const pinnedWarmupBatches = 10

type seriesResult struct {
	mbps     float64
	p50, p99 time.Duration
	max      time.Duration
	// leaderCPU and backupCPU are the CPU time (user and system) the leader, and
	// each backup on average, spent per GB of payload acknowledged.
	leaderCPU, backupCPU time.Duration
	// runqWaitPerBatch is the time the nodes' threads and the client's spent
	// runnable but waiting for a CPU, summed over all of them, per batch: on a
	// machine with fewer cores than busy threads, the part of a batch's latency
	// that is the scheduler's and not the server's.
	runqWaitPerBatch time.Duration
}

func (r seriesResult) String() string {
	s := fmt.Sprintf("%.1f MB/s, p50 %.2f ms, p99 %.2f ms, max %.2f ms, leader %.0f cpu-ms/GB", r.mbps,
		r.p50.Seconds()*1e3, r.p99.Seconds()*1e3, r.max.Seconds()*1e3, r.leaderCPU.Seconds()*1e3)
	if r.backupCPU > 0 {
		s += fmt.Sprintf(", backups %.0f cpu-ms/GB", r.backupCPU.Seconds()*1e3)
	}
	return s + fmt.Sprintf(", run-queue wait %.2f ms/batch", r.runqWaitPerBatch.Seconds()*1e3)
}

// startPinned starts n nodes of shards shards each (n = 1: the single-node server)
// with the load's topic of one partition, and returns them once they serve.
func startPinned(b *testing.B, n, shards int) *cluster {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := newCluster(b, n)
	c.single = n == 1
	c.shards = shards
	c.pprof = os.Getenv("IGGY_CLUSTERTEST_PROFILE_DIR") != ""
	c.startAll()
	leader := c.awaitLeader(ctx, c.nodes)
	cl, err := leader.dial(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	if _, err := cl.CreateStream(ctx, loadStream); err != nil {
		b.Fatal(err)
	}
	if _, err := cl.CreateTopic(ctx, client.NameID(loadStream), loadTopic, 1, nil); err != nil {
		b.Fatal(err)
	}
	return c
}

// discardPinned stops the nodes and removes their data now, not at the end of the
// benchmark: each op writes 1.2 GB at the defaults, and the data of a long run
// (-benchtime 300x: 360 GB) would not fit on the disk.
func discardPinned(b *testing.B, c *cluster) {
	c.stop()
	for _, n := range c.nodes {
		if err := os.RemoveAll(n.dir); err != nil {
			b.Fatal(err)
		}
	}
}

// pinnedSeries sends batches batches of 1000 x 1000 B to partition 0 through one
// client at the leader, one at a time, and returns the throughput of the payload
// acknowledged and the latency from each Send to its acknowledgement.
func pinnedSeries(b *testing.B, c *cluster, batches int, label string) seriesResult {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	leader := c.awaitLeader(ctx, c.nodes)
	cl, err := leader.dial(ctx, client.WithRequestTimeout(60*time.Second))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	messageBytes := envInt(b, "IGGY_CLUSTERTEST_MESSAGE_BYTES", benchMessageBytes)
	payload := make([]byte, messageBytes)
	for i := range payload {
		payload[i] = byte('a' + i%26)
	}
	msgs := make([]client.Message, benchBatchMessages)
	for i := range msgs {
		msgs[i] = client.Message{Payload: payload}
	}
	target := wire.Partitioning{Kind: wire.PartitioningPartitionID, PartitionID: 0}
	send := func() {
		if _, err := cl.SendMessages(ctx, client.NameID(loadStream), client.NameID(loadTopic), target, msgs); err != nil {
			b.Fatal(err)
		}
	}
	for range pinnedWarmupBatches {
		send()
	}
	profiled := profileNodes(b, c, label)
	cpuBefore := nodesCPU(b, c)
	waitBefore := runQueueWait(b, c)
	latencies := make([]time.Duration, 0, batches)
	sentMono := make([]int64, 0, batches)
	start := time.Now()
	for range batches {
		sentMono = append(sentMono, monotonicNs())
		sent := time.Now()
		send()
		latencies = append(latencies, time.Since(sent))
	}
	elapsed := time.Since(start)
	writeBatchTrace(b, c, leader, label, sentMono, latencies)
	cpuAfter := nodesCPU(b, c)
	waitAfter := runQueueWait(b, c)
	profiled.Wait()
	slices.Sort(latencies)
	gb := float64(batches*benchBatchMessages*messageBytes) / 1e9
	r := seriesResult{
		mbps: gb * 1e3 / elapsed.Seconds(),
		p50:  percentile(latencies, 0.50),
		p99:  percentile(latencies, 0.99),
		max:  latencies[len(latencies)-1],

		runqWaitPerBatch: (waitAfter - waitBefore) / time.Duration(batches),
	}
	var backups time.Duration
	for i, n := range c.nodes {
		spent := cpuAfter[i] - cpuBefore[i]
		if n == leader {
			r.leaderCPU = time.Duration(float64(spent) / gb)
		} else {
			backups += spent
		}
	}
	if len(c.nodes) > 1 {
		r.backupCPU = time.Duration(float64(backups) / gb / float64(len(c.nodes)-1))
	}
	return r
}

// monotonicNs is CLOCK_MONOTONIC, the clock `perf record -k CLOCK_MONOTONIC`
// stamps its events with.
func monotonicNs() int64 {
	const clockMonotonic = 1 // CLOCK_MONOTONIC in linux/time.h
	var ts syscall.Timespec
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockMonotonic, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		panic(errno)
	}
	return ts.Nano()
}

// writeBatchTrace writes, when IGGY_CLUSTERTEST_TRACE_DIR is set, the series'
// batches in send order (send time on CLOCK_MONOTONIC and latency, both in ns)
// after a line of the pids (client, then each node by id, the leader marked), and
// each node's log so far.
func writeBatchTrace(b *testing.B, c *cluster, leader *node, label string, sentMono []int64, latencies []time.Duration) {
	dir := os.Getenv("IGGY_CLUSTERTEST_TRACE_DIR")
	if dir == "" {
		return
	}
	var out strings.Builder
	fmt.Fprintf(&out, "client %d", os.Getpid())
	for _, n := range c.nodes {
		mark := ""
		if n == leader {
			mark = "*"
		}
		fmt.Fprintf(&out, " node%d%s %d", n.id, mark, n.proc.cmd.Process.Pid)
	}
	out.WriteString("\n")
	for i, at := range sentMono {
		fmt.Fprintf(&out, "%d %d\n", at, latencies[i].Nanoseconds())
	}
	if err := os.WriteFile(filepath.Join(dir, label+"-batches.txt"), []byte(out.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	for _, n := range c.nodes {
		path := filepath.Join(dir, fmt.Sprintf("%s-node%d.log", label, n.id))
		if err := os.WriteFile(path, []byte(n.proc.log.String()), 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

// nodesCPU is the CPU time (user and system) each node's process has used.
func nodesCPU(b *testing.B, c *cluster) []time.Duration {
	out := make([]time.Duration, len(c.nodes))
	for i, n := range c.nodes {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", n.proc.cmd.Process.Pid))
		if err != nil {
			b.Fatal(err)
		}
		// The fields after the command's closing parenthesis: utime and stime are
		// the 12th and 13th, in clock ticks (100 a second on Linux).
		_, rest, _ := strings.Cut(string(stat), ") ")
		fields := strings.Fields(rest)
		if len(fields) < 13 {
			b.Fatalf("/proc/%d/stat: %q", n.proc.cmd.Process.Pid, stat)
		}
		utime, _ := strconv.ParseInt(fields[11], 10, 64)
		stime, _ := strconv.ParseInt(fields[12], 10, 64)
		out[i] = time.Duration(utime+stime) * 10 * time.Millisecond
	}
	return out
}

// runQueueWait is the time every thread of the nodes' processes and of this one
// (the client) has spent runnable but waiting for a CPU: the second field of
// /proc/<pid>/task/<tid>/schedstat, in nanoseconds (Documentation/scheduler/
// sched-stats.rst in the kernel). Threads that ended between two readings drop
// their share, so the difference is a lower bound.
func runQueueWait(b *testing.B, c *cluster) time.Duration {
	pids := []int{os.Getpid()}
	for _, n := range c.nodes {
		pids = append(pids, n.proc.cmd.Process.Pid)
	}
	var total time.Duration
	for _, pid := range pids {
		tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		if err != nil {
			b.Fatal(err)
		}
		for _, task := range tasks {
			stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/schedstat", pid, task.Name()))
			if err != nil {
				continue // the thread ended
			}
			fields := strings.Fields(string(stat))
			if len(fields) < 2 {
				b.Fatalf("/proc/%d/task/%s/schedstat: %q", pid, task.Name(), stat)
			}
			waitNs, _ := strconv.ParseInt(fields[1], 10, 64)
			total += time.Duration(waitNs)
		}
	}
	return total
}

// profileNodes starts a CPU profile of every node over the next
// IGGY_CLUSTERTEST_PROFILE_SECONDS, written to IGGY_CLUSTERTEST_PROFILE_DIR as
// label-node<id>.pprof, when that is set; the WaitGroup is done when all are
// written.
func profileNodes(b *testing.B, c *cluster, label string) *sync.WaitGroup {
	var wg sync.WaitGroup
	dir := os.Getenv("IGGY_CLUSTERTEST_PROFILE_DIR")
	if dir == "" {
		return &wg
	}
	seconds := envInt(b, "IGGY_CLUSTERTEST_PROFILE_SECONDS", 5)
	for _, n := range c.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			url := fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/profile?seconds=%d", n.pprofPort, seconds)
			resp, err := http.Get(url)
			if err != nil {
				b.Errorf("profile of node %d: %v", n.id, err)
				return
			}
			defer resp.Body.Close()
			out, err := os.Create(filepath.Join(dir, fmt.Sprintf("%s-node%d.pprof", label, n.id)))
			if err != nil {
				b.Errorf("profile of node %d: %v", n.id, err)
				return
			}
			defer out.Close()
			if _, err := io.Copy(out, resp.Body); err != nil {
				b.Errorf("profile of node %d: %v", n.id, err)
			}
		}()
	}
	return &wg
}

func envInt(b *testing.B, name string, fallback int) int {
	v := os.Getenv(name)
	if v == "" {
		return fallback
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		b.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

func median64(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}
