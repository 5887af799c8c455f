package wire

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// pollGoldenBody is the golden poll reply: prefix, the slice1 header, frame 1.
func pollGoldenBody(tb testing.TB) []byte {
	tb.Helper()
	body := readGolden(tb, "batches/polled_messages_prefix.hex")
	body = append(body, readGolden(tb, "batches/batch_small_slice1_header.hex")...)
	return append(body, smallBatch(tb)[BatchHeaderSize+53:]...)
}

func TestPolledMessagesGolden(t *testing.T) {
	// The server side: slice the stored batch and send [prefix][hdr][frames].
	stored := smallBatch(t)
	StampBatch(stored, 3, 1000, 1_700_000_000_500_000)
	var hdr [BatchHeaderSize]byte
	frames, count, err := SliceBatch(&hdr, stored, 1001, 100)
	if err != nil || count != 1 {
		t.Fatal(count, err)
	}
	reply := PolledMessages{PartitionID: 3, CurrentOffset: 1001, MessagesCount: count}
	body := reply.AppendPrefix(nil)
	body = append(append(body, hdr[:]...), frames...)
	want := pollGoldenBody(t)
	if !bytes.Equal(body, want) {
		t.Fatalf("server reply differs:\n got % x\nwant % x", body, want)
	}

	// The client side.
	var p PolledMessages
	if err := p.Decode(body); err != nil {
		t.Fatal(err)
	}
	if p.PartitionID != 3 || p.CurrentOffset != 1001 || p.MessagesCount != 1 || len(p.Records) != len(body)-16 {
		t.Fatalf("decoded %+v", p)
	}
	if err := p.Verify(); err != nil {
		t.Fatal(err)
	}
	if got := p.Append(nil); !bytes.Equal(got, body) || p.EncodedLen() != len(body) {
		t.Fatal("Append does not reproduce the body")
	}
	n := 0
	for it := p.Messages(); it.Next(); n++ {
		m := it.Message()
		if m.Offset != 1001 || m.Timestamp != 1_700_000_000_500_000 || m.OriginTimestamp != 1_700_000_000_000_000 ||
			m.ID() != (Uint128{Lo: 2}) || string(m.Payload()) != "iggy" || len(m.UserHeaders()) != 6 {
			t.Fatalf("message %+v", m)
		}
	}
	if n != 1 {
		t.Fatalf("%d messages", n)
	}
}

func TestPolledMessagesEmptyShapes(t *testing.T) {
	resync := PolledMessages{PartitionID: PollPartitionResync}
	checkGolden(t, "batches/polled_messages_resync.hex", resync.Append(nil))
	var p PolledMessages
	if err := p.Decode(readGolden(t, "batches/polled_messages_resync.hex")); err != nil ||
		p.PartitionID != PollPartitionResync || p.MessagesCount != 0 || len(p.Records) != 0 {
		t.Fatalf("resync decode: %+v, %v", p, err)
	}
	if it := p.Messages(); it.Next() {
		t.Fatal("an empty reply yields a message")
	}
}

func TestPolledMessagesDecodeErrors(t *testing.T) {
	tests := []struct {
		name   string
		mutate func([]byte) []byte
	}{
		{"empty", func(b []byte) []byte { return nil }},
		{"short prefix", func(b []byte) []byte { return b[:15] }},
		{"prefix count without records", func(b []byte) []byte { return b[:16] }},
		{"count too high", func(b []byte) []byte { binary.LittleEndian.PutUint32(b[12:], 2); return b }},
		{"count too low", func(b []byte) []byte { binary.LittleEndian.PutUint32(b[12:], 0); return b }},
		{"record header cut", func(b []byte) []byte { return b[:16+200] }},
		{"trailing byte", func(b []byte) []byte { return append(b, 0) }},
		{"batch_length below header", func(b []byte) []byte {
			binary.LittleEndian.PutUint64(b[16+32:], 255)
			return b
		}},
		{"batch_length beyond body", func(b []byte) []byte {
			binary.LittleEndian.PutUint64(b[16+32:], uint64(len(b)))
			return b
		}},
		{"batch_length huge", func(b []byte) []byte {
			binary.LittleEndian.PutUint64(b[16+32:], 1<<63)
			return b
		}},
		{"frame cut", func(b []byte) []byte {
			b = b[:len(b)-1]
			binary.LittleEndian.PutUint64(b[16+32:], uint64(len(b)-16))
			return b
		}},
		{"frame reserved", func(b []byte) []byte { b[16+256+40] = 1; return b }},
		{"record message_count", func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[16+48:], 2)
			return b
		}},
		{"payload_length overruns", func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[16+256+36:], 0xFFFFFFFF)
			return b
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := PolledMessages{MessagesCount: 7}
			if err := p.Decode(tt.mutate(pollGoldenBody(t))); err != ErrInvalidCommand {
				t.Fatalf("Decode = %v, want %v", err, ErrInvalidCommand)
			}
			if p.MessagesCount != 0 || p.Records != nil {
				t.Fatal("a failed Decode left fields set")
			}
		})
	}
}

