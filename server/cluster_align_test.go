package server

import (
	"fmt"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/shard"
	"github.com/iggy-shard/iggy-shard/wire"
)

// A topic created after a failover has its partitions led by the node that leads
// the metadata group, the node GetClusterMetadata names and the SDKs write to: its
// partition groups start in the view of the op that created them. (They started in
// view 0, led by node 0 whatever led the cluster: with node 0 back from a restart,
// every send at the leader was answered 58 for ever.)
func TestClusterNewTopicLedByTheLeader(t *testing.T) {
	cfgs := clusterConfigs(t, 3, testClusterSecret)
	servers := startCluster(t, cfgs)
	stopServer(t, servers[0])
	var leader uint8
	waitUntil(t, "another node leads", func() (ok bool) {
		leader, ok = agreedLeader(servers[1:])
		return ok && leader != 0
	})
	servers[0] = startTestServer(t, cfgs[0])
	waitUntil(t, "node 0 rejoins", func() bool { l, ok := agreedLeader(servers); return ok && l == leader })
	lc := dialCluster(t, servers[leader])
	if _, err := lc.CreateStream(testContext(t), "later"); err != nil {
		t.Fatal(err)
	}
	if _, err := lc.CreateTopic(testContext(t), client.NameID("later"), "events", 2, nil); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Second)
	for p := uint32(0); p < 2; p++ {
		to := wire.Partitioning{Kind: wire.PartitioningPartitionID, PartitionID: p}
		for {
			_, err := lc.SendMessages(testContext(t), client.NameID("later"), client.NameID("events"), to, messages(1, "m"))
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("partition %d: a send at the metadata leader (node %d): %v", p, leader, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// Partitions whose groups moved away from the metadata leader (here node 2 takes
// them over, as a partition group's own view change would) come back to it:
// clients write where GetClusterMetadata names the leader, and sends there succeed
// again.
func TestClusterPartitionsFollowTheLeader(t *testing.T) {
	cfgs := clusterConfigs(t, 3, testClusterSecret)
	servers := startCluster(t, cfgs)
	pc := dialCluster(t, servers[0])
	if _, err := pc.CreateStream(testContext(t), "s"); err != nil {
		t.Fatal(err)
	}
	const partitions = 4
	if _, err := pc.CreateTopic(testContext(t), client.NameID("s"), "t", partitions, nil); err != nil {
		t.Fatal(err)
	}
	send := func(p uint32) error {
		to := wire.Partitioning{Kind: wire.PartitioningPartitionID, PartitionID: p}
		_, err := pc.SendMessages(testContext(t), client.NameID("s"), client.NameID("t"), to, messages(1, "m"))
		return err
	}
	for p := uint32(0); p < partitions; p++ {
		waitUntil(t, fmt.Sprintf("partition %d takes sends at node 0", p), func() bool { return send(p) == nil })
	}
	moved := 0
	err := servers[2].rt.Inspect(testContext(t), func(sh *shard.Shard) {
		moved += servers[2].handlers[sh.Index()].owned.Store.LeadGroups(partitions)
	})
	if err != nil || moved != partitions {
		t.Fatalf("node 2 took over %d partitions (%v), want %d", moved, err, partitions)
	}
	for p := uint32(0); p < partitions; p++ {
		waitUntil(t, fmt.Sprintf("partition %d takes sends at the leader again", p), func() bool { return send(p) == nil })
	}
	if l, ok := agreedLeader(servers); !ok || l != 0 {
		t.Fatalf("the metadata leader moved to %d (%v)", l, ok)
	}
}
