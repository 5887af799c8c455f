package sim

import (
	"slices"
	"testing"

	"github.com/iggy-shard/iggy-shard/metaplane"
	"github.com/iggy-shard/iggy-shard/vsr"
)

// Each broken rule must be caught by the checkers within a bounded number of seeds;
// a checker that cannot fail would pass these runs.
func TestMutationsCaught(t *testing.T) {
	for _, tc := range []struct {
		name     string
		mutation vsr.Mutation
		// seedsMax bounds the search: the seeds the simulator needed when this test
		// was written, with room.
		seedsMax int
	}{
		{"CommitBeforeQuorum", vsr.MutationCommitBeforeQuorum, 200},
		{"TruncatePastNackQuorum", vsr.MutationTruncatePastNackQuorum, 400},
		{"AckBeforeDurable", vsr.MutationAckBeforeDurable, 1000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run := 0
			for i := 0; i < tc.seedsMax; i++ {
				opts := Config(uint64(i + 1))
				if opts.Replicas < 3 {
					continue // one and two replicas have no quorum to break
				}
				// The mutations break the metadata core's rules: no partition
				// group runs, so that no partition-plane bug passes for a caught
				// mutation.
				opts.Mutation, opts.PartitionGroups = tc.mutation, 0
				run++
				if r := Run(opts); r.Violation != nil {
					t.Logf("caught at seed %d, the %d-th seed run: %v", opts.Seed, run, r.Violation)
					return
				}
			}
			t.Fatalf("mutation %s not caught in %d seeds", tc.name, tc.seedsMax)
		})
	}
}

// Each rule of the metadata plane and of the simulated server broken on purpose
// must be caught too: the checkers of exactly once, of equal states and applies,
// of liveness, of the disk fault model's bound and of the partition stores' acks.
func TestBrokenRulesCaught(t *testing.T) {
	for _, tc := range []struct {
		name     string
		plane    metaplane.Mutation
		broken   brokenRule
		replicas []int
		// long: the break shows over a long seed only.
		long     bool
		seedsMax int
	}{
		// A retry prepared twice is executed twice.
		{name: "ApplyEveryPrepare", plane: metaplane.MutationApplyEveryPrepare, replicas: []int{3, 5}, seedsMax: 400},
		// A closed connection's entry removed locally: the tables drift.
		{name: "DropSessionOnClose", plane: metaplane.MutationDropSessionOnClose, replicas: []int{2, 3, 5}, seedsMax: 200},
		// A checkpoint every header window: the cluster locks up at op 1,023.
		{name: "CheckpointLate", plane: metaplane.MutationCheckpointLate, replicas: []int{3, 5}, long: true, seedsMax: 4},
		{name: "ApplySkew", plane: metaplane.MutationApplySkew, replicas: []int{2, 3, 5}, seedsMax: 20},
		// Two replicas commit on one (QuorumReplication(2) is 1): once both rot, a
		// committed op may have no intact copy left.
		{name: "RotEverywhere", broken: brokenRotEverywhere, replicas: []int{2}, seedsMax: 400},
		// The core cannot be told that an entry it held rotted (CoreRecovered lists
		// intact entries only), so it nacks a rotten op above its commit point in a
		// view change, and a committed op can be truncated. Long seeds restart and
		// change views with ops above the commit point far more often (caught at
		// the 16th long seed; 9 short seeds of 4,500 caught it).
		{name: "RotAboveCommit", broken: brokenRotAboveCommit, replicas: []int{3, 5}, long: true, seedsMax: 40},
		// The read-back of the real partition stores: an acknowledged batch that is
		// not the one in the logs, or one acknowledged before it committed (a view
		// change truncates it, and its offsets go to another batch).
		{name: "StoreAckFlipsBit", broken: brokenStoreAckFlipsBit, replicas: []int{1, 3}, seedsMax: 20},
		{name: "StoreAckAtPrepare", broken: brokenStoreAckAtPrepare, replicas: []int{3, 5}, seedsMax: 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run := 0
			for i := 0; i < tc.seedsMax; i++ {
				config := Config
				if tc.long {
					config = LongConfig
				}
				opts := config(uint64(i + 1))
				if !slices.Contains(tc.replicas, opts.Replicas) {
					continue
				}
				opts.broken, opts.PlaneMutation = tc.broken, tc.plane
				store := tc.broken == brokenStoreAckFlipsBit || tc.broken == brokenStoreAckAtPrepare
				if store {
					opts.CatchUp = false
				} else {
					opts.PartitionGroups = 0
				}
				run++
				if r := Run(opts); r.Violation != nil {
					t.Logf("caught at seed %d, the %d-th seed run: %v", opts.Seed, run, r.Violation)
					return
				}
			}
			t.Fatalf("broken rule %s not caught in %d seeds", tc.name, tc.seedsMax)
		})
	}
}

// The checkpoint interval's lock-up has its boundary at the header window less
// one op (metaplane.MutationCheckpointLate says why): on one long seed an
// interval of W-1 keeps committing past three checkpoints, and W, the mutation,
// stops the cluster at op W-1 with no checkpoint taken.
func TestCheckpointIntervalBoundary(t *testing.T) {
	window := uint64(metaplane.JournalSlotsMin)
	opts := LongConfig(4) // three replicas, thousands of ops
	opts.PartitionGroups = 0
	opts.checkpointIntervalOps = window - 1
	if r := Run(opts); r.Violation != nil || r.Metadata.Committed < 3*window {
		t.Errorf("an interval of %d (the window less one): %d metadata ops committed, %v; want past three intervals, no violation", window-1, r.Metadata.Committed, r.Violation)
	}
	opts.checkpointIntervalOps, opts.PlaneMutation = 0, metaplane.MutationCheckpointLate
	if r := Run(opts); r.Violation == nil || r.Metadata.Committed != window-1 || r.Metadata.Checkpoints != 0 {
		t.Errorf("an interval of %d (the window): %d metadata ops committed, %d checkpoints, %v; want the cluster stopped at op %d with none", window, r.Metadata.Committed, r.Metadata.Checkpoints, r.Violation, window-1)
	}
}
