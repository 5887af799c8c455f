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
