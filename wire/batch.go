package wire

// Message batches: the one layout messages have anywhere. A SendMessages body carries
// one, the partition log stores them byte for byte, replicas journal them and a poll
// reply serves them (or a slice of one) back.
//
//	batch = [batch header: 256 bytes][frame]*          batch_length = 256 + frame bytes
//
//	batch header                                        frame = [frame header: 48][payload][user_headers]
//	  0  partition_id      u64  server-stamped            0  checksum             u64
//	  8  base_offset       u64  server-stamped            8  id                   u128
//	 16  base_timestamp    u64  server-stamped, µs       24  offset_delta         u32  0..n-1
//	 24  origin_timestamp  u64  producer, µs (minimum)   28  timestamp_delta      u32  µs after origin
//	 32  batch_length      u64                           32  user_headers_length  u32
//	 40  batch_checksum    u64                           36  payload_length       u32
//	 48  message_count     u32                           40  reserved             u64 = 0
//	 52  reserved          204 bytes = 0                 48  payload, then user_headers
//
// Checksums (XXH3-64, seed 0):
//
//	frame checksum = XXH3(frame[8:])   (header bytes 8..48, payload, user headers)
//	batch checksum = XXH3(header[0:40] ++ header[48:52] ++ checksum of frame 0 ++ ... of frame n-1)
//
// header[0:40] ++ header[48:52] is exactly the six fields partition_id, base_offset,
// base_timestamp, origin_timestamp, batch_length, message_count as little-endian bytes.
// The batch checksum binds the bodies only through the frame checksums, so stamping a
// batch rehashes 44 + 8n bytes rather than the whole blob, and every reader that
// trusts a batch must verify the frame checksums too (ValidateBatch and
// CheckStoredBatch do both in one pass).

import (
	"bytes"
	"encoding/binary"

	"github.com/zeebo/xxh3"
)

// These sizes and offsets are part of the wire format and the on-disk format; they
// must never change.
const (
	BatchHeaderSize = 256 // bytes
	FrameHeaderSize = 48  // bytes
)

const (
	batchPartitionIDAt     = 0
	batchBaseOffsetAt      = 8
	batchBaseTimestampAt   = 16
	batchOriginTimestampAt = 24
	batchLengthAt          = 32
	batchChecksumAt        = 40
	batchMessageCountAt    = 48
	batchReservedAt        = 52

	frameChecksumAt          = 0
	frameIDAt                = 8
	frameOffsetDeltaAt       = 24
	frameTimestampDeltaAt    = 28
	frameUserHeadersLengthAt = 32
	framePayloadLengthAt     = 36
	frameReservedAt          = 40
)

// Admission limits on a single message, the same constants the Iggy SDKs enforce
// before sending (MAX_PAYLOAD_SIZE and MAX_USER_HEADERS_SIZE of iggy_common). No
// official SDK produces a frame beyond them, so a server answers such a frame with the
// code the SDKs use locally instead of persisting it. Stored batches are not held to
// them (CheckStoredBatch): a limit may change, data already written stays readable.
const (
	MessagePayloadSizeMax = 64_000_000 // bytes
	UserHeadersSizeMax    = 100_000    // bytes
)

// BatchHeader is a zero-copy read view of the first 256 bytes of a batch. It is only
// as trustworthy as the bytes under it: read fields of an unvalidated batch as hints.
type BatchHeader struct {
	b *[BatchHeaderSize]byte
}

// ViewBatchHeader returns a view of b's first 256 bytes. It checks nothing but the
// length, which is the one thing the accessors need.
func ViewBatchHeader(b []byte) (BatchHeader, error) {
	if len(b) < BatchHeaderSize {
		return BatchHeader{}, ErrInvalidCommand
	}
	return BatchHeader{b: (*[BatchHeaderSize]byte)(b)}, nil
}

// PartitionID is the partition the server stamped at admission (0 from producers).
func (h BatchHeader) PartitionID() uint64 {
	return binary.LittleEndian.Uint64(h.b[batchPartitionIDAt:])
}

// BaseOffset is the offset of the frame whose offset_delta is 0.
func (h BatchHeader) BaseOffset() uint64 {
	return binary.LittleEndian.Uint64(h.b[batchBaseOffsetAt:])
}

