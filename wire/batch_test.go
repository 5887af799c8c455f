package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/zeebo/xxh3"
)

// The checksums in these tests are computed from the spec's definitions with xxh3.Hash
// over explicitly concatenated bytes, never with the package's own streaming code.

func le64(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }
func le32(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }

// specFrameChecksum is XXH3-64 over frame bytes 8..end.
func specFrameChecksum(frame []byte) uint64 { return xxh3.Hash(frame[8:]) }

// specBatchChecksum is XXH3-64 over the six header fields, little-endian, in order,
// followed by each frame's stored checksum bytes.
func specBatchChecksum(batch []byte) uint64 {
	var in []byte
	in = append(in, batch[0:8]...)   // partition_id
	in = append(in, batch[8:16]...)  // base_offset
	in = append(in, batch[16:24]...) // base_timestamp
	in = append(in, batch[24:32]...) // origin_timestamp
	in = append(in, batch[32:40]...) // batch_length
	in = append(in, batch[48:52]...) // message_count
	for at := BatchHeaderSize; at < len(batch); {
		uh := binary.LittleEndian.Uint32(batch[at+32:])
		pl := binary.LittleEndian.Uint32(batch[at+36:])
		in = append(in, batch[at:at+8]...)
		at += FrameHeaderSize + int(uh) + int(pl)
	}
	return xxh3.Hash(in)
}

// resum rewrites every frame checksum and the batch checksum of a well-tiled batch
// from the spec definitions, so a test can change one field and see only the check
// it targets fail.
func resum(batch []byte) {
	for at := BatchHeaderSize; at < len(batch); {
		uh := binary.LittleEndian.Uint32(batch[at+32:])
		pl := binary.LittleEndian.Uint32(batch[at+36:])
		end := at + FrameHeaderSize + int(uh) + int(pl)
		binary.LittleEndian.PutUint64(batch[at:], specFrameChecksum(batch[at:end]))
		at = end
	}
	binary.LittleEndian.PutUint64(batch[40:], specBatchChecksum(batch))
}

func smallBatch(tb testing.TB) []byte {
	tb.Helper()
	return readGolden(tb, "batches/batch_small.hex")
}

func TestBatchGoldenChecksumsFollowSpec(t *testing.T) {
	frame := readGolden(t, "batches/frame_hello.hex")
	var explicit []byte
	explicit = append(explicit, le64(0x1122334455667788)...) // id lo
	explicit = append(explicit, le64(0x99aabbccddeeff00)...) // id hi
	explicit = append(explicit, le32(0)...)                  // offset_delta
	explicit = append(explicit, le32(100)...)                // timestamp_delta
	explicit = append(explicit, le32(0)...)                  // user_headers_length
	explicit = append(explicit, le32(5)...)                  // payload_length
	explicit = append(explicit, le64(0)...)                  // reserved
	explicit = append(explicit, "hello"...)
	if !bytes.Equal(frame[8:], explicit) {
		t.Fatalf("frame golden body differs from the spec layout:\n got % x\nwant % x", frame[8:], explicit)
	}
	if got, want := binary.LittleEndian.Uint64(frame), xxh3.Hash(explicit); got != want {
		t.Fatalf("frame golden checksum %#x, spec %#x", got, want)
	}

	batch := smallBatch(t)
	var fields []byte
	fields = append(fields, le64(0)...)                     // partition_id
	fields = append(fields, le64(0)...)                     // base_offset
	fields = append(fields, le64(0)...)                     // base_timestamp
	fields = append(fields, le64(1_700_000_000_000_000)...) // origin_timestamp
	fields = append(fields, le64(367)...)                   // batch_length
	fields = append(fields, le32(2)...)                     // message_count
	fields = append(fields, batch[256:264]...)              // frame 0 checksum
	fields = append(fields, batch[256+53:256+53+8]...)      // frame 1 checksum
	if got, want := binary.LittleEndian.Uint64(batch[40:]), xxh3.Hash(fields); got != want {
		t.Fatalf("batch golden checksum %#x, spec %#x", got, want)
	}
	if !bytes.Equal(batch[256:256+53], frame) {
		t.Fatal("frame_hello.hex is not the first frame of batch_small.hex")
	}
	if got, want := specFrameChecksum(batch[256+53:]), binary.LittleEndian.Uint64(batch[256+53:]); got != want {
		t.Fatalf("frame 1 golden checksum %#x, spec %#x", want, got)
	}
}

