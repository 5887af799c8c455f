package sim

import (
	"testing"

	"github.com/iggy-shard/iggy-shard/metadata"
	"github.com/iggy-shard/iggy-shard/metaplane"
)

// ciRevocationSeeds, ciRevocationLongSeeds and ciRevocationBoundSeeds are how
// many seeds of each class TestSimRevocations runs in CI (a bound seed revokes
// about 200,000 tokens on three replicas: seconds); go test ./sim -revoke
// -seeds N runs more short seeds, -revoke -long -seeds N long ones.
const (
	ciRevocationSeeds      = 100
	ciRevocationLongSeeds  = 2
	ciRevocationBoundSeeds = 1
)

// TestSimRevocations runs seeds whose nodes serve HTTP logouts (revocations.go):
// short seeds, long seeds past three checkpoints with a node catching up by an
// installed state, and seeds that fill the revoked tokens' table past its bound
// again and again.
func TestSimRevocations(t *testing.T) {
	if *seedFlag != 0 || *seedsFlag > 0 || testing.Short() {
		t.Skip("TestSim runs the seeds asked for")
	}
	sum := func(results []Result) (total RevocationsResult, installs, checkpoints int) {
		for _, r := range results {
			total.Ops += r.Revocations.Ops
			total.Revoked += r.Revocations.Revoked
			total.RefusedFull += r.Revocations.RefusedFull
			total.NotProposed += r.Revocations.NotProposed
			total.Unknown += r.Revocations.Unknown
			total.TableMax = max(total.TableMax, r.Revocations.TableMax)
			installs += r.Metadata.StateInstalls
			checkpoints += r.Metadata.Checkpoints
		}
		return total, installs, checkpoints
	}
	short, _, _ := sum(runSeeds(t, RevocationConfig, ciRevocationSeeds, 1))
	t.Logf("short seeds: %+v", short)
	if short.Revoked == 0 || short.NotProposed == 0 {
		t.Errorf("the short seeds revoked %d tokens, %d logouts at backups: the load is not what it says", short.Revoked, short.NotProposed)
	}
	longResults := runSeeds(t, RevocationLongConfig, ciRevocationLongSeeds, 1)
	long, installs, _ := sum(longResults)
	t.Logf("long seeds: %+v, %d states installed", long, installs)
	for _, r := range longResults {
		if interval := metaplane.CheckpointIntervalOpsMax(metaplane.JournalSlotsMin); r.Violation == nil && r.Metadata.Committed < 3*interval {
			t.Errorf("long seed %d committed %d metadata ops, fewer than three checkpoint intervals", r.Seed, r.Metadata.Committed)
		}
	}
	if installs == 0 || long.Revoked == 0 {
		t.Errorf("the long seeds installed %d states and revoked %d tokens: no revoked token crossed an install", installs, long.Revoked)
	}
	bound, _, _ := sum(runSeeds(t, RevocationBoundConfig, ciRevocationBoundSeeds, 1))
	t.Logf("bound seeds: %+v", bound)
	// Crossed: full, refused, and more tokens revoked than the bound holds, so
	// entries left and new ones took their place.
	if bound.TableMax != metadata.RevokedTokensMax || bound.RefusedFull == 0 || bound.Revoked <= 2*metadata.RevokedTokensMax {
		t.Errorf("the bound seeds did not cross the bound: %+v", bound)
	}
}