// BaseTimestamp is the server's append time in microseconds since the Unix epoch; it
// is every message's timestamp (frame deltas do not apply to it).
func (h BatchHeader) BaseTimestamp() uint64 {
	return binary.LittleEndian.Uint64(h.b[batchBaseTimestampAt:])
}

// OriginTimestamp is the earliest producer timestamp among the batch's messages, in
// microseconds; a message's producer time is OriginTimestamp + its timestamp_delta.
func (h BatchHeader) OriginTimestamp() uint64 {
	return binary.LittleEndian.Uint64(h.b[batchOriginTimestampAt:])
}

// BatchLength is the whole batch's size in bytes: 256 + the frames' bytes.
func (h BatchHeader) BatchLength() uint64 {
	return binary.LittleEndian.Uint64(h.b[batchLengthAt:])
}

// BatchChecksum is the stored batch checksum (see the package comment for its input).
func (h BatchHeader) BatchChecksum() uint64 {
	return binary.LittleEndian.Uint64(h.b[batchChecksumAt:])
}

// MessageCount is the number of frames.
func (h BatchHeader) MessageCount() uint32 {
	return binary.LittleEndian.Uint32(h.b[batchMessageCountAt:])
}

// LastOffset is BaseOffset + MessageCount - 1: the offset of the last frame of an
// admitted or stored batch, whose deltas run 0..n-1. It is meaningless for a batch of
// zero messages, which validation never lets through.
func (h BatchHeader) LastOffset() uint64 {
	return h.BaseOffset() + uint64(h.MessageCount()) - 1
}

// Bytes returns the 256 header bytes (aliasing the batch).
func (h BatchHeader) Bytes() []byte { return h.b[:] }

// batchCheck selects which rules checkBatch applies on top of the layout and checksum
// checks every mode shares.
type batchCheck uint8

const (
	// checkAdmission: a producer's batch; deltas 0..n-1 and the message size limits.
	checkAdmission batchCheck = iota
	// checkStored: a stamped batch read back from disk or a peer; deltas 0..n-1.
	checkStored
	// checkRecord: a poll reply record, possibly a slice of a stored batch; deltas
	// consecutive from the first frame's, whatever it is.
	checkRecord
)

// ValidateBatch is admission validation of a producer's batch b, which must be exactly
// one batch (batch_length == len(b): bytes after a batch are covered by no checksum,
// and the log advances by batch_length). It returns nil or the IggyError code the
// server answers with:
//
//	ErrInvalidCommand          shorter than a header, batch_length != len(b), frames that
//	                           do not tile the blob, offset_delta != frame index
//	ErrInvalidReservedField    non-zero header bytes 52..256 or frame bytes 40..48
//	ErrInvalidMessagesCount    message_count 0 or not the number of frames
//	ErrTooBigMessagePayload    payload_length > MessagePayloadSizeMax
//	ErrTooBigUserHeaders       user_headers_length > UserHeadersSizeMax
//	ErrInvalidMessageChecksum  a frame checksum does not match its bytes
//	ErrInvalidBatchChecksum    the batch checksum does not match
//
// Every byte of a batch is covered: flipping any single byte fails validation. The
// values of partition_id, base_offset and base_timestamp are not checked (producers
// send zeros, the checksum proves whatever they sent, StampBatch overwrites them). The
// user headers block is not parsed: the reference server does not parse it at
// admission either, it is opaque bytes to the log.
//
// ValidateBatch reads every byte once, hashing each frame, and does not allocate.
func ValidateBatch(b []byte) error { return checkBatch(b, checkAdmission) }

// CheckStoredBatch is what recovery runs on a batch read back from disk (or received
// from a replica): the layout rules of ValidateBatch and every checksum, on a stamped
// batch, returning the same codes. The admission size limits do not apply.
func CheckStoredBatch(b []byte) error { return checkBatch(b, checkStored) }

// CheckBatchRecord checks one record of a poll reply the way CheckStoredBatch checks a
// stored batch, except that the offset deltas may start anywhere (a record may be a
// slice of a stored batch, see SliceBatch); they must still be consecutive.
func CheckBatchRecord(b []byte) error { return checkBatch(b, checkRecord) }