func TestPolledMessagesVerifyCatchesCorruption(t *testing.T) {
	body := pollGoldenBody(t)
	for _, at := range []int{16 + 40, 16 + 256 + 49, len(body) - 1} {
		b := bytes.Clone(body)
		b[at] ^= 0x10
		var p PolledMessages
		if err := p.Decode(b); err != nil {
			t.Fatalf("byte %d: Decode = %v (only checksummed bytes were touched)", at, err)
		}
		if err := p.Verify(); err == nil {
			t.Errorf("byte %d: Verify misses the corruption", at)
		}
	}
}

// Random stored batches, sliced at random and assembled into one reply, decode back
// to exactly the messages in the slices, in order.
func TestPolledMessagesRoundTripProperty(t *testing.T) {
	seed := uint64(100)
	rng := rand.New(rand.NewPCG(seed, 15))
	var bb BatchBuilder
	var hdr [BatchHeaderSize]byte
	type expected struct {
		offset, origin uint64
		msg            testMessage
	}
	for iter := 0; iter < 100; iter++ {
		var want []expected
		var records []byte
		var total uint32
		next := uint64(rng.IntN(1000))
		for range rng.IntN(5) {
			msgs := randomMessages(rng, 1+rng.IntN(8))
			batch := buildBatch(t, &bb, nil, msgs)
			StampBatch(batch, 4, next, 1_000+next)
			from := next + uint64(rng.IntN(len(msgs)))
			maxMessages := uint32(1 + rng.IntN(len(msgs)))
			frames, count, err := SliceBatch(&hdr, batch, from, maxMessages)
			if err != nil || count == 0 {
				t.Fatalf("seed=%d iter=%d: SliceBatch = %d, %v", seed, iter, count, err)
			}
			records = append(append(records, hdr[:]...), frames...)
			total += count
			for i := uint32(0); i < count; i++ {
				k := from - next + uint64(i)
				want = append(want, expected{offset: from + uint64(i), origin: msgs[k].timestamp, msg: msgs[k]})
			}
			next += uint64(len(msgs))
		}
		reply := PolledMessages{PartitionID: 4, CurrentOffset: next - 1, MessagesCount: total, Records: records}
		body := reply.Append(nil)
		var p PolledMessages
		if err := p.Decode(body); err != nil {
			t.Fatalf("seed=%d iter=%d: Decode: %v", seed, iter, err)
		}
		if err := p.Verify(); err != nil {
			t.Fatalf("seed=%d iter=%d: Verify: %v", seed, iter, err)
		}
		i := 0
		for it := p.Messages(); it.Next(); i++ {
			m := it.Message()
			if i >= len(want) {
				t.Fatalf("seed=%d iter=%d: more than %d messages", seed, iter, len(want))
			}
			w := want[i]
			if m.Offset != w.offset || m.OriginTimestamp != w.origin || m.ID() != w.msg.id ||
				!bytes.Equal(m.Payload(), w.msg.payload) || !bytes.Equal(m.UserHeaders(), w.msg.uh) {
				t.Fatalf("seed=%d iter=%d: message %d = offset %d, want %d", seed, iter, i, m.Offset, w.offset)
			}
		}
		if i != len(want) {
			t.Fatalf("seed=%d iter=%d: %d messages, want %d", seed, iter, i, len(want))
		}
	}
}

func TestPollDoesNotAllocate(t *testing.T) {
	body := pollGoldenBody(t)
	buf := make([]byte, 0, 64)
	var p PolledMessages
	if n := testing.AllocsPerRun(50, func() {
		_ = p.Decode(body)
		for it := p.Messages(); it.Next(); {
			_ = it.Message().Payload()
		}
		_ = p.Verify()
		buf = p.AppendPrefix(buf[:0])
	}); n != 0 {
		t.Fatalf("poll decode/iterate allocates %v times", n)
	}
}

func FuzzDecodePolledMessages(f *testing.F) {
	f.Add(pollGoldenBody(f))
	f.Add(readGolden(f, "batches/polled_messages_resync.hex"))
	two := pollGoldenBody(f)
	two = append(two, two[16:]...)
	binary.LittleEndian.PutUint32(two[12:], 2)
	f.Add(two)
	f.Fuzz(func(t *testing.T, body []byte) {
		var p PolledMessages
		if err := p.Decode(body); err != nil {
			return
		}
		if !bytes.Equal(p.Append(nil), body) {
			t.Fatal("a decoded body does not re-encode to itself")
		}
		var n uint32
		for it := p.Messages(); it.Next(); n++ {
			_ = it.Message().Payload()
		}
		if n != p.MessagesCount {
			t.Fatalf("iterated %d messages, prefix says %d", n, p.MessagesCount)
		}
		var size int
		for it := p.Batches(); it.Next(); {
			size += len(it.Batch())
		}
		if size != len(p.Records) {
			t.Fatalf("records cover %d of %d bytes", size, len(p.Records))
		}
		_ = p.Verify()
	})
}
