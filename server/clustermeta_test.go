package server

import (
	"net/netip"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/config"
	"github.com/iggy-shard/iggy-shard/wire"
)

// TestClusterMetadataOfACluster: every roster node is listed with the address
// advertised to the asking client, the metadata primary as the one leader, and a
// status from the last time each peer was heard from, and the ports of the
// transports it serves: tcp and http, never quic or websocket (0).
func TestClusterMetadataOfACluster(t *testing.T) {
	node := config.Default()
	node.Cluster = threeNodeCluster()
	cfg := &node.Cluster
	for i := range cfg.Nodes {
		p := &cfg.Nodes[i].Ports
		p.QUIC, p.HTTP, p.WebSocket = uint16(8080+i), uint16(3000+i), uint16(8070+i)
	}
	cfg.Name = "prod"
	cfg.Nodes[1].AdvertisedAddress = "203.0.113.11"
	cfg.Nodes[1].AdvertisedAddresses = []config.AdvertisedSelector{{ClientCIDR: netip.MustParsePrefix("10.0.0.0/8"), Address: "10.1.1.11"}}
	const timeout = 5 * time.Second
	now := int64(100 * time.Second)

	type want struct {
		ip     string
		port   uint16
		role   uint8
		status uint8
	}
	cases := []struct {
		name   string
		peer   string
		health clusterHealth
		want   [3]want
	}{
		{
			name: "all heard from, node 0 leads, client outside every selector",
			peer: "192.0.2.7",
			health: clusterHealth{self: 2, leader: 0, leaderKnown: true, nowNs: now, heartbeatTimeout: timeout,
				lastHeardNs: []int64{now - int64(time.Second), now - int64(timeout), 0}},
			want: [3]want{
				{"127.0.0.1", 8090, wire.ClusterRoleLeader, wire.ClusterNodeHealthy},
				{"203.0.113.11", 8091, wire.ClusterRoleFollower, wire.ClusterNodeHealthy},
				{"127.0.0.1", 8092, wire.ClusterRoleFollower, wire.ClusterNodeHealthy},
			},
		},
		{
			name: "a client inside a selector, node 1 silent past the timeout",
			peer: "10.9.8.7",
			health: clusterHealth{self: 0, leader: 0, leaderKnown: true, nowNs: now, heartbeatTimeout: timeout,
				lastHeardNs: []int64{0, now - int64(timeout) - 1, now}},
			want: [3]want{
				{"127.0.0.1", 8090, wire.ClusterRoleLeader, wire.ClusterNodeHealthy},
				{"10.1.1.11", 8091, wire.ClusterRoleFollower, wire.ClusterNodeUnreachable},
				{"127.0.0.1", 8092, wire.ClusterRoleFollower, wire.ClusterNodeHealthy},
			},
		},
		{
			name: "a view change: no leader, never-heard peers unreachable",
			peer: "::ffff:10.0.0.1",
			health: clusterHealth{self: 1, leader: 1, leaderKnown: false, nowNs: now, heartbeatTimeout: timeout,
				lastHeardNs: make([]int64, 3)},
			want: [3]want{
				{"127.0.0.1", 8090, wire.ClusterRoleFollower, wire.ClusterNodeUnreachable},
				{"10.1.1.11", 8091, wire.ClusterRoleFollower, wire.ClusterNodeHealthy},
				{"127.0.0.1", 8092, wire.ClusterRoleFollower, wire.ClusterNodeUnreachable},
			},
		},
		{
			name: "an idle backup never heard from, its connection up",
			peer: "192.0.2.7",
			health: clusterHealth{self: 0, leader: 0, leaderKnown: true, nowNs: now, heartbeatTimeout: timeout,
				lastHeardNs: make([]int64, 3), connected: []bool{false, true, false}},
			want: [3]want{
				{"127.0.0.1", 8090, wire.ClusterRoleLeader, wire.ClusterNodeHealthy},
				{"203.0.113.11", 8091, wire.ClusterRoleFollower, wire.ClusterNodeHealthy},
				{"127.0.0.1", 8092, wire.ClusterRoleFollower, wire.ClusterNodeUnreachable},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body := appendClusterMetadataOf(nil, &node, netip.MustParseAddr(tc.peer), &tc.health)
			var m wire.ClusterMetadata
			if err := m.Decode(body); err != nil {
				t.Fatalf("decode: %v", err)
			}
			if string(m.Name) != "prod" || len(m.Nodes) != 3 {
				t.Fatalf("cluster %q with %d nodes", m.Name, len(m.Nodes))
			}
			for i, n := range m.Nodes {
				w := tc.want[i]
				if string(n.Name) != cfg.Nodes[i].Name || string(n.IP) != w.ip || n.TCPPort != w.port ||
					n.Role != w.role || n.Status != w.status || n.QUICPort|n.WebSocketPort != 0 || n.HTTPPort != uint16(3000+i) {
					t.Errorf("node %d: %+v, want %+v", i, n, w)
				}
			}
		})
	}
}

// TestClusterMetadataHTTPOff: a node with [http] disabled advertises 0 for
// every peer's http port, as the reference answers a transport not served.
func TestClusterMetadataHTTPOff(t *testing.T) {
	node := config.Default()
	node.HTTP.Enabled = false
	node.Cluster = threeNodeCluster()
	for i := range node.Cluster.Nodes {
		node.Cluster.Nodes[i].Ports.HTTP = uint16(3000 + i)
	}
	health := clusterHealth{self: 0, leaderKnown: true, heartbeatTimeout: time.Second, lastHeardNs: make([]int64, 3)}
	var m wire.ClusterMetadata
	if err := m.Decode(appendClusterMetadataOf(nil, &node, netip.MustParseAddr("127.0.0.1"), &health)); err != nil {
		t.Fatal(err)
	}
	for i, n := range m.Nodes {
		if n.HTTPPort != 0 || n.TCPPort != uint16(8090+i) {
			t.Errorf("node %d: tcp %d http %d, want %d and 0", i, n.TCPPort, n.HTTPPort, 8090+i)
		}
	}
}

// threeNodeCluster is a roster of three nodes on loopback, enabled.
func threeNodeCluster() config.Cluster {
	c := config.DefaultCluster()
	c.Enabled = true
	for i := range 3 {
		c.Nodes = append(c.Nodes, config.ClusterNode{
			Name: "node-" + string(rune('a'+i)), IP: "127.0.0.1", ReplicaID: i,
			Ports: config.NodePorts{TCP: uint16(8090 + i), TCPReplica: uint16(9090 + i)},
		})
	}
	return c
}

// cluster.partition_memory_max is the node's: each shard's partition store gets
// an even share, at least a batch's 1 MiB; 0 leaves the package's 64 MiB a shard.
func TestPartitionMemoryIsSharedByTheShards(t *testing.T) {
	cfg := defaultSetup()
	cfg.Cluster = threeNodeCluster()
	for _, tc := range []struct {
		node   int64
		shards int
		want   int64
	}{{0, 4, 0}, {256 << 20, 4, 64 << 20}, {256 << 20, 1, 256 << 20}, {2 << 20, 8, 1 << 20}} {
		cfg.Cluster.PartitionMemoryMaxBytes = tc.node
		s := &Server{cfg: cfg, shardCount: tc.shards}
		if got := s.partitionReplication(nil).BodyBudgetBytes; got != tc.want {
			t.Errorf("%d bytes over %d shards: %d a shard, want %d", tc.node, tc.shards, got, tc.want)
		}
	}
}
