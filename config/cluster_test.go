package config

import (
	"errors"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"
)

func threeNodeCluster() Cluster {
	c := DefaultCluster()
	c.Enabled = true
	for i := range 3 {
		c.Nodes = append(c.Nodes, ClusterNode{
			Name: "node-" + string(rune('a'+i)), IP: "127.0.0.1", ReplicaID: i,
			Ports: NodePorts{TCP: uint16(8090 + i), TCPReplica: uint16(9090 + i)},
		})
	}
	return c
}

// TestClusterConfigRules: every boot-time rule of the reference refuses the start
// with the setting it concerns and the rule.
func TestClusterConfigRules(t *testing.T) {
	if err := (&Cluster{}).Validate(); err != nil {
		t.Fatalf("a disabled section: %v", err)
	}
	ok := threeNodeCluster()
	if err := ok.Validate(); err != nil {
		t.Fatalf("the shipped defaults with a 3-node roster: %v", err)
	}
	secret := strings.Repeat("s", 32)
	cases := []struct {
		name, setting, rule string
		change              func(c *Cluster)
	}{
		{"zero duration", "cluster.commit_broadcast_interval", "nonzero", func(c *Cluster) { c.CommitBroadcastInterval = 0 }},
		{"short heartbeat", "cluster.heartbeat_timeout", "at least 2s", func(c *Cluster) { c.HeartbeatTimeout = time.Second }},
		{"heartbeat under 4 broadcasts", "cluster.heartbeat_timeout", "4x commit_broadcast_interval", func(c *Cluster) { c.CommitBroadcastInterval = 2 * time.Second }},
		{"view change status", "cluster.view_change_status_timeout", "4x view_change_retransmit_interval", func(c *Cluster) { c.ViewChangeStatusTimeout = time.Second }},
		{"probes", "cluster.view_probe_attempts_max", "between 1 and 100", func(c *Cluster) { c.ViewProbeAttemptsMax = 101 }},
		{"repair chunk over the queue", "cluster.repair_chunk_max", "below message_bus.peer_queue_capacity", func(c *Cluster) { c.RepairChunkMax = 256 }},
		{"partition queue under a repair", "message_bus.partition_queue_capacity", "between 33 and 65536", func(c *Cluster) { c.MessageBus.PartitionQueueCapacity = 32 }},
		{"partition queue too long", "message_bus.partition_queue_capacity", "between 33 and 65536", func(c *Cluster) { c.MessageBus.PartitionQueueCapacity = 1 << 17 }},
		{"short secret", "cluster.auth.shared_secret", "at least 32 bytes", func(c *Cluster) { c.Auth.SharedSecret = "short" }},
		{"auth without secret", "cluster.auth.shared_secret", "must be set", func(c *Cluster) { c.Auth.Enabled = true }},
		{"rotation to the same key", "cluster.auth.previous_shared_secret", "must differ", func(c *Cluster) {
			c.Auth = ClusterAuth{Enabled: true, SharedSecret: secret, PreviousSharedSecret: secret}
		}},
		{"TLS without auth", "cluster.tls.enabled", "requires cluster.auth.enabled", func(c *Cluster) { c.TLS.Enabled = true }},
		{"TLS CA mode without CA", "cluster.tls.ca_file", "required in CA mode", func(c *Cluster) {
			c.Auth = ClusterAuth{Enabled: true, SharedSecret: secret}
			c.TLS = ClusterTLS{Enabled: true, CertFile: "c.pem", KeyFile: "k.pem"}
		}},
		{"no roster", "cluster.nodes", "needs its roster", func(c *Cluster) { c.Nodes = nil }},
		{"hostname ip", "cluster.nodes[1].ip", "literal IPv4 or IPv6", func(c *Cluster) { c.Nodes[1].IP = "node-b.local" }},
		{"duplicate name", "cluster.nodes[2].name", "unique", func(c *Cluster) { c.Nodes[2].Name = "node-a" }},
		{"replica id out of range", "cluster.nodes[2].replica_id", "below the roster size", func(c *Cluster) { c.Nodes[2].ReplicaID = 3 }},
		{"duplicate replica id", "cluster.nodes[2].replica_id", "unique", func(c *Cluster) { c.Nodes[2].ReplicaID = 0 }},
		{"no replica port", "cluster.nodes[0].ports.tcp_replica", "required", func(c *Cluster) { c.Nodes[0].Ports.TCPReplica = 0 }},
		{"shared endpoint", "cluster.nodes[1].ports", "already claimed by cluster.nodes[0]", func(c *Cluster) { c.Nodes[1].Ports.TCP = 8090 }},
		{"bad advertised", "cluster.nodes[0].advertised_address", "RFC 1123", func(c *Cluster) { c.Nodes[0].AdvertisedAddress = "host.example:8090" }},
		{"duplicate selector", "cluster.nodes[0].advertised_addresses[1].client_cidr", "duplicates", func(c *Cluster) {
			c.Nodes[0].AdvertisedAddresses = []AdvertisedSelector{
				{ClientCIDR: netip.MustParsePrefix("10.0.0.0/16"), Address: "10.0.1.5"},
				{ClientCIDR: netip.MustParsePrefix("10.0.1.0/16"), Address: "10.0.1.6"},
			}
		}},
		{"own entry", "--replica-id", "must name an entry", func(c *Cluster) { c.ReplicaID = 5 }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := threeNodeCluster()
			tc.change(&c)
			err := c.Validate()
			var se *SettingError
			if !errors.As(err, &se) {
				t.Fatalf("accepted (%v)", err)
			}
			if se.Setting != tc.setting || !strings.Contains(se.Reason, tc.rule) {
				t.Fatalf("refused as %s: %s; want %s: ...%s...", se.Setting, se.Reason, tc.setting, tc.rule)
			}
		})
	}
}