func TestBatchBuilderMatchesGolden(t *testing.T) {
	var bb BatchBuilder
	bb.Reset(nil)
	if err := bb.Append(Uint128{Lo: 0x1122334455667788, Hi: 0x99aabbccddeeff00}, 1_700_000_000_000_100, []byte("hello"), nil); err != nil {
		t.Fatal(err)
	}
	if err := bb.Append(Uint128{Lo: 2}, 1_700_000_000_000_000, []byte("iggy"), []byte{1, 2, 3, 4, 5, 6}); err != nil {
		t.Fatal(err)
	}
	got, err := bb.Finish()
	if err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "batches/batch_small.hex", got)
}

func TestBatchHeaderView(t *testing.T) {
	batch := smallBatch(t)
	StampBatch(batch, 3, 1000, 1_700_000_000_500_000)
	checkGolden(t, "batches/batch_small_stamped_header.hex", batch[:BatchHeaderSize])
	h, err := ViewBatchHeader(batch)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		got, want uint64
	}{
		{"PartitionID", h.PartitionID(), 3},
		{"BaseOffset", h.BaseOffset(), 1000},
		{"BaseTimestamp", h.BaseTimestamp(), 1_700_000_000_500_000},
		{"OriginTimestamp", h.OriginTimestamp(), 1_700_000_000_000_000},
		{"BatchLength", h.BatchLength(), 367},
		{"BatchChecksum", h.BatchChecksum(), 0x9cd0e87ca4ebd4ba},
		{"MessageCount", uint64(h.MessageCount()), 2},
		{"LastOffset", h.LastOffset(), 1001},
	} {
		if c.got != c.want {
			t.Errorf("%s = %d, want %d", c.name, c.got, c.want)
		}
	}
	if !bytes.Equal(h.Bytes(), batch[:BatchHeaderSize]) {
		t.Error("Bytes is not the header")
	}
	if _, err := ViewBatchHeader(batch[:BatchHeaderSize-1]); !errors.Is(err, ErrInvalidCommand) {
		t.Errorf("ViewBatchHeader(255 bytes) err = %v", err)
	}
	if err := CheckStoredBatch(batch); err != nil {
		t.Errorf("stamped batch: %v", err)
	}
}

func TestFramesGolden(t *testing.T) {
	batch := smallBatch(t)
	type want struct {
		id          Uint128
		delta, ts   uint32
		payload, uh string
	}
	wants := []want{
		{Uint128{Lo: 0x1122334455667788, Hi: 0x99aabbccddeeff00}, 0, 100, "hello", ""},
		{Uint128{Lo: 2}, 1, 0, "iggy", "\x01\x02\x03\x04\x05\x06"},
	}
	i := 0
	it := Frames(batch)
	for it.Next() {
		f := it.Frame()
		if i >= len(wants) {
			t.Fatalf("more than %d frames", len(wants))
		}
		w := wants[i]
		if f.ID() != w.id || f.OffsetDelta() != w.delta || f.TimestampDelta() != w.ts ||
			string(f.Payload()) != w.payload || string(f.UserHeaders()) != w.uh {
			t.Errorf("frame %d = id %v delta %d ts %d payload %q headers %q, want %+v",
				i, f.ID(), f.OffsetDelta(), f.TimestampDelta(), f.Payload(), f.UserHeaders(), w)
		}
		if f.Checksum() != specFrameChecksum(f.Bytes()) {
			t.Errorf("frame %d checksum %#x does not verify", i, f.Checksum())
		}
		i++
	}
	if i != len(wants) || it.Err() != nil {
		t.Fatalf("iterated %d frames, err %v", i, it.Err())
	}
	// A caller appending to a payload must not clobber the user headers behind it.
	it = Frames(batch)
	it.Next()
	it.Next()
	p := it.Frame().Payload()
	_ = append(p, 'X')
	if string(it.Frame().UserHeaders()) != "\x01\x02\x03\x04\x05\x06" {
		t.Fatal("append to Payload overwrote the user headers")
	}
}

