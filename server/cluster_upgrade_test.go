package server

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/metadata"
	"github.com/iggy-shard/iggy-shard/metaplane"
	"github.com/iggy-shard/iggy-shard/vsr"
	"github.com/iggy-shard/iggy-shard/wire"
)

// TestClusterUpgradeHealsAWedgedCluster: a cluster run with the snapshot
// trigger of the previous binary (a snapshot every 1,024 ops, the old default,
// beside a header window of 1,024) stops committing a window above its last
// snapshot: its primary refuses every proposal. The data directories it leaves
// are started with the rule: the nodes elect, apply the journaled ops, snapshot
// past them, and commit again; every write acknowledged before is there, on
// every node alike.
func TestClusterUpgradeHealsAWedgedCluster(t *testing.T) {
	cfgs := clusterConfigs(t, 3, testClusterSecret)
	for i := range cfgs {
		cfgs[i].SnapshotIntervalOps = 1024
		cfgs[i].metaOldCheckpointRule = true
	}
	started := time.Now()
	servers := startCluster(t, cfgs)
	pc := dialCluster(t, servers[0])
	// Writes until the primary's log reaches a window above its last snapshot:
	// the next proposal is refused.
	var acked []string
	for head := uint64(0); head < journalSlotsMin-1; {
		if len(acked) > 2*journalSlotsMin {
			t.Fatalf("%d writes committed at the old rule: no wedge", len(acked))
		}
		name := fmt.Sprintf("w-%d", len(acked))
		if _, err := pc.CreateStream(testContext(t), name); err != nil {
			t.Fatalf("CreateStream %s: %v", name, err)
		}
		acked = append(acked, name)
		onMetaShard(t, servers[0], func(p *metaPlane) { head = p.Core().Op() - p.Core().CheckpointOp() })
	}
	// One more write (the server's own, so that no client connection waits on
	// it) is held: the primary's core refuses it, on every try.
	committed := make(chan error, 1)
	onMetaShard(t, servers[0], func(p *metaPlane) {
		p.Propose(vsr.Proposal{Operation: wire.OperationCreateStream, UserID: metadata.RootUserID},
			createStreamBody(t, "held"), 1, func(_ *metaplane.Commit, err error) { committed <- err })
	})
	waitUntil(t, "the primary refuses proposals", func() bool { return servers[0].meta.Driver().CheckpointWaits() > 1 })
	for i, s := range servers {
		var snapshots int64
		var snapshotOp, op uint64
		onMetaShard(t, s, func(p *metaPlane) { snapshots, snapshotOp, op = p.SnapshotsTaken(), p.SnapshotOp(), p.Core().Op() })
		if snapshots != 0 || snapshotOp != 0 || op != journalSlotsMin-1 {
			t.Fatalf("node %d wedged with %d snapshots (the last at op %d), log to op %d; want none, op %d",
				i, snapshots, snapshotOp, op, journalSlotsMin-1)
		}
	}
	select {
	case err := <-committed:
		t.Fatalf("the held write ended: %v", err)
	default:
	}
	t.Logf("wedged after %d writes, %v", len(acked), time.Since(started).Round(time.Millisecond))

	// The upgrade: the same data directories, the rule. (A restart alone heals
	// the old binary too, once: a recovered journal a window long grows the
	// window, so the old trigger comes due; the next restart, with a short
	// journal, brings the old window back, and it wedges a window later. The
	// cluster here is restarted twice and taken past a window after each.)
	for _, s := range servers {
		stopServer(t, s)
	}
	for i := range cfgs {
		cfgs[i].metaOldCheckpointRule = false
	}
	for round := range 2 {
		for i := range cfgs {
			servers[i] = startTestServer(t, cfgs[i])
		}
		var leader uint8
		waitUntil(t, "the restarted cluster elects", func() (ok bool) { leader, ok = agreedLeader(servers); return ok })
		lc := dialCluster(t, servers[leader])
		for k := range journalSlotsMin + 16 {
			name := fmt.Sprintf("after-%d-%d", round, k)
			if _, err := lc.CreateStream(testContext(t), name); err != nil {
				t.Fatalf("CreateStream %s after restart %d: %v", name, round+1, err)
			}
			acked = append(acked, name)
		}
		sameMetadata(t, servers)
		for i, s := range servers {
			// Each node applied past the old trigger's reach and snapshotted.
			var snapshots int64
			var snapshotOp uint64
			onMetaShard(t, s, func(p *metaPlane) { snapshots, snapshotOp = p.SnapshotsTaken(), p.SnapshotOp() })
			if snapshots == 0 || snapshotOp < defaultSetup().SnapshotIntervalOps {
				t.Fatalf("node %d after restart %d: %d snapshots, the last at op %d", i, round+1, snapshots, snapshotOp)
			}
			names := streamNames(t, dialCluster(t, s))
			for _, name := range acked {
				if !slices.Contains(names, name) {
					t.Fatalf("node %d lost the acknowledged stream %s", i, name)
				}
			}
		}
		t.Logf("restart %d: %d writes acknowledged, %v", round+1, len(acked), time.Since(started).Round(time.Millisecond))
		for _, s := range servers {
			stopServer(t, s)
		}
	}
}
