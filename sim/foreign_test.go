package sim

import (
	"fmt"
	"testing"

	"github.com/iggy-shard/iggy-shard/vsr"
)

// ciForeignSeeds is how many ForeignConfig seeds CI runs (seconds); go test
// ./sim -run TestSimForeignIncarnation -seeds N runs more, -foreign -seed N
// replays one.
const ciForeignSeeds = 60

// TestSimForeignIncarnation runs seeds with another incarnation of the group ids
// beside the cluster, frames crossing both ways while the faults last: every
// check of both clusters holds, and the frames did cross.
func TestSimForeignIncarnation(t *testing.T) {
	if *seedFlag != 0 || testing.Short() {
		t.Skip("TestSim runs the seed asked for")
	}
	count, first := ciForeignSeeds, uint64(1)
	if *seedsFlag > 0 {
		count, first = *seedsFlag, *firstFlag
	}
	config := func(seed uint64) Options {
		o := ForeignConfig(seed)
		o.foreignNormalCase, o.foreignAnswers = *foreignNormalFlag, *foreignAnswersFlag
		return o
	}
	results := runSeeds(t, config, count, first)
	delivered, refused, wedged, installs := 0, 0, 0, 0
	var contradicting uint64
	for _, r := range results {
		installs += r.Partitions.StatesInstalled
		contradicting += r.Partitions.Drops[vsr.DropContradictsCommitted]
		delivered += r.ForeignDelivered
		refused += r.ForeignRefused
		if r.Partitions.ForeignWedged {
			wedged++
		}
	}
	t.Logf("%d foreign frames delivered, %d refused as bad input, %d partition inputs refused as contradicting the committed ops, %d partition states installed; %d of %d seeds ended with a partition group wedged by the other's log",
		delivered, refused, contradicting, installs, wedged, len(results))
	if delivered == 0 {
		t.Error("no frame of the other incarnation was delivered")
	}
}

// TestSimForeignReplaysExactly: a run with the other incarnation beside it is a
// pure function of its seed too.
func TestSimForeignReplaysExactly(t *testing.T) {
	a, b := Run(ForeignConfig(3)), Run(ForeignConfig(3))
	if a.Violation != nil || b.Violation != nil {
		t.Fatal(a.Violation, b.Violation)
	}
	a.Violation, b.Violation = nil, nil
	if a.ForeignDelivered == 0 || fmt.Sprintf("%+v", a) != fmt.Sprintf("%+v", b) {
		t.Fatalf("two runs of seed 3 differ (or nothing crossed):\n%+v\n%+v", a, b)
	}
}