func checkBatch(b []byte, mode batchCheck) error {
	if len(b) < BatchHeaderSize {
		return ErrInvalidCommand
	}
	header := (*[BatchHeaderSize]byte)(b)
	if binary.LittleEndian.Uint64(header[batchLengthAt:]) != uint64(len(b)) {
		return ErrInvalidCommand
	}
	if !reservedIsZero(header) {
		return ErrInvalidReservedField
	}
	count := binary.LittleEndian.Uint32(header[batchMessageCountAt:])
	if count == 0 {
		return ErrInvalidMessagesCount
	}

	var hasher batchHasher
	if count > batchHasherBufferedFramesMax {
		var stream xxh3.Hasher
		hasher.stream = &stream
	}
	hasher.begin(header)
	blob := b[BatchHeaderSize:]
	var index uint32
	var firstDelta uint32
	for len(blob) > 0 {
		if len(blob) < FrameHeaderSize {
			return ErrInvalidCommand
		}
		frameHeader := (*[FrameHeaderSize]byte)(blob)
		if binary.LittleEndian.Uint64(frameHeader[frameReservedAt:]) != 0 {
			return ErrInvalidReservedField
		}
		userHeadersLength := binary.LittleEndian.Uint32(frameHeader[frameUserHeadersLengthAt:])
		payloadLength := binary.LittleEndian.Uint32(frameHeader[framePayloadLengthAt:])
		// Summed in uint64 so that two u32 lengths cannot wrap on any platform.
		frameSize := FrameHeaderSize + uint64(userHeadersLength) + uint64(payloadLength)
		if frameSize > uint64(len(blob)) {
			return ErrInvalidCommand
		}
		if index == count {
			return ErrInvalidMessagesCount
		}
		delta := binary.LittleEndian.Uint32(frameHeader[frameOffsetDeltaAt:])
		if index == 0 && mode == checkRecord {
			firstDelta = delta
		}
		// A record's deltas may start high but never wrap: firstDelta+index is what the
		// frame must carry, computed in uint64 so a wrap cannot make it match.
		if uint64(delta) != uint64(firstDelta)+uint64(index) {
			return ErrInvalidCommand
		}
		if mode == checkAdmission {
			if payloadLength > MessagePayloadSizeMax {
				return ErrTooBigMessagePayload
			}
			if userHeadersLength > UserHeadersSizeMax {
				return ErrTooBigUserHeaders
			}
		}
		frame := blob[:frameSize]
		if xxh3.Hash(frame[frameIDAt:]) != binary.LittleEndian.Uint64(frameHeader[frameChecksumAt:]) {
			return ErrInvalidMessageChecksum
		}
		hasher.add(frameHeader)
		blob = blob[frameSize:]
		index++
	}
	if index != count {
		return ErrInvalidMessagesCount
	}
	if hasher.sum() != binary.LittleEndian.Uint64(header[batchChecksumAt:]) {
		return ErrInvalidBatchChecksum
	}
	return nil
}

// StampBatch makes an admitted batch the partition's: it writes partition_id,
// base_offset and base_timestamp into b's header and recomputes batch_checksum, in
// place and without allocation. b must be a batch that passed ValidateBatch; anything
// else is a bug of the caller and panics.
func StampBatch(b []byte, partitionID, baseOffset, baseTimestampMicros uint64) {
	if len(b) < BatchHeaderSize {
		panic("wire: StampBatch on a buffer shorter than a batch header")
	}
	header := (*[BatchHeaderSize]byte)(b)
	binary.LittleEndian.PutUint64(header[batchPartitionIDAt:], partitionID)
	binary.LittleEndian.PutUint64(header[batchBaseOffsetAt:], baseOffset)
	binary.LittleEndian.PutUint64(header[batchBaseTimestampAt:], baseTimestampMicros)
	sum, ok := batchChecksum(header, b[BatchHeaderSize:])
	if !ok {
		panic("wire: StampBatch on a batch whose frames do not tile (not validated?)")
	}
	binary.LittleEndian.PutUint64(header[batchChecksumAt:], sum)
}

// ComputeBatchChecksum returns the batch checksum of header (its first 256 bytes) over
// the frames in frames, reading only each frame's length fields and checksum. It
// reports false when frames do not tile into whole frames or their number is not the
// header's message_count.
func ComputeBatchChecksum(header []byte, frames []byte) (uint64, bool) {
	if len(header) < BatchHeaderSize {
		return 0, false
	}
	return batchChecksum((*[BatchHeaderSize]byte)(header), frames)
}

