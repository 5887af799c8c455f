package sim

import (
	"flag"
	"fmt"
	"testing"
	"time"
)

var (
	seedFlag  = flag.Uint64("seed", 0, "replay one seed, with a trace")
	seedsFlag = flag.Int("seeds", 0, "run this many seeds from -first (long mode)")
	firstFlag = flag.Uint64("first", 1, "first seed of -seeds")
)

// ciSeeds is the fixed set CI runs on every change.
const ciSeeds = 200

func TestSim(t *testing.T) {
	if *seedFlag != 0 {
		opts := Config(*seedFlag)
		opts.Trace = func(line string) { t.Log(line) }
		r := Run(opts)
		t.Logf("seed=%d replicas=%d clients=%d: %d ticks, liveness %d ticks, %d committed, %d acknowledged, %d crashes, view %d",
			r.Seed, opts.Replicas, opts.Clients, r.Ticks, r.LivenessTicks, r.Committed, r.Acknowledged, r.Crashes, r.ViewChanges)
		if r.Violation != nil {
			t.Fatal(r.Violation)
		}
		return
	}
	count, first := ciSeeds, uint64(1)
	if *seedsFlag > 0 {
		count, first = *seedsFlag, *firstFlag
	}
	start := time.Now()
	var livenessMax, committed uint64
	failures := 0
	for i := 0; i < count; i++ {
		seed := first + uint64(i)
		r := Run(Config(seed))
		committed += r.Committed
		livenessMax = max(livenessMax, r.LivenessTicks)
		if r.Violation != nil {
			failures++
			t.Errorf("%v\n\treplay: go test ./vsr/sim -run TestSim -seed %d", r.Violation, seed)
			if failures >= 5 {
				break
			}
		}
	}
	t.Logf("%d seeds from %d in %v: %d ops committed, liveness bound seen %d ticks",
		count, first, time.Since(start).Round(time.Millisecond), committed, livenessMax)
}

func ExampleConfig() {
	fmt.Println(Config(1).Replicas, Config(4).Replicas)
	// Output: 5 1
}
