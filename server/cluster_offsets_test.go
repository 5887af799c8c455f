package server

import (
	"fmt"
	"testing"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/wire"
)

// A consumer offset stored at AckQuorum (what the SDKs send) through a cluster's
// partition primary is answered once its group applied it, and every node then
// serves it; deleting it likewise. (The store used to answer 58 in a cluster
// whatever happened, so the SDKs retried until their deadline.)
func TestClusterConsumerOffsetAtQuorum(t *testing.T) {
	cfgs := clusterConfigs(t, 3, testClusterSecret)
	servers := startCluster(t, cfgs)
	pc := dialCluster(t, servers[0])
	if _, err := pc.CreateStream(testContext(t), "orders"); err != nil {
		t.Fatal(err)
	}
	if _, err := pc.CreateTopic(testContext(t), client.NameID("orders"), "events", 1, nil); err != nil {
		t.Fatal(err)
	}
	clients := []*client.Client{pc, dialCluster(t, servers[1]), dialCluster(t, servers[2])}
	to0 := wire.Partitioning{Kind: wire.PartitioningPartitionID, PartitionID: 0}
	if _, err := pc.SendMessages(testContext(t), client.NameID("orders"), client.NameID("events"), to0, messages(10, "m")); err != nil {
		t.Fatal(err)
	}
	consumer := wire.Consumer{Kind: wire.ConsumerSingle, ID: wire.NumericIdentifier(7)}
	partition := wire.OptionalPartition{Set: true, ID: 0}
	for _, offset := range []uint64{3, 8} {
		err := pc.StoreConsumerOffset(testContext(t), &wire.StoreConsumerOffset{Consumer: consumer, StreamID: client.NameID("orders"),
			TopicID: client.NameID("events"), Partition: partition, Offset: offset, Ack: wire.AckQuorum})
		if err != nil {
			t.Fatalf("StoreConsumerOffset %d at the partition's primary: %v", offset, err)
		}
		for i, c := range clients {
			waitUntil(t, fmt.Sprintf("offset %d on node %d", offset, i), func() bool {
				o, ok, err := c.GetConsumerOffset(testContext(t), &wire.GetConsumerOffset{Consumer: consumer, StreamID: client.NameID("orders"),
					TopicID: client.NameID("events"), Partition: partition})
				return err == nil && ok && o.StoredOffset == offset
			})
		}
	}
	err := pc.DeleteConsumerOffset(testContext(t), &wire.DeleteConsumerOffset{Consumer: consumer, StreamID: client.NameID("orders"),
		TopicID: client.NameID("events"), Partition: partition, Ack: wire.AckQuorum})
	if err != nil {
		t.Fatalf("DeleteConsumerOffset at the partition's primary: %v", err)
	}
	for i, c := range clients {
		waitUntil(t, fmt.Sprintf("no offset on node %d", i), func() bool {
			_, ok, err := c.GetConsumerOffset(testContext(t), &wire.GetConsumerOffset{Consumer: consumer, StreamID: client.NameID("orders"),
				TopicID: client.NameID("events"), Partition: partition})
			return err == nil && !ok
		})
	}
}
