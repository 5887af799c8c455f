package server

import (
	"fmt"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/shard"
	"github.com/iggy-shard/iggy-shard/vsr"
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

// Partitions whose groups moved away from the metadata leader (here a follower
// takes them over, as a partition group's own view change would) come back to it:
// clients write where GetClusterMetadata names the leader, and sends there succeed
// again. Where the leader is, is the point: the sends go to the leader's node
// alone, and the metadata leader must stay there all along. A stall of the test
// process that moves the leader meanwhile, or has the follower's groups changing
// views, leaves an attempt inconclusive, and the test tries again. An attempt
// needs the leader in place for a second or two (it takes its partitions back a
// heartbeat timeout after it took the lead, then once per heartbeat timeout):
// under a harness freezing the process every second or two many attempts are cut
// short, hence twice clusterWait for them.
func TestClusterPartitionsFollowTheLeader(t *testing.T) {
	servers := formCluster(t, clusterConfigs(t, 3, testClusterSecret))
	u := dialClusterUser(t, servers[0])
	u.createStream("s")
	const partitions = 4
	u.createTopic("s", "t", partitions, nil)
	const attemptsWait = 2 * clusterWait
	deadline := time.Now().Add(attemptsWait)
	for attempt := 1; ; attempt++ {
		inconclusive := partitionsFollowTheLeader(t, servers, partitions)
		if inconclusive == "" {
			return
		}
		t.Logf("attempt %d: %s: again", attempt, inconclusive)
		if time.Now().After(deadline) {
			t.Fatalf("no conclusive attempt in %v (%d attempts)", attemptsWait, attempt)
		}
	}
}

// partitionsFollowTheLeader has a follower take over every partition of topic s/t
// and waits until they come back to the metadata leader, with the leader in place
// all along. It returns why an attempt proved nothing either way (the leader
// moved, the follower could not take them all over now), or "". A partition that
// does not come back to a leader in place fails the test.
func partitionsFollowTheLeader(t *testing.T, servers []*Server, partitions int) (inconclusive string) {
	t.Helper()
	leader := awaitAgreedLeader(t, servers)
	moved := func() bool {
		l, ok := agreedLeader(servers)
		return !ok || l != leader
	}
	// backing counts the groups s backs in a normal view: those its takeover
	// moves (partition.Store.LeadGroups), if take.
	backing := func(s *Server, take bool) (backed, took int) {
		t.Helper()
		err := s.rt.Inspect(testContext(t), func(sh *shard.Shard) {
			store := s.handlers[sh.Index()].owned.Store
			for _, k := range store.Keys(nil) {
				if core := store.SimCore(k); core != nil && core.Status() == vsr.StatusNormal && !core.IsPrimary() {
					backed++
				}
			}
			if take {
				took += store.LeadGroups(partitions)
			}
		})
		if err != nil {
			t.Fatalf("Inspect: %v", err)
		}
		return backed, took
	}
	// A follower that backs every partition (after a stall the partitions may
	// still be led by the other, the leader before it).
	var follower *Server
	waitUntil(t, "a follower backs every partition", func() bool {
		for _, s := range servers {
			if s.cluster.self != leader && !moved() {
				if backed, _ := backing(s, false); backed == partitions {
					follower = s
					return true
				}
			}
		}
		return moved()
	})
	if follower == nil {
		return fmt.Sprintf("the metadata leader moved from node %d before a follower backed every partition", leader)
	}
	if backed, took := backing(follower, true); backed != partitions || took != backed {
		return fmt.Sprintf("node %d backed %d partitions of %d in a normal view, and took over %d of them", follower.cluster.self, backed, partitions, took)
	}
	lc := dialCluster(t, servers[leader])
	for p := uint32(0); p < uint32(partitions); p++ {
		to := wire.Partitioning{Kind: wire.PartitioningPartitionID, PartitionID: p}
		took := false
		waitUntil(t, fmt.Sprintf("partition %d takes sends at the leader, node %d, again", p, leader), func() bool {
			_, err := lc.SendMessages(testContext(t), client.NameID("s"), client.NameID("t"), to, messages(1, "m"))
			took = err == nil
			return took || moved()
		})
		if !took {
			return fmt.Sprintf("the metadata leader moved from node %d before partition %d came back", leader, p)
		}
	}
	if moved() {
		return fmt.Sprintf("the metadata leader moved from node %d while its partitions came back", leader)
	}
	return ""
}
