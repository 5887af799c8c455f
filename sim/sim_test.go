package sim

import (
	"flag"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/metaplane"
	"github.com/iggy-shard/iggy-shard/partition"
	"github.com/iggy-shard/iggy-shard/vsr"
)

var (
	seedFlag           = flag.Uint64("seed", 0, "replay one seed, with a trace")
	seedsFlag          = flag.Int("seeds", 0, "run this many seeds from -first (long mode)")
	firstFlag          = flag.Uint64("first", 1, "first seed of -seeds")
	heavyFlag          = flag.Bool("heavy", false, "run the seeds' HeavyConfig instead of their Config")
	longFlag           = flag.Bool("long", false, "run the seeds' LongConfig (thousands of metadata ops, past three checkpoints) instead of their Config")
	allFlag            = flag.Bool("all", false, "report every failing seed's violation, not only the first ten")
	revokeFlag         = flag.Bool("revoke", false, "run the seeds' RevocationConfig (HTTP logouts revoking tokens; with -long, RevocationLongConfig)")
	foreignFlag        = flag.Bool("foreign", false, "run the seeds' ForeignConfig (another incarnation of the group ids beside the cluster)")
	foreignNormalFlag  = flag.Bool("foreign-normal-case", false, "with -foreign, the other incarnation's Prepare, PrepareOk and Commit frames cross too")
	foreignAnswersFlag = flag.Bool("foreign-answers", false, "with -foreign, every answer to a request that crossed crosses back")
	purgeFlag          = flag.Bool("purge", false, "run the seeds' PurgeConfig (the partition groups' topic purged often, each node carrying the purge out as it applies it)")
)

// ciSeeds is the fixed set CI runs on every change (seeds 1..ciSeeds); -short runs
// fewer; ciLongSeeds is how many long seeds CI runs.
const (
	ciSeeds      = 1000
	ciSeedsShort = 100
	ciLongSeeds  = 4
)

func TestSim(t *testing.T) {
	config := Config
	switch {
	case *heavyFlag:
		config = HeavyConfig
	case *revokeFlag && *longFlag:
		config = RevocationLongConfig
	case *revokeFlag:
		config = RevocationConfig
	case *longFlag:
		config = LongConfig
	case *purgeFlag:
		config = PurgeConfig
	case *foreignFlag:
		config = func(seed uint64) Options {
			o := ForeignConfig(seed)
			o.foreignNormalCase, o.foreignAnswers = *foreignNormalFlag, *foreignAnswersFlag
			return o
		}
	}
	if *seedFlag != 0 {
		opts := config(*seedFlag)
		opts.Trace = func(line string) { t.Log(line) }
		r := Run(opts)
		t.Logf("seed=%d replicas=%d clients=%d partition groups=%d: %d ticks, liveness %d ticks, %d committed, %d acknowledged, %d crashes, view %d, %+v",
			r.Seed, opts.Replicas, opts.Clients, opts.PartitionGroups, r.Ticks, r.LivenessTicks, r.Committed, r.Acknowledged, r.Crashes, r.ViewChanges, r)
		if r.Violation != nil {
			t.Fatal(r.Violation)
		}
		return
	}
	count, first := ciSeeds, uint64(1)
	if testing.Short() {
		count = ciSeedsShort
	}
	if *longFlag {
		count = ciLongSeeds
	}
	if *seedsFlag > 0 {
		count, first = *seedsFlag, *firstFlag
	}
	runSeeds(t, config, count, first)
}

// TestSimLong runs a handful of long seeds (LongConfig) in CI: thousands of
// metadata ops at the server's defaults, past three checkpoints, with a node
// down across one; -long with -seeds runs more.
func TestSimLong(t *testing.T) {
	if *seedFlag != 0 || *seedsFlag > 0 || testing.Short() {
		t.Skip("TestSim runs the seeds asked for")
	}
	results := runSeeds(t, LongConfig, ciLongSeeds, 1)
	// The class is what it says: past three checkpoints of the server's window,
	// with a node down across one.
	for _, r := range results {
		if interval := metaplane.CheckpointIntervalOpsMax(metaplane.JournalSlotsMin); r.Violation == nil && r.Metadata.Committed < 3*interval {
			t.Errorf("long seed %d committed %d metadata ops, fewer than three checkpoint intervals (%d)", r.Seed, r.Metadata.Committed, 3*interval)
		}
		if r.Violation == nil && !r.DownAcrossCheckpoint {
			t.Errorf("long seed %d: no node was down while another checkpointed past it", r.Seed)
		}
	}
}

