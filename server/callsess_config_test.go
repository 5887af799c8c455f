package server

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/iggy-shard/iggy-shard/config"
	"github.com/iggy-shard/iggy-shard/metafiles"
	"github.com/iggy-shard/iggy-shard/metaplane"
	"github.com/iggy-shard/iggy-shard/vsr"
)

// [metadata] sizes the metadata plane (config/metadata.go, metahost.go).

// TestMetadataDefaultsAreThePlanes: config repeats the planes' defaults and
// bounds (it does not import vsr); they must stay equal.
func TestMetadataDefaultsAreThePlanes(t *testing.T) {
	for _, c := range []struct {
		name         string
		config, pkgs int
	}{
		{"prepare_queue_depth", config.MetadataPrepareQueueDepthDefault, vsr.PipelineDepthDefault},
		{"prepare_queue_depth's maximum", config.MetadataPrepareQueueDepthMax, vsr.PipelineDepthMax},
		{"journal_slots", config.MetadataJournalSlotsDefault, metaplane.JournalSlotsMin},
		{"clients_table_max", config.MetadataClientsTableMaxDefault, vsr.ClientsTableMaxDefault},
	} {
		if c.config != c.pkgs {
			t.Errorf("metadata.%s: config's default %d, the plane's %d", c.name, c.config, c.pkgs)
		}
	}
	s := startTestServer(t, testConfig(t.TempDir(), 1))
	onMetaShard(t, s, func(p *metaPlane) {
		if p.JournalSlots() != config.MetadataJournalSlotsDefault || p.PipelineDepth() != config.MetadataPrepareQueueDepthDefault {
			t.Errorf("a default node's header window %d, pipeline depth %d", p.JournalSlots(), p.PipelineDepth())
		}
	})
}

// TestMetadataSizesReachThePlane: a node started with [metadata] values runs its
// plane with them.
func TestMetadataSizesReachThePlane(t *testing.T) {
	cfg := testConfig(t.TempDir(), 1)
	cfg.Metadata = config.Metadata{PrepareQueueDepth: 4, JournalSlots: 512, ClientsTableMax: 10}
	s := startTestServer(t, cfg)
	onMetaShard(t, s, func(p *metaPlane) {
		if p.JournalSlots() != 512 || p.PipelineDepth() != 4 {
			t.Errorf("header window %d, pipeline depth %d; want 512, 4", p.JournalSlots(), p.PipelineDepth())
		}
	})
	if cap := s.cfg.callerSessionsCap(); cap != 5 {
		t.Errorf("callers' cap %d, want 5", cap)
	}
	for i := range 12 {
		dialRoot(t, s)
		var n int
		onMetaShard(t, s, func(p *metaPlane) { n = p.Table().Len() })
		if want := min(i+1, 10); n != want {
			t.Fatalf("after %d logins the table holds %d sessions, want %d", i+1, n, want)
		}
	}
}

// TestMetadataTableSizeAcrossRestarts: a data directory's ops are replayed with
// the table size they were applied with, so a start with another size is refused
// naming the key while the journal holds ops to replay; once a snapshot covers
// them it resizes.
func TestMetadataTableSizeAcrossRestarts(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir, 1)
	cfg.Metadata.ClientsTableMax = 8
	cfg.SnapshotIntervalOps = 1000 // no snapshot: every op stays in the journal
	s := startTestServer(t, cfg)
	mustOK(t, "a stream", createStreamAs(t, s, rootCaller(), "s"))
	stopServer(t, s)
	recorded, err := os.ReadFile(filepath.Join(dir, "metadata", metafiles.TableSizeFileName))
	if err != nil || strings.TrimSpace(string(recorded)) != "8" {
		t.Fatalf("the recorded table size: %q, %v", recorded, err)
	}

	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	other := cfg
	other.Metadata.ClientsTableMax = 16
	if s, err := start(other, log); err == nil {
		stopServer(t, s)
		t.Fatal("a start with another table size under a journal to replay was not refused")
	} else if !strings.Contains(err.Error(), "metadata.clients_table_max") {
		t.Fatalf("the refusal does not name the key: %v", err)
	}

	// With every op in a snapshot (an interval of one op), the size may change.
	same := cfg
	same.SnapshotIntervalOps = 1
	s = startTestServer(t, same)
	mustOK(t, "a second stream", createStreamAs(t, s, rootCaller(), "s2"))
	waitUntil(t, "a snapshot of every op", func() (covered bool) {
		onMetaShard(t, s, func(p *metaPlane) { covered = p.SnapshotOp() == p.Applied().Op })
		return covered
	})
	stopServer(t, s)
	other.SnapshotIntervalOps = 1
	s = startTestServer(t, other)
	if !hasStreamOn(t, s, "s2") {
		t.Fatal("the resized node lost a stream")
	}
	for range 20 {
		dialRoot(t, s)
	}
	var n int
	onMetaShard(t, s, func(p *metaPlane) { n = p.Table().Len() })
	if n != 16 {
		t.Fatalf("the resized table holds %d sessions after 20 logins, want 16", n)
	}
}
