package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestMetadataConfig: [metadata] with the reference's keys, defaults and ranges,
// from the file and from IGGY_METADATA_*; a value out of range refuses the start
// naming its key, at each edge.
func TestMetadataConfig(t *testing.T) {
	dir := t.TempDir()
	files := 0
	write := func(text string) string {
		files++
		path := filepath.Join(dir, fmt.Sprint(files, ".toml"))
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	file := write("[metadata]\nprepare_queue_depth = 8\njournal_slots = 512\nclients_table_max = 100\n")
	tests := []struct {
		name    string
		path    string
		env     map[string]string
		want    Metadata
		setting string // non-empty: Load or Validate must refuse naming it
	}{
		{name: "defaults", want: Metadata{PrepareQueueDepth: 32, JournalSlots: 1024, ClientsTableMax: 8192}},
		{name: "file", path: file, want: Metadata{PrepareQueueDepth: 8, JournalSlots: 512, ClientsTableMax: 100}},
		{name: "environment over file", path: file, env: map[string]string{"IGGY_METADATA_PREPARE_QUEUE_DEPTH": "127",
			"IGGY_METADATA_JOURNAL_SLOTS": "508", "IGGY_METADATA_CLIENTS_TABLE_MAX": "65536"},
			want: Metadata{PrepareQueueDepth: 127, JournalSlots: 508, ClientsTableMax: 65536}},
		{name: "smallest", env: map[string]string{"IGGY_METADATA_PREPARE_QUEUE_DEPTH": "1", "IGGY_METADATA_JOURNAL_SLOTS": "256",
			"IGGY_METADATA_CLIENTS_TABLE_MAX": "2"}, want: Metadata{PrepareQueueDepth: 1, JournalSlots: 256, ClientsTableMax: 2}},
		{name: "largest window", env: map[string]string{"IGGY_METADATA_JOURNAL_SLOTS": strconv.Itoa(1 << 20)},
			want: Metadata{PrepareQueueDepth: 32, JournalSlots: 1 << 20, ClientsTableMax: 8192}},

		{name: "depth 0", path: write("[metadata]\nprepare_queue_depth = 0\n"), setting: "metadata.prepare_queue_depth"},
		{name: "depth 128", env: map[string]string{"IGGY_METADATA_PREPARE_QUEUE_DEPTH": "128"}, setting: "metadata.prepare_queue_depth"},
		{name: "window below 4 x 64", env: map[string]string{"IGGY_METADATA_JOURNAL_SLOTS": "255"}, setting: "metadata.journal_slots"},
		{name: "window below 4 x depth", env: map[string]string{"IGGY_METADATA_PREPARE_QUEUE_DEPTH": "100",
			"IGGY_METADATA_JOURNAL_SLOTS": "399"}, setting: "metadata.journal_slots"},
		{name: "window too large", path: write("[metadata]\njournal_slots = 1048577\n"), setting: "metadata.journal_slots"},
		{name: "table of 1", path: write("[metadata]\nclients_table_max = 1\n"), setting: "metadata.clients_table_max"},
		{name: "table of 65537", env: map[string]string{"IGGY_METADATA_CLIENTS_TABLE_MAX": "65537"}, setting: "metadata.clients_table_max"},
		{name: "negative in the file", path: write("[metadata]\nclients_table_max = -8\n"), setting: "metadata.clients_table_max"},
		{name: "not a number", env: map[string]string{"IGGY_METADATA_JOURNAL_SLOTS": "many"}, setting: "IGGY_METADATA_JOURNAL_SLOTS"},
		{name: "unknown key", path: write("[metadata]\nclient_table_max = 8\n"), setting: "metadata.client_table_max"},
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
			if c.Metadata != tc.want {
				t.Fatalf("[metadata] %+v, want %+v", c.Metadata, tc.want)
			}
			if got := c.Metadata.CallerSessionsMax(); got != tc.want.ClientsTableMax/2 {
				t.Fatalf("callers' cap %d for a table of %d", got, tc.want.ClientsTableMax)
			}
		})
	}
}

// TestMetadataClusterKeepsDefaults: a cluster's replicas compare none of
// [metadata], so a cluster node refuses any value but the default, naming it.
func TestMetadataClusterKeepsDefaults(t *testing.T) {
	for _, tc := range []struct {
		setting string
		change  func(m *Metadata)
	}{
		{"metadata.prepare_queue_depth", func(m *Metadata) { m.PrepareQueueDepth = 16 }},
		{"metadata.journal_slots", func(m *Metadata) { m.JournalSlots = 2048 }},
		{"metadata.clients_table_max", func(m *Metadata) { m.ClientsTableMax = 4096 }},
	} {
		c := Default()
		c.Cluster = threeNodeCluster()
		if err := c.Validate(); err != nil {
			t.Fatalf("a cluster with the defaults: %v", err)
		}
		tc.change(&c.Metadata)
		var se *SettingError
		if err := c.Validate(); !errors.As(err, &se) || se.Setting != tc.setting || !strings.Contains(err.Error(), "cluster") {
			t.Fatalf("a cluster node with %+v: %v, want a refusal naming %s", c.Metadata, err, tc.setting)
		}
		c.Cluster = Cluster{}
		if err := c.Validate(); err != nil {
			t.Fatalf("a single node with %+v: %v", c.Metadata, err)
		}
	}
}
