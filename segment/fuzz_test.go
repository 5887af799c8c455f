package segment

import (
	"testing"
)

// FuzzRead runs arbitrary queries against a log of many small batches across
// segments: no query panics or errs, and every answer is a contiguous run of stored
// messages, starting where the strategy says, of at most the count asked for.
func FuzzRead(f *testing.F) {
	st := NewSimDisk(31)
	l, _, err := Open(st, Config{PartitionID: testPartition, SegmentSizeBytes: 1500}, Hooks{})
	if err != nil {
		f.Fatal(err)
	}
	a := newAppender(f, l, 31, 20)
	for i := 0; i < 80; i++ {
		a.ts += 7
		a.append(1 + i%4)
	}
	l.WaitIdle()
	if err := l.StoreConsumerOffset(Consumer, 5, 40); err != nil {
		f.Fatal(err)
	}
	end := l.NextOffset()
	f.Add(uint8(PollOffset), uint64(0), uint32(10), int64(0))
	f.Add(uint8(PollOffset), uint64(end-1), uint32(1<<31), int64(1))
	f.Add(uint8(PollTimestamp), uint64(1_000_100), uint32(5), int64(0))
	f.Add(uint8(PollFirst), uint64(0), uint32(3), int64(-5))
	f.Add(uint8(PollLast), uint64(0), uint32(7), int64(0))
	f.Add(uint8(PollNext), uint64(5), uint32(7), int64(0))
	f.Add(uint8(0), ^uint64(0), ^uint32(0), int64(1<<62))
	f.Fuzz(func(t *testing.T, kind uint8, value uint64, count uint32, maxBytes int64) {
		q := Query{Kind: PollingKind(kind), Value: value, Count: count, ConsumerKind: Consumer, ConsumerID: uint32(value), MaxBytes: maxBytes}
		var p Polled
		if err := l.Read(q, &p); err != nil {
			t.Fatalf("%+v: %v", q, err)
		}
		msgs := decodePolled(t, &p)
		a.sent.check(t, msgs)
		if uint64(len(msgs)) > uint64(count) {
			t.Fatalf("%+v: %d messages for a count of %d", q, len(msgs), count)
		}
		if len(msgs) == 0 {
			return
		}
		switch q.Kind {
		case PollOffset:
			if msgs[0].offset != value {
				t.Fatalf("%+v: starts at %d", q, msgs[0].offset)
			}
		case PollFirst:
			if msgs[0].offset != 0 {
				t.Fatalf("%+v: starts at %d", q, msgs[0].offset)
			}
		case PollLast:
			// The newest count messages, unless MaxBytes stopped the read early.
			if want := end - min(end, uint64(count)); msgs[0].offset != want {
				t.Fatalf("%+v: starts at %d, want %d", q, msgs[0].offset, want)
			}
		case PollTimestamp:
			if msgs[0].timestamp < value || (msgs[0].offset > 0 && a.sent.stamps[msgs[0].offset-1] >= value) {
				t.Fatalf("%+v: starts at %d stamped %d", q, msgs[0].offset, msgs[0].timestamp)
			}
		}
	})
}

// FuzzCrash runs one seeded crash life (see crashRun) per input, so the fuzzer's
// coverage guidance explores schedules the fixed seeds do not.
func FuzzCrash(f *testing.F) {
	f.Add(uint64(1), false)
	f.Add(uint64(1001), true)
	f.Fuzz(func(t *testing.T, seed uint64, faults bool) {
		r := newCrashRun(t, seed, faults)
		r.run(150)
	})
}
