package wire

import "encoding/binary"

// Frame is a view of one message frame inside a batch: its 48-byte header, payload and
// user headers. Accessors read the caller's bytes in place.
type Frame struct {
	b []byte
}

// Checksum is the stored frame checksum: XXH3-64 of Bytes()[8:].
func (f Frame) Checksum() uint64 { return binary.LittleEndian.Uint64(f.b[frameChecksumAt:]) }

// ID is the message id (for example a UUID), as the producer sent it.
func (f Frame) ID() Uint128 { return GetUint128(f.b[frameIDAt:]) }

// OffsetDelta is the message's offset minus the batch's base_offset.
func (f Frame) OffsetDelta() uint32 { return binary.LittleEndian.Uint32(f.b[frameOffsetDeltaAt:]) }

// TimestampDelta is the producer time minus the batch's origin_timestamp, in
// microseconds.
func (f Frame) TimestampDelta() uint32 {
	return binary.LittleEndian.Uint32(f.b[frameTimestampDeltaAt:])
}

// Payload is the message body (aliasing the batch; capacity capped so an append by the
// caller cannot overwrite the user headers that follow).
func (f Frame) Payload() []byte {
	n := binary.LittleEndian.Uint32(f.b[framePayloadLengthAt:])
	end := FrameHeaderSize + int(n)
	return f.b[FrameHeaderSize:end:end]
}

// UserHeaders is the raw user headers block that follows the payload (possibly empty).
func (f Frame) UserHeaders() []byte {
	n := binary.LittleEndian.Uint32(f.b[framePayloadLengthAt:])
	return f.b[FrameHeaderSize+int(n):]
}

// Bytes is the whole frame, header included.
func (f Frame) Bytes() []byte { return f.b }

// FrameIterator walks the frames of a batch without allocating:
//
//	for it := wire.Frames(batch); it.Next(); {
//		f := it.Frame()
//		...
//	}
//
// It is meant for batches that passed validation. On malformed bytes it stops at the
// first frame that does not fit, never reads out of bounds, and Err reports it.
type FrameIterator struct {
	rest   []byte
	frame  Frame
	broken bool // stopped on bytes that are not a whole frame
}

// Frames iterates the frames of batch. batch must start with a batch header; the
// frames end at its batch_length when that lies within batch, else at len(batch).
func Frames(batch []byte) FrameIterator {
	if len(batch) < BatchHeaderSize {
		return FrameIterator{broken: true}
	}
	end := uint64(len(batch))
	if n := binary.LittleEndian.Uint64(batch[batchLengthAt:]); n >= BatchHeaderSize && n < end {
		end = n
	}
	return FrameIterator{rest: batch[BatchHeaderSize:end:end]}
}

// framesOf iterates bare frames (the part of a batch after its header).
func framesOf(frames []byte) FrameIterator {
	return FrameIterator{rest: frames}
}

// Next advances to the next frame and reports whether there is one. It is written to
// fit the compiler's inlining budget, so a loop over frames makes no call per frame.
func (it *FrameIterator) Next() bool {
	rest := it.rest
	if len(rest) >= FrameHeaderSize {
		if size := frameSizeOf((*[FrameHeaderSize]byte)(rest)); size <= uint64(len(rest)) {
			it.frame.b = rest[:size:size]
			it.rest = rest[size:]
			return true
		}
	}
	it.broken = it.broken || len(rest) != 0
	it.rest = nil
	return false
}

// Frame returns the frame Next moved to.
func (it *FrameIterator) Frame() Frame { return it.frame }

// Err reports ErrInvalidCommand when the iteration stopped on bytes that are not a
// whole frame (never for a validated batch), and nil otherwise.
func (it *FrameIterator) Err() error {
	if it.broken {
		return ErrInvalidCommand
	}
	return nil
}
