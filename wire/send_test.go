package wire

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

func sendGoldenBody(tb testing.TB) []byte {
	tb.Helper()
	return append(readGolden(tb, "batches/send_messages_metadata.hex"), smallBatch(tb)...)
}

func TestSendMessagesGolden(t *testing.T) {
	body := sendGoldenBody(t)
	var r SendMessages
	if err := r.Decode(body); err != nil {
		t.Fatal(err)
	}
	if !r.StreamID.Equal(NumericIdentifier(1)) || !r.TopicID.Equal(NumericIdentifier(2)) ||
		r.Partitioning.Kind != PartitioningPartitionID || r.Partitioning.PartitionID != 0 || r.MessagesCount != 2 {
		t.Fatalf("decoded %#v", r)
	}
	if !bytes.Equal(r.Batch, smallBatch(t)) || &r.Batch[0] != &body[26] {
		t.Fatal("Batch is not a view of the batch in the body")
	}
	if err := ValidateBatch(r.Batch); err != nil {
		t.Fatal(err)
	}
	out, err := r.Append(nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, body) {
		t.Fatalf("Append differs:\n got % x\nwant % x", out, body)
	}

	// A client building the batch in place behind the metadata gets the same bytes.
	req := SendMessages{StreamID: NumericIdentifier(1), TopicID: NumericIdentifier(2),
		Partitioning: Partitioning{Kind: PartitioningPartitionID}, MessagesCount: 2}
	meta, err := req.AppendMetadata(nil)
	if err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "batches/send_messages_metadata.hex", meta)
	var bb BatchBuilder
	bb.Reset(meta)
	_ = bb.Append(Uint128{Lo: 0x1122334455667788, Hi: 0x99aabbccddeeff00}, 1_700_000_000_000_100, []byte("hello"), nil)
	_ = bb.Append(Uint128{Lo: 2}, 1_700_000_000_000_000, []byte("iggy"), []byte{1, 2, 3, 4, 5, 6})
	built, err := bb.Finish()
	if err != nil || !bytes.Equal(built, body) {
		t.Fatalf("metadata + builder = % x, %v", built, err)
	}
}

func TestSendMessagesNamedGolden(t *testing.T) {
	req := SendMessages{
		StreamID:      StringIdentifier([]byte("s")),
		TopicID:       StringIdentifier([]byte("orders")),
		Partitioning:  Partitioning{Kind: PartitioningMessagesKey, Key: []byte("user-42")},
		MessagesCount: 1,
	}
	meta, err := req.AppendMetadata(nil)
	if err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "batches/send_messages_metadata_named.hex", meta)
	var bb BatchBuilder
	bb.Reset(meta)
	_ = bb.Append(Uint128{Lo: 9}, 77, []byte("x"), nil)
	body, err := bb.Finish()
	if err != nil {
		t.Fatal(err)
	}
	var r SendMessages
	if err := r.Decode(body); err != nil {
		t.Fatal(err)
	}
	if string(r.StreamID.String) != "s" || string(r.TopicID.String) != "orders" ||
		string(r.Partitioning.Key) != "user-42" || r.MessagesCount != 1 || ValidateBatch(r.Batch) != nil {
		t.Fatalf("decoded %#v", r)
	}
}