func runSeeds(t *testing.T, config func(uint64) Options, count int, first uint64) []Result {
	t.Helper()
	start := time.Now()
	// Seeds are independent: run them on every core, each a pure function of its
	// seed, and report failures in seed order.
	results := make([]Result, count)
	var next, done atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < runtime.GOMAXPROCS(0); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= count {
					return
				}
				results[i] = Run(config(first + uint64(i)))
				if done := done.Add(1); done%10000 == 0 {
					t.Logf("%d of %d seeds run, %v", done, count, time.Since(start).Round(time.Second))
				}
			}
		}()
	}
	wg.Wait()
	var livenessMax, livenessSeed, committed uint64
	failures, crashes, forwarded, corrupt, installs, views := 0, 0, 0, 0, 0, uint64(0)
	checkpoints, skipped, disconnects, abandoned, evictions, refused58, acrossCheckpoint := 0, 0, 0, 0, 0, 0, 0
	var metaCommittedMin, metaCommittedMax uint64 = ^uint64(0), 0
	refusals, admitRefused, partitionAcks, rotten, rottenToRepair, dropped, acknowledged := 0, 0, 0, 0, 0, 0, 0
	realSeeds, stalled, lagging, stampRefusals, divergedRefusals, offsetStores, sendsFailed, unobserved := 0, 0, 0, 0, 0, 0, 0, 0
	purges, purgesSkipped, acksPurged, otherLife, purgedSeeds := 0, 0, 0, 0, 0
	bySize := map[int]int{}
	var drops, partitionDrops vsr.DropCounts
	var ingressDrops partition.IngressDrops
	var failed []uint64
	for i, r := range results {
		opts := config(first + uint64(i))
		bySize[opts.Replicas]++
		committed += r.Committed
		for reason := range drops {
			drops[reason] += r.Metadata.Drops[reason]
			partitionDrops[reason] += r.Partitions.Drops[reason]
		}
		for reason := range ingressDrops {
			ingressDrops[reason] += r.Partitions.IngressDrops[reason]
		}
		crashes += r.Crashes
		forwarded += r.Metadata.ForwardedLogins
		views += uint64(r.ViewChanges)
		corrupt += r.CorruptRefused
		installs += r.Metadata.StateInstalls
		refusals += r.Metadata.CommittedRefusals
		admitRefused += r.Metadata.AdmitRefused
		partitionAcks += r.Partitions.Acks
		rotten += r.Metadata.RottenEntries
		rottenToRepair += r.Metadata.RottenToRepair
		dropped += r.Metadata.DamagedEntriesDropped
		acknowledged += r.Acknowledged
		checkpoints += r.Metadata.Checkpoints
		skipped += r.Metadata.DuplicatesSkipped
		disconnects += r.Clients.Disconnects
		abandoned += r.Clients.Abandoned
		evictions += r.Metadata.Evictions
		refused58 += r.Clients.Refused58
		if r.DownAcrossCheckpoint {
			acrossCheckpoint++
		}
		metaCommittedMin = min(metaCommittedMin, r.Metadata.Committed)
		metaCommittedMax = max(metaCommittedMax, r.Metadata.Committed)
		if opts.PartitionGroups > 0 {
			realSeeds++
		}
		if r.Partitions.Stalled {
			stalled++
		}
		lagging += r.Partitions.LaggingReplicas
		stampRefusals += r.Partitions.StampRefusals
		purges += r.Partitions.Purges
		purgesSkipped += r.Partitions.PurgesSkipped
		acksPurged += r.Partitions.AcksPurged
		otherLife += r.Partitions.OtherLifeDropped
		if r.Partitions.Purges > 0 {
			purgedSeeds++
		}
		divergedRefusals += r.Partitions.DivergedRefusals
		offsetStores += r.Partitions.OffsetStores
		sendsFailed += r.Partitions.SendsFailed
		unobserved += r.Partitions.CommitsUnobserved
		if r.LivenessTicks > livenessMax {
			livenessMax, livenessSeed = r.LivenessTicks, r.Seed
		}
		if r.Violation == nil {
			continue
		}
		failures++
		failed = append(failed, r.Seed)
		if failures <= 10 || *allFlag {
			t.Errorf("%v\n\treplay: go test ./sim -run TestSim -seed %d", r.Violation, r.Seed)
		}
	}
	if len(failed) > 10 {
		t.Errorf("all failing seeds: %v", failed)
	}
	t.Logf("seeds by replica count: %v", bySize)
	t.Logf("%d seeds from %d in %v: %d failed, %d ops committed, %d crashes, %d views, %d forwarded logins, %d corrupted frames refused, %d state transfers, liveness bound seen %d ticks at seed %d (limit %d)",
		count, first, time.Since(start).Round(time.Millisecond), failures, committed, crashes, views, forwarded, corrupt, installs, livenessMax, livenessSeed, config(first).LivenessTicksMax)
	t.Logf("%d requests acknowledged (%d of them partition sends and offset stores), %d metadata ops committed as refusals, %d refused at admission, %d journal entries rotted (%d of them above their replica's checkpoint), %d damaged entries dropped at recovery",
		acknowledged, partitionAcks, refusals, admitRefused, rotten, rottenToRepair, dropped)
	byReason := func(drops *vsr.DropCounts) string {
		var reasons []string
		for reason := vsr.DropReason(0); reason < vsr.DropReasonCount; reason++ {
			if n := drops[reason]; n > 0 {
				reasons = append(reasons, fmt.Sprintf("%v %d", reason, n))
			}
		}
		return strings.Join(reasons, ", ")
	}
	var ingressByReason []string
	for reason := partition.IngressDrop(0); reason < partition.IngressDropCount; reason++ {
		if n := ingressDrops[reason]; n > 0 {
			ingressByReason = append(ingressByReason, fmt.Sprintf("%v %d", reason, n))
		}
	}
	t.Logf("metadata plane: %d to %d ops committed per seed, %d checkpoints, %d committed prepares skipped at apply (a request applied already, or of a session ended), %d connections closed, %d requests abandoned with them, %d sessions evicted from a full client table, %d requests given up after a 58 (none in the log), %d seeds with a node down while another checkpointed past it",
		metaCommittedMin, metaCommittedMax, checkpoints, skipped, disconnects, abandoned, evictions, refused58, acrossCheckpoint)
	t.Logf("inputs the metadata group dropped, by reason: %s", byReason(&drops))
	t.Logf("inputs the partition groups dropped, by reason: %s; frames the stores gave no group, by reason: %s",
		byReason(&partitionDrops), strings.Join(ingressByReason, ", "))
	t.Logf("real partition stores in %d seeds: %d offset stores acknowledged, %d admitted sends failed, %d stalled at the liveness bound behind replicas that cannot catch up, %d replicas left behind, %d intact prepares refused for their stamp, %d requests refused by partitions that took themselves for diverged, %d commits past a core's window unobserved",
		realSeeds, offsetStores, sendsFailed, stalled, lagging, stampRefusals, divergedRefusals, unobserved)
	t.Logf("purges: %d partitions purged in %d seeds, %d purges applied again and skipped (the record at their generation), %d acknowledged sends of purged lives released, %d frames of another life dropped",
		purges, purgedSeeds, purgesSkipped, acksPurged, otherLife)
	return results
}

