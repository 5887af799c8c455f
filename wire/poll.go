package wire

import "encoding/binary"

// PolledMessages: the PollMessages (100) reply body, status 0, never empty.
//
//	[partition_id u32][current_offset u64][messages_count u32]   16-byte prefix
//	[batch record]*                                              to the end of the body
//
// Each record is a stamped batch exactly as batch.go lays it out, possibly a slice of
// a stored batch (SliceBatch): its base_offset is the stored one and its frames keep
// their deltas, so the first polled offset is base_offset + the first frame's
// offset_delta, not necessarily base_offset. messages_count is the number of frames
// over all records. A client resolves each message as
//
//	offset           = base_offset + offset_delta
//	timestamp        = base_timestamp                      (server append time, µs)
//	origin_timestamp = origin_timestamp + timestamp_delta  (producer time, µs)
//
// current_offset is the partition's newest offset at poll time. A server answers a
// poll it cannot serve (an undecodable body, a group poll without a partition) with
// the prefix alone and 0 messages, and a group poll on a partition the member does not
// own with partition_id PollPartitionResync; the Go SDK then re-syncs its assignment.
//
// A server writes the prefix with AppendPrefix and each record as [header][frames]
// straight from SliceBatch, with a vectored write; a client decodes with Decode and
// walks the messages with Messages, allocating nothing.

// PolledMessagesPrefixSize is the size of the fixed part of a PolledMessages body.
const PolledMessagesPrefixSize = 16 // bytes

// PollPartitionResync is the partition_id of a consumer-group poll refused because the
// member does not own the partition at the current generation.
const PollPartitionResync uint32 = 0xFFFFFFFF

// PolledMessages is the PollMessages reply body. Records aliases a decoded body.
type PolledMessages struct {
	PartitionID   uint32
	CurrentOffset uint64
	MessagesCount uint32 // frames over all records
	Records       []byte // the batch records, back to back
}

// EncodedLen is the number of bytes Append writes.
func (p *PolledMessages) EncodedLen() int { return PolledMessagesPrefixSize + len(p.Records) }

// AppendPrefix encodes the 16-byte prefix alone, for a server that sends the records
// from where they lie.
func (p *PolledMessages) AppendPrefix(b []byte) []byte {
	b = appendU32(b, p.PartitionID)
	b = appendU64(b, p.CurrentOffset)
	return appendU32(b, p.MessagesCount)
}

// Append encodes the prefix and then copies Records.
func (p *PolledMessages) Append(b []byte) []byte {
	return append(p.AppendPrefix(b), p.Records...)
}

// Decode reads a PolledMessages body and checks what the Go SDK checks before it
// trusts one: every record has a whole header, a batch_length within the body, frames
// that tile it exactly with zero reserved bytes and as many frames as its
// message_count, and the frames of all records add up to messages_count. It does not
// verify checksums (the SDKs do not either; Verify does). A body that breaks a rule is
// ErrInvalidCommand. Decode does not allocate.
func (p *PolledMessages) Decode(body []byte) error {
	*p = PolledMessages{}
	if len(body) < PolledMessagesPrefixSize {
		return ErrInvalidCommand
	}
	messagesCount := binary.LittleEndian.Uint32(body[12:])
	records := body[PolledMessagesPrefixSize:]
	var frames uint64
	for rest := records; len(rest) > 0; {
		record, tail, ok := nextRecord(rest)
		if !ok {
			return ErrInvalidCommand
		}
		n, ok := countRecordFrames(record)
		if !ok || n != uint64(binary.LittleEndian.Uint32(record[batchMessageCountAt:])) {
			return ErrInvalidCommand
		}
		frames += n
		rest = tail
	}
	if frames != uint64(messagesCount) {
		return ErrInvalidCommand
	}
	*p = PolledMessages{
		PartitionID:   binary.LittleEndian.Uint32(body[0:]),
		CurrentOffset: binary.LittleEndian.Uint64(body[4:]),
		MessagesCount: messagesCount,
		Records:       records,
	}
	return nil
}

