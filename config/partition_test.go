package config

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// [system.partition] is read from the file and from IGGY_SYSTEM_PARTITION_*
// (the environment over the file), and a value out of bounds refuses the start
// naming the key or the variable.
func TestPartitionSettings(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	full := write("full.toml", `
[system.partition]
splice_reply_min = "512 KiB"
splice_trust_writes = true
splice_pin_max = "5 s"
splice_plans_max = 8
splice_pipes_per_shard = 4
splice_pipe_size = "256 KiB"
splice_ring = true
scrub_bytes_per_second = "1 MiB"
`)
	tests := []struct {
		name    string
		path    string
		env     map[string]string
		want    Partition
		setting string // non-empty: the error must name it
	}{
		{name: "defaults", want: DefaultPartition()},
		{name: "file", path: full, want: Partition{SpliceReplyBytesMin: 512 << 10, SpliceTrustWrites: true, SplicePinMax: 5 * time.Second,
			SplicePlansMax: 8, SplicePipesPerShard: 4, SplicePipeSizeBytes: 256 << 10, SpliceRing: true, ScrubBytesPerSecond: 1 << 20}},
		{name: "environment over file", path: full, env: map[string]string{
			"IGGY_SYSTEM_PARTITION_SPLICE_REPLY_MIN": "off", "IGGY_SYSTEM_PARTITION_SPLICE_TRUST_WRITES": "false",
			"IGGY_SYSTEM_PARTITION_SPLICE_PIN_MAX": "1 m", "IGGY_SYSTEM_PARTITION_SPLICE_PLANS_MAX": "16",
			"IGGY_SYSTEM_PARTITION_SPLICE_PIPES_PER_SHARD": "2", "IGGY_SYSTEM_PARTITION_SPLICE_PIPE_SIZE": "64 KiB",
			"IGGY_SYSTEM_PARTITION_SCRUB_BYTES_PER_SECOND": "0", "IGGY_SYSTEM_PARTITION_SPLICE_RING": "false",
		}, want: Partition{SpliceReplyBytesMin: -1, SplicePinMax: time.Minute, SplicePlansMax: 16, SplicePipesPerShard: 2,
			SplicePipeSizeBytes: 64 << 10}},
		{name: "unknown key", path: write("unknown.toml", "[system.partition]\nsplice_replies_min = \"1 MiB\"\n"),
			setting: "system.partition.splice_replies_min"},
		{name: "a reply minimum that is no size", path: write("min.toml", "[system.partition]\nsplice_reply_min = \"big\"\n"),
			setting: "system.partition.splice_reply_min"},
		{name: "a zero reply minimum", path: write("min0.toml", "[system.partition]\nsplice_reply_min = \"0\"\n"),
			setting: "system.partition.splice_reply_min"},
		{name: "trust that is no boolean", env: map[string]string{"IGGY_SYSTEM_PARTITION_SPLICE_TRUST_WRITES": "maybe"},
			setting: "IGGY_SYSTEM_PARTITION_SPLICE_TRUST_WRITES"},
		{name: "a splice ring that is no boolean", path: write("ring.toml", "[system.partition]\nsplice_ring = \"sometimes\"\n"),
			setting: "system.partition.splice_ring"},
		{name: "a zero pin", path: write("pin.toml", "[system.partition]\nsplice_pin_max = \"0 s\"\n"), setting: "system.partition.splice_pin_max"},
		{name: "a pin that is no duration", env: map[string]string{"IGGY_SYSTEM_PARTITION_SPLICE_PIN_MAX": "long"},
			setting: "IGGY_SYSTEM_PARTITION_SPLICE_PIN_MAX"},
		{name: "no plans", path: write("plans.toml", "[system.partition]\nsplice_plans_max = 0\n"), setting: "system.partition.splice_plans_max"},
		{name: "plans that are no number", env: map[string]string{"IGGY_SYSTEM_PARTITION_SPLICE_PLANS_MAX": "many"},
			setting: "IGGY_SYSTEM_PARTITION_SPLICE_PLANS_MAX"},
		{name: "no pipes", env: map[string]string{"IGGY_SYSTEM_PARTITION_SPLICE_PIPES_PER_SHARD": "0"},
			setting: "system.partition.splice_pipes_per_shard"},
		{name: "too many pipes", path: write("pipes.toml", "[system.partition]\nsplice_pipes_per_shard = 5000\n"),
			setting: "system.partition.splice_pipes_per_shard"},
		{name: "a pipe smaller than a page", path: write("pipe.toml", "[system.partition]\nsplice_pipe_size = \"1 KiB\"\n"),
			setting: "system.partition.splice_pipe_size"},
		{name: "a scrub rate that is no size", env: map[string]string{"IGGY_SYSTEM_PARTITION_SCRUB_BYTES_PER_SECOND": "fast"},
			setting: "IGGY_SYSTEM_PARTITION_SCRUB_BYTES_PER_SECOND"},
		{name: "a scrub rate past 1 TiB", path: write("scrub.toml", "[system.partition]\nscrub_bytes_per_second = \"2000 GiB\"\n"),
			setting: "system.partition.scrub_bytes_per_second"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := loadValidated(tc.path, tc.env)
			if tc.setting != "" {
				mustNameSetting(t, err, tc.setting)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Partition != tc.want {
				t.Fatalf("partition settings %+v, want %+v", c.Partition, tc.want)
			}
		})
	}
}
