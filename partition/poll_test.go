package partition

import (
	"fmt"
	"slices"
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

// fivePartition holds 5 batches of 10 messages, offsets 0..49, batch i stamped at
// (i+1)*1000 µs, in 4 KiB segments (several segments).
func fivePartition(t *testing.T, cfg Config) *Store {
	s, _ := newSimStore(t, 1, cfg)
	for i := uint64(0); i < 5; i++ {
		if base := mustSend(t, s, testKey, makeBatch(t, i*10, 10, 100), (i+1)*1000); base != i*10 {
			t.Fatalf("batch %d: base offset %d", i, base)
		}
	}
	return s
}

func TestPollStrategies(t *testing.T) {
	for _, fsync := range []bool{false, true} {
		cfg := smallConfig()
		cfg.EnforceFsync = fsync
		s := fivePartition(t, cfg)
		if info, _ := s.Info(testKey); info.SegmentsCount < 2 {
			t.Fatalf("want several segments, have %d", info.SegmentsCount)
		}
		strategy := func(kind wire.PollingKind, value uint64) wire.PollingStrategy {
			return wire.PollingStrategy{Kind: kind, Value: value}
		}
		for _, tc := range []struct {
			name     string
			strategy wire.PollingStrategy
			count    uint32
			want     []uint64
		}{
			{"offset 0", strategy(wire.PollingOffset, 0), 10, span(0, 10)},
			{"offset across batches", strategy(wire.PollingOffset, 5), 10, span(5, 15)},
			{"offset across segments", strategy(wire.PollingOffset, 7), 40, span(7, 47)},
			{"offset near the end", strategy(wire.PollingOffset, 45), 100, span(45, 50)},
			{"offset at the end", strategy(wire.PollingOffset, 50), 10, nil},
			{"offset far beyond", strategy(wire.PollingOffset, 1<<40), 10, nil},
			{"count 0", strategy(wire.PollingOffset, 0), 0, nil},
			{"count 1", strategy(wire.PollingOffset, 33), 1, []uint64{33}},
			{"timestamp exact", strategy(wire.PollingTimestamp, 3000), 5, span(20, 25)},
			{"timestamp between", strategy(wire.PollingTimestamp, 2500), 5, span(20, 25)},
			{"timestamp before all", strategy(wire.PollingTimestamp, 0), 3, span(0, 3)},
			{"timestamp after all", strategy(wire.PollingTimestamp, 5001), 5, nil},
			{"first", strategy(wire.PollingFirst, 0), 3, span(0, 3)},
			{"first all", strategy(wire.PollingFirst, 99), 1000, span(0, 50)},
			{"last", strategy(wire.PollingLast, 0), 3, span(47, 50)},
			{"last more than stored", strategy(wire.PollingLast, 0), 100, span(0, 50)},
			{"last count 0", strategy(wire.PollingLast, 0), 0, nil},
			{"next without stored offset", strategy(wire.PollingNext, 0), 4, span(0, 4)},
		} {
			t.Run(fmt.Sprintf("fsync=%v/%s", fsync, tc.name), func(t *testing.T) {
				pm, msgs := poll(t, s, testKey, PollRequest{Consumer: Consumer{Kind: wire.ConsumerSingle, ID: 1}, Strategy: tc.strategy, Count: tc.count})
				if got := offsetsOf(msgs); !slices.Equal(got, tc.want) {
					t.Fatalf("offsets %v, want %v", got, tc.want)
				}
				for _, m := range msgs {
					if m.seq != m.offset {
						t.Fatalf("offset %d holds message %d", m.offset, m.seq)
					}
					if want := (m.offset/10 + 1) * 1000; m.timestamp != want {
						t.Fatalf("offset %d stamped %d, want %d", m.offset, m.timestamp, want)
					}
				}
				if pm.PartitionID != testKey.PartitionID || pm.CurrentOffset != 49 {
					t.Fatalf("prefix partition %d current %d, want %d and 49", pm.PartitionID, pm.CurrentOffset, testKey.PartitionID)
				}
			})
		}
	}
}

func TestPollEmptyPartition(t *testing.T) {
	s, _ := newSimStore(t, 2, smallConfig())
	for kind := wire.PollingOffset; kind <= wire.PollingNext; kind++ {
		pm, msgs := poll(t, s, testKey, PollRequest{Consumer: Consumer{Kind: wire.ConsumerSingle, ID: 1}, Strategy: wire.PollingStrategy{Kind: kind}, Count: 10, AutoCommit: true})
		if len(msgs) != 0 || pm.CurrentOffset != 0 || pm.PartitionID != testKey.PartitionID {
			t.Fatalf("%v: %d messages, current %d, partition %d", kind, len(msgs), pm.CurrentOffset, pm.PartitionID)
		}
	}
	if _, ok, _ := s.ConsumerOffset(testKey, Consumer{Kind: wire.ConsumerSingle, ID: 1}); ok {
		t.Fatal("an empty auto-commit poll stored an offset")
	}
}

func TestPollUnknownPartition(t *testing.T) {
	s, _ := newSimStore(t, 3, smallConfig())
	var res PollResult
	var rec pollRecorder
	err := s.Poll(Key{StreamID: 9}, PollRequest{Strategy: wire.PollingStrategy{Kind: wire.PollingFirst}, Count: 1}, &res, &rec, 1)
	if err != wire.ErrPartitionNotFound || rec.calls != 0 {
		t.Fatalf("err %v, %d completions", err, rec.calls)
	}
}

func TestPollNextWithAutoCommit(t *testing.T) {
	s := fivePartition(t, smallConfig())
	alice := Consumer{Kind: wire.ConsumerSingle, ID: 1}
	group := Consumer{Kind: wire.ConsumerGroup, ID: 1} // same number, other namespace
	next := func(c Consumer, count uint32) []uint64 {
		_, msgs := poll(t, s, testKey, PollRequest{Consumer: c, Strategy: wire.PollingStrategy{Kind: wire.PollingNext}, Count: count, AutoCommit: true})
		return offsetsOf(msgs)
	}
	if got := next(alice, 10); !slices.Equal(got, span(0, 10)) {
		t.Fatalf("first next: %v", got)
	}
	if got := next(alice, 15); !slices.Equal(got, span(10, 25)) {
		t.Fatalf("second next: %v", got)
	}
	if got := next(group, 3); !slices.Equal(got, span(0, 3)) {
		t.Fatalf("group next: %v", got)
	}
	o, ok, err := s.ConsumerOffset(testKey, alice)
	if err != nil || !ok || o != (wire.ConsumerOffset{PartitionID: testKey.PartitionID, CurrentOffset: 49, StoredOffset: 24}) {
		t.Fatalf("stored offset %+v %v %v", o, ok, err)
	}
	// Auto-commit never moves an offset back.
	poll(t, s, testKey, PollRequest{Consumer: alice, Strategy: wire.PollingStrategy{Kind: wire.PollingOffset, Value: 0}, Count: 5, AutoCommit: true})
	if o, _, _ := s.ConsumerOffset(testKey, alice); o.StoredOffset != 24 {
		t.Fatalf("offset moved back to %d", o.StoredOffset)
	}
	// Reading to the end, then past it.
	if got := next(alice, 100); !slices.Equal(got, span(25, 50)) {
		t.Fatalf("to the end: %v", got)
	}
	if got := next(alice, 100); len(got) != 0 {
		t.Fatalf("past the end: %v", got)
	}
	// Without auto-commit nothing is stored.
	bob := Consumer{Kind: wire.ConsumerSingle, ID: 2}
	poll(t, s, testKey, PollRequest{Consumer: bob, Strategy: wire.PollingStrategy{Kind: wire.PollingNext}, Count: 5})
	if _, ok, _ := s.ConsumerOffset(testKey, bob); ok {
		t.Fatal("a poll without auto-commit stored an offset")
	}
}

func TestEmptyPollReply(t *testing.T) {
	got := AppendEmptyPollReply(nil, wire.PollPartitionResync, 0)
	var pm wire.PolledMessages
	if err := pm.Decode(got); err != nil || pm.PartitionID != wire.PollPartitionResync || pm.MessagesCount != 0 || len(got) != 16 {
		t.Fatalf("%x: %+v %v", got, pm, err)
	}
}

// A batch corrupted at rest is never served: the poll fails closed, empty.
func TestPollCorruptBatchFailsClosed(t *testing.T) {
	s, st := newSimStore(t, 4, Config{PartitionsCount: 1})
	mustSend(t, s, testKey, makeBatch(t, 0, 3, 100), 1000)
	disk := st.disks[s.Dir(testKey)]
	if err := disk.FlipBit("00000000000000000000.log", 8*300); err != nil {
		t.Fatal(err)
	}
	var res PollResult
	var rec pollRecorder
	if err := s.Poll(testKey, PollRequest{Strategy: wire.PollingStrategy{Kind: wire.PollingFirst}, Count: 10}, &res, &rec, 1); err != nil {
		t.Fatal(err)
	}
	s.WaitIdle()
	if rec.calls != 1 || rec.err == nil {
		t.Fatalf("%d completions, err %v", rec.calls, rec.err)
	}
	pm, msgs := decodePoll(t, &res)
	if len(msgs) != 0 || pm.CurrentOffset != 2 {
		t.Fatalf("served %d messages, current %d", len(msgs), pm.CurrentOffset)
	}
}
