package wire

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// fuzzSeedBatches are the golden batches plus a few built ones, as fuzz seeds.
func fuzzSeedBatches(f *testing.F) [][]byte {
	f.Helper()
	small := smallBatch(f)
	stamped := bytes.Clone(small)
	StampBatch(stamped, 3, 1000, 1_700_000_000_500_000)
	var bb BatchBuilder
	bb.Reset(nil)
	for i := range 5 {
		_ = bb.Append(Uint128{Lo: uint64(i)}, uint64(1000-i), bytes.Repeat([]byte{byte(i)}, i*3), bytes.Repeat([]byte{0xEE}, i))
	}
	built, _ := bb.Finish()
	return [][]byte{small, stamped, built, small[:BatchHeaderSize], nil}
}

// resumLenient rewrites the frame checksums of every whole frame it can walk and then
// the batch checksum, so that fuzzed layouts get past the checksums to the layout
// rules behind them.
func resumLenient(b []byte) {
	if len(b) < BatchHeaderSize {
		return
	}
	frames := b[BatchHeaderSize:]
	for len(frames) >= FrameHeaderSize {
		size := frameSizeOf((*[FrameHeaderSize]byte)(frames))
		if size > uint64(len(frames)) {
			break
		}
		binary.LittleEndian.PutUint64(frames, specFrameChecksum(frames[:size]))
		frames = frames[size:]
	}
	if sum, ok := ComputeBatchChecksum(b, b[BatchHeaderSize:]); ok {
		binary.LittleEndian.PutUint64(b[batchChecksumAt:], sum)
	}
}

// FuzzValidateBatch: arbitrary bytes never panic, and whatever validates is a batch
// whose frames iterate cleanly, count and tile exactly, and survive stamping. Each
// input is checked as it is and with its checksums made right, so the layout rules
// are reached too.
func FuzzValidateBatch(f *testing.F) {
	for _, b := range fuzzSeedBatches(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkValidatedBatchProperties(t, b)
		resummed := bytes.Clone(b)
		resumLenient(resummed)
		checkValidatedBatchProperties(t, resummed)
	})
}

func checkValidatedBatchProperties(t *testing.T, b []byte) {
	admitted := ValidateBatch(b) == nil
	stored := CheckStoredBatch(b) == nil
	record := CheckBatchRecord(b) == nil
	if admitted && !stored || stored && !record {
		t.Fatalf("admission %v, stored %v, record %v: each must imply the next", admitted, stored, record)
	}
	if !record {
		return
	}
	h, err := ViewBatchHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	var frames uint32
	var size uint64 = BatchHeaderSize
	it := Frames(b)
	var first uint32
	for ; it.Next(); frames++ {
		f := it.Frame()
		if frames == 0 {
			first = f.OffsetDelta()
		}
		if f.OffsetDelta() != first+frames || f.Checksum() != specFrameChecksum(f.Bytes()) {
			t.Fatalf("frame %d: delta %d (first %d), checksum %#x", frames, f.OffsetDelta(), first, f.Checksum())
		}
		size += uint64(len(f.Bytes()))
	}
	if it.Err() != nil || frames != h.MessageCount() || size != uint64(len(b)) {
		t.Fatalf("validated batch iterates %d frames over %d bytes (err %v), header says %d over %d",
			frames, size, it.Err(), h.MessageCount(), len(b))
	}
	if h.BatchChecksum() != specBatchChecksum(b) {
		t.Fatal("validated batch checksum differs from the spec's")
	}
	if stored != (first == 0) {
		t.Fatalf("stored %v with first delta %d", stored, first)
	}
	if !stored {
		return
	}
	c := bytes.Clone(b)
	StampBatch(c, 1, 2, 3)
	if err := CheckStoredBatch(c); err != nil {
		t.Fatalf("stamped batch fails CheckStoredBatch: %v", err)
	}
}

