package segment

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

// crashRun drives one seeded life of a log on a SimDisk: appends, polls, reads,
// consumer offset stores, injected faults, crashes and restarts, checking after
// every restart that
//
//   - every batch reported Durable before the crash is there, byte for byte;
//   - offsets run contiguously from the first stored one to the next offset;
//   - nothing else is there but batches that were appended at those very offsets
//     (an unacknowledged batch may survive a crash whole, never altered or partly);
//
// and during the run that every read returns exactly what was appended.
type crashRun struct {
	t    *testing.T
	seed uint64
	rng  *rand.Rand
	disk *SimDisk
	cfg  Config
	log  *Log
	tag  int // generation: payloads of each life differ, so stale bytes show

	sent       *model // every batch appended and not reported Failed
	cut        *model // batches reported Failed since the last restart
	durableEnd uint64 // from Hooks.Durable
	ts         uint64
	faults     bool
	lastReport *RecoveryReport
	crashes    int
	failures   int
}

func (r *crashRun) fatalf(format string, args ...any) {
	r.t.Helper()
	r.t.Fatalf("seed=%d crash=%d: %s", r.seed, r.crashes, fmt.Sprintf(format, args...))
}

func (r *crashRun) hooks() Hooks {
	return Hooks{
		Durable: func(end uint64) {
			if end < r.durableEnd {
				r.fatalf("durable end went back from %d to %d", r.durableEnd, end)
			}
			r.durableEnd = end
		},
		Failed: func(from, to uint64, err error) {
			if from < r.durableEnd {
				r.fatalf("failure cuts durable offsets: [%d, %d) with durable end %d: %v", from, to, r.durableEnd, err)
			}
			r.failures++
			for o := from; o < to; o++ {
				if p, ok := r.sent.payloads[o]; ok {
					r.cut.payloads[o], r.cut.stamps[o] = p, r.sent.stamps[o]
				}
			}
			r.sent.truncate(from)
		},
	}
}

func (r *crashRun) open() {
	r.t.Helper()
	l, report, err := Open(r.disk, r.cfg, r.hooks())
	if err != nil {
		r.fatalf("open: %v", err)
	}
	r.log = l
	r.lastReport = report
	// Durable batches survived.
	if l.NextOffset() < r.durableEnd {
		r.fatalf("recovered to %d below the durable end %d (%s)", l.NextOffset(), r.durableEnd, report)
	}
	msgs := readAll(r.t, l, 0, uint32(1+r.rng.IntN(40)))
	if uint64(len(msgs)) != l.NextOffset()-l.FirstOffset() {
		r.fatalf("read %d messages, log holds [%d, %d)", len(msgs), l.FirstOffset(), l.NextOffset())
	}
	r.sent.check(r.t, msgs)
	// One read of everything returns everything: reads are bounded by their count
	// and bytes, not by how many sealed indexes the cache keeps.
	var whole Polled
	if err := l.Read(Query{Kind: PollFirst, Count: 1 << 20}, &whole); err != nil {
		r.fatalf("read of the whole log: %v", err)
	}
	if n := len(decodePolled(r.t, &whole)); n != len(msgs) {
		r.fatalf("one read of the whole log returned %d messages, polls of a few returned %d (%d segments, index cache %d)", n, len(msgs), l.SegmentCount(), r.cfg.IndexCacheSegments)
	}
	// What survived beyond the durable end is what was sent there; what did not
	// survive is forgotten (the next life reuses those offsets).
	r.sent.truncate(l.NextOffset())
	r.cut = newModel()
	r.durableEnd = l.NextOffset()
	r.ts = max(r.ts, l.LastTimestamp())
}

func (r *crashRun) appendOne() {
	count := 1 + r.rng.IntN(6)
	r.ts += uint64(r.rng.IntN(2))
	b := makeBatch(r.t, r.log.NextOffset(), r.ts, count, 1+r.rng.IntN(120), fmt.Sprintf("g%d", r.tag))
	err := r.log.Append(b)
	if errors.Is(err, wire.ErrTransientNotAccepted) {
		r.disk.Poll(false)
		return
	}
	if err != nil && r.log.broken != nil && r.faults {
		// The repair after a failure failed too: the owner restarts the partition
		// (a process restart is a crash for the page cache's purposes too).
		r.crash()
		return
	}
	if err != nil {
		r.fatalf("append: %v", err)
	}
	r.sent.add(b)
}

func (r *crashRun) readSome() {
	end := r.log.WrittenEnd()
	if r.cfg.EnforceFsync {
		end = r.log.DurableEnd()
	}
	first := r.log.FirstOffset()
	if end <= first {
		return
	}
	from := first + r.rng.Uint64N(end-first)
	var p Polled
	if err := r.log.Read(Query{Kind: PollOffset, Value: from, Count: uint32(1 + r.rng.IntN(20))}, &p); err != nil {
		r.fatalf("read at %d: %v", from, err)
	}
	msgs := decodePolled(r.t, &p)
	if len(msgs) == 0 && !r.log.failure.active {
		r.fatalf("read at %d below the readable end %d returned nothing", from, end)
	}
	// A read may race a failure reported while it was in flight (without fsync it
	// serves written, not yet durable batches): it then returned what was sent at
	// those offsets before the cut, never anything else.
	for _, msg := range msgs {
		m := r.sent
		if _, ok := r.sent.payloads[msg.offset]; !ok {
			m = r.cut
		}
		m.check(r.t, []message{msg})
	}
}