func TestFrameIteratorMalformed(t *testing.T) {
	batch := smallBatch(t)
	for n := 0; n < len(batch); n++ {
		it := Frames(batch[:n])
		frames := 0
		for it.Next() {
			frames++
		}
		// A cut inside frame 0 stops at once, inside frame 1 after frame 0; only a cut
		// at a frame boundary stops cleanly.
		clean := n == BatchHeaderSize || n == BatchHeaderSize+53
		if (it.Err() == nil) != clean {
			t.Errorf("cut at %d: %d frames, err %v", n, frames, it.Err())
		}
	}
}

func TestValidateBatchErrors(t *testing.T) {
	tests := []struct {
		name   string
		mutate func([]byte) []byte
		want   ErrorCode
	}{
		{"shorter than a header", func(b []byte) []byte { return b[:BatchHeaderSize-1] }, ErrInvalidCommand},
		{"header only", func(b []byte) []byte { return b[:BatchHeaderSize] }, ErrInvalidCommand},
		{"batch_length too big", func(b []byte) []byte {
			binary.LittleEndian.PutUint64(b[32:], uint64(len(b)+1))
			return b
		}, ErrInvalidCommand},
		{"trailing byte", func(b []byte) []byte { return append(b, 0) }, ErrInvalidCommand},
		{"truncated frame", func(b []byte) []byte {
			b = b[:len(b)-1]
			binary.LittleEndian.PutUint64(b[32:], uint64(len(b)))
			return b
		}, ErrInvalidCommand},
		{"frame header cut", func(b []byte) []byte {
			b = b[:BatchHeaderSize+53+20]
			binary.LittleEndian.PutUint64(b[32:], uint64(len(b)))
			return b
		}, ErrInvalidCommand},
		{"payload_length overruns", func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[256+36:], math.MaxUint32)
			return b
		}, ErrInvalidCommand},
		{"header reserved byte", func(b []byte) []byte { b[255] = 1; return b }, ErrInvalidReservedField},
		{"header reserved first byte", func(b []byte) []byte { b[52] = 0x80; return b }, ErrInvalidReservedField},
		{"frame reserved byte", func(b []byte) []byte { b[256+47] = 1; resum(b); return b }, ErrInvalidReservedField},
		{"message_count 0", func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[48:], 0)
			resum(b)
			return b
		}, ErrInvalidMessagesCount},
		{"message_count 1 of 2", func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[48:], 1)
			resum(b)
			return b
		}, ErrInvalidMessagesCount},
		{"message_count 3 of 2", func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[48:], 3)
			resum(b)
			return b
		}, ErrInvalidMessagesCount},
		{"offset deltas 0,0", func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[256+53+24:], 0)
			resum(b)
			return b
		}, ErrInvalidCommand},
		{"offset deltas 1,2", func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[256+24:], 1)
			binary.LittleEndian.PutUint32(b[256+53+24:], 2)
			resum(b)
			return b
		}, ErrInvalidCommand},
		{"user headers too big", func(b []byte) []byte {
			b = append(b, make([]byte, UserHeadersSizeMax+1-6)...)
			binary.LittleEndian.PutUint32(b[256+53+32:], UserHeadersSizeMax+1)
			binary.LittleEndian.PutUint64(b[32:], uint64(len(b)))
			resum(b)
			return b
		}, ErrTooBigUserHeaders},
		{"frame checksum", func(b []byte) []byte { b[256] ^= 1; return b }, ErrInvalidMessageChecksum},
		{"payload byte", func(b []byte) []byte { b[len(b)-7] ^= 1; return b }, ErrInvalidMessageChecksum},
		{"batch checksum", func(b []byte) []byte { b[47] ^= 0x80; return b }, ErrInvalidBatchChecksum},
		{"origin timestamp", func(b []byte) []byte { b[24] ^= 1; return b }, ErrInvalidBatchChecksum},
		{"partition_id", func(b []byte) []byte { b[0] = 7; return b }, ErrInvalidBatchChecksum},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := tt.mutate(smallBatch(t))
			if err := ValidateBatch(b); err != tt.want {
				t.Errorf("ValidateBatch = %v, want %v", err, tt.want)
			}
			if err := CheckStoredBatch(b); tt.want != ErrTooBigUserHeaders && err != tt.want {
				t.Errorf("CheckStoredBatch = %v, want %v", err, tt.want)
			}
		})
	}
}

