package sim

import (
	"slices"
	"testing"

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
				opts.Mutation = tc.mutation
				// The mutations break the core's rules: with the stand-in, every
				// group of the run takes them, and no partition-plane bug (known
				// ones end runs too) passes for a caught mutation.
				opts.RealPartitions, opts.CatchUp = false, false
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

// Each rule of the simulated server broken on purpose must be caught too: the
// checkers of exactly once, of equal applies and of the disk fault model's bound.
func TestBrokenRulesCaught(t *testing.T) {
	for _, tc := range []struct {
		name     string
		broken   brokenRule
		replicas []int
		seedsMax int
	}{
		{"ApplyRetries", brokenApplyRetries, []int{3, 5}, 400},
		{"ApplyDiverges", brokenApplyDiverges, []int{2, 3, 5}, 20},
		// Two replicas commit on one (QuorumReplication(2) is 1): once both rot, a
		// committed op may have no intact copy left.
		{"RotEverywhere", brokenRotEverywhere, []int{2}, 400},
		// The core cannot be told that an entry it held rotted (CoreRecovered lists
		// intact entries only), so it nacks a rotten op above its commit point in a
		// view change, and a committed op can be truncated.
		{"RotAboveCommit", brokenRotAboveCommit, []int{3, 5}, 2000},
		// The read-back of the real partition stores: an acknowledged batch that is
		// not the one in the logs, or one acknowledged before it committed (a view
		// change truncates it, and its offsets go to another batch).
		{"StoreAckFlipsBit", brokenStoreAckFlipsBit, []int{1, 3}, 20},
		{"StoreAckAtPrepare", brokenStoreAckAtPrepare, []int{3, 5}, 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run := 0
			for i := 0; i < tc.seedsMax; i++ {
				opts := Config(uint64(i + 1))
				if !slices.Contains(tc.replicas, opts.Replicas) {
					continue
				}
				opts.broken = tc.broken
				opts.RealPartitions, opts.CatchUp = tc.broken == brokenStoreAckFlipsBit || tc.broken == brokenStoreAckAtPrepare, false
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