func TestSendMessagesDecodeErrors(t *testing.T) {
	tests := []struct {
		name   string
		mutate func([]byte) []byte
		want   ErrorCode
	}{
		{"empty", func(b []byte) []byte { return nil }, ErrResourceNotFound},
		{"three bytes", func(b []byte) []byte { return b[:3] }, ErrResourceNotFound},
		{"metadata_length beyond body", func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b, uint32(len(b)))
			return b
		}, ErrInvalidCommand},
		{"metadata_length huge", func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b, 0xFFFFFFFF)
			return b
		}, ErrInvalidCommand},
		{"metadata_length one short", func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b, 21)
			return b
		}, ErrInvalidCommand},
		{"metadata_length one long", func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b, 23)
			return b
		}, ErrInvalidCommand},
		{"bad identifier kind", func(b []byte) []byte { b[4] = 9; return b }, ErrResourceNotFound},
		{"bad partitioning kind", func(b []byte) []byte { b[16] = 7; return b }, ErrResourceNotFound},
		{"messages_count cut", func(b []byte) []byte { return b[:24] }, ErrResourceNotFound},
		{"metadata only", func(b []byte) []byte { return b[:26] }, ErrInvalidCommand},
		{"batch header cut", func(b []byte) []byte { return b[:26+255] }, ErrInvalidCommand},
		{"trailing byte", func(b []byte) []byte { return append(b, 0) }, ErrInvalidCommand},
		{"batch cut", func(b []byte) []byte { return b[:len(b)-1] }, ErrInvalidCommand},
		{"messages_count 0", func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[22:], 0)
			return b
		}, ErrInvalidMessagesCount},
		{"messages_count differs", func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[22:], 3)
			return b
		}, ErrInvalidMessagesCount},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r SendMessages
			r.MessagesCount = 99
			if err := r.Decode(tt.mutate(sendGoldenBody(t))); err != tt.want {
				t.Fatalf("Decode = %v, want %v", err, tt.want)
			}
			if r.MessagesCount != 0 || r.Batch != nil {
				t.Fatal("a failed Decode left fields set")
			}
		})
	}
}

func TestSendMessagesAppendErrors(t *testing.T) {
	batch := smallBatch(t)
	prefix := []byte{0xAB}
	for _, r := range []SendMessages{
		{StreamID: NumericIdentifier(1), TopicID: NumericIdentifier(1), Partitioning: Partitioning{Kind: PartitioningBalanced}, MessagesCount: 1, Batch: batch},
		{StreamID: NumericIdentifier(1), TopicID: NumericIdentifier(1), Partitioning: Partitioning{Kind: PartitioningBalanced}, MessagesCount: 2, Batch: batch[:100]},
		{StreamID: NumericIdentifier(1), TopicID: NumericIdentifier(1), Partitioning: Partitioning{Kind: PartitioningBalanced}},
		{StreamID: NumericIdentifier(1), TopicID: NumericIdentifier(1), Partitioning: Partitioning{Kind: PartitioningBalanced}, MessagesCount: 2, Batch: append(bytes.Clone(batch), 0)},
		{StreamID: StringIdentifier(nil), TopicID: NumericIdentifier(1), Partitioning: Partitioning{Kind: PartitioningBalanced}, MessagesCount: 2, Batch: batch},
		{StreamID: NumericIdentifier(1), TopicID: NumericIdentifier(1), Partitioning: Partitioning{Kind: PartitioningMessagesKey}, MessagesCount: 2, Batch: batch},
	} {
		out, err := r.Append(prefix)
		if err == nil || !bytes.Equal(out, prefix) {
			t.Errorf("Append(%#v) = % x, %v; want an error and b untouched", r, out, err)
		}
	}
}

func TestSendMessagesRoundTripProperty(t *testing.T) {
	seed := uint64(42)
	rng := rand.New(rand.NewPCG(seed, 101))
	var bb BatchBuilder
	for iter := 0; iter < 200; iter++ {
		randomIdentifier := func() Identifier {
			if rng.IntN(2) == 0 {
				return NumericIdentifier(rng.Uint32())
			}
			name := make([]byte, 1+rng.IntN(255))
			for i := range name {
				name[i] = byte('a' + rng.IntN(26))
			}
			return StringIdentifier(name)
		}
		var p Partitioning
		switch rng.IntN(3) {
		case 0:
			p = Partitioning{Kind: PartitioningBalanced}
		case 1:
			p = Partitioning{Kind: PartitioningPartitionID, PartitionID: rng.Uint32()}
		default:
			key := make([]byte, 1+rng.IntN(255))
			for i := range key {
				key[i] = byte(rng.Uint32())
			}
			p = Partitioning{Kind: PartitioningMessagesKey, Key: key}
		}
		msgs := randomMessages(rng, 1+rng.IntN(5))
		batch := buildBatch(t, &bb, nil, msgs)
		in := SendMessages{StreamID: randomIdentifier(), TopicID: randomIdentifier(), Partitioning: p,
			MessagesCount: uint32(len(msgs)), Batch: batch}
		body, err := in.Append(nil)
		if err != nil {
			t.Fatalf("seed=%d iter=%d: Append: %v", seed, iter, err)
		}
		var out SendMessages
		if err := out.Decode(body); err != nil {
			t.Fatalf("seed=%d iter=%d: Decode: %v", seed, iter, err)
		}
		if !out.StreamID.Equal(in.StreamID) || !out.TopicID.Equal(in.TopicID) ||
			out.Partitioning.Kind != in.Partitioning.Kind || out.Partitioning.PartitionID != in.Partitioning.PartitionID ||
			!bytes.Equal(out.Partitioning.Key, in.Partitioning.Key) || out.MessagesCount != in.MessagesCount ||
			!bytes.Equal(out.Batch, in.Batch) {
			t.Fatalf("seed=%d iter=%d: round trip differs: %#v vs %#v", seed, iter, out, in)
		}
	}
}

