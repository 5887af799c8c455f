package partition

import (
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

// TestPollOfAVerifiedRangeVerifiesNothingAgain: the first poll of batches
// verifies their checksums, later polls of them, whole or cut, do not.
func TestPollOfAVerifiedRangeVerifiesNothingAgain(t *testing.T) {
	s, _ := newSimStore(t, 1, smallConfig())
	defer s.Close()
	for i := range uint64(20) {
		mustSend(t, s, testKey, makeBatch(t, i*10, 10, 100), i+1)
	}
	log := s.partitions[testKey].log
	req := PollRequest{Consumer: Consumer{Kind: wire.ConsumerSingle, ID: 1}, Strategy: wire.PollingStrategy{Kind: wire.PollingOffset}, Count: 200}
	if prefix, _ := poll(t, s, testKey, req); prefix.MessagesCount != 200 {
		t.Fatalf("first poll: %d messages", prefix.MessagesCount)
	}
	if got := log.Stats().BatchesVerified; got != 20 {
		t.Fatalf("first poll verified %d batches, want 20", got)
	}
	req.Strategy.Value, req.Count = 35, 100
	for range 3 {
		if prefix, _ := poll(t, s, testKey, req); prefix.MessagesCount != 100 {
			t.Fatalf("later poll: %d messages", prefix.MessagesCount)
		}
	}
	if got := log.Stats().BatchesVerified; got != 20 {
		t.Fatalf("later polls verified %d batches more", got-20)
	}
}

// TestStoreScrubKeepsItsRate: over ten simulated seconds in 100 ms ticks the
// scrubber verifies the rate's worth of bytes, round after round of a
// partition's sealed segments, within one step; a negative rate scrubs
// nothing. So does ScrubAsync, its reads completing in PollIO, one step in
// flight at a time (what it verified is returned by the call after).
func TestStoreScrubKeepsItsRate(t *testing.T) {
	const rate = 64 << 10
	for _, async := range []bool{false, true} {
		for _, tc := range []struct {
			rate       int64
			wantBytes  int64
			slackBytes int64
		}{{rate, 10 * rate, 16 << 10}, {-1, 0, 0}} {
			st := newSimStorages(1)
			s := NewReplicatedStore("local_data", st, Replication{ScrubBytesPerSecond: tc.rate})
			if err := s.Create(testKey, smallConfig(), 1234); err != nil {
				t.Fatal(err)
			}
			for i := range uint64(100) {
				mustSend(t, s, testKey, makeBatch(t, i*10, 10, 100), i+1)
			}
			log := s.partitions[testKey].log
			scrub := s.Scrub
			if async {
				scrub = s.ScrubAsync
			}
			var total int64
			for tick := range int64(102) {
				n, err := scrub(min(tick, 100) * 100e6)
				if err != nil {
					t.Fatal(err)
				}
				total += n
				if s.ScrubInFlight() != (async && tc.rate > 0 && tick > 0 && tick <= 100) || s.ScrubInFlight() && log.Idle() {
					t.Fatalf("async %v tick %d: in flight %v, log idle %v", async, tick, s.ScrubInFlight(), log.Idle())
				}
				for guard := 0; s.PollIO() > 0; guard++ {
					if guard > 10_000 {
						t.Fatal("the steps never stopped")
					}
				}
			}
			if total < tc.wantBytes-tc.slackBytes || total > tc.wantBytes+tc.slackBytes || uint64(total) != log.Stats().ScrubbedBytes {
				t.Fatalf("async %v, rate %d: scrubbed %d bytes in 10 s (log says %d), want %d±%d",
					async, tc.rate, total, log.Stats().ScrubbedBytes, tc.wantBytes, tc.slackBytes)
			}
			if tc.rate > 0 && total < 2*log.SizeBytes() {
				t.Fatalf("async %v: scrubbed %d bytes of a %d-byte log: want several rounds", async, total, log.SizeBytes())
			}
			s.Close()
		}
	}
}