// A producer that stamped the server-owned fields itself and checksummed them is
// accepted: the server overwrites them anyway.
func TestValidateBatchAcceptsPrestampedFields(t *testing.T) {
	b := smallBatch(t)
	binary.LittleEndian.PutUint64(b[0:], 9)
	binary.LittleEndian.PutUint64(b[8:], 10)
	binary.LittleEndian.PutUint64(b[16:], 11)
	resum(b)
	if err := ValidateBatch(b); err != nil {
		t.Fatal(err)
	}
}

func TestTooBigPayload(t *testing.T) {
	// One frame whose payload is one byte over the admission limit: admission refuses
	// it, recovery of an already stored batch does not.
	payload := make([]byte, MessagePayloadSizeMax+1)
	var bb BatchBuilder
	bb.Reset(nil)
	if err := bb.Append(Uint128{Lo: 1}, 0, payload, nil); err != ErrTooBigMessagePayload {
		t.Fatalf("builder Append = %v, want %v", err, ErrTooBigMessagePayload)
	}
	if err := bb.Append(Uint128{Lo: 1}, 0, nil, make([]byte, UserHeadersSizeMax+1)); err != ErrTooBigUserHeaders {
		t.Fatalf("builder Append = %v, want %v", err, ErrTooBigUserHeaders)
	}
	b := make([]byte, BatchHeaderSize+FrameHeaderSize, BatchHeaderSize+FrameHeaderSize+len(payload))
	b = append(b, payload...)
	binary.LittleEndian.PutUint64(b[32:], uint64(len(b)))
	binary.LittleEndian.PutUint32(b[48:], 1)
	binary.LittleEndian.PutUint32(b[256+36:], uint32(len(payload)))
	resum(b)
	if err := ValidateBatch(b); err != ErrTooBigMessagePayload {
		t.Errorf("ValidateBatch = %v, want %v", err, ErrTooBigMessagePayload)
	}
	if err := CheckStoredBatch(b); err != nil {
		t.Errorf("CheckStoredBatch = %v, want nil", err)
	}
}

// Flipping any single bit of any byte of a valid batch must fail validation: no byte
// is outside the checksums and the layout checks.
func TestValidateBatchCatchesEveryByteFlip(t *testing.T) {
	clean := smallBatch(t)
	stamped := smallBatch(t)
	StampBatch(stamped, 3, 1000, 1_700_000_000_500_000)
	for _, c := range []struct {
		name  string
		batch []byte
		check func([]byte) error
	}{
		{"ValidateBatch", clean, ValidateBatch},
		{"CheckStoredBatch", stamped, CheckStoredBatch},
		{"CheckBatchRecord", stamped, CheckBatchRecord},
	} {
		if err := c.check(c.batch); err != nil {
			t.Fatalf("%s of the clean batch: %v", c.name, err)
		}
		b := bytes.Clone(c.batch)
		for i := range b {
			for _, mask := range []byte{0x01, 0x80, 0xff} {
				b[i] ^= mask
				if c.check(b) == nil {
					t.Errorf("%s: flipping byte %d with %#02x goes unnoticed", c.name, i, mask)
				}
				b[i] ^= mask
			}
		}
	}
}

func TestValidateBatchTruncations(t *testing.T) {
	b := smallBatch(t)
	for n := 0; n < len(b); n++ {
		cut := bytes.Clone(b[:n])
		if n >= 40 {
			binary.LittleEndian.PutUint64(cut[32:], uint64(n)) // lengths agree, frames do not
		}
		if err := ValidateBatch(cut); err == nil {
			t.Errorf("a batch cut to %d bytes validates", n)
		}
	}
}

func TestStampBatchPanicsOnBrokenBatch(t *testing.T) {
	b := smallBatch(t)
	binary.LittleEndian.PutUint32(b[256+36:], 1000) // frame 0 now overruns the batch
	defer func() {
		if recover() == nil {
			t.Fatal("StampBatch on a batch that does not tile did not panic")
		}
	}()
	StampBatch(b, 1, 2, 3)
}

