package clustertest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/wire"
)

// Benchmarks of a real cluster against a real single node, both started in the same
// run on the same machine (go test -bench . -benchtime 100x; README.md). Each op is
// one batch from every producer; MB/s counts the payload bytes acknowledged.

const (
	benchBatchMessages = 1000
	benchMessageBytes  = 1000
)

// BenchmarkReplicatedProduce: produce throughput and batch latency (p50, p99, p999
// of the time from a Send to its acknowledgement) on a single node (the baseline)
// and on a three-node cluster, where a batch is acknowledged once a quorum has it;
// 1 producer on 1 partition, and 4 producers on 4 partitions. The three-node rows
// report their throughput as a fraction of the single node's, measured just before.
func BenchmarkReplicatedProduce(b *testing.B) {
	for _, producers := range []int{1, 4} {
		// Each setup runs alone: the single node is stopped before the cluster
		// starts. (They start here, not in the sub-benchmarks, whose cleanups run
		// after every round of b.N.)
		single := startBenchCluster(b, 1, uint32(producers))
		var singleMBps float64
		b.Run(fmt.Sprintf("producers=%d/nodes=1", producers), func(b *testing.B) {
			singleMBps = benchProduce(b, single, producers, 0)
		})
		single.stop()
		three := startBenchCluster(b, 3, uint32(producers))
		b.Run(fmt.Sprintf("producers=%d/nodes=3", producers), func(b *testing.B) {
			benchProduce(b, three, producers, singleMBps)
		})
		three.stop()
	}
}

// startBenchCluster starts n nodes (n = 1: the single-node server, without
// [cluster]) with a topic of partitions partitions, and returns it once it serves.
func startBenchCluster(b *testing.B, n int, partitions uint32) *cluster {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := newCluster(b, n)
	c.single = n == 1
	// A shard per partition at most, on the machine's cores.
	c.shards = 2
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
	if _, err := cl.CreateTopic(ctx, client.NameID(loadStream), loadTopic, partitions, nil); err != nil {
		b.Fatal(err)
	}
	return c
}

