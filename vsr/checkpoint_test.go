package vsr

import (
	"errors"
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

func TestCheckpointIntervalOpsMax(t *testing.T) {
	for _, tc := range []struct {
		slots, depth int
		want         uint64
	}{
		{1024, 0, 1024 - 2*PipelineDepthDefault}, // the metadata plane's defaults: 960
		{1024, 32, 960},
		{2048, 32, 1984}, // a window grown on recovery: the bound widens
		{128, 32, 64},    // the simulator's former small window, checkpoints every 32 ops
		{64, 32, 0},      // no room: no interval is safe
		{64, 8, 48},
	} {
		if got := CheckpointIntervalOpsMax(tc.slots, tc.depth); got != tc.want {
			t.Errorf("CheckpointIntervalOpsMax(%d, %d) = %d, want %d", tc.slots, tc.depth, got, tc.want)
		}
	}
}

func TestNewCoreAssertsTheCheckpointRule(t *testing.T) {
	build := func(slots int, interval uint64) error {
		_, err := NewCore(CoreConfig{
			Config:       Config{Cluster: wire.ClusterID("test"), ReplicaID: 0, ReplicaCount: 3, Group: wire.MetadataGroup},
			Timing:       testTiming,
			JournalSlots: slots, Storage: newMemStorage(slots),
			ReportsCheckpoints: true, CheckpointIntervalOps: interval,
		})
		return err
	}
	for _, tc := range []struct {
		slots    int
		interval uint64
		ok       bool
	}{
		{1024, 960, true},
		{1024, 1, true},
		{1024, 961, false},
		{1024, 1024, false}, // the old default: locks up
		{1024, 0, false},    // a ReportsCheckpoints caller must say its interval
		{2048, 1024, true},
		{64, 1, false},
	} {
		if err := build(tc.slots, tc.interval); (err == nil) != tc.ok {
			t.Errorf("slots %d, interval %d: NewCore error %v, want accepted=%v", tc.slots, tc.interval, err, tc.ok)
		}
	}
}

// checkpointRun is what driveCheckpoints saw.
type checkpointRun struct {
	applied     uint64
	checkpoints int
	// refused counts the proposals refused with ErrCheckpointDue.
	refused int
	// wedged: a turn in which nothing could be proposed or applied, and no
	// checkpoint came due.
	wedged bool
}

// driveCheckpoints runs a primary whose caller takes a checkpoint whenever it has
// applied interval ops since its last one, and otherwise proposes as many ops as
// the core takes, turn after turn, until it applied ops or wedged. With overlap,
// a checkpoint is durable only after the next turn's proposals (the caller writes
// it while the primary goes on), as a snapshot written off the primary's loop is;
// without, it is durable before the next proposal. The interval is the caller's:
// the core is built with a legal one, so that an illegal one can be shown to fail.
func driveCheckpoints(t *testing.T, slots, depth int, interval, ops uint64, overlap bool) checkpointRun {
	t.Helper()
	legal := min(interval, CheckpointIntervalOpsMax(slots, depth))
	c, err := NewCore(CoreConfig{
		Config:       Config{Cluster: wire.ClusterID("test"), ReplicaCount: 1, Group: wire.MetadataGroup, PipelineDepth: depth},
		Timing:       testTiming,
		JournalSlots: slots, Storage: newMemStorage(slots),
		ReportsCheckpoints: true, CheckpointIntervalOps: legal,
	})
	if err != nil {
		t.Fatal(err)
	}
	var run checkpointRun
	var checkpoint, pending uint64 // pending: being written (overlap)
	body := []byte{1, 2, 3}
	for turn := uint64(0); run.applied < ops; turn++ {
		if turn > 4*ops {
			t.Fatalf("no progress bound: %d turns", turn)
		}
		proposed := 0
		for {
			_, err := c.Propose(Proposal{Client: wire.Uint128{Lo: 1}, Request: turn, Operation: wire.OperationCreateStream}, body, turn)
			if errors.Is(err, ErrCheckpointDue) {
				run.refused++
				break
			}
			if errors.Is(err, ErrPipelineFull) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			proposed++
		}
		completed := pending > 0
		if completed {
			c.Checkpointed(pending)
			checkpoint, pending = pending, 0
			run.checkpoints++
		}
		appliedBefore := run.applied
		for c.HasReady() {
			rd := c.Ready()
			for i := range rd.Committed {
				if rd.Committed[i].Op != run.applied+1 {
					t.Fatalf("op %d applied after %d", rd.Committed[i].Op, run.applied)
				}
				run.applied++
			}
			c.Advance()
		}
		due := run.applied-checkpoint >= interval && pending == 0
		if proposed == 0 && run.applied == appliedBefore && !due && !completed {
			run.wedged = true
			return run
		}
		if due {
			if overlap {
				pending = run.applied
			} else {
				c.Checkpointed(run.applied)
				checkpoint = run.applied
				run.checkpoints++
			}
		}
	}
	return run
}

// TestCheckpointBoundary: the rule's boundaries, each side, over ten windows. A
// checkpoint every W-2P ops never refuses a proposal even while each checkpoint
// is written beside a pipeline of proposals; one op more does (the pipeline runs
// dry at each checkpoint) but lives; W-1 still lives; W, the old default, wedges
// the group a window above its last checkpoint, for good.
func TestCheckpointBoundary(t *testing.T) {
	const slots, depth = 1024, 32
	const ops = 10 * slots
	limit := CheckpointIntervalOpsMax(slots, depth)
	for _, tc := range []struct {
		name     string
		interval uint64
		overlap  bool
		refused  bool
		wedged   bool
	}{
		{"W-2P overlapped", limit, true, false, false},
		{"W-2P+1 overlapped", limit + 1, true, true, false},
		{"W-P", slots - depth, false, false, false},
		{"W-P+1", slots - depth + 1, false, true, false},
		{"W-1", slots - 1, false, true, false},
		{"W-1 overlapped", slots - 1, true, true, false},
		{"W", slots, false, true, true},
		{"W overlapped", slots, true, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run := driveCheckpoints(t, slots, depth, tc.interval, ops, tc.overlap)
			if run.wedged != tc.wedged || (run.refused > 0) != tc.refused {
				t.Fatalf("interval %d: %+v, want wedged=%v refused=%v", tc.interval, run, tc.wedged, tc.refused)
			}
			if tc.wedged {
				if run.applied != slots-1 || run.checkpoints != 0 {
					t.Fatalf("wedged at op %d after %d checkpoints, want op %d and none", run.applied, run.checkpoints, slots-1)
				}
				return
			}
			if run.checkpoints < int(ops/tc.interval)-1 {
				t.Fatalf("%d checkpoints over %d ops at interval %d", run.checkpoints, run.applied, tc.interval)
			}
		})
	}
}

