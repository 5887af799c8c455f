package partition

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

// sentBatch is one batch a property test sent: its messages carry the sequence
// numbers token*1000 + i.
type sentBatch struct {
	count int
}

func batchForToken(t testing.TB, token uint64, n, payloadSize int) []byte {
	return makeBatch(t, token*1000, n, payloadSize)
}

// randomConfig draws a topic configuration that rolls segments often.
func randomConfig(rng *rand.Rand, fsync bool) Config {
	return Config{
		SegmentSizeBytes:                  int64(1024 + rng.IntN(8)*512),
		EnforceFsync:                      fsync,
		PartitionsCount:                   1,
		MessagesRequiredToSave:            uint32(1 + rng.IntN(64)),
		SizeOfMessagesRequiredToSaveBytes: int64(512 + rng.IntN(8192)),
		InflightBatchesMax:                2 + rng.IntN(32),
	}
}

// TestRandomSendsAndPolls: random sends, I/O completions in a seeded order, injected
// write (and with enforce_fsync, sync) failures, and a consumer polling Next with
// auto-commit in between. Every acknowledged message is polled exactly once, in
// offset order, with its own payload; no failed batch is ever polled.
func TestRandomSendsAndPolls(t *testing.T) {
	for seed := uint64(1); seed <= 60; seed++ {
		fsync := seed%2 == 0
		t.Run(fmt.Sprintf("seed=%d/fsync=%v", seed, fsync), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 0xfeed))
			cfg := randomConfig(rng, fsync)
			s, st := newSimStore(t, seed, cfg)
			disk := st.disks[s.Dir(testKey)]
			rec := newSendRecorder()
			sent := map[uint64]sentBatch{}
			consumer := Consumer{Kind: wire.ConsumerGroup, ID: 3}
			var polled []polledMessage
			var res PollResult
			var pollRec pollRecorder
			pollInFlight := false
			collect := func() {
				_, msgs := decodePoll(t, &res)
				polled = append(polled, msgs...)
				pollInFlight = false
			}
			token := uint64(0)
			broken := false
			for step := 0; step < 400 && !broken; step++ {
				broken = s.partitions[testKey].broken() != nil
				switch r := rng.IntN(10); {
				case r < 5:
					n := 1 + rng.IntN(8)
					batch := batchForToken(t, token, n, 1+rng.IntN(300))
					err := s.Send(testKey, sendRequest(batch), uint64(step), rec, token)
					if err == wire.ErrTransientNotAccepted {
						continue
					}
					if err == wire.ErrCannotAppendMessage && s.partitions[testKey].broken() != nil {
						// An injected failure hit the repair too: the log is broken
						// for good and refuses sends, which is all it may do.
						broken = true
						continue
					}
					if err != nil {
						t.Fatalf("send: %v (log: %v)", err, s.Err(testKey))
					}
					sent[token] = sentBatch{count: n}
					token++
				case r < 8:
					s.PollIO()
				case r == 8:
					if pollInFlight {
						continue
					}
					calls := pollRec.calls
					req := PollRequest{Consumer: consumer, Strategy: wire.PollingStrategy{Kind: wire.PollingNext}, Count: uint32(1 + rng.IntN(40)), AutoCommit: true}
					if err := s.Poll(testKey, req, &res, &pollRec, 0); err != nil {
						t.Fatal(err)
					}
					pollInFlight = true
					if pollRec.calls > calls { // served at once
						collect()
					}
				default:
					// Without enforce_fsync a batch is acknowledged once written, and a
					// failed fdatasync or seal cuts what is not durable, acknowledged or
					// not (as a power loss would): faults only where acks mean durable.
					if !fsync {
						continue
					}
					if rng.IntN(4) == 0 {
						disk.FailNextWrites(1)
					} else if rng.IntN(4) == 0 {
						disk.FailNextSyncs(1)
					}
				}
				if pollInFlight && pollRec.calls > 0 && res.inFlight == false {
					if pollRec.err != nil {
						t.Fatalf("poll: %v", pollRec.err)
					}
					collect()
				}
			}
			disk.FailNextWrites(0)
			disk.FailNextSyncs(0)
			s.WaitIdle()
			if pollInFlight {
				collect()
			}
			broken = broken || s.partitions[testKey].broken() != nil
			reported := s.Err(testKey)
			if broken {
				// What an operator does once the disk is healthy again.
				if _, err := s.Recover(testKey); err != nil {
					t.Fatalf("recover: %v", err)
				}
			}
			for {
				_, msgs := poll(t, s, testKey, PollRequest{Consumer: consumer, Strategy: wire.PollingStrategy{Kind: wire.PollingNext}, Count: 1000, AutoCommit: true})
				if len(msgs) == 0 {
					break
				}
				polled = append(polled, msgs...)
			}
			if rec.done() != len(sent) {
				p := s.partitions[testKey]
				t.Fatalf("%d sends admitted, %d completed; pending %d, written %d durable %d next %d idle %v err %v", len(sent), rec.done(), p.sends.n, p.log.WrittenEnd(), p.log.DurableEnd(), p.log.NextOffset(), p.log.Idle(), p.log.Err())
			}
			// The acknowledged batches, in offset order, are exactly what was polled.
			bySeq := map[uint64]uint64{} // seq -> offset it was acknowledged at
			var ackedMessages int
			for tok, c := range rec.acked {
				for i := 0; i < sent[tok].count; i++ {
					bySeq[tok*1000+uint64(i)] = c.BaseOffset + uint64(i)
				}
				ackedMessages += sent[tok].count
			}
			// A broken log fails its pending sends although some may have reached the
			// disk (segment cannot tell which until a reopen): at-least-once, so a
			// failed batch may be polled then, never otherwise.
			if len(polled) != ackedMessages && !broken {
				t.Fatalf("%d messages polled, %d acknowledged (%d sends failed); last failure %v", len(polled), ackedMessages, len(rec.failed), s.Err(testKey))
			}
			seen := 0
			for i, m := range polled {
				if m.offset != uint64(i) {
					t.Fatalf("poll %d has offset %d", i, m.offset)
				}
				at, ok := bySeq[m.seq]
				if ok {
					seen++
				}
				if ok && at != m.offset {
					t.Fatalf("offset %d holds message %d, acknowledged at %d", m.offset, m.seq, at)
				}
				if !ok && !broken {
					t.Fatalf("offset %d holds message %d, never acknowledged", m.offset, m.seq)
				}
				if _, failed := rec.failed[m.seq/1000]; !ok && !failed {
					t.Fatalf("offset %d holds message %d, never sent", m.offset, m.seq)
				}
			}
			if seen != ackedMessages {
				t.Fatalf("%d of %d acknowledged messages polled", seen, ackedMessages)
			}
			// With enforce_fsync every acknowledgement survives a power loss now.
			if fsync {
				s2 := NewStore("local_data", st.crash(seed))
				if _, err := s2.Open(testKey, cfg, Incarnation{CreatedAtMicros: 1234}); err != nil {
					t.Fatalf("reopen after crash: %v", err)
				}
				_, kept := poll(t, s2, testKey, PollRequest{Strategy: wire.PollingStrategy{Kind: wire.PollingFirst}, Count: 1 << 20})
				for seq, at := range bySeq {
					if at >= uint64(len(kept)) || kept[at].seq != seq {
						t.Fatalf("acknowledged message %d at offset %d lost in a crash", seq, at)
					}
				}
			}
			if len(rec.failed) > 0 && reported == nil {
				t.Fatal("sends failed, the partition reports no failure")
			}
		})
	}
}