func batchChecksum(header *[BatchHeaderSize]byte, frames []byte) (uint64, bool) {
	count := binary.LittleEndian.Uint32(header[batchMessageCountAt:])
	var hasher batchHasher
	if count > batchHasherBufferedFramesMax {
		var stream xxh3.Hasher
		hasher.stream = &stream
	}
	hasher.begin(header)
	var index uint32
	for ; len(frames) > 0; index++ {
		if len(frames) < FrameHeaderSize || index == count {
			return 0, false
		}
		frameHeader := (*[FrameHeaderSize]byte)(frames)
		frameSize := frameSizeOf(frameHeader)
		if frameSize > uint64(len(frames)) {
			return 0, false
		}
		hasher.add(frameHeader)
		frames = frames[frameSize:]
	}
	return hasher.sum(), index == count
}

// frameSizeOf is the whole frame's size from its header's length fields, in uint64 so
// that it cannot wrap.
func frameSizeOf(frameHeader *[FrameHeaderSize]byte) uint64 {
	return FrameHeaderSize +
		uint64(binary.LittleEndian.Uint32(frameHeader[frameUserHeadersLengthAt:])) +
		uint64(binary.LittleEndian.Uint32(frameHeader[framePayloadLengthAt:]))
}

// batchHasher computes a batch checksum without concatenating its input in an
// allocated buffer. The six header fields and the frame checksums are gathered in a
// fixed buffer; a batch of up to batchHasherBufferedFramesMax frames is hashed from it
// in one call, a larger one is fed to a streaming XXH3 hasher a buffer at a time.
// Writing 8 bytes per frame straight into the streaming hasher costs a call and a copy
// per frame (a third of the whole validation time for 1 KB messages), and zeroing the
// streaming hasher's 1.2 KB of state costs more than hashing a small batch, so the
// caller provides one only for a batch that needs it:
//
//	var hasher batchHasher
//	if count > batchHasherBufferedFramesMax {
//		var stream xxh3.Hasher
//		hasher.stream = &stream
//	}
type batchHasher struct {
	stream   *xxh3.Hasher
	streamed bool // part of the input already went to stream
	n        int
	buf      [batchHasherBufferSize]byte
}

const (
	batchHashedHeaderSize        = 44 // bytes: header[0:40] and header[48:52]
	batchHasherBufferSize        = 512
	batchHasherBufferedFramesMax = (batchHasherBufferSize - batchHashedHeaderSize) / 8 // 58
	frameChecksumSize            = 8
)

// begin feeds the six header fields: bytes 0..40 are the first five, 48..52 the count.
func (h *batchHasher) begin(header *[BatchHeaderSize]byte) {
	copy(h.buf[0:40], header[batchPartitionIDAt:batchChecksumAt])
	copy(h.buf[40:44], header[batchMessageCountAt:batchReservedAt])
	h.n = batchHashedHeaderSize
}

// add feeds the checksum field of one frame. Past batchHasherBufferedFramesMax frames
// it needs h.stream; its absence then is a bug of the caller, and panics.
func (h *batchHasher) add(frameHeader *[FrameHeaderSize]byte) {
	if h.n+frameChecksumSize > len(h.buf) {
		h.stream.Write(h.buf[:h.n])
		h.streamed = true
		h.n = 0
	}
	copy(h.buf[h.n:h.n+frameChecksumSize], frameHeader[frameChecksumAt:frameChecksumAt+frameChecksumSize])
	h.n += frameChecksumSize
}

func (h *batchHasher) sum() uint64 {
	if !h.streamed {
		return xxh3.Hash(h.buf[:h.n])
	}
	h.stream.Write(h.buf[:h.n])
	return h.stream.Sum64()
}

// reservedIsZero reports whether the header's reserved bytes are all zero, comparing
// them with a zero header's through the runtime's vectorised memequal: a byte loop
// over the 204 bytes was a third of the validation time of a one-message batch.
func reservedIsZero(header *[BatchHeaderSize]byte) bool {
	return bytes.Equal(header[batchReservedAt:], zeroBatchHeader[batchReservedAt:])
}