func TestComputeBatchChecksum(t *testing.T) {
	b := smallBatch(t)
	sum, ok := ComputeBatchChecksum(b[:BatchHeaderSize], b[BatchHeaderSize:])
	if !ok || sum != binary.LittleEndian.Uint64(b[40:]) {
		t.Fatalf("ComputeBatchChecksum = %#x, %v", sum, ok)
	}
	if _, ok := ComputeBatchChecksum(b[:100], nil); ok {
		t.Error("short header accepted")
	}
	if _, ok := ComputeBatchChecksum(b[:BatchHeaderSize], b[BatchHeaderSize:len(b)-1]); ok {
		t.Error("frames that do not tile accepted")
	}
}

func TestSliceBatchGolden(t *testing.T) {
	b := smallBatch(t)
	StampBatch(b, 3, 1000, 1_700_000_000_500_000)
	var hdr [BatchHeaderSize]byte
	frames, count, err := SliceBatch(&hdr, b, 1001, 10)
	if err != nil || count != 1 {
		t.Fatalf("SliceBatch = %d, %v", count, err)
	}
	checkGolden(t, "batches/batch_small_slice1_header.hex", hdr[:])
	if !bytes.Equal(frames, b[256+53:]) {
		t.Fatal("sliced frames are not frame 1")
	}
	if &frames[0] != &b[256+53] {
		t.Fatal("sliced frames are a copy, not a view of src")
	}
}

func TestSliceBatchEdges(t *testing.T) {
	b := smallBatch(t)
	StampBatch(b, 3, 1000, 5)
	var hdr [BatchHeaderSize]byte
	sentinel := hdr
	sentinel[0] = 0xAA
	for _, c := range []struct {
		name  string
		src   []byte
		from  uint64
		max   uint32
		count uint32
		err   error
	}{
		{"before the batch", b, 0, 1000, 0, nil},
		{"after the batch", b, 1002, 10, 0, nil},
		{"max 0", b, 1000, 0, 0, nil},
		{"from max uint64", b, math.MaxUint64, math.MaxUint32, 0, nil},
		{"range ends inside", b, 999, 2, 1, nil},
		{"whole", b, 1000, 2, 2, nil},
		{"whole from below", b, 900, math.MaxUint32, 2, nil},
		{"short src", b[:200], 1000, 2, 0, ErrInvalidCommand},
		{"src shorter than batch_length", b[:300], 1000, 2, 0, ErrInvalidCommand},
	} {
		t.Run(c.name, func(t *testing.T) {
			hdr = sentinel
			frames, count, err := SliceBatch(&hdr, c.src, c.from, c.max)
			if count != c.count || err != c.err {
				t.Fatalf("SliceBatch = %d, %v; want %d, %v", count, err, c.count, c.err)
			}
			if count == 0 && (frames != nil || hdr != sentinel) {
				t.Fatal("an empty slice wrote the header or returned frames")
			}
		})
	}
	// Bytes after the batch are ignored.
	long := append(bytes.Clone(b), 1, 2, 3)
	frames, count, err := SliceBatch(&hdr, long, 1000, 5)
	if err != nil || count != 2 || len(frames) != len(b)-BatchHeaderSize || !bytes.Equal(hdr[:], b[:BatchHeaderSize]) {
		t.Fatalf("SliceBatch with trailing bytes = %d, %v", count, err)
	}
	// A frame that overruns the batch is an error, not a panic.
	broken := bytes.Clone(b)
	binary.LittleEndian.PutUint32(broken[256+36:], 1000)
	if _, _, err := SliceBatch(&hdr, broken, 1001, 5); err != ErrInvalidCommand {
		t.Fatalf("SliceBatch of a broken batch = %v", err)
	}
}

type testMessage struct {
	id          Uint128
	timestamp   uint64
	payload, uh []byte
}

func randomMessages(rng *rand.Rand, n int) []testMessage {
	base := rng.Uint64N(1 << 60)
	msgs := make([]testMessage, n)
	for i := range msgs {
		payload := make([]byte, rng.IntN(70))
		for j := range payload {
			payload[j] = byte(rng.Uint32())
		}
		var uh []byte
		if rng.IntN(3) == 0 {
			uh = make([]byte, 1+rng.IntN(20))
			for j := range uh {
				uh[j] = byte(rng.Uint32())
			}
		}
		msgs[i] = testMessage{
			id:        Uint128{Lo: rng.Uint64(), Hi: rng.Uint64()},
			timestamp: base + rng.Uint64N(math.MaxUint32+1),
			payload:   payload,
			uh:        uh,
		}
	}
	return msgs
}