// TestAdvertisedForLongestPrefix: a client is told the address of the selector with
// the longest prefix matching it, per address family, else the catch-all, else ip.
func TestAdvertisedForLongestPrefix(t *testing.T) {
	n := ClusterNode{IP: "10.0.1.5", AdvertisedAddress: "203.0.113.10", AdvertisedAddresses: []AdvertisedSelector{
		{ClientCIDR: netip.MustParsePrefix("10.0.0.0/8"), Address: "10.255.0.1"},
		{ClientCIDR: netip.MustParsePrefix("10.0.0.0/16"), Address: "10.0.1.5"},
		{ClientCIDR: netip.MustParsePrefix("::ffff:192.168.0.0/112"), Address: "192.168.0.9"},
		{ClientCIDR: netip.MustParsePrefix("fd00::/8"), Address: "fd00::5"},
	}}
	for peer, want := range map[string]string{
		"10.0.7.7":        "10.0.1.5",
		"10.9.0.1":        "10.255.0.1",
		"192.168.3.4":     "192.168.0.9",
		"::ffff:10.0.0.1": "10.0.1.5",
		"fd00::1":         "fd00::5",
		"2001:db8::1":     "203.0.113.10",
		"198.51.100.1":    "203.0.113.10",
	} {
		if got := n.AdvertisedFor(netip.MustParseAddr(peer)); got != want {
			t.Errorf("client %s is told %s, want %s", peer, got, want)
		}
	}
	bare := ClusterNode{IP: "10.0.1.5"}
	if got := bare.AdvertisedFor(netip.MustParseAddr("1.2.3.4")); got != "10.0.1.5" {
		t.Errorf("a node without advertised addresses tells %s, want its ip", got)
	}
	if Ticks(5*time.Millisecond) != 1 || Ticks(25*time.Millisecond) != 2 || Ticks(5*time.Second) != 500 {
		t.Error("durations must round down to whole 10 ms ticks, at least one")
	}
}

