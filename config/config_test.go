package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLoadConfig(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	full := write("full.toml", `
[system]
path = "/data/iggy"
[system.sharding]
cpu_allocation = "4"
busy_poll = "50 us"
[system.metadata]
snapshot_interval_ops = 10
[tcp]
address = "0.0.0.0:9000"
max_frame_size = "16 MiB"
idle_timeout = "30 s"
`)
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	tests := []struct {
		name    string
		path    string
		env     map[string]string
		want    func(c Config) bool
		setting string // non-empty: the error must name it
	}{
		{name: "defaults", want: func(c Config) bool {
			return c.TCPAddress == "127.0.0.1:8090" && c.SystemPath == "local_data" && c.RootUsername == "iggy" && c.RootPassword == "iggy" &&
				c.HeartbeatInterval == 30*time.Second && c.BusyPoll == 50*time.Microsecond &&
				c.IdleTimeout == time.Minute
		}},
		{name: "file", path: full, want: func(c Config) bool {
			return c.TCPAddress == "0.0.0.0:9000" && c.SystemPath == "/data/iggy" && c.ShardCount == 4 &&
				c.SnapshotIntervalOps == 10 && c.FrameSizeMaxBytes == 16<<20 && c.IdleTimeout == 30*time.Second &&
				c.BusyPoll == 50*time.Microsecond
		}},
		{name: "environment over file", path: full, env: map[string]string{
			"IGGY_TCP_ADDRESS": "127.0.0.1:1234", "IGGY_SYSTEM_PATH": "/elsewhere",
			"IGGY_ROOT_USERNAME": "admin", "IGGY_ROOT_PASSWORD": "s3cret", "IGGY_SYSTEM_SHARDING_CPU_ALLOCATION": "all",
		}, want: func(c Config) bool {
			return c.TCPAddress == "127.0.0.1:1234" && c.SystemPath == "/elsewhere" && c.RootUsername == "admin" &&
				c.RootPassword == "s3cret" && c.ShardCount == 0
		}},
		{name: "root username without password", env: map[string]string{"IGGY_ROOT_USERNAME": "admin"}, setting: "IGGY_ROOT_USERNAME/IGGY_ROOT_PASSWORD"},
		{name: "bad cpu allocation", env: map[string]string{"IGGY_SYSTEM_SHARDING_CPU_ALLOCATION": "numa:auto"}, setting: "IGGY_SYSTEM_SHARDING_CPU_ALLOCATION"},
		{name: "unknown key", path: write("unknown.toml", "[tcp]\nadress = \"x\"\n"), setting: "tcp.adress"},
		{name: "bad size", path: write("size.toml", "[tcp]\nmax_frame_size = \"12 parsecs\"\n"), setting: "tcp.max_frame_size"},
		{name: "bad duration", path: write("duration.toml", "[tcp]\nidle_timeout = \"soon\"\n"), setting: "tcp.idle_timeout"},
		{name: "heartbeat interval", path: write("heartbeat.toml", "[heartbeat]\ninterval = \"5 s\"\n"), want: func(c Config) bool {
			return c.HeartbeatInterval == 5*time.Second
		}},
		{name: "heartbeat interval from the environment", env: map[string]string{"IGGY_HEARTBEAT_INTERVAL": "2 s"}, want: func(c Config) bool {
			return c.HeartbeatInterval == 2*time.Second
		}},
		{name: "zero heartbeat interval", path: write("heartbeat0.toml", "[heartbeat]\ninterval = \"0 s\"\n"), setting: "heartbeat.interval"},
		{name: "bad heartbeat interval", env: map[string]string{"IGGY_HEARTBEAT_INTERVAL": "often"}, setting: "IGGY_HEARTBEAT_INTERVAL"},
		{name: "zero snapshot interval", path: write("snap.toml", "[system.metadata]\nsnapshot_interval_ops = 0\n"), setting: "system.metadata.snapshot_interval_ops"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Load(tc.path, env(tc.env))
			if tc.setting != "" {
				var se *SettingError
				if !errors.As(err, &se) || se.Setting != tc.setting {
					t.Fatalf("error %v, want one naming %s", err, tc.setting)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tc.want(c) {
				t.Fatalf("config %+v", c)
			}
			if err := c.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
		})
	}
}

func TestValidateNamesTheSetting(t *testing.T) {
	tests := []struct {
		name    string
		change  func(c *Config)
		setting string
	}{
		{"address without port", func(c *Config) { c.TCPAddress = "127.0.0.1" }, "tcp.address"},
		{"address with a bad port", func(c *Config) { c.TCPAddress = "127.0.0.1:99999" }, "tcp.address"},
		{"address with a host name", func(c *Config) { c.TCPAddress = "example.com:80" }, "tcp.address"},
		{"empty path", func(c *Config) { c.SystemPath = "" }, "system.path"},
		{"short root name", func(c *Config) { c.RootUsername = "ab" }, "IGGY_ROOT_USERNAME"},
		{"short root password", func(c *Config) { c.RootPassword = "ab" }, "IGGY_ROOT_PASSWORD"},
		{"negative shards", func(c *Config) { c.ShardCount = -1 }, "system.sharding.cpu_allocation"},
		{"tiny frames", func(c *Config) { c.FrameSizeMaxBytes = 1000 }, "tcp.max_frame_size"},
		{"negative busy poll", func(c *Config) { c.BusyPoll = -time.Microsecond }, "system.sharding.busy_poll"},
		{"busy poll of a second", func(c *Config) { c.BusyPoll = time.Second }, "system.sharding.busy_poll"},
		{"negative idle timeout", func(c *Config) { c.IdleTimeout = -time.Second }, "tcp.idle_timeout"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := Default()
			tc.change(&c)
			err := c.Validate()
			var se *SettingError
			if !errors.As(err, &se) || se.Setting != tc.setting || !strings.Contains(err.Error(), tc.setting) {
				t.Fatalf("error %v, want one naming %s", err, tc.setting)
			}
		})
	}
	c := Default()
	if err := c.Validate(); err != nil {
		t.Fatalf("defaults invalid: %v", err)
	}
}

func TestParseSizeBytes(t *testing.T) {
	for in, want := range map[string]uint64{"4096": 4096, "64 MiB": 64 << 20, "1GB": 1e9, "16 KiB": 16 << 10, "5 B": 5} {
		got, err := ParseSizeBytes(in)
		if err != nil || got != want {
			t.Errorf("ParseSizeBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "MiB", "12 parsecs", "99999999999999999999 GiB", "-1"} {
		if _, err := ParseSizeBytes(in); err == nil {
			t.Errorf("ParseSizeBytes(%q) accepted", in)
		}
	}
}

// TestPollMemoryFromFile: [system.polls] memory_max sets the per-shard poll budget;
// a size that does not parse refuses the start by name.
func TestPollMemoryFromFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "iggy.toml")
	if err := os.WriteFile(path, []byte("[system.polls]\nmemory_max = \"64 MiB\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(path, func(string) string { return "" })
	if err != nil || cfg.PollMemoryBytesMax != 64<<20 {
		t.Fatalf("read %d, %v; want 64 MiB", cfg.PollMemoryBytesMax, err)
	}
	if err := os.WriteFile(path, []byte("[system.polls]\nmemory_max = \"lots\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var se *SettingError
	if _, err := Load(path, func(string) string { return "" }); !errors.As(err, &se) || se.Setting != "system.polls.memory_max" {
		t.Fatalf("a bad size: %v", err)
	}
}
