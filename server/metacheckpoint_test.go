package server

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/iggy-shard/iggy-shard/metadata"
	"github.com/iggy-shard/iggy-shard/metafiles"
	"github.com/iggy-shard/iggy-shard/metaplane"
	"github.com/iggy-shard/iggy-shard/segment"
	"github.com/iggy-shard/iggy-shard/vsr"
	"github.com/iggy-shard/iggy-shard/wire"
)

// TestSnapshotIntervalClamped: the old default (1,024, in every existing
// configuration file) starts a node with the largest interval the window allows,
// and one warning naming the setting and the value used; a legal one is kept,
// silently.
func TestSnapshotIntervalClamped(t *testing.T) {
	if got, want := defaultSetup().SnapshotIntervalOps, vsr.CheckpointIntervalOpsMax(1024, vsr.PipelineDepthDefault); got != want || want != 960 {
		t.Fatalf("default snapshot interval %d, want %d (960)", got, want)
	}
	for _, tc := range []struct {
		configured, used uint64
		warned           bool
	}{{1024, 960, true}, {1 << 40, 960, true}, {960, 960, false}, {16, 16, false}} {
		var logs lockedBuffer
		cfg := testConfig(t.TempDir(), 1)
		cfg.SnapshotIntervalOps = tc.configured
		s, err := start(cfg, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
		if err != nil {
			t.Fatalf("Start with snapshot_interval_ops %d: %v", tc.configured, err)
		}
		stopServer(t, s)
		var warnings []string
		for _, line := range strings.Split(logs.String(), "\n") {
			if strings.Contains(line, "level=WARN") && strings.Contains(line, "snapshot_interval_ops") {
				warnings = append(warnings, line)
			}
		}
		if s.cfg.SnapshotIntervalOps != tc.used || s.meta.IntervalOps() != tc.used {
			t.Errorf("configured %d: config %d, plane %d, want %d", tc.configured, s.cfg.SnapshotIntervalOps, s.meta.IntervalOps(), tc.used)
		}
		switch {
		case !tc.warned && len(warnings) != 0:
			t.Errorf("configured %d: warned %q", tc.configured, warnings)
		case tc.warned && (len(warnings) != 1 || !strings.Contains(warnings[0], "setting=system.metadata.snapshot_interval_ops") ||
			!strings.Contains(warnings[0], fmt.Sprintf("used=%d", tc.used))):
			t.Errorf("configured %d: warnings %q, want one naming the setting and used=%d", tc.configured, warnings, tc.used)
		}
	}
}

// primaryPlane is a clustered plane that leads view 0 (replica 0) of a
// three-replica group whose backups are statePeers, on a simulated disk.
type primaryPlane struct {
	t     *testing.T
	n     *metaNet
	m     *metaPlane
	store *metafiles.SimStorage
	// written counts the writes committed, submitted the writes handed over.
	written, submitted int
}

func newPrimaryPlane(t *testing.T, seed uint64) *primaryPlane {
	t.Helper()
	cfgs := clusterConfigs(t, 3, testClusterSecret)
	cfg := cfgs[0]
	cfg.SnapshotIntervalOps = defaultSetup().SnapshotIntervalOps
	store := metafiles.NewSimStorage(segment.NewSimDisk(seed))
	n := &metaNet{t: t, planeID: 0, peers: []*statePeer{nil, newStatePeer(t, &cfgs[1], 1, journalSlotsMin), newStatePeer(t, &cfgs[2], 2, journalSlotsMin)}}
	n.plane = clusterPlane(t, &cfg, store, &n.sent)
	pumpPlane(t, n.plane)
	if !n.plane.Core().IsPrimary() {
		t.Fatal("replica 0 of a fresh group does not lead view 0")
	}
	return &primaryPlane{t: t, n: n, m: n.plane, store: store}
}

// write hands count writes (the server's own ops, no client's) to the plane and
// runs the group until nothing moves.
func (p *primaryPlane) write(count int) {
	p.t.Helper()
	for range count {
		p.submitted++
		p.m.Propose(vsr.Proposal{Operation: wire.OperationCreateStream, UserID: metadata.RootUserID},
			createStreamBody(p.t, fmt.Sprintf("s-%d", p.submitted)), uint64(p.submitted), func(_ *metaplane.Commit, err error) {
				if err != nil {
					p.t.Fatalf("write refused: %v", err)
				}
				p.written++
			})
		if p.submitted%vsr.PipelineDepthDefault == 0 {
			p.settle()
		}
	}
	p.settle()
}

// settle runs the plane's work and the frames until none moves.
func (p *primaryPlane) settle() {
	pumpPlane(p.t, p.m)
	p.n.run()
}

// tick gives the plane's core ticks cluster ticks.
func (p *primaryPlane) tick(ticks int) {
	for range ticks {
		p.m.Tick()
		p.settle()
	}
}

// TestPrimarySnapshotFailureDoesNotWedge: at the production defaults, the
// primary's snapshot fails for a while (a full disk). Its writes go on up to a
// window above the last snapshot written, then wait (the core refuses them:
// vsr.ErrCheckpointDue); the plane tries again, counting from the last snapshot
// written, every metaplane.SnapshotRetryTicks; once the disk takes a snapshot again, the
// writes resume, and the group lives on past four windows. (The plane used to
// count the next try from the failed one: due beyond the window, it never came,
// and the group wedged for good after one failed write.)
func TestPrimarySnapshotFailureDoesNotWedge(t *testing.T) {
	p := newPrimaryPlane(t, 21)
	interval := int(p.m.IntervalOps())
	p.write(interval / 2)

	errDiskFull := errors.New("no space left on device")
	failing := true
	p.store.FailReplace = func(name string) error {
		if failing && name == metafiles.SnapshotFileName {
			return errDiskFull
		}
		return nil
	}
	p.write(journalSlotsMin)
	if p.m.SnapshotsTaken() != 0 {
		t.Fatalf("%d snapshots taken on a failing disk", p.m.SnapshotsTaken())
	}
	stoppedAt := p.m.Applied().Op
	if want := uint64(journalSlotsMin - 1); stoppedAt != want || p.m.Driver().CheckpointWaits() == 0 {
		t.Fatalf("the primary applied op %d (%d proposals held), want op %d and held proposals", stoppedAt, p.m.Driver().CheckpointWaits(), want)
	}
	// Tries while the disk fails change nothing.
	p.tick(3 * metaplane.SnapshotRetryTicks)
	if p.m.Applied().Op != stoppedAt || p.m.SnapshotsTaken() != 0 {
		t.Fatalf("applied op %d, snapshots %d while the disk fails", p.m.Applied().Op, p.m.SnapshotsTaken())
	}

	failing = false
	p.tick(metaplane.SnapshotRetryTicks + 1)
	if p.m.SnapshotsTaken() != 1 || p.m.SnapshotOp() != stoppedAt {
		t.Fatalf("after the disk healed: %d snapshots, the last at op %d, want one at %d", p.m.SnapshotsTaken(), p.m.SnapshotOp(), stoppedAt)
	}
	p.write(3 * journalSlotsMin)
	if p.written != p.submitted {
		t.Fatalf("%d of %d writes committed", p.written, p.submitted)
	}
	if applied := p.m.Applied().Op; applied < 4*journalSlotsMin || p.m.SnapshotsTaken() < 4 {
		t.Fatalf("applied op %d with %d snapshots", applied, p.m.SnapshotsTaken())
	}
}
