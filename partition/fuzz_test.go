package partition

import (
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

// FuzzSend feeds arbitrary bytes to Send as a batch: it either refuses them with a
// code and stores nothing, or stores them and serves them back, verified, with the
// offsets it confirmed.
func FuzzSend(f *testing.F) {
	valid := makeBatch(f, 0, 3, 20)
	f.Add(valid)
	f.Add(valid[:wire.BatchHeaderSize])
	f.Add(valid[:len(valid)-1])
	f.Add([]byte{})
	flipped := append([]byte(nil), valid...)
	flipped[wire.BatchHeaderSize+60] ^= 0x80
	f.Add(flipped)
	huge := append([]byte(nil), valid...)
	huge[32] = 0xff // batch_length
	f.Add(huge)
	f.Fuzz(func(t *testing.T, batch []byte) {
		s, _ := newSimStore(t, 70, smallConfig())
		mustSend(t, s, testKey, makeBatch(t, 0, 2, 10), 1)
		rec := newSendRecorder()
		req := &wire.SendMessages{Batch: append([]byte(nil), batch...)}
		err := s.Send(testKey, req, 2, rec, 1)
		s.WaitIdle()
		info, _ := s.Info(testKey)
		if err != nil {
			if _, ok := err.(wire.ErrorCode); !ok {
				t.Fatalf("refusal is not a wire code: %v", err)
			}
			if rec.done() != 0 || info.MessagesCount != 2 {
				t.Fatalf("refused batch left a trace: %d completions, %+v", rec.done(), info)
			}
			return
		}
		c, ok := rec.acked[1]
		if !ok || c.BaseOffset != 2 {
			t.Fatalf("admitted batch: %+v %v %v", c, ok, rec.failed)
		}
		h, _ := wire.ViewBatchHeader(req.Batch)
		_, msgs := poll(t, s, testKey, PollRequest{Strategy: wire.PollingStrategy{Kind: wire.PollingOffset, Value: 2}, Count: 1 << 20})
		if uint32(len(msgs)) != h.MessageCount() || info.MessagesCount != 2+uint64(h.MessageCount()) {
			t.Fatalf("stored %d messages, polled %d, info %+v", h.MessageCount(), len(msgs), info)
		}
	})
}

// FuzzPoll runs arbitrary poll requests against a partition of 60 messages in 6
// batches over several segments: every reply decodes, verifies, holds consecutive
// offsets within the partition, no more than asked, starting where the strategy says.
func FuzzPoll(f *testing.F) {
	f.Add(uint8(1), uint64(5), uint32(10), false, int64(0))
	f.Add(uint8(2), uint64(3500), uint32(7), true, int64(100))
	f.Add(uint8(3), uint64(0), uint32(1), false, int64(0))
	f.Add(uint8(4), uint64(0), uint32(25), false, int64(0))
	f.Add(uint8(5), uint64(0), uint32(1000), true, int64(-1))
	f.Add(uint8(0), uint64(1<<63), uint32(0xffffffff), true, int64(1))
	s, _ := newSimStore(f, 71, smallConfig())
	for i := uint64(0); i < 6; i++ {
		mustSend(f, s, testKey, makeBatch(f, i*10, 10, 100), (i+1)*1000)
	}
	f.Fuzz(func(t *testing.T, kind uint8, value uint64, count uint32, autoCommit bool, maxBytes int64) {
		consumer := Consumer{Kind: wire.ConsumerSingle, ID: uint32(value % 3)}
		stored, hasStored, _ := s.ConsumerOffset(testKey, consumer)
		req := PollRequest{Consumer: consumer, Strategy: wire.PollingStrategy{Kind: wire.PollingKind(kind), Value: value}, Count: count, AutoCommit: autoCommit, MaxBytes: maxBytes}
		pm, msgs := poll(t, s, testKey, req)
		if pm.CurrentOffset != 59 || pm.PartitionID != testKey.PartitionID {
			t.Fatalf("prefix %+v", pm)
		}
		if uint64(len(msgs)) > uint64(count) {
			t.Fatalf("%d messages for count %d", len(msgs), count)
		}
		for i, m := range msgs {
			if m.offset > 59 || m.seq != m.offset || (i > 0 && m.offset != msgs[i-1].offset+1) {
				t.Fatalf("message %d: %+v", i, m)
			}
		}
		if len(msgs) == 0 {
			return
		}
		start := msgs[0].offset
		switch wire.PollingKind(kind) {
		case wire.PollingOffset:
			if start != value {
				t.Fatalf("offset poll from %d started at %d", value, start)
			}
		case wire.PollingFirst:
			if start != 0 {
				t.Fatalf("first started at %d", start)
			}
		case wire.PollingLast:
			if msgs[len(msgs)-1].offset != 59 && maxBytes == 0 {
				t.Fatalf("last ended at %d", msgs[len(msgs)-1].offset)
			}
		case wire.PollingNext:
			want := uint64(0)
			if hasStored {
				want = stored.StoredOffset + 1
			}
			if start != want {
				t.Fatalf("next started at %d, stored %+v", start, stored)
			}
		case wire.PollingTimestamp:
			// Batch i (offsets 10i..10i+9) is stamped (i+1)*1000: the poll starts at
			// the first batch stamped at or after value.
			previousStamp := (start / 10) * 1000
			if msgs[0].timestamp < value || (start >= 10 && previousStamp >= value) {
				t.Fatalf("timestamp %d poll started at %d stamped %d", value, start, msgs[0].timestamp)
			}
		default:
			t.Fatalf("unknown strategy %d served %d messages", kind, len(msgs))
		}
	})
}