func buildBatch(tb testing.TB, bb *BatchBuilder, dst []byte, msgs []testMessage) []byte {
	tb.Helper()
	bb.Reset(dst)
	for _, m := range msgs {
		if err := bb.Append(m.id, m.timestamp, m.payload, m.uh); err != nil {
			tb.Fatal(err)
		}
	}
	out, err := bb.Finish()
	if err != nil {
		tb.Fatal(err)
	}
	return out[len(dst):]
}

// checkFrames verifies that the frames of batch are msgs[lo:hi] at offsets lo..hi-1
// relative to base (with origin the batch's origin timestamp).
func checkFrames(t *testing.T, batch []byte, msgs []testMessage, lo, hi int, base uint64) {
	t.Helper()
	h, err := ViewBatchHeader(batch)
	if err != nil {
		t.Fatal(err)
	}
	i := lo
	for it := Frames(batch); it.Next(); i++ {
		f := it.Frame()
		if i >= hi {
			t.Fatalf("more frames than %d", hi-lo)
		}
		m := msgs[i]
		if f.ID() != m.id || !bytes.Equal(f.Payload(), m.payload) || !bytes.Equal(f.UserHeaders(), m.uh) {
			t.Fatalf("frame %d differs from message %d", i-lo, i)
		}
		if h.BaseOffset()+uint64(f.OffsetDelta()) != base+uint64(i) {
			t.Fatalf("frame %d resolves to offset %d, want %d", i-lo, h.BaseOffset()+uint64(f.OffsetDelta()), base+uint64(i))
		}
		if h.OriginTimestamp()+uint64(f.TimestampDelta()) != m.timestamp {
			t.Fatalf("frame %d resolves to time %d, want %d", i-lo, h.OriginTimestamp()+uint64(f.TimestampDelta()), m.timestamp)
		}
	}
	if i != hi {
		t.Fatalf("%d frames, want %d", i-lo, hi-lo)
	}
}

// Build random batches, validate, stamp, iterate and slice them at every offset and
// count: every slice must be a valid record holding exactly the frames in range.
func TestBatchRoundTripProperty(t *testing.T) {
	seed := uint64(0x1995_0ba7c4)
	rng := rand.New(rand.NewPCG(seed, 7))
	var bb BatchBuilder
	var hdr [BatchHeaderSize]byte
	prefix := []byte("routing metadata in front")
	for iter := 0; iter < 150; iter++ {
		n := 1 + rng.IntN(9)
		msgs := randomMessages(rng, n)
		batch := buildBatch(t, &bb, prefix, msgs)
		if err := ValidateBatch(batch); err != nil {
			t.Fatalf("seed=%d iter=%d: built batch does not validate: %v", seed, iter, err)
		}
		if got, want := binary.LittleEndian.Uint64(batch[40:]), specBatchChecksum(batch); got != want {
			t.Fatalf("seed=%d iter=%d: batch checksum %#x, spec %#x", seed, iter, got, want)
		}
		minTime := uint64(math.MaxUint64)
		for _, m := range msgs {
			minTime = min(minTime, m.timestamp)
		}
		if h, _ := ViewBatchHeader(batch); h.OriginTimestamp() != minTime || h.MessageCount() != uint32(n) {
			t.Fatalf("seed=%d iter=%d: origin %d count %d", seed, iter, h.OriginTimestamp(), h.MessageCount())
		}
		checkFrames(t, batch, msgs, 0, n, 0)

		base := rng.Uint64N(1 << 40)
		StampBatch(batch, uint64(rng.Uint32()), base, rng.Uint64())
		if err := CheckStoredBatch(batch); err != nil {
			t.Fatalf("seed=%d iter=%d: stamped batch: %v", seed, iter, err)
		}
		if got, want := binary.LittleEndian.Uint64(batch[40:]), specBatchChecksum(batch); got != want {
			t.Fatalf("seed=%d iter=%d: stamped checksum %#x, spec %#x", seed, iter, got, want)
		}
		checkFrames(t, batch, msgs, 0, n, base)

		record := make([]byte, 0, len(batch))
		for from := base - min(base, 2); from <= base+uint64(n)+1; from++ {
			for maxMessages := uint32(0); maxMessages <= uint32(n)+1; maxMessages++ {
				frames, count, err := SliceBatch(&hdr, batch, from, maxMessages)
				if err != nil {
					t.Fatalf("seed=%d iter=%d: SliceBatch(%d, %d): %v", seed, iter, from, maxMessages, err)
				}
				lo := max(from, base)
				hi := min(from+uint64(maxMessages), base+uint64(n))
				want := uint32(0)
				if hi > lo {
					want = uint32(hi - lo)
				}
				if count != want {
					t.Fatalf("seed=%d iter=%d: SliceBatch(%d, %d) count %d, want %d", seed, iter, from, maxMessages, count, want)
				}
				if count == 0 {
					continue
				}
				record = append(append(record[:0], hdr[:]...), frames...)
				if err := CheckBatchRecord(record); err != nil {
					t.Fatalf("seed=%d iter=%d: SliceBatch(%d, %d) record: %v", seed, iter, from, maxMessages, err)
				}
				if lo == base && err == nil && CheckStoredBatch(record) != nil {
					t.Fatalf("seed=%d iter=%d: a slice from the first frame is not a valid stored batch", seed, iter)
				}
				checkFrames(t, record, msgs, int(lo-base), int(hi-base), base)
			}
		}
	}
}

