package sim

import "testing"

// ciPurgeSeeds is how many PurgeConfig seeds CI runs (seconds); go test ./sim
// -run TestSimPurge -seeds N (-first F) runs more, -purge -seed N replays one.
const ciPurgeSeeds = 300

// TestSimPurge runs seeds whose workload purges the partition groups' topic
// often, each node carrying the purge out when it applies the op (purge.go):
// every check holds within each life and across them, and the stores did purge.
func TestSimPurge(t *testing.T) {
	if *seedFlag != 0 || testing.Short() {
		t.Skip("TestSim runs the seed asked for")
	}
	count, first := ciPurgeSeeds, uint64(1)
	if *seedsFlag > 0 {
		count, first = *seedsFlag, *firstFlag
	}
	purges := 0
	for _, r := range runSeeds(t, PurgeConfig, count, first) {
		purges += r.Partitions.Purges
	}
	if purges == 0 {
		t.Error("no partition was purged")
	}
}
