package server

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/wire"
)

// TestClusterMetadataLeaderTakesSendsOnceNamed: after the primary of a three-node
// cluster stops, the leader GetClusterMetadata names takes sends to a partition
// the old primary led within a fraction of the heartbeat timeout of being named.
// The cluster runs on its configuration's timers (heartbeat_timeout 2 s, the
// floor), not on the tests' override: the partition groups once kept the
// reference's 5 s default whatever the section said, so the new leader answered
// every send 58 for 3 s after the metadata group had elected it.
func TestClusterMetadataLeaderTakesSendsOnceNamed(t *testing.T) {
	const heartbeatTimeout = 2 * time.Second
	cfgs := clusterConfigs(t, 3, testClusterSecret)
	for i := range cfgs {
		c := &cfgs[i].Cluster
		cfgs[i].clusterTiming = nil
		c.HeartbeatTimeout = heartbeatTimeout
		c.CommitBroadcastInterval = 200 * time.Millisecond
		c.PrepareRetransmitInterval = 100 * time.Millisecond
		c.ViewChangeRetransmitInterval = 200 * time.Millisecond
		c.ViewChangeStatusTimeout = time.Second
		c.RequestStartViewRetransmitInterval = 500 * time.Millisecond
		c.RepairRetryInterval = 500 * time.Millisecond
		if err := c.Validate(); err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
	}
	servers := make([]*Server, len(cfgs))
	for i := range cfgs {
		servers[i] = startTestServer(t, cfgs[i])
	}
	waitUntil(t, "the cluster forms", func() bool { l, ok := agreedLeader(servers); return ok && l == 0 })
	pc := dialCluster(t, servers[0])
	if _, err := pc.CreateStream(testContext(t), "orders"); err != nil {
		t.Fatal(err)
	}
	if _, err := pc.CreateTopic(testContext(t), client.NameID("orders"), "events", 1, nil); err != nil {
		t.Fatal(err)
	}
	to0 := wire.Partitioning{Kind: wire.PartitioningPartitionID, PartitionID: 0}
	if _, err := pc.SendMessages(testContext(t), client.NameID("orders"), client.NameID("events"), to0, messages(1, "before")); err != nil {
		t.Fatalf("SendMessages at the primary: %v", err)
	}
	backups := []*client.Client{dialCluster(t, servers[1]), dialCluster(t, servers[2])}
	for i, c := range backups {
		waitUntil(t, fmt.Sprintf("the message reaches node %d", i+1), func() bool { return polledCount(t, c) == 1 })
	}

	stopServer(t, servers[0])
	stopped := time.Now()
	// The leader every survivor names, as a leader-aware client reads it.
	var leader int
	waitUntil(t, "the survivors name a new leader", func() bool {
		leader = -1
		for _, c := range backups {
			name, count := leaderOf(t, c)
			var id int
			if count != 1 || name == "node-0" {
				return false
			}
			if _, err := fmt.Sscanf(name, "node-%d", &id); err != nil || leader >= 0 && id != leader {
				return false
			}
			leader = id
		}
		return true
	})
	named := time.Now()
	at := backups[leader-1]
	var lastErr error
	waitUntil(t, "the named leader takes a send", func() bool {
		_, lastErr = at.SendMessages(testContext(t), client.NameID("orders"), client.NameID("events"), to0, messages(1, "after"))
		var code wire.ErrorCode
		if lastErr != nil && (!errors.As(lastErr, &code) || code != wire.ErrTransientNotAccepted) {
			t.Fatalf("SendMessages at the named leader: %v, want success or 58 TransientNotAccepted", lastErr)
		}
		return lastErr == nil
	})
	acked := time.Now()
	t.Logf("node-%d named leader %v after the stop, took a send %v after that", leader,
		named.Sub(stopped).Round(time.Millisecond), acked.Sub(named).Round(time.Millisecond))
	if lag := acked.Sub(named); lag > heartbeatTimeout/2 {
		t.Fatalf("the leader GetClusterMetadata named answered sends 58 for %v after it was named (heartbeat_timeout %v): its partition group elected later",
			lag.Round(time.Millisecond), heartbeatTimeout)
	}
}