// benchProduce runs b.N batches per producer, each producer on its own partition and
// connection, and reports MB/s, latency percentiles and, against a baseline, the
// ratio; it returns the MB/s.
func benchProduce(b *testing.B, c *cluster, producers int, baselineMBps float64) float64 {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	clients := make([]*client.Client, producers)
	for i := range clients {
		cl, err := c.nodes[i%len(c.nodes)].dial(ctx, client.WithRequestTimeout(60*time.Second))
		if err != nil {
			b.Fatal(err)
		}
		defer cl.Close()
		clients[i] = cl
	}
	payload := make([]byte, benchMessageBytes)
	for i := range payload {
		payload[i] = byte('a' + i%26)
	}
	msgs := make([][]client.Message, producers)
	for i := range msgs {
		msgs[i] = make([]client.Message, benchBatchMessages)
		for j := range msgs[i] {
			msgs[i][j] = client.Message{Payload: payload}
		}
	}
	latencies := make([][]time.Duration, producers)
	for i := range latencies {
		latencies[i] = make([]time.Duration, 0, b.N)
	}
	errs := make([]error, producers)
	b.SetBytes(int64(producers * benchBatchMessages * benchMessageBytes))
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			target := wire.Partitioning{Kind: wire.PartitioningPartitionID, PartitionID: uint32(p)}
			for range b.N {
				sent := time.Now()
				if _, err := clients[p].SendMessages(ctx, client.NameID(loadStream), client.NameID(loadTopic), target, msgs[p]); err != nil {
					errs[p] = err
					return
				}
				latencies[p] = append(latencies[p], time.Since(sent))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	for p, err := range errs {
		if err != nil {
			b.Fatalf("producer %d: %v", p, err)
		}
	}
	var all []time.Duration
	for _, l := range latencies {
		all = append(all, l...)
	}
	slices.Sort(all)
	b.ReportMetric(percentile(all, 0.50).Seconds()*1e3, "p50-ms")
	b.ReportMetric(percentile(all, 0.99).Seconds()*1e3, "p99-ms")
	b.ReportMetric(percentile(all, 0.999).Seconds()*1e3, "p999-ms")
	mbps := float64(b.N*producers*benchBatchMessages*benchMessageBytes) / elapsed.Seconds() / 1e6
	if baselineMBps > 0 {
		b.ReportMetric(mbps/baselineMBps, "x-single-node")
	}
	return mbps
}

// percentile of sorted durations, nearest rank.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// failoverRuns is how many primaries BenchmarkFailover kills.
const failoverRuns = 20

// BenchmarkFailover kills the primary of a three-node cluster with SIGKILL while a
// Client writes small batches, failoverRuns times, each on a fresh cluster, and
// reports median and max of the time from the kill to the first write acknowledged
// afterwards (by the new primary: the election, and the client's way to it), and of
// the time until the survivors' metadata names the new leader. The
// timings are the tests' (heartbeat_timeout 2 s). Run it with -benchtime 1x: one op
// is the whole series.
func BenchmarkFailover(b *testing.B) {
	for range b.N {
		var failovers, elections []time.Duration
		for run := range failoverRuns {
			election, failover := measureFailover(b)
			b.Logf("run %d: survivors agree on a new leader %v, first acknowledged write %v after the kill", run, election, failover)
			failovers = append(failovers, failover)
			elections = append(elections, election)
		}
		b.ReportMetric(median(failovers).Seconds()*1e3, "failover-p50-ms")
		b.ReportMetric(slices.Max(failovers).Seconds()*1e3, "failover-max-ms")
		b.ReportMetric(median(elections).Seconds()*1e3, "election-p50-ms")
		b.ReportMetric(slices.Max(elections).Seconds()*1e3, "election-max-ms")
	}
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// startLoadedCluster starts three nodes with the load's topic of one partition and
// a sync writer on it, and returns once progressBatches are acknowledged.
func startLoadedCluster(b *testing.B, ctx context.Context) (*cluster, *node, *partitionLog, *writers) {
	c := newCluster(b, 3)
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
	log := newPartitionLog(0)
	w := newWriters()
	w.syncWriter(ctx, c.nodes, log)
	if err := log.awaitAcked(ctx, progressBatches); err != nil {
		w.halt()
		b.Fatal(err)
	}
	return c, leader, log, w
}

// measureFailover returns the time from the kill signal until the survivors'
// metadata agrees on a new leader (polled every 100 ms), and until the first
// acknowledged write of a batch sent after the primary had exited: one only a
// survivor can have acknowledged. (It once counted from after the kill's wait for
// the exit and the ports, and took the first acknowledgement after that instant
// while it waited for one counted before it: a batch the dying primary answered
// meanwhile ended the wait with no acknowledgement after the instant, and the
// zero time gave a negative duration.)
func measureFailover(b *testing.B) (election, failover time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, leader, log, w := startLoadedCluster(b, ctx)
	defer c.stop()
	defer w.halt()
	killedAt, exitedAt := leader.kill()
	if exitedAt.IsZero() {
		b.Fatalf("node %d did not exit after SIGKILL", leader.id)
	}
	c.awaitLeader(ctx, c.others(leader))
	election = time.Since(killedAt)
	ackedAt, err := log.awaitAckOfSentAfter(ctx, exitedAt)
	if err != nil {
		b.Fatal(err)
	}
	return election, ackedAt.Sub(killedAt)
}

// catchUpBatches is how many batches BenchmarkCatchUp writes while a backup is down.
const catchUpBatches = 200

// BenchmarkCatchUp kills a backup with SIGKILL, writes catchUpBatches batches
// (batchMessages messages of payloadBytes, one at a time) to the two others, and
// reports the rate of those writes, then restarts it and reports the time until its
// copy holds every batch acknowledged by the restart, while the writer goes on.
// Run it with -benchtime 1x.
func BenchmarkCatchUp(b *testing.B) {
	for range b.N {
		downRate, catchUp, held := measureCatchUp(b)
		b.ReportMetric(downRate, "batches/s-one-down")
		b.ReportMetric(catchUp.Seconds()*1e3, "catchup-ms")
		b.ReportMetric(float64(held), "batches-held")
	}
}

// measureCatchUp returns the writer's rate while the backup is down (batches per
// second), the restarted backup's catch-up time and the batches it had to hold.
func measureCatchUp(b *testing.B) (float64, time.Duration, int) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, leader, log, w := startLoadedCluster(b, ctx)
	defer c.stop()
	defer w.halt()
	// The same writer's rate with every node up: the baseline.
	healthyFrom, healthyAcked := time.Now(), log.ackedCount()
	if err := log.awaitAcked(ctx, healthyAcked+catchUpBatches); err != nil {
		b.Fatal(err)
	}
	healthyRate := catchUpBatches / time.Since(healthyFrom).Seconds()
	b.ReportMetric(healthyRate, "batches/s-all-up")
	victim := c.others(leader)[0]
	victim.kill()
	killedAt := time.Now()
	if err := log.awaitAcked(ctx, log.ackedCount()+catchUpBatches); err != nil {
		b.Fatal(err)
	}
	downRate := catchUpBatches / time.Since(killedAt).Seconds()
	b.Logf("%d batches written in %v with backup node %d down: %.1f batches/s (%.1f with every node up)",
		catchUpBatches, time.Since(killedAt), victim.id, downRate, healthyRate)
	acked, _ := log.snapshot()
	victim.start()
	restartedAt := time.Now()
	if _, err := awaitCaughtUp(ctx, victim, log, acked); err != nil {
		b.Fatal(err)
	}
	return downRate, time.Since(restartedAt), len(acked)
}