func TestBatchBuilder(t *testing.T) {
	var bb BatchBuilder
	if _, err := bb.Finish(); err != ErrInvalidMessagesCount {
		t.Errorf("Finish of the zero builder = %v", err)
	}
	bb.Reset(nil)
	if _, err := bb.Finish(); err != ErrInvalidMessagesCount {
		t.Errorf("Finish of an empty batch = %v", err)
	}

	bb.Reset(nil)
	_ = bb.Append(Uint128{Lo: 1}, 1000, []byte("a"), nil)
	_ = bb.Append(Uint128{Lo: 2}, 1000+math.MaxUint32, []byte("b"), nil)
	if b, err := bb.Finish(); err != nil || ValidateBatch(b) != nil {
		t.Fatalf("a batch spanning exactly 2^32-1 µs: %v", err)
	}
	bb.Reset(nil)
	_ = bb.Append(Uint128{Lo: 1}, 1000+math.MaxUint32+1, []byte("a"), nil)
	_ = bb.Append(Uint128{Lo: 2}, 1000, []byte("b"), nil)
	if _, err := bb.Finish(); err != ErrInvalidMessageTimestampDelta {
		t.Fatalf("a batch spanning 2^32 µs: %v, want %v", err, ErrInvalidMessageTimestampDelta)
	}

	// A failed Finish sticks until Reset.
	if err := bb.Append(Uint128{Lo: 3}, 1000, []byte("c"), nil); err != ErrInvalidMessageTimestampDelta {
		t.Fatalf("Append after a failed Finish = %v", err)
	}
	if _, err := bb.Finish(); err != ErrInvalidMessageTimestampDelta {
		t.Fatalf("second Finish after a failed one = %v", err)
	}

	// After Finish, Append starts a second batch behind the first; Finish is idempotent.
	bb.Reset([]byte("p"))
	_ = bb.Append(Uint128{Lo: 1}, 10, []byte("one"), nil)
	first, err := bb.Finish()
	if err != nil {
		t.Fatal(err)
	}
	again, err := bb.Finish()
	if err != nil || !bytes.Equal(again, first) {
		t.Fatalf("Finish twice: %v", err)
	}
	firstLen := len(first)
	_ = bb.Append(Uint128{Lo: 2}, 20, []byte("two"), nil)
	_ = bb.Append(Uint128{Lo: 3}, 30, []byte("three"), nil)
	both, err := bb.Finish()
	if err != nil || bb.Count() != 2 {
		t.Fatalf("second batch: %v, count %d", err, bb.Count())
	}
	if both[0] != 'p' || ValidateBatch(both[1:firstLen]) != nil || ValidateBatch(both[firstLen:]) != nil {
		t.Fatal("two consecutive batches in one buffer do not both validate")
	}

	// The zero builder needs no Reset, and an empty payload is a legal frame.
	var zero BatchBuilder
	if err := zero.Append(Uint128{}, 5, nil, nil); err != nil {
		t.Fatal(err)
	}
	b, err := zero.Finish()
	if err != nil || ValidateBatch(b) != nil || len(b) != BatchHeaderSize+FrameHeaderSize || zero.Count() != 1 {
		t.Fatalf("zero builder: %d bytes, %v", len(b), err)
	}
}

