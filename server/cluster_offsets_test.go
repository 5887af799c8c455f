package server

import (
	"context"
	"fmt"
	"testing"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/wire"
)

// A consumer offset stored at AckQuorum (what the SDKs send) through a cluster's
// partition primary (where a user that follows the leader sends it) is answered
// once its group applied it, and every node then serves it; deleting it likewise. (The store used to answer 58 in a cluster
// whatever happened, so the SDKs retried until their deadline.)
func TestClusterConsumerOffsetAtQuorum(t *testing.T) {
	cfgs := clusterConfigs(t, 3, testClusterSecret)
	servers := formCluster(t, cfgs)
	u := dialClusterUser(t, servers[0])
	u.createStream("orders")
	u.createTopic("orders", "events", 1, nil)
	clients := []*client.Client{dialCluster(t, servers[0]), dialCluster(t, servers[1]), dialCluster(t, servers[2])}
	u.sendTo("orders", "events", 0, messages(10, "m"))
	consumer := wire.Consumer{Kind: wire.ConsumerSingle, ID: wire.NumericIdentifier(7)}
	partition := wire.OptionalPartition{Set: true, ID: 0}
	for _, offset := range []uint64{3, 8} {
		u.storeOffsetOf(consumer, "orders", "events", 0, offset)
		for i, c := range clients {
			waitUntil(t, fmt.Sprintf("offset %d on node %d", offset, i), func() bool {
				o, ok, err := c.GetConsumerOffset(testContext(t), &wire.GetConsumerOffset{Consumer: consumer, StreamID: client.NameID("orders"),
					TopicID: client.NameID("events"), Partition: partition})
				return err == nil && ok && o.StoredOffset == offset
			})
		}
	}
	u.must("DeleteConsumerOffset", func(ctx context.Context, c *client.Client) error {
		return c.DeleteConsumerOffset(ctx, &wire.DeleteConsumerOffset{Consumer: consumer, StreamID: client.NameID("orders"),
			TopicID: client.NameID("events"), Partition: partition, Ack: wire.AckQuorum})
	})
	for i, c := range clients {
		waitUntil(t, fmt.Sprintf("no offset on node %d", i), func() bool {
			_, ok, err := c.GetConsumerOffset(testContext(t), &wire.GetConsumerOffset{Consumer: consumer, StreamID: client.NameID("orders"),
				TopicID: client.NameID("events"), Partition: partition})
			return err == nil && !ok
		})
	}
}