// TestCrashLosesNothingAcknowledged: with enforce_fsync, a power loss at any point
// loses no acknowledged batch; without it, none below the durable end. After the
// restart every stored batch is whole and the partition takes sends where it stopped.
func TestCrashLosesNothingAcknowledged(t *testing.T) {
	for seed := uint64(1); seed <= 60; seed++ {
		fsync := seed%3 != 0
		t.Run(fmt.Sprintf("seed=%d/fsync=%v", seed, fsync), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 0xc0ffee))
			cfg := randomConfig(rng, fsync)
			s, st := newSimStore(t, seed, cfg)
			rec := newSendRecorder()
			sent := map[uint64]sentBatch{}
			token := uint64(0)
			steps := 20 + rng.IntN(300)
			for step := 0; step < steps; step++ {
				if rng.IntN(3) > 0 {
					n := 1 + rng.IntN(6)
					err := s.Send(testKey, sendRequest(batchForToken(t, token, n, 1+rng.IntN(200))), uint64(step), rec, token)
					if err == wire.ErrTransientNotAccepted {
						continue
					}
					if err != nil {
						t.Fatal(err)
					}
					sent[token] = sentBatch{count: n}
					token++
				} else {
					s.PollIO()
				}
			}
			durableEnd := s.partitions[testKey].log.DurableEnd()
			crashed := st.crash(seed * 7)

			s2 := NewStore("local_data", crashed)
			report, err := s2.Open(testKey, cfg, Incarnation{CreatedAtMicros: 1234})
			if err != nil {
				t.Fatalf("reopen: %v (%v)", err, report)
			}
			_, msgs := poll(t, s2, testKey, PollRequest{Strategy: wire.PollingStrategy{Kind: wire.PollingFirst}, Count: 1 << 20})
			kept := map[uint64]uint64{} // offset -> seq
			for i, m := range msgs {
				if m.offset != uint64(i) {
					t.Fatalf("recovered log has offset %d at position %d", m.offset, i)
				}
				kept[m.offset] = m.seq
			}
			for tok, c := range rec.acked {
				for i := 0; i < sent[tok].count; i++ {
					seq, ok := kept[c.BaseOffset+uint64(i)]
					if fsync && (!ok || seq != tok*1000+uint64(i)) {
						t.Fatalf("acknowledged message %d at offset %d lost (found %d, %v); report %v", tok*1000+uint64(i), c.BaseOffset+uint64(i), seq, ok, report)
					}
				}
			}
			if uint64(len(msgs)) < durableEnd {
				t.Fatalf("%d messages recovered, %d were durable", len(msgs), durableEnd)
			}
			// Whatever survived is whole batches of what was sent, in send order.
			for off := 0; off < len(msgs); {
				tok := msgs[off].seq / 1000
				b, ok := sent[tok]
				if !ok || msgs[off].seq%1000 != 0 {
					t.Fatalf("offset %d holds message %d, not the start of a sent batch", off, msgs[off].seq)
				}
				for i := 0; i < b.count; i++ {
					if off+i >= len(msgs) || msgs[off+i].seq != tok*1000+uint64(i) {
						t.Fatalf("batch %d torn at offset %d", tok, off+i)
					}
				}
				off += b.count
			}
			if base := mustSend(t, s2, testKey, batchForToken(t, 999_999, 1, 10), 1<<40); base != uint64(len(msgs)) {
				t.Fatalf("after recovery the next batch went to %d, log ends at %d", base, len(msgs))
			}
		})
	}
}
