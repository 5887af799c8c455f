package clustertest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/wire"
)

// BenchmarkCatchUpPerGB: a backup of a three-node cluster is killed with SIGKILL,
// the two others take batches it misses, the writer stops, and the backup restarts.
// Reported: how long from its restart until its copy of the partition ends where
// the leader's does, as seconds per GB missed and MB/s, against the rate at which
// the cluster wrote those bytes (one node down), measured in the same run.
//
//	repair:   fewer ops and bytes than the primary retains (64 ops, 16 MiB): the
//	          restarted node repairs them from the primary's ring.
//	transfer: far more (256 MB): the node takes a state transfer of the segments it lacks
//	          (those it holds byte for byte are not sent again).
//
// Run it with -benchtime 1x; every run starts its own cluster.
func BenchmarkCatchUpPerGB(b *testing.B) {
	for _, tc := range []struct {
		name            string
		batches         int
		messagesInBatch int
	}{
		{"repair", 40, 100},     // 40 ops of 100 KB: 4 MB
		{"transfer", 256, 1000}, // 256 ops of 1 MB: 256 MB
	} {
		b.Run(tc.name, func(b *testing.B) {
			for range b.N {
				writeMBps, catchUp, missedBytes := measureCatchUpPerGB(b, tc.batches, tc.messagesInBatch)
				gb := float64(missedBytes) / 1e9
				b.ReportMetric(catchUp.Seconds()/gb, "s/GB")
				b.ReportMetric(float64(missedBytes)/1e6/catchUp.Seconds(), "catchup-MB/s")
				b.ReportMetric(writeMBps, "write-MB/s-one-down")
				b.ReportMetric(float64(missedBytes)/1e6, "missed-MB")
			}
		})
	}
}

func measureCatchUpPerGB(b *testing.B, batches, messagesInBatch int) (writeMBps float64, catchUp time.Duration, missedBytes int64) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := startBenchCluster(b, 3, 1)
	defer c.stop()
	leader := c.awaitLeader(ctx, c.nodes)
	cl, err := leader.dial(ctx, client.WithRequestTimeout(60*time.Second))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	payload := make([]byte, benchMessageBytes)
	for i := range payload {
		payload[i] = byte('a' + i%26)
	}
	msgs := make([]client.Message, messagesInBatch)
	for i := range msgs {
		msgs[i] = client.Message{Payload: payload}
	}
	target := wire.Partitioning{Kind: wire.PartitioningPartitionID, PartitionID: 0}
	send := func(n int) {
		for range n {
			if _, err := cl.SendMessages(ctx, client.NameID(loadStream), client.NameID(loadTopic), target, msgs); err != nil {
				b.Fatal(err)
			}
		}
	}
	send(8) // every node holds a start
	victim := c.others(leader)[0]
	if _, err := awaitSameEnd(ctx, victim, leader); err != nil {
		b.Fatal(err)
	}
	victim.kill()
	started := time.Now()
	send(batches)
	missedBytes = int64(batches * messagesInBatch * benchMessageBytes)
	writeMBps = float64(missedBytes) / 1e6 / time.Since(started).Seconds()
	victim.start()
	restarted := time.Now()
	end, err := awaitSameEnd(ctx, victim, leader)
	if err != nil {
		b.Fatal(err)
	}
	catchUp = time.Since(restarted)
	b.Logf("node %d caught up on %d MB (%d batches) in %v; the cluster wrote them at %.1f MB/s with it down; partition ends at offset %d",
		victim.id, missedBytes/1e6, batches, catchUp, writeMBps, end)
	return writeMBps, catchUp, missedBytes
}

// awaitSameEnd waits until n's copy of partition 0 ends at the offset the leader's
// does, and returns it.
func awaitSameEnd(ctx context.Context, n, leader *node) (uint64, error) {
	want, err := partitionEnd(ctx, leader)
	if err != nil {
		return 0, err
	}
	for {
		got, err := partitionEnd(ctx, n)
		if err == nil && got == want {
			return got, nil
		}
		if !waitCtx(ctx, 20*time.Millisecond) {
			return 0, fmt.Errorf("node %d ends at %d, the leader at %d: %v", n.id, got, want, err)
		}
	}
}

// partitionEnd is partition 0's current offset as node n serves it.
func partitionEnd(ctx context.Context, n *node) (uint64, error) {
	attempt, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	cl, err := n.dial(attempt, client.WithLeaderRedirection(false))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	t, err := cl.GetTopic(attempt, client.NameID(loadStream), client.NameID(loadTopic))
	if err != nil {
		return 0, err
	}
	if len(t.Partitions) == 0 {
		return 0, fmt.Errorf("node %d: no partition", n.id)
	}
	return t.Partitions[0].CurrentOffset, nil
}