// TestCheckpointFailureKeepsTheLastDurable: a caller whose checkpoint write fails
// keeps counting from the last durable checkpoint and tries again later; one that
// counts the next try from the failed op (the metadata plane did) wedges after a
// single failure, since the try comes due beyond the window.
func TestCheckpointFailureKeepsTheLastDurable(t *testing.T) {
	const slots, depth = 1024, 32
	interval := CheckpointIntervalOpsMax(slots, depth)
	for _, countFromFailed := range []bool{false, true} {
		c, err := NewCore(CoreConfig{
			Config:       Config{Cluster: wire.ClusterID("test"), ReplicaCount: 1, Group: wire.MetadataGroup, PipelineDepth: depth},
			Timing:       testTiming,
			JournalSlots: slots, Storage: newMemStorage(slots),
			ReportsCheckpoints: true, CheckpointIntervalOps: interval,
		})
		if err != nil {
			t.Fatal(err)
		}
		var applied, durable, paced uint64 // paced: what the next try counts from
		failures, wedged := 0, false
		for turn := uint64(0); applied < 4*slots && !wedged; turn++ {
			proposed := 0
			for ; ; proposed++ {
				if _, err := c.Propose(Proposal{Client: wire.Uint128{Lo: 1}, Request: turn, Operation: wire.OperationCreateStream}, []byte{1}, turn); err != nil {
					break
				}
			}
			before := applied
			for c.HasReady() {
				rd := c.Ready()
				applied += uint64(len(rd.Committed))
				c.Advance()
			}
			if applied-paced >= interval {
				if failures == 0 { // the first try fails
					failures++
					if countFromFailed {
						paced = applied
					}
					continue
				}
				c.Checkpointed(applied)
				durable, paced = applied, applied
				continue
			}
			wedged = proposed == 0 && applied == before
		}
		if wedged != countFromFailed {
			t.Fatalf("counting from the failed try %v: wedged=%v at op %d (last durable checkpoint %d)", countFromFailed, wedged, applied, durable)
		}
	}
}