// nextRecord splits the first record off records. It reports false when records does
// not start with a whole header whose batch_length lies within records.
func nextRecord(records []byte) (record, rest []byte, ok bool) {
	if len(records) < BatchHeaderSize {
		return nil, nil, false
	}
	length := binary.LittleEndian.Uint64(records[batchLengthAt:])
	if length < BatchHeaderSize || length > uint64(len(records)) {
		return nil, nil, false
	}
	return records[:length:length], records[length:], true
}

// countRecordFrames counts the frames of one record, reporting false unless they tile
// it exactly with zero reserved fields.
func countRecordFrames(record []byte) (uint64, bool) {
	var n uint64
	for frames := record[BatchHeaderSize:]; len(frames) > 0; n++ {
		if len(frames) < FrameHeaderSize {
			return 0, false
		}
		frameHeader := (*[FrameHeaderSize]byte)(frames)
		if binary.LittleEndian.Uint64(frameHeader[frameReservedAt:]) != 0 {
			return 0, false
		}
		size := frameSizeOf(frameHeader)
		if size > uint64(len(frames)) {
			return 0, false
		}
		frames = frames[size:]
	}
	return n, true
}

// Verify checks every checksum of every record (CheckBatchRecord), for a client that
// wants the end-to-end integrity the SDKs skip. It returns the first failure's code.
func (p *PolledMessages) Verify() error {
	for it := p.Batches(); it.Next(); {
		if err := CheckBatchRecord(it.Batch()); err != nil {
			return err
		}
	}
	return nil
}

// RecordIterator walks the batch records of a decoded PolledMessages.
type RecordIterator struct {
	rest  []byte
	batch []byte
}

// Batches iterates the records, each a whole batch (header and frames).
func (p *PolledMessages) Batches() RecordIterator { return RecordIterator{rest: p.Records} }

// Next advances to the next record and reports whether there is one.
func (it *RecordIterator) Next() bool {
	record, rest, ok := nextRecord(it.rest)
	if !ok {
		it.rest = nil
		return false
	}
	it.batch, it.rest = record, rest
	return true
}

// Batch returns the record Next moved to.
func (it *RecordIterator) Batch() []byte { return it.batch }

// PolledMessage is one message of a poll reply, resolved against its record's header.
// The embedded Frame gives its id, payload, user headers and checksum.
type PolledMessage struct {
	Offset          uint64 // base_offset + offset_delta
	Timestamp       uint64 // the record's base_timestamp: server append time, µs
	OriginTimestamp uint64 // origin_timestamp + timestamp_delta: producer time, µs
	Frame
}

// PolledMessageIterator walks every message of every record without allocating:
//
//	for it := polled.Messages(); it.Next(); {
//		m := it.Message()
//		... m.Offset, m.Payload() ...
//	}
type PolledMessageIterator struct {
	records RecordIterator
	header  BatchHeader
	frames  FrameIterator
}

// Messages iterates the messages in order. It is meant for a body Decode accepted; on
// other bytes it stops early and never reads out of bounds.
func (p *PolledMessages) Messages() PolledMessageIterator {
	return PolledMessageIterator{records: p.Batches()}
}

// Next advances to the next message and reports whether there is one.
func (it *PolledMessageIterator) Next() bool {
	for !it.frames.Next() {
		if !it.records.Next() {
			return false
		}
		batch := it.records.Batch()
		it.header = BatchHeader{b: (*[BatchHeaderSize]byte)(batch)}
		it.frames = framesOf(batch[BatchHeaderSize:])
	}
	return true
}

// Message returns the message Next moved to.
func (it *PolledMessageIterator) Message() PolledMessage {
	f := it.frames.Frame()
	return PolledMessage{
		Offset:          it.header.BaseOffset() + uint64(f.OffsetDelta()),
		Timestamp:       it.header.BaseTimestamp(),
		OriginTimestamp: it.header.OriginTimestamp() + uint64(f.TimestampDelta()),
		Frame:           f,
	}
}