func TestBatchHotPathsDoNotAllocate(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	msgs := randomMessages(rng, 100)
	var bb BatchBuilder
	buf := make([]byte, 0, 64<<10)
	batch := buildBatch(t, &bb, buf, msgs)
	var hdr [BatchHeaderSize]byte
	for _, c := range []struct {
		name string
		fn   func()
	}{
		{"ValidateBatch", func() { _ = ValidateBatch(batch) }},
		{"StampBatch", func() { StampBatch(batch, 1, 2, 3) }},
		{"CheckStoredBatch", func() { _ = CheckStoredBatch(batch) }},
		{"SliceBatch", func() { _, _, _ = SliceBatch(&hdr, batch, 10, 20) }},
		{"Frames", func() {
			for it := Frames(batch); it.Next(); {
				_ = it.Frame().Payload()
			}
		}},
		{"BatchBuilder", func() {
			bb.Reset(buf[:0])
			for _, m := range msgs {
				_ = bb.Append(m.id, m.timestamp, m.payload, m.uh)
			}
			_, _ = bb.Finish()
		}},
	} {
		if n := testing.AllocsPerRun(20, c.fn); n != 0 {
			t.Errorf("%s allocates %v times", c.name, n)
		}
	}
}

// The batch checksum is hashed in one call up to 58 frames and streamed beyond: both
// sides of that boundary must agree with the spec's one-shot definition.
func TestBatchChecksumAcrossBufferBoundary(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var bb BatchBuilder
	for _, n := range []int{1, 57, 58, 59, 60, 63, 64, 65, 117, 118, 119, 300} {
		msgs := randomMessages(rng, n)
		batch := buildBatch(t, &bb, nil, msgs)
		if got, want := binary.LittleEndian.Uint64(batch[40:]), specBatchChecksum(batch); got != want {
			t.Fatalf("%d frames: builder checksum %#x, spec %#x", n, got, want)
		}
		if err := ValidateBatch(batch); err != nil {
			t.Fatalf("%d frames: %v", n, err)
		}
		StampBatch(batch, 1, 1<<33, 7)
		if got, want := binary.LittleEndian.Uint64(batch[40:]), specBatchChecksum(batch); got != want {
			t.Fatalf("%d frames: stamped checksum %#x, spec %#x", n, got, want)
		}
		if err := CheckStoredBatch(batch); err != nil {
			t.Fatalf("%d frames: %v", n, err)
		}
		// A header whose message_count is not the number of frames has no checksum.
		lying := bytes.Clone(batch[:BatchHeaderSize])
		binary.LittleEndian.PutUint32(lying[48:], uint32(n-1))
		if _, ok := ComputeBatchChecksum(lying, batch[BatchHeaderSize:]); ok {
			t.Fatalf("%d frames: ComputeBatchChecksum accepts message_count %d", n, n-1)
		}
		binary.LittleEndian.PutUint32(lying[48:], uint32(n+1))
		if _, ok := ComputeBatchChecksum(lying, batch[BatchHeaderSize:]); ok {
			t.Fatalf("%d frames: ComputeBatchChecksum accepts message_count %d", n, n+1)
		}
		for _, cut := range []uint32{1, uint32(n) / 2, uint32(n) - 1} {
			if cut == 0 || cut >= uint32(n) {
				continue
			}
			var hdr [BatchHeaderSize]byte
			frames, count, err := SliceBatch(&hdr, batch, (1<<33)+uint64(cut), uint32(n))
			if err != nil || count != uint32(n)-cut {
				t.Fatalf("%d frames: SliceBatch from %d = %d, %v", n, cut, count, err)
			}
			record := append(hdr[:], frames...)
			if got, want := binary.LittleEndian.Uint64(record[40:]), specBatchChecksum(record); got != want {
				t.Fatalf("%d frames: slice from %d checksum %#x, spec %#x", n, cut, got, want)
			}
		}
	}
}
