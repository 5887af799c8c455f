package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
)

// The README's three-node cluster: each file of examples/cluster is a valid
// configuration with the secret from the environment, the three rosters agree, and
// each node's client address is its roster port.
func TestExampleClusterConfigs(t *testing.T) {
	secret := strings.Repeat("s", 32)
	getenv := func(name string) string {
		if name == "IGGY_CLUSTER_AUTH_SHARED_SECRET" {
			return secret
		}
		return ""
	}
	var rosters []string
	for i := range 3 {
		path := filepath.Join("..", "..", "examples", "cluster", fmt.Sprintf("node%d.toml", i))
		o, err := parseFlags([]string{"--config", path, "--replica-id", fmt.Sprint(i)}, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := o.config(getenv)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		cl := cfg.Cluster
		if !cl.Enabled || cl.ReplicaID != i || len(cl.Nodes) != 3 || cl.Auth.SharedSecret != secret {
			t.Fatalf("%s: cluster %+v", path, cl)
		}
		self := cl.Nodes[i]
		if want := fmt.Sprintf("%s:%d", self.IP, self.Ports.TCP); cfg.TCPAddress != want {
			t.Errorf("%s: tcp address %s, its roster entry says %s", path, cfg.TCPAddress, want)
		}
		if cfg.SystemPath != fmt.Sprintf("local_data/node-%d", i) {
			t.Errorf("%s: system path %s", path, cfg.SystemPath)
		}
		rosters = append(rosters, fmt.Sprintf("%s %+v", cl.Name, cl.Nodes))
		// Without the secret the start is refused, naming the variable.
		if _, err := o.config(func(string) string { return "" }); err == nil ||
			!strings.Contains(err.Error(), "IGGY_CLUSTER_AUTH_SHARED_SECRET") {
			t.Errorf("%s without a secret: %v", path, err)
		}
	}
	for i := 1; i < len(rosters); i++ {
		if rosters[i] != rosters[0] {
			t.Errorf("node%d.toml's roster differs from node0.toml's:\n%s\n%s", i, rosters[i], rosters[0])
		}
	}
}