func ExampleConfig() {
	fmt.Println(Config(1).Replicas, Config(4).Replicas)
	// Output: 5 1
}

// BenchmarkSim runs whole seeds: committed ops per second of wall time is the
// simulator's speed (the core's, the checkers' and the simulated network's).
func BenchmarkSim(b *testing.B) {
	for _, replicas := range []int{3, 5} {
		b.Run(fmt.Sprintf("replicas=%d", replicas), func(b *testing.B) {
			b.ReportAllocs()
			var committed, ticks uint64
			seed := uint64(0)
			for b.Loop() {
				seed++
				opts := Config(seed)
				opts.Replicas = replicas
				r := Run(opts)
				if r.Violation != nil {
					b.Fatal(r.Violation)
				}
				committed += r.Committed
				ticks += r.Ticks
			}
			b.ReportMetric(float64(committed)/b.Elapsed().Seconds(), "ops/s")
			b.ReportMetric(float64(ticks)/b.Elapsed().Seconds(), "ticks/s")
		})
	}
}

// A seed is the whole run: twice the same seed gives the same trace, line for line
// (a long one too: a map's random order once made it differ there).
func TestSimReplaysExactly(t *testing.T) {
	for _, seed := range []uint64{3, 12, 77, 1 << 40} {
		var traces [2][]string
		var results [2]Result
		for k := range traces {
			opts := Config(seed)
			if seed == 1<<40 {
				opts = LongConfig(88)
			}
			opts.Trace = func(line string) { traces[k] = append(traces[k], line) }
			results[k] = Run(opts)
		}
		if results[0] != results[1] || len(traces[0]) != len(traces[1]) {
			t.Fatalf("seed %d ran twice differently: %+v vs %+v", seed, results[0], results[1])
		}
		for i := range traces[0] {
			if traces[0][i] != traces[1][i] {
				t.Fatalf("seed %d: line %d differs:\n%s\n%s", seed, i, traces[0][i], traces[1][i])
			}
		}
	}
}