// FuzzSliceBatch: arbitrary source bytes and ranges never panic; a slice of a stored
// batch is a valid record whose frames are exactly those in range.
func FuzzSliceBatch(f *testing.F) {
	for _, b := range fuzzSeedBatches(f) {
		f.Add(b, uint64(1000), uint32(1))
		f.Add(b, uint64(0), uint32(3))
	}
	f.Fuzz(func(t *testing.T, src []byte, fromOffset uint64, maxMessages uint32) {
		var hdr [BatchHeaderSize]byte
		frames, count, err := SliceBatch(&hdr, src, fromOffset, maxMessages)
		if err != nil || count == 0 {
			if frames != nil || count != 0 {
				t.Fatalf("count %d, %d frame bytes with err %v", count, len(frames), err)
			}
			return
		}
		if count > maxMessages {
			t.Fatalf("count %d > maxMessages %d", count, maxMessages)
		}
		if !bytes.Contains(src, frames) {
			t.Fatal("frames are not a part of src")
		}
		// Beyond staying in bounds, SliceBatch promises nothing about bytes that are
		// not a stored batch.
		if CheckStoredBatch(src[:binary.LittleEndian.Uint64(src[batchLengthAt:])]) != nil {
			return
		}
		record := append(hdr[:len(hdr):len(hdr)], frames...)
		base := binary.LittleEndian.Uint64(hdr[batchBaseOffsetAt:])
		var n uint32
		for it := Frames(record); it.Next(); n++ {
			offset := base + uint64(it.Frame().OffsetDelta())
			if offset < fromOffset || offset-fromOffset >= uint64(maxMessages) {
				t.Fatalf("frame at offset %d outside [%d, +%d)", offset, fromOffset, maxMessages)
			}
		}
		if n != count {
			t.Fatalf("record iterates %d frames, SliceBatch said %d", n, count)
		}
		if err := CheckBatchRecord(record); err != nil {
			t.Fatalf("slice of a stored batch is not a valid record: %v", err)
		}
	})
}

// FuzzBatchRoundTrip builds a batch from messages carved out of the fuzz input, then
// validates, stamps, iterates and slices it: whatever the builder accepts must come
// back out exactly, and every slice must be a valid record of the frames in range.
func FuzzBatchRoundTrip(f *testing.F) {
	f.Add([]byte("\x05hello\x00\x04iggy\x02\x06abcdef"), uint64(1000), uint64(1001), uint32(5))
	f.Add([]byte{0, 0, 0}, uint64(0), uint64(0), uint32(1))
	f.Fuzz(func(t *testing.T, data []byte, baseOffset, fromOffset uint64, maxMessages uint32) {
		// Each message is [payload length u8][payload][headers length u8 & 7][headers],
		// its time the running sum of the lengths, so deltas vary.
		var msgs []testMessage
		clock := uint64(1 << 40)
		for len(data) > 0 && len(msgs) < 64 {
			n := int(data[0])
			data = data[1:]
			n = min(n, len(data))
			payload := data[:n]
			data = data[n:]
			var uh []byte
			if len(data) > 0 {
				m := min(int(data[0]&7), len(data)-1)
				uh = data[1 : 1+m]
				data = data[1+m:]
			}
			clock += uint64(n) * 1000
			msgs = append(msgs, testMessage{id: Uint128{Lo: uint64(len(msgs))}, timestamp: clock - uint64(len(uh))*7000, payload: payload, uh: uh})
		}
		var bb BatchBuilder
		bb.Reset(nil)
		for _, m := range msgs {
			if err := bb.Append(m.id, m.timestamp, m.payload, m.uh); err != nil {
				t.Fatal(err)
			}
		}
		batch, err := bb.Finish()
		if len(msgs) == 0 {
			if err != ErrInvalidMessagesCount {
				t.Fatalf("empty batch: %v", err)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := ValidateBatch(batch); err != nil {
			t.Fatalf("built batch: %v", err)
		}
		baseOffset = min(baseOffset, 1<<62)
		StampBatch(batch, 9, baseOffset, 1)
		if err := CheckStoredBatch(batch); err != nil {
			t.Fatalf("stamped batch: %v", err)
		}
		h, _ := ViewBatchHeader(batch)
		i := 0
		for it := Frames(batch); it.Next(); i++ {
			fr := it.Frame()
			m := msgs[i]
			if fr.ID() != m.id || !bytes.Equal(fr.Payload(), m.payload) || !bytes.Equal(fr.UserHeaders(), m.uh) ||
				h.OriginTimestamp()+uint64(fr.TimestampDelta()) != m.timestamp {
				t.Fatalf("frame %d differs from its message", i)
			}
		}
		var hdr [BatchHeaderSize]byte
		frames, count, err := SliceBatch(&hdr, batch, fromOffset, maxMessages)
		if err != nil {
			t.Fatal(err)
		}
		lo := max(fromOffset, baseOffset)
		hi := baseOffset + uint64(len(msgs))
		if fromOffset <= hi && uint64(maxMessages) < hi-fromOffset {
			hi = fromOffset + uint64(maxMessages)
		}
		want := uint32(0)
		if hi > lo {
			want = uint32(hi - lo)
		}
		if count != want {
			t.Fatalf("SliceBatch(%d, %d) of [%d, +%d) = %d frames, want %d", fromOffset, maxMessages, baseOffset, len(msgs), count, want)
		}
		if count == 0 {
			return
		}
		record := append(hdr[:len(hdr):len(hdr)], frames...)
		if err := CheckBatchRecord(record); err != nil {
			t.Fatalf("slice record: %v", err)
		}
		it := Frames(record)
		it.Next()
		if first := baseOffset + uint64(it.Frame().OffsetDelta()); first != lo {
			t.Fatalf("slice starts at %d, want %d", first, lo)
		}
	})
}
