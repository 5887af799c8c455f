package main

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/config"
)

// In a cluster the client follows the leader; -v says which node answered, and
// that it was not the one the command was pointed at. Three nodes in process,
// on loopback ports: the only test with servers of its own besides TestTLS.
func TestClusterSaysWhichNodeAnswered(t *testing.T) {
	t.Parallel()
	const n = 3
	var listeners []net.Listener
	ports := make([]uint16, 2*n)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		listeners = append(listeners, l)
		ports[i] = uint16(l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range listeners {
		l.Close()
	}
	nodes := make([]config.ClusterNode, n)
	for i := range nodes {
		nodes[i] = config.ClusterNode{Name: fmt.Sprintf("node-%d", i), IP: "127.0.0.1", ReplicaID: i,
			Ports: config.NodePorts{TCP: ports[2*i], TCPReplica: ports[2*i+1]}}
	}
	for i := range n {
		cfg := config.Default()
		cfg.Cluster = config.DefaultCluster()
		cfg.Cluster.Enabled = true
		cfg.Cluster.ReplicaID = i
		cfg.Cluster.Nodes = nodes
		cfg.Cluster.Auth = config.ClusterAuth{Enabled: true, SharedSecret: strings.Repeat("s", 32)}
		cfg.Cluster.MessageBus.ReconnectPeriod = 50 * time.Millisecond
		startServer(t, cfg)
	}
	leader := fmt.Sprintf("127.0.0.1:%d", ports[0])
	follower := fmt.Sprintf("127.0.0.1:%d", ports[2])
	e := newEnv(t)
	var r result
	eventually(t, "the cluster answers", func() bool {
		r = e.raw("--tcp-server-address", follower, "-u", "iggy", "-p", "iggy", "-v", "stream", "create", name("clustered"))
		return r.code == exitOK
	})
	for _, want := range []string{
		"iggy: connected to " + follower,
		"iggy: the cluster's leader is " + leader + ": the command goes there (asked " + follower + ")",
		"iggy: answered by " + leader + " (node node-0, leader)",
	} {
		if !strings.Contains(r.stderr, want) {
			t.Fatalf("-v does not say %q:\n%s", want, r)
		}
	}
	r = e.raw("--tcp-server-address", follower, "-u", "iggy", "-p", "iggy", "cluster", "metadata")
	has(t, r, "node-0", "leader", "node-2", "follower")
}
