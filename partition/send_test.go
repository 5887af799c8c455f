package partition

import (
	"errors"
	"testing"

	"github.com/iggy-shard/iggy-shard/segment"
	"github.com/iggy-shard/iggy-shard/wire"
)

func TestSendReply(t *testing.T) {
	s, _ := newSimStore(t, 10, smallConfig())
	rec := newSendRecorder()
	if err := s.Send(testKey, sendRequest(makeBatch(t, 0, 4, 10)), 500, rec, 1); err != nil {
		t.Fatal(err)
	}
	if err := s.Send(testKey, sendRequest(makeBatch(t, 4, 2, 10)), 400, rec, 2); err != nil {
		t.Fatal(err)
	}
	s.WaitIdle()
	want := wire.SendConfirmation{StreamID: 1, TopicID: 2, PartitionID: 3, BaseOffset: 4}
	if c := rec.acked[2]; c != want {
		t.Fatalf("confirmation %+v, want %+v", c, want)
	}
	body := AppendSendReply(nil, rec.acked[2])
	var confirmations wire.SendConfirmations
	if err := confirmations.Decode(body); err != nil || confirmations.Len() != 1 || confirmations.At(0) != want {
		t.Fatalf("reply %x: %v", body, err)
	}
	// The second batch's clock went back: it is stamped with its prepare's timestamp,
	// which the group raises to just above the first's (prepare timestamps strictly
	// increase).
	_, msgs := poll(t, s, testKey, PollRequest{Strategy: wire.PollingStrategy{Kind: wire.PollingFirst}, Count: 10})
	if len(msgs) != 6 || msgs[3].timestamp != 500 || msgs[5].timestamp != 501 {
		t.Fatalf("%+v", msgs)
	}
}

func TestSendAdmission(t *testing.T) {
	s, _ := newSimStore(t, 11, smallConfig())
	good := func() []byte { return makeBatch(t, 0, 3, 50) }
	flip := func(at int) []byte {
		b := good()
		b[at] ^= 1
		return b
	}
	for _, tc := range []struct {
		name  string
		key   Key
		batch []byte
		want  error
	}{
		{"unknown partition", Key{StreamID: 9}, good(), wire.ErrResourceNotFound},
		{"payload byte", testKey, flip(wire.BatchHeaderSize + 48 + 3), wire.ErrInvalidMessageChecksum},
		{"batch checksum", testKey, flip(40), wire.ErrInvalidBatchChecksum},
		{"origin timestamp", testKey, flip(24), wire.ErrInvalidBatchChecksum},
		{"reserved header byte", testKey, flip(100), wire.ErrInvalidReservedField},
		{"header only", testKey, good()[:wire.BatchHeaderSize], wire.ErrInvalidCommand},
		{"short", testKey, good()[:10], wire.ErrInvalidCommand},
	} {
		rec := newSendRecorder()
		req := &wire.SendMessages{Batch: tc.batch}
		if err := s.Send(tc.key, req, 1, rec, 1); err != tc.want {
			t.Errorf("%s: err %v, want %v", tc.name, err, tc.want)
		}
		s.WaitIdle()
		if rec.done() != 0 {
			t.Errorf("%s: a refused batch completed", tc.name)
		}
	}
	if info, _ := s.Info(testKey); info.MessagesCount != 0 {
		t.Fatalf("refused batches were stored: %+v", info)
	}
}

