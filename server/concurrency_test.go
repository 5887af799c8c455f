package server

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/wire"
)

// TestProducersAndGroupConsumersAcrossShards: producers on every shard fill the
// partitions of a topic while a consumer group consumes it; members join and
// disconnect meanwhile (rebalancing). Every message is consumed, and no
// (partition, offset) is delivered to two members.
func TestProducersAndGroupConsumersAcrossShards(t *testing.T) {
	s := testServer(t, t.TempDir(), 3)
	admin := dialRoot(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const (
		partitions       = 6
		producers        = 4
		batchesPerWorker = 30
		batchMessages    = 5
		total            = producers * batchesPerWorker * batchMessages
	)
	_, err := admin.CreateStream(ctx, "cg")
	mustOK(t, "CreateStream", err)
	_, err = admin.CreateTopic(ctx, client.NameID("cg"), "t", partitions, nil)
	mustOK(t, "CreateTopic", err)
	_, err = admin.CreateConsumerGroup(ctx, client.NameID("cg"), client.NameID("t"), "g")
	mustOK(t, "CreateConsumerGroup", err)

	var producing sync.WaitGroup
	for w := 0; w < producers; w++ {
		c := dialRoot(t, s)
		producing.Add(1)
		go func(w int) {
			defer producing.Done()
			for b := 0; b < batchesPerWorker; b++ {
				_, err := c.SendMessages(ctx, client.NameID("cg"), client.NameID("t"), wire.Partitioning{Kind: wire.PartitioningBalanced}, messages(batchMessages, fmt.Sprintf("w%d-b%d", w, b)))
				if err != nil {
					t.Errorf("producer %d: %v", w, err)
					return
				}
			}
		}(w)
	}

	type delivery struct {
		partition uint32
		offset    uint64
	}
	var mu sync.Mutex
	seen := make(map[delivery]int) // -> member
	consumed := 0
	// leaverConsumed is closed once member 0, the one that leaves, has consumed a
	// message: the rebalance then moves partitions it has committed offsets on.
	leaverConsumed := make(chan struct{})
	leaverStarted := false
	consume := func(member int, c *client.Client, stop <-chan struct{}) {
		group := client.NameID("g")
		mustOK(t, "JoinConsumerGroup", c.JoinConsumerGroup(ctx, client.NameID("cg"), client.NameID("t"), group))
		for round := 0; round < 10_000; round++ {
			select {
			case <-stop:
				return
			case <-ctx.Done():
				return
			default:
			}
			a, err := c.SyncConsumerGroup(ctx, client.NameID("cg"), client.NameID("t"), group)
			if err != nil {
				t.Errorf("member %d sync: %v", member, err)
				return
			}
			for _, p := range a.PartitionIDs {
				polled, err := c.PollMessages(ctx, &wire.PollMessages{Consumer: client.GroupConsumer(group), StreamID: client.NameID("cg"),
					TopicID: client.NameID("t"), Partition: wire.SomePartition(p), Strategy: wire.PollingStrategy{Kind: wire.PollingNext}, Count: 7, AutoCommit: true})
				if err != nil {
					t.Errorf("member %d poll: %v", member, err)
					return
				}
				mu.Lock()
				for it := polled.Messages(); it.Next(); {
					d := delivery{partition: polled.PartitionID, offset: it.Message().Offset}
					if other, dup := seen[d]; dup {
						t.Errorf("partition %d offset %d delivered to members %d and %d", d.partition, d.offset, other, member)
					}
					seen[d] = member
					consumed++
					if member == 0 && !leaverStarted {
						leaverStarted = true
						close(leaverConsumed)
					}
				}
				mu.Unlock()
			}
			mu.Lock()
			done := consumed >= total
			mu.Unlock()
			if done {
				return
			}
			time.Sleep(time.Millisecond)
		}
	}

	var consuming sync.WaitGroup
	stopLeaver := make(chan struct{})
	for m := 0; m < 3; m++ {
		c := dialRoot(t, s)
		stop := make(chan struct{})
		if m == 0 {
			stop = stopLeaver
		}
		consuming.Add(1)
		go func(m int) {
			defer consuming.Done()
			consume(m, c, stop)
			if m == 0 {
				c.Close() // disconnects: the server makes it leave the group
			}
		}(m)
	}
	// Rebalance while consuming: once the member that leaves has consumed, it leaves
	// by disconnecting, and one joins.
	select {
	case <-leaverConsumed:
	case <-ctx.Done():
		t.Fatal("member 0 consumed nothing before the deadline")
	}
	close(stopLeaver)
	late := dialRoot(t, s)
	consuming.Add(1)
	go func() { defer consuming.Done(); consume(3, late, nil) }()

	producing.Wait()
	consuming.Wait()
	if consumed != total {
		t.Fatalf("consumed %d messages, want %d", consumed, total)
	}
	g, err := admin.GetConsumerGroup(ctx, client.NameID("cg"), client.NameID("t"), client.NameID("g"))
	mustOK(t, "GetConsumerGroup", err)
	if g.MembersCount != 3 {
		t.Fatalf("%d members after one disconnected, want 3", g.MembersCount)
	}
}