// TestClusterConfigFromFileAndEnvironment: [cluster], [[cluster.nodes]] and
// [message_bus] read with Apache Iggy's key names, the IGGY_CLUSTER_* variables over
// them, and an enabled cluster refused at start, by name, while it is not built.
func TestClusterConfigFromFileAndEnvironment(t *testing.T) {
	path := t.TempDir() + "/iggy.toml"
	toml := `
[cluster]
enabled = true
name = "prod"
heartbeat_timeout = "6 s"
partition_memory_max = "512 MiB"
[cluster.auth]
enabled = true
[[cluster.nodes]]
name = "a"
ip = "127.0.0.1"
replica_id = 0
ports = { tcp = 8090, tcp_replica = 9090 }
[[cluster.nodes.advertised_addresses]]
client_cidr = "10.0.0.0/16"
address = "10.0.1.5"
[[cluster.nodes]]
name = "b"
ip = "127.0.0.1"
replica_id = 1
ports = { tcp = 8091, tcp_replica = 9091 }
[message_bus]
peer_queue_capacity = 512
partition_queue_capacity = 2048
`
	if err := os.WriteFile(path, []byte(toml), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"IGGY_CLUSTER_AUTH_SHARED_SECRET":        strings.Repeat("k", 32),
		"IGGY_CLUSTER_NODES_2_NAME":              "c",
		"IGGY_CLUSTER_NODES_2_IP":                "127.0.0.1",
		"IGGY_CLUSTER_NODES_2_REPLICA_ID":        "2",
		"IGGY_CLUSTER_NODES_2_PORTS_TCP":         "8092",
		"IGGY_CLUSTER_NODES_2_PORTS_TCP_REPLICA": "9092",
		"IGGY_CLUSTER_NODES_1_IP":                "::1",
	}
	readPartitionQueue := func() int {
		t.Helper()
		cfg, err := Load(path, func(k string) string { return env[k] })
		if err != nil {
			t.Fatal(err)
		}
		return cfg.Cluster.MessageBus.PartitionQueueCapacity
	}
	if n := readPartitionQueue(); n != 2048 {
		t.Fatalf("message_bus.partition_queue_capacity read as %d, want 2048", n)
	}
	env["IGGY_MESSAGE_BUS_PARTITION_QUEUE_CAPACITY"] = "4096"
	if n := readPartitionQueue(); n != 4096 {
		t.Fatalf("IGGY_MESSAGE_BUS_PARTITION_QUEUE_CAPACITY read as %d, want 4096", n)
	}
	readPartitionMemory := func() int64 {
		t.Helper()
		cfg, err := Load(path, func(k string) string { return env[k] })
		if err != nil {
			t.Fatal(err)
		}
		return cfg.Cluster.PartitionMemoryMaxBytes
	}
	if n := readPartitionMemory(); n != 512<<20 {
		t.Fatalf("cluster.partition_memory_max read as %d, want 512 MiB", n)
	}
	env["IGGY_CLUSTER_PARTITION_MEMORY_MAX"] = "1 GiB"
	if n := readPartitionMemory(); n != 1<<30 {
		t.Fatalf("IGGY_CLUSTER_PARTITION_MEMORY_MAX read as %d, want 1 GiB", n)
	}
	env["IGGY_CLUSTER_PARTITION_MEMORY_MAX"] = "lots"
	if _, err := Load(path, func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), "IGGY_CLUSTER_PARTITION_MEMORY_MAX") {
		t.Fatalf("a partition memory of lots: %v", err)
	}
	delete(env, "IGGY_CLUSTER_PARTITION_MEMORY_MAX")
	cfg, err := Load(path, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	c := cfg.Cluster
	if !c.Enabled || c.Name != "prod" || c.HeartbeatTimeout != 6*time.Second || c.MessageBus.PeerQueueCapacity != 512 ||
		len(c.Nodes) != 3 || c.Nodes[1].IP != "::1" || c.Nodes[2].Ports.TCPReplica != 9092 ||
		c.Nodes[0].AdvertisedFor(netip.MustParseAddr("10.0.3.3")) != "10.0.1.5" || c.Auth.SharedSecret == "" {
		t.Fatalf("read %+v", c)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("a valid 3-node section refused: %v", err)
	}
	env["IGGY_CLUSTER_HEARTBEAT_TIMEOUT"] = "disabled"
	if _, err := Load(path, func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	} else if cfg, _ := Load(path, func(k string) string { return env[k] }); cfg.Validate() == nil {
		t.Fatal("a disabled heartbeat timeout was accepted")
	}
}

// cluster.partition_incarnation_tags (ours): true by default, read from the file
// and from IGGY_CLUSTER_PARTITION_INCARNATION_TAGS over it, and a value that is no
// boolean refused naming the key.
func TestClusterPartitionIncarnationTags(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		t.Helper()
		path := dir + "/" + name
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	off := write("off.toml", "[cluster]\npartition_incarnation_tags = false\n")
	on := write("on.toml", "[cluster]\npartition_incarnation_tags = true\n")
	for _, tc := range []struct {
		name string
		path string
		env  map[string]string
		want bool
	}{
		{name: "default", want: true},
		{name: "file off", path: off, want: false},
		{name: "file on", path: on, want: true},
		{name: "environment off", env: map[string]string{"IGGY_CLUSTER_PARTITION_INCARNATION_TAGS": "false"}, want: false},
		{name: "environment over file", path: off, env: map[string]string{"IGGY_CLUSTER_PARTITION_INCARNATION_TAGS": "true"}, want: true},
	} {
		c, err := loadValidated(tc.path, tc.env)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if c.Cluster.PartitionIncarnationTags != tc.want {
			t.Errorf("%s: partition_incarnation_tags read as %v, want %v", tc.name, c.Cluster.PartitionIncarnationTags, tc.want)
		}
	}
	_, err := loadValidated("", map[string]string{"IGGY_CLUSTER_PARTITION_INCARNATION_TAGS": "sometimes"})
	mustNameSetting(t, err, "IGGY_CLUSTER_PARTITION_INCARNATION_TAGS")
	_, err = loadValidated(write("string.toml", "[cluster]\npartition_incarnation_tags = \"yes\"\n"), nil)
	if err == nil || !strings.Contains(err.Error(), "cluster.partition_incarnation_tags") {
		t.Fatalf("a string for partition_incarnation_tags: %v, want an error naming the key", err)
	}
}
