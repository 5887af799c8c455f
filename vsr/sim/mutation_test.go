package sim

import (
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