func TestSendConfirmationsGolden(t *testing.T) {
	c := SendConfirmation{StreamID: 1, TopicID: 2, PartitionID: 3, BaseOffset: 1000}
	body := AppendSendConfirmations(nil, c)
	checkGolden(t, "batches/send_confirmations.hex", body)
	var r SendConfirmations
	if err := r.Decode(body); err != nil || r.Len() != 1 || r.At(0) != c {
		t.Fatalf("Decode = %v, %d confirmations", err, r.Len())
	}
	if c.EncodedLen() != len(c.Append(nil)) {
		t.Fatal("EncodedLen is not what Append writes")
	}

	none := AppendSendConfirmations(nil)
	if err := r.Decode(none); err != nil || r.Len() != 0 || !bytes.Equal(none, []byte{0, 0, 0, 0}) {
		t.Fatalf("count 0: % x, %v", none, err)
	}
	many := []SendConfirmation{c, {StreamID: 9, BaseOffset: 1 << 60}, {PartitionID: 0xFFFFFFFF}}
	if err := r.Decode(AppendSendConfirmations(nil, many...)); err != nil || r.Len() != 3 {
		t.Fatal(err)
	}
	for i, want := range many {
		if r.At(i) != want {
			t.Errorf("At(%d) = %+v, want %+v", i, r.At(i), want)
		}
	}

	for _, bad := range [][]byte{nil, {1, 0, 0}, body[:len(body)-1], append(bytes.Clone(body), 0),
		{0xFF, 0xFF, 0xFF, 0xFF}, {2, 0, 0, 0}} {
		if err := r.Decode(bad); err != ErrInvalidCommand || r.Len() != 0 {
			t.Errorf("Decode(% x) = %v, %d confirmations", bad, err, r.Len())
		}
	}
}

func TestSendDecodeDoesNotAllocate(t *testing.T) {
	body := sendGoldenBody(t)
	reply := AppendSendConfirmations(nil, SendConfirmation{StreamID: 1})
	var r SendMessages
	var c SendConfirmations
	buf := make([]byte, 0, 1024)
	if n := testing.AllocsPerRun(50, func() {
		_ = r.Decode(body)
		_ = c.Decode(reply)
		buf = AppendSendConfirmations(buf[:0], SendConfirmation{StreamID: 1, BaseOffset: 5})
	}); n != 0 {
		t.Fatalf("send decode/encode allocates %v times", n)
	}
}

func FuzzDecodeSendMessages(f *testing.F) {
	f.Add(sendGoldenBody(f))
	f.Add(readGolden(f, "batches/send_messages_metadata.hex"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, body []byte) {
		var r SendMessages
		if err := r.Decode(body); err != nil {
			return
		}
		// What decodes re-encodes to the same bytes and has a batch whose outline holds.
		out, err := r.Append(nil)
		if err != nil {
			t.Fatalf("decoded body does not re-encode: %v", err)
		}
		if !bytes.Equal(out, body) {
			t.Fatalf("re-encoding differs:\n got % x\nwant % x", out, body)
		}
		h, err := ViewBatchHeader(r.Batch)
		if err != nil || h.BatchLength() != uint64(len(r.Batch)) || h.MessageCount() != r.MessagesCount {
			t.Fatalf("decoded batch outline broken: %v", err)
		}
		_ = ValidateBatch(r.Batch)
	})
}