// TestRegressionSeeds replays seeds that once broke a rule of the core, with the
// configuration that broke it.
func TestRegressionSeeds(t *testing.T) {
	cases := []struct {
		name string
		opts Options
		// realPlane: the run broke a rule with the real partition plane (the
		// others broke the core's with a stand-in that is gone; they replay with
		// the real planes).
		realPlane bool
	}{
		// A primary of two committed alone while it could not apply, proposed past
		// what its journal window could hold above its last checkpoint, crashed,
		// and its repair overwrote the head's slot (CoreConfig.ReportsCheckpoints).
		{"window above the checkpoint", HeavyConfig(1519), false},
		// The run was declared done while an acknowledged send sat above the commit
		// point of a new view, and the durability check read the log too early.
		{"done before the recommit, 2 replicas", Config(2003343), false},
		{"done before the recommit, 3 replicas", Config(2128322), false},
		// A backup of a partition group, left in the view of a primary that was
		// cut off, took that primary's uncommitted op; the newer view's prepare
		// was refused at ingress for its stamp, and the backup asked the old
		// view's primary (which had joined the newer view) for a state, whose
		// identity it named from the header it held at the state's op: the
		// cut-off primary's op stood committed there.
		{"state of a newer view, 5 replicas", Config(6043761), true},
		{"state of a newer view, 5 replicas, 6 crashes", Config(6012859), true},
		{"state of a newer view, 5 replicas, 2 crashes", Config(6049489), true},
		// The partition plane on the real stores, each fixed in partition/:
		// ops applied while a state was on its way, then cut by its install;
		{"apply during a transfer, 3 replicas", Config(6000320), true},
		{"apply during a transfer, 5 replicas", Config(6017217), true},
		// an entry the core discarded came back from the journal file;
		{"discard not in the journal file", Config(6011893), true},
		// offsets of an installed state, and of an op the log's later batches
		// proved applied, lost in a crash behind a checkpoint;
		{"offsets installed after the checkpoint", Config(6005578), true},
		{"offset op proven applied, its write lost", Config(6013904), true},
		// an installed state's new state file said view 0;
		{"installed state file at view 0", Config(6047735), true},
		// the torn first write of a state file left a log no one could place;
		{"torn first state write", Config(6042623), true},
		// a new log view durable before the discards of the old one's entries;
		{"view state before the discards", Config(7131400), true},
		// a batch journaled below the last op left a stale prepared end;
		{"stale prepared end", Config(440), true},
		// a restart at op 0 dropped the view headers it had adopted, and spoke in
		// a view change for a shorter log than its log view's.
		{"view headers at op 0", Config(8107888), true},
		{"view headers at op 0, 3 groups", Config(8120213), true},
		// A backup that had applied nothing followed a view more than a journal
		// window (128 slots) above it and acknowledged the head op; repair verified
		// the chain downward past the window into the head's slot, so its next
		// DoViewChange nacked the head, and with a stale log's nack the merge
		// truncated a committed op.
		{"repair below the window, 3 replicas", Config(7038202), true},
	}
	for _, tc := range cases {
		if r := Run(tc.opts); r.Violation != nil {
			t.Errorf("%s: %v\n\treplay: go test ./sim -run TestSim -seed %d -heavy", tc.name, r.Violation, tc.opts.Seed)
		}
	}
}