func (r *crashRun) crash() {
	r.crashes++
	r.tag++
	r.disk = r.disk.Crash(r.rng.Uint64())
	if r.rng.IntN(2) == 0 {
		// The disk is still full at restart: recovery may fail for want of space,
		// and must then succeed once space is freed.
		l, _, err := Open(r.disk, r.cfg, r.hooks())
		if err == nil {
			_ = l.Close()
		} else if !IsNoSpace(err) {
			r.fatalf("open on a full disk: %v", err)
		}
	}
	r.disk.CapacityBytes = 0
	r.open()
}

func (r *crashRun) run(steps int) {
	r.open()
	for i := 0; i < steps; i++ {
		switch k := r.rng.IntN(100); {
		case k < 55:
			r.appendOne()
		case k < 75:
			r.disk.Poll(false)
		case k < 82:
			r.readSome()
		case k < 85:
			if cur, ok := r.log.CurrentOffset(); ok && !r.log.failure.active {
				if err := r.log.StoreConsumerOffset(Consumer, uint32(r.rng.IntN(3)), r.rng.Uint64N(cur+1)); err != nil {
					r.fatalf("store offset: %v", err)
				}
			}
		case k < 87:
			r.log.Sync()
		case k < 90 && r.faults:
			switch r.rng.IntN(3) {
			case 0:
				r.disk.FailNextSyncs(1)
			case 1:
				r.disk.FailNextWrites(1)
			case 2:
				// A disk that fills up, then frees.
				total := r.disk.totalBytes()
				r.disk.CapacityBytes = total + int64(r.rng.IntN(4096))
			}
		case k < 92 && r.faults:
			r.disk.CapacityBytes = 0
			r.disk.FailNextSyncs(0)
			r.disk.FailNextWrites(0)
		case k < 95:
			r.crash()
		default:
			if r.rng.IntN(4) == 0 {
				// A clean restart keeps everything.
				r.disk.CapacityBytes = 0
				r.disk.FailNextSyncs(0)
				r.disk.FailNextWrites(0)
				r.log.WaitIdle() // failures of requests already done show up here
				next := r.log.NextOffset()
				if err := r.log.Close(); err != nil && !errors.Is(err, ErrInjectedIO) && r.log.broken == nil {
					r.fatalf("close: %v", err)
				}
				failedDuringClose := r.log.broken != nil
				r.open()
				if r.log.NextOffset() != next && !failedDuringClose {
					r.fatalf("clean restart: next offset %d, was %d: %s", r.log.NextOffset(), next, r.lastReport)
				}
			}
		}
	}
	r.crash()
	_ = r.log.Close()
}

func newCrashRun(t *testing.T, seed uint64, faults bool) *crashRun {
	rng := rand.New(rand.NewPCG(seed, 0xC4A5))
	cfg := Config{
		PartitionID:                       testPartition,
		SegmentSizeBytes:                  int64(1024 + rng.IntN(4096)),
		EnforceFsync:                      rng.IntN(2) == 0,
		MessagesRequiredToSave:            uint32(1 + rng.IntN(20)),
		SizeOfMessagesRequiredToSaveBytes: int64(256 + rng.IntN(4096)),
		InflightBatchesMax:                1 + rng.IntN(16),
		IndexCacheSegments:                1 + rng.IntN(20),
		// Reservations off, a few per segment, or the default (the whole segment).
		ReserveChunkBytes: []int64{-1, 256, 1024, 0}[rng.IntN(4)],
	}
	return &crashRun{
		t: t, seed: seed, rng: rng, disk: NewSimDisk(seed), cfg: cfg,
		sent: newModel(), cut: newModel(), ts: 1_000_000, faults: faults,
	}
}

// crashSeeds is how many seeds each crash test runs: 150 (30 with -short), or
// SEGMENT_CRASH_SEEDS for a long run by hand. A failure prints its seed.
func crashSeeds() uint64 {
	if v, err := strconv.ParseUint(os.Getenv("SEGMENT_CRASH_SEEDS"), 10, 64); err == nil && v > 0 {
		return v
	}
	if testing.Short() {
		return 30
	}
	return 150
}

func TestCrashProperties(t *testing.T) {
	seeds := crashSeeds()
	for seed := uint64(1); seed <= seeds; seed++ {
		r := newCrashRun(t, seed, false)
		r.run(400)
	}
}

func TestCrashPropertiesWithFaults(t *testing.T) {
	seeds := crashSeeds()
	failures := 0
	for seed := uint64(1000); seed < 1000+seeds; seed++ {
		r := newCrashRun(t, seed, true)
		r.run(400)
		failures += r.failures
	}
	if failures == 0 {
		t.Fatal("no injected fault reached the log: the test tests nothing")
	}
}
