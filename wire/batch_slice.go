package wire

import "encoding/binary"

// SliceBatch makes a poll record out of the frames of the stored batch at the start of
// src whose offsets lie in [fromOffset, fromOffset+maxMessages). It returns those
// frames as one contiguous sub-slice of src (no copy) and writes into *hdr the header
// that turns them into a batch of their own: base_offset, base_timestamp and
// origin_timestamp are kept, so the frames' unchanged deltas still resolve to the same
// absolute offsets and times, while message_count, batch_length and batch_checksum are
// those of the slice. The record is then [hdr][frames], sent with a vectored write.
//
// count == 0 (and frames == nil, *hdr untouched) when no frame is in range. Bytes of
// src after its batch_length are ignored, so src may be a read buffer holding more
// than one batch. When the range covers the whole batch, *hdr is a copy of src's
// header and frames is the whole blob.
//
// SliceBatch trusts that src passed CheckStoredBatch: it verifies no checksum, and it
// serves a range covering the whole batch from the header alone, without walking the
// frames. On other bytes its result is meaningless but it never reads out of bounds:
// a header or frame it walks that does not fit src is reported as ErrInvalidCommand.
// It does not allocate.
func SliceBatch(hdr *[BatchHeaderSize]byte, src []byte, fromOffset uint64, maxMessages uint32) (frames []byte, count uint32, err error) {
	if len(src) < BatchHeaderSize {
		return nil, 0, ErrInvalidCommand
	}
	source := (*[BatchHeaderSize]byte)(src)
	batchLength := binary.LittleEndian.Uint64(source[batchLengthAt:])
	if batchLength < BatchHeaderSize || batchLength > uint64(len(src)) {
		return nil, 0, ErrInvalidCommand
	}
	blob := src[BatchHeaderSize:batchLength:batchLength]
	if maxMessages == 0 {
		return nil, 0, nil
	}
	baseOffset := binary.LittleEndian.Uint64(source[batchBaseOffsetAt:])

	// A poll that wants the whole batch, the common case for a consumer keeping up,
	// needs no walk: a stored batch's deltas are 0..message_count-1.
	messageCount := binary.LittleEndian.Uint32(source[batchMessageCountAt:])
	if messageCount > 0 && len(blob) > 0 && fromOffset <= baseOffset &&
		baseOffset-fromOffset+uint64(messageCount) <= uint64(maxMessages) {
		*hdr = *source
		return blob, messageCount, nil
	}

	// Find the run of frames in range: it starts at the first frame whose offset is in
	// range and ends at the first one after it that is not. Deltas of a stored batch
	// run 0..n-1, so that run is every frame in range.
	start, end := -1, 0
	var total uint32
	for at := 0; at < len(blob); {
		if len(blob)-at < FrameHeaderSize {
			return nil, 0, ErrInvalidCommand
		}
		frameHeader := (*[FrameHeaderSize]byte)(blob[at:])
		size := frameSizeOf(frameHeader)
		if size > uint64(len(blob)-at) {
			return nil, 0, ErrInvalidCommand
		}
		offset := baseOffset + uint64(binary.LittleEndian.Uint32(frameHeader[frameOffsetDeltaAt:]))
		// offset-fromOffset < maxMessages, written so that fromOffset+maxMessages
		// cannot overflow.
		inRange := offset >= fromOffset && offset-fromOffset < uint64(maxMessages)
		if inRange {
			if start < 0 {
				start = at
			}
			total++
			end = at + int(size)
			if total == maxMessages {
				break
			}
		} else if start >= 0 {
			break
		}
		at += int(size)
	}
	if start < 0 {
		return nil, 0, nil
	}

	frames = blob[start:end:end]
	*hdr = *source
	if start == 0 && end == len(blob) && total == binary.LittleEndian.Uint32(source[batchMessageCountAt:]) {
		// The whole batch: its header, checksum included, is already right.
		return frames, total, nil
	}
	binary.LittleEndian.PutUint64(hdr[batchLengthAt:], BatchHeaderSize+uint64(len(frames)))
	binary.LittleEndian.PutUint32(hdr[batchMessageCountAt:], total)
	sum, _ := batchChecksum(hdr, frames) // the frames were just walked: they tile
	binary.LittleEndian.PutUint64(hdr[batchChecksumAt:], sum)
	return frames, total, nil
}
