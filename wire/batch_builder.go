package wire

import (
	"encoding/binary"
	"math"

	"github.com/zeebo/xxh3"
)

// BatchBuilder builds a producer batch the way the Iggy SDKs do: offset deltas 0..n-1,
// origin_timestamp the earliest message time with each frame's timestamp_delta against
// it, reserved bytes zero, every frame checksum and the batch checksum; partition_id,
// base_offset and base_timestamp stay zero for the server to stamp.
//
// It appends into a caller-owned buffer, so a builder reused with the same buffer
// builds batch after batch without allocating:
//
//	var bb wire.BatchBuilder
//	bb.Reset(buf[:0])
//	for _, m := range messages {
//		if err := bb.Append(m.ID, m.TimestampMicros, m.Payload, m.UserHeaders); err != nil { ... }
//	}
//	buf, err := bb.Finish() // buf ends with the batch
//
// The zero BatchBuilder is ready to use and builds into a fresh buffer. An Append after
// a successful Finish starts the next batch behind the finished one, in the same
// buffer. Ids are taken as given: a zero id is sent as zero (the Go SDK replaces it
// with a random UUID before encoding; the builder has no randomness of its own).
type BatchBuilder struct {
	buf   []byte
	start int // index of the batch header in buf
	count uint32
	// originMicros is the minimum producer timestamp so far. Until Finish each frame's
	// own timestamp waits in its reserved field, because the deltas are only known once
	// the minimum is.
	originMicros uint64
	finished     bool
	// err is a failed Finish's error, returned by every call until Reset: that Finish
	// left the frames half rewritten.
	err error
}

var zeroBatchHeader [BatchHeaderSize]byte

// Reset starts a new batch appended after dst's existing bytes, which are kept (a
// SendMessages body's routing metadata can be encoded in front of the batch first).
func (bb *BatchBuilder) Reset(dst []byte) {
	bb.start = len(dst)
	bb.buf = append(dst, zeroBatchHeader[:]...)
	bb.count = 0
	bb.originMicros = math.MaxUint64
	bb.finished = false
	bb.err = nil
}

// Append adds one message: id, producer time in microseconds since the Unix epoch,
// payload and raw user headers block (nil for none). Payload and user headers are
// copied. It fails with ErrTooBigMessagePayload or ErrTooBigUserHeaders beyond the
// admission limits, leaving the batch as it was.
func (bb *BatchBuilder) Append(id Uint128, originTimestampMicros uint64, payload, userHeaders []byte) error {
	if bb.err != nil {
		return bb.err
	}
	if bb.buf == nil || bb.finished {
		bb.Reset(bb.buf)
	}
	if len(payload) > MessagePayloadSizeMax {
		return ErrTooBigMessagePayload
	}
	if len(userHeaders) > UserHeadersSizeMax {
		return ErrTooBigUserHeaders
	}
	if bb.count == math.MaxUint32 {
		return ErrTooManyMessages
	}
	var frameHeader [FrameHeaderSize]byte
	id.Put(frameHeader[frameIDAt:])
	binary.LittleEndian.PutUint32(frameHeader[frameOffsetDeltaAt:], bb.count)
	binary.LittleEndian.PutUint32(frameHeader[frameUserHeadersLengthAt:], uint32(len(userHeaders)))
	binary.LittleEndian.PutUint32(frameHeader[framePayloadLengthAt:], uint32(len(payload)))
	binary.LittleEndian.PutUint64(frameHeader[frameReservedAt:], originTimestampMicros)
	bb.buf = append(bb.buf, frameHeader[:]...)
	bb.buf = append(bb.buf, payload...)
	bb.buf = append(bb.buf, userHeaders...)
	bb.count++
	bb.originMicros = min(bb.originMicros, originTimestampMicros)
	return nil
}

// Count is the number of messages appended since Reset.
func (bb *BatchBuilder) Count() uint32 { return bb.count }

// Finish writes the deltas, checksums and header and returns the buffer with the
// finished batch at its end (the batch is the last BatchHeaderSize + frame bytes, from
// the length dst had at Reset). It fails with ErrInvalidMessagesCount for an empty
// batch and ErrInvalidMessageTimestampDelta when a message is more than 2^32-1 µs
// (about 71.6 minutes) after the earliest one; the buffer then holds no usable batch
// and every call fails until Reset. Finish again after a success returns the same
// buffer.
func (bb *BatchBuilder) Finish() ([]byte, error) {
	if bb.err != nil {
		return bb.buf, bb.err
	}
	if bb.finished {
		return bb.buf, nil
	}
	if bb.count == 0 {
		return bb.buf, ErrInvalidMessagesCount
	}
	batch := bb.buf[bb.start:]
	header := (*[BatchHeaderSize]byte)(batch)
	var hasher batchHasher
	if bb.count > batchHasherBufferedFramesMax {
		var stream xxh3.Hasher
		hasher.stream = &stream
	}
	frames := batch[BatchHeaderSize:]
	// The header fields go first into the batch checksum but the frame checksums must
	// be written before it is final, so fill the header now (checksum aside).
	binary.LittleEndian.PutUint64(header[batchOriginTimestampAt:], bb.originMicros)
	binary.LittleEndian.PutUint64(header[batchLengthAt:], uint64(len(batch)))
	binary.LittleEndian.PutUint32(header[batchMessageCountAt:], bb.count)
	hasher.begin(header)
	for len(frames) > 0 {
		frameHeader := (*[FrameHeaderSize]byte)(frames)
		size := frameSizeOf(frameHeader)
		delta := binary.LittleEndian.Uint64(frameHeader[frameReservedAt:]) - bb.originMicros
		if delta > math.MaxUint32 {
			bb.err = ErrInvalidMessageTimestampDelta
			return bb.buf, bb.err
		}
		binary.LittleEndian.PutUint32(frameHeader[frameTimestampDeltaAt:], uint32(delta))
		binary.LittleEndian.PutUint64(frameHeader[frameReservedAt:], 0)
		binary.LittleEndian.PutUint64(frameHeader[frameChecksumAt:], xxh3.Hash(frames[frameIDAt:size]))
		hasher.add(frameHeader)
		frames = frames[size:]
	}
	binary.LittleEndian.PutUint64(header[batchChecksumAt:], hasher.sum())
	bb.finished = true
	return bb.buf, nil
}