// A full in-flight window refuses with 58, which SDKs retry; completions reopen it.
func TestSendWindowFull(t *testing.T) {
	cfg := smallConfig()
	cfg.InflightBatchesMax = 2
	s, _ := newSimStore(t, 12, cfg)
	rec := newSendRecorder()
	for i := uint64(0); i < 2; i++ {
		if err := s.Send(testKey, sendRequest(makeBatch(t, i, 1, 10)), 1, rec, i); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Send(testKey, sendRequest(makeBatch(t, 2, 1, 10)), 1, rec, 2); err != wire.ErrTransientNotAccepted {
		t.Fatalf("third send: %v", err)
	}
	s.WaitIdle()
	if len(rec.acked) != 2 {
		t.Fatalf("%d acknowledged", len(rec.acked))
	}
	if err := s.Send(testKey, sendRequest(makeBatch(t, 2, 1, 10)), 1, rec, 2); err != nil {
		t.Fatalf("send after completions: %v", err)
	}
	s.WaitIdle()
	if c := rec.acked[2]; c.BaseOffset != 2 {
		t.Fatalf("%+v", c)
	}
}

// The acknowledgement waits for what the topic's policy requires.
func TestSendAcknowledgedPerPolicy(t *testing.T) {
	for _, fsync := range []bool{false, true} {
		cfg := smallConfig()
		cfg.EnforceFsync = fsync
		s, _ := newSimStore(t, 13, cfg)
		p := s.partitions[testKey]
		rec := newSendRecorder()
		var pending []uint64 // end offset by token
		rec.check = func(token uint64, _ wire.SendConfirmation, err error) {
			if err != nil {
				t.Fatalf("send %d: %v", token, err)
			}
			end := pending[token]
			if fsync && p.log.DurableEnd() < end {
				t.Fatalf("fsync: acknowledged offsets below %d with durable end %d", end, p.log.DurableEnd())
			}
			if !fsync && p.log.WrittenEnd() < end {
				t.Fatalf("acknowledged offsets below %d with written end %d", end, p.log.WrittenEnd())
			}
		}
		next := uint64(0)
		for i := uint64(0); i < 40; i++ {
			n := 1 + int(i%7)
			if err := s.Send(testKey, sendRequest(makeBatch(t, next, n, 100)), i, rec, i); err != nil {
				t.Fatal(err)
			}
			next += uint64(n)
			pending = append(pending, next)
			if i%3 == 0 {
				s.PollIO()
			}
		}
		s.WaitIdle()
		if len(rec.acked) != 40 {
			t.Fatalf("fsync=%v: %d of 40 acknowledged", fsync, len(rec.acked))
		}
		for i, token := range rec.order {
			if token != uint64(i) {
				t.Fatalf("fsync=%v: acknowledgements out of order: %v", fsync, rec.order)
			}
		}
	}
}

// A failed write fails its batch and every later one; their offsets are given again.
// The simulated disk runs queued writes in a seeded order, so the failing write may be
// either batch's: whatever was acknowledged is polled back, nothing else.
func TestSendWriteFailure(t *testing.T) {
	for seed := uint64(0); seed < 8; seed++ {
		s, st := newSimStore(t, 14+seed*100, smallConfig())
		mustSend(t, s, testKey, makeBatch(t, 0, 2, 10), 1)
		st.disks[s.Dir(testKey)].FailNextWrites(1)
		rec := newSendRecorder()
		if err := s.Send(testKey, sendRequest(makeBatch(t, 2, 3, 10)), 2, rec, 1); err != nil {
			t.Fatal(err)
		}
		if err := s.Send(testKey, sendRequest(makeBatch(t, 5, 1, 10)), 2, rec, 2); err != nil {
			t.Fatal(err)
		}
		s.WaitIdle()
		if rec.failed[2] != wire.ErrCannotSaveMessagesToSegment {
			t.Fatalf("seed %d: the batch after a failed one was not failed: failures %v, acks %v", seed, rec.failed, rec.acked)
		}
		stored := uint64(2)
		if c, ok := rec.acked[1]; ok {
			if c.BaseOffset != 2 {
				t.Fatalf("seed %d: %+v", seed, c)
			}
			stored = 5
		} else if rec.failed[1] != wire.ErrCannotSaveMessagesToSegment {
			t.Fatalf("seed %d: batch 1 neither acknowledged nor failed", seed)
		}
		if s.Err(testKey) == nil {
			t.Fatalf("seed %d: the storage failure is not reported", seed)
		}
		if base := mustSend(t, s, testKey, makeBatch(t, stored, 2, 10), 3); base != stored {
			t.Fatalf("seed %d: after the cut the next batch got offset %d, want %d", seed, base, stored)
		}
		_, msgs := poll(t, s, testKey, PollRequest{Strategy: wire.PollingStrategy{Kind: wire.PollingFirst}, Count: 100})
		for i, m := range msgs {
			if m.offset != uint64(i) || m.seq != uint64(i) {
				t.Fatalf("seed %d: message %d: %+v", seed, i, m)
			}
		}
		if uint64(len(msgs)) != stored+2 {
			t.Fatalf("seed %d: %d messages, want %d", seed, len(msgs), stored+2)
		}
	}
}

// A failed fdatasync with enforce_fsync loses no acknowledged batch either.
func TestSendSyncFailure(t *testing.T) {
	cfg := smallConfig()
	cfg.EnforceFsync = true
	s, st := newSimStore(t, 15, cfg)
	mustSend(t, s, testKey, makeBatch(t, 0, 2, 10), 1)
	st.disks[s.Dir(testKey)].FailNextSyncs(1)
	rec := newSendRecorder()
	if err := s.Send(testKey, sendRequest(makeBatch(t, 2, 2, 10)), 2, rec, 1); err != nil {
		t.Fatal(err)
	}
	s.WaitIdle()
	if rec.failed[1] != wire.ErrCannotSaveMessagesToSegment {
		t.Fatalf("failures %v, acks %v", rec.failed, rec.acked)
	}
	if base := mustSend(t, s, testKey, makeBatch(t, 2, 2, 10), 3); base != 2 {
		t.Fatalf("next batch at %d", base)
	}
}

// The send and poll paths allocate nothing per batch once their rings and free lists
// have grown (OSStorage: the simulated disk allocates for its own bookkeeping).
func TestHotPathsDoNotAllocate(t *testing.T) {
	s := NewStore(t.TempDir(), OSStorages{})
	if err := s.Create(testKey, noSaveConfig(), 1); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	req := sendRequest(makeBatch(t, 0, 10, 100))
	done := &countingCompletion{}
	send := func() {
		if err := s.Send(testKey, req, 1, done, 0); err != nil {
			t.Fatal(err)
		}
		s.PollIO()
	}
	for i := 0; i < 50; i++ {
		send()
	}
	if allocs := testing.AllocsPerRun(100, send); allocs != 0 {
		t.Errorf("Send allocates %v times per batch", allocs)
	}
	var res PollResult
	var rec pollRecorder
	var buffers [][]byte
	req2 := PollRequest{Consumer: Consumer{Kind: wire.ConsumerSingle, ID: 1}, Strategy: wire.PollingStrategy{Kind: wire.PollingOffset, Value: 5}, Count: 25, AutoCommit: true}
	pollOnce := func() {
		if err := s.Poll(testKey, req2, &res, &rec, 0); err != nil {
			t.Fatal(err)
		}
		s.PollIO()
		buffers = res.AppendPollBuffers(buffers[:0])
	}
	for i := 0; i < 10; i++ {
		pollOnce()
	}
	if allocs := testing.AllocsPerRun(50, pollOnce); allocs != 0 {
		t.Errorf("Poll allocates %v times per poll", allocs)
	}
	if done.failed != 0 || rec.err != nil || res.MessageCount() != 25 {
		t.Fatalf("%d failed sends, poll %v, %d messages", done.failed, rec.err, res.MessageCount())
	}
}

type countingCompletion struct{ acked, failed int }

func (c *countingCompletion) SendDone(_ uint64, _ wire.SendConfirmation, err error) {
	if err != nil {
		c.failed++
	} else {
		c.acked++
	}
}

var _ segment.Storage = (*segment.SimDisk)(nil)

// A write failure while 1 KiB segments roll every few batches (so it may hit an
// append, an index write or a seal), with enforce_fsync: whichever way the seeded disk
// orders the requests, every send completes, and after a power loss every
// acknowledged message is there. (The stalled durable end recoverStalledDurability
// handles shows up under the denser faults of TestRandomSendsAndPolls.)
func TestSendFailuresAroundSegmentRolls(t *testing.T) {
	stalled := 0
	for seed := uint64(0); seed < 200; seed++ {
		cfg := Config{SegmentSizeBytes: 1024, EnforceFsync: true, PartitionsCount: 1}
		s, st := newSimStore(t, 90+seed, cfg)
		disk := st.disks[s.Dir(testKey)]
		rec := newSendRecorder()
		counts := map[uint64]int{}
		for token := uint64(0); token < 12; token++ {
			if token == 3+seed%5 {
				disk.FailNextWrites(1)
			}
			n := 1 + int(token%3)
			if err := s.Send(testKey, sendRequest(batchForToken(t, token, n, 150)), token, rec, token); err != nil {
				continue
			}
			counts[token] = n
			if (seed+token)%2 == 0 {
				s.PollIO()
			}
		}
		s.WaitIdle()
		if rec.done() != len(counts) {
			t.Fatalf("seed %d: %d sends admitted, %d completed", seed, len(counts), rec.done())
		}
		if errors.Is(s.Err(testKey), errDurabilityStalled) {
			stalled++
		}
		s2 := NewStore("local_data", st.crash(seed))
		if _, err := s2.Open(testKey, cfg, Incarnation{CreatedAtMicros: 1}); err != nil {
			t.Fatal(err)
		}
		_, msgs := poll(t, s2, testKey, PollRequest{Strategy: wire.PollingStrategy{Kind: wire.PollingFirst}, Count: 1000})
		for token, c := range rec.acked {
			for i := 0; i < counts[token]; i++ {
				at := c.BaseOffset + uint64(i)
				if at >= uint64(len(msgs)) || msgs[at].seq != token*1000+uint64(i) {
					t.Fatalf("seed %d: acknowledged message %d at %d lost", seed, token*1000+uint64(i), at)
				}
			}
		}
	}
	t.Logf("%d of 200 seeds stalled the durable end", stalled)
}
