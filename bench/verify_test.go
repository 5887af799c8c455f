package bench

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

// polledBatch is a poll reply body holding one template batch stamped at baseOffset.
func polledBatch(t *testing.T, producer, n, size int, baseOffset uint64, corrupt func([]byte)) wire.PolledMessages {
	t.Helper()
	batch, err := templateBatch(producer, n, size)
	if err != nil {
		t.Fatal(err)
	}
	restamp(batch, 1)
	wire.StampBatch(batch, 0, baseOffset, 1)
	if corrupt != nil {
		corrupt(batch)
	}
	var polled wire.PolledMessages
	body := (&wire.PolledMessages{MessagesCount: uint32(n), Records: batch}).Append(nil)
	if err := polled.Decode(body); err != nil {
		t.Fatal(err)
	}
	return polled
}

func TestPollCheckCatchesCorruption(t *testing.T) {
	const n, size = 10, 20
	frame := func(i int) int { return batchHeaderSizeBytes + i*(frameHeaderSizeBytes+size) }
	for _, tc := range []struct {
		name                string
		baseOffset          uint64
		corrupt             func([]byte)
		checksum, misplaced uint64
		problem             string
	}{
		{"intact", 0, nil, 0, 0, ""},
		{"intact later batch", 30, nil, 0, 0, ""},
		{"payload byte flipped", 0, func(b []byte) { b[frame(3)+frameHeaderSizeBytes+5] ^= 1 }, 1, 0, "checksum"},
		{"batch at an offset that is not a batch boundary", 5, nil, 0, n, "not message"},
		{"foreign message id", 0, func(b []byte) { b[frame(2)+8] ^= 0xFF }, 1, 1, "message id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pc := pollCheck{messagesPerBatch: n, messageSizeBytes: size}
			polled := polledBatch(t, 1, n, size, tc.baseOffset, tc.corrupt)
			first, count, origin := pc.check("consumer 0", &polled, true)
			if first != tc.baseOffset || count != n || origin != 1 {
				t.Fatalf("first %d count %d origin %d", first, count, origin)
			}
			if pc.ChecksumFailures != tc.checksum || pc.Misplaced != tc.misplaced {
				t.Fatalf("checksum failures %d misplaced %d, want %d %d: %q", pc.ChecksumFailures, pc.Misplaced, tc.checksum, tc.misplaced, pc.Problems)
			}
			if tc.problem != "" && (pc.OK() || !strings.Contains(strings.Join(pc.Problems, "\n"), tc.problem)) {
				t.Fatalf("problems %q, want one about %q", pc.Problems, tc.problem)
			}
		})
	}
}

// verify compares each reader's tracker with what the server confirmed.
func TestVerifyCountsLostAndDuplicated(t *testing.T) {
	for _, tc := range []struct {
		name             string
		polls            [][2]uint64 // first, count
		produced         uint64
		lost, duplicated uint64
		problemsAtLeast  int
	}{
		{"everything once", [][2]uint64{{0, 10}, {10, 10}}, 20, 0, 0, 0},
		{"tail missing", [][2]uint64{{0, 10}}, 20, 10, 0, 1},
		{"hole in the middle", [][2]uint64{{0, 10}, {20, 10}}, 30, 10, 0, 1},
		{"one poll twice", [][2]uint64{{0, 10}, {0, 10}, {10, 10}}, 20, 0, 10, 1},
		{"more than confirmed", [][2]uint64{{0, 10}, {10, 10}}, 15, 0, 5, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &stream{name: "bench-stream-1", partitionIDs: []uint32{0}, producersDone: make(chan struct{})}
			s.produced = make([]atomic.Uint64, 1)
			s.produced[0].Store(tc.produced)
			k := &consumer{stats: &actorStats{role: RoleConsumer}, s: s, trackers: []*partitionTracker{new(partitionTracker)}}
			for _, p := range tc.polls {
				k.trackers[0].observe(p[0], p[1])
			}
			cfg := &Config{Kind: PinnedConsumer}
			v := verify(cfg, []*stream{s}, []*consumer{k}, nil, []*actorStats{k.stats})
			if v.Lost != tc.lost || v.Duplicated != tc.duplicated || len(v.Problems) < tc.problemsAtLeast || v.MessagesExpected != tc.produced {
				t.Fatalf("%+v", v)
			}
			if v.OK() != (tc.lost == 0 && tc.duplicated == 0) {
				t.Fatalf("OK() = %v for %+v", v.OK(), v)
			}
		})
	}
}
