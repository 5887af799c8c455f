package segment

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

const testPartition = 7

// makeBatch builds a stamped batch of n messages starting at base, stamped ts, whose
// payloads name their offset and tag (so a stale or misplaced message is visible),
// padded to payloadBytes.
func makeBatch(t testing.TB, base, ts uint64, n int, payloadBytes int, tag string) []byte {
	t.Helper()
	var bb wire.BatchBuilder
	bb.Reset(nil)
	for i := 0; i < n; i++ {
		if err := bb.Append(wire.Uint128{Lo: base + uint64(i) + 1}, ts-uint64(n-i), payloadFor(base+uint64(i), tag, payloadBytes), nil); err != nil {
			t.Fatalf("build batch: %v", err)
		}
	}
	b, err := bb.Finish()
	if err != nil {
		t.Fatalf("finish batch: %v", err)
	}
	if err := wire.ValidateBatch(b); err != nil {
		t.Fatalf("built batch invalid: %v", err)
	}
	wire.StampBatch(b, testPartition, base, ts)
	return b
}

func payloadFor(offset uint64, tag string, payloadBytes int) []byte {
	p := []byte(fmt.Sprintf("%s/o%d/", tag, offset))
	for len(p) < payloadBytes {
		p = append(p, byte('a'+offset%26))
	}
	return p
}

type message struct {
	offset    uint64
	timestamp uint64
	payload   []byte
}

// decodePolled checks every record as a poll reply record and returns its messages.
func decodePolled(t testing.TB, p *Polled) []message {
	t.Helper()
	var msgs []message
	var count uint32
	for i, r := range p.Records {
		record := append(append([]byte(nil), r.Header...), r.Frames...)
		if err := wire.CheckBatchRecord(record); err != nil {
			t.Fatalf("record %d (segment %d position %d) fails CheckBatchRecord: %v", i, r.Segment, r.Position, err)
		}
		h, _ := wire.ViewBatchHeader(record)
		for it := wire.Frames(record); it.Next(); {
			f := it.Frame()
			msgs = append(msgs, message{
				offset:    h.BaseOffset() + uint64(f.OffsetDelta()),
				timestamp: h.BaseTimestamp(),
				payload:   append([]byte(nil), f.Payload()...),
			})
		}
		count += h.MessageCount()
	}
	if count != p.MessageCount {
		t.Fatalf("records hold %d messages, Polled.MessageCount says %d", count, p.MessageCount)
	}
	for i := 1; i < len(msgs); i++ {
		if msgs[i].offset != msgs[i-1].offset+1 {
			t.Fatalf("offsets not contiguous: %d after %d", msgs[i].offset, msgs[i-1].offset)
		}
	}
	return msgs
}

// model is what a log must hold: the payload and timestamp of each offset.
type model struct {
	first    uint64
	payloads map[uint64][]byte
	stamps   map[uint64]uint64
}

func newModel() *model {
	return &model{payloads: make(map[uint64][]byte), stamps: make(map[uint64]uint64)}
}

func (m *model) clone() *model {
	c := newModel()
	for o, p := range m.payloads {
		c.payloads[o], c.stamps[o] = p, m.stamps[o]
	}
	return c
}

func (m *model) add(batch []byte) {
	h, _ := wire.ViewBatchHeader(batch)
	for it := wire.Frames(batch); it.Next(); {
		f := it.Frame()
		o := h.BaseOffset() + uint64(f.OffsetDelta())
		m.payloads[o] = append([]byte(nil), f.Payload()...)
		m.stamps[o] = h.BaseTimestamp()
	}
}

func (m *model) truncate(from uint64) {
	for o := range m.payloads {
		if o >= from {
			delete(m.payloads, o)
			delete(m.stamps, o)
		}
	}
}

func (m *model) check(t testing.TB, msgs []message) {
	t.Helper()
	for _, msg := range msgs {
		want, ok := m.payloads[msg.offset]
		if !ok {
			t.Fatalf("read offset %d which the model does not hold (payload %q)", msg.offset, msg.payload)
		}
		if !bytes.Equal(want, msg.payload) {
			t.Fatalf("offset %d: payload %q, want %q", msg.offset, msg.payload, want)
		}
		if m.stamps[msg.offset] != msg.timestamp {
			t.Fatalf("offset %d: timestamp %d, want %d", msg.offset, msg.timestamp, m.stamps[msg.offset])
		}
	}
}

// readAll reads [from, end) in polls of count messages and returns every message.
func readAll(t testing.TB, l *Log, from uint64, count uint32) []message {
	t.Helper()
	var all []message
	var p Polled
	next := from
	for guard := 0; guard < 1_000_000; guard++ {
		if err := l.Read(Query{Kind: PollOffset, Value: next, Count: count}, &p); err != nil {
			t.Fatalf("read at %d: %v", next, err)
		}
		msgs := decodePolled(t, &p)
		if len(msgs) == 0 {
			return all
		}
		if msgs[0].offset != max(next, l.FirstOffset()) {
			t.Fatalf("read at %d starts at %d", next, msgs[0].offset)
		}
		if len(msgs) > int(count) {
			t.Fatalf("read of %d returned %d messages", count, len(msgs))
		}
		all = append(all, msgs...)
		next = msgs[len(msgs)-1].offset + 1
	}
	t.Fatal("readAll did not finish")
	return nil
}

// appender appends generated batches to a log, keeping the model of what it sent.
type appender struct {
	t       testing.TB
	l       *Log
	rng     *rand.Rand
	ts      uint64
	tag     string
	sent    *model
	payload int
}

func (a *appender) append(n int) []byte {
	a.t.Helper()
	a.ts += uint64(a.rng.IntN(3)) // equal timestamps happen and must work
	b := makeBatch(a.t, a.l.NextOffset(), a.ts, n, a.payload+a.rng.IntN(a.payload+1), a.tag)
	if err := a.l.Append(b); err != nil {
		a.t.Fatalf("append at %d: %v", a.l.NextOffset(), err)
	}
	a.sent.add(b)
	return b
}

func putU64(b []byte, v uint64) { binary.LittleEndian.PutUint64(b, v) }
