package wire

import "encoding/binary"

// SendMessages (101): routing metadata, then one producer batch (batch.go) to the end
// of the body.
//
//	[metadata_length u32]                         bytes from stream_id to messages_count
//	[stream_id Identifier][topic_id Identifier]
//	[partitioning Partitioning]
//	[messages_count u32]                          must equal the batch's message_count
//	[batch: 256-byte header + frames]             batch_length must end the body
//
// The reply is status 0 with [count u32][SendConfirmation]*, one confirmation per
// committed batch; it is never empty (the Go SDK rejects an empty SendMessages reply).
//
//	SendConfirmation  [stream_id u32][topic_id u32][partition_id u32][base_offset u64]  20 bytes
//
// Error codes, as the server answers them (apache/iggy core/server/src/dispatch.rs and
// responses.rs): routing fields that do not decode are status 20 ResourceNotFound, the
// code the reference server gives every resolution failure of a partition operation,
// decode failures included. A body that fails admission (a metadata_length that lies, a
// bad batch) gets a code (Decode's, then ValidateBatch's) instead of the reference
// server's silence, which leaves the Go SDK waiting out its 30 s deadline.

// SendConfirmationSize is the size of one SendConfirmation.
const SendConfirmationSize = 20 // bytes

// SendMessages is the SendMessages (101) request body. A decoded body's identifiers,
// key and batch alias the body.
type SendMessages struct {
	StreamID, TopicID Identifier
	Partitioning      Partitioning
	MessagesCount     uint32
	Batch             []byte // the whole batch, header included
}

// Decode reads the body: the metadata, and the batch's outline (it has a header,
// its batch_length ends the body, its message_count is non-zero and equals
// messages_count). It does not hash: the checksums and the frames are ValidateBatch's
// work, which the partition's shard runs before the batch is admitted. Errors, split
// the way the reference server splits them between its routing decode (status 20)
// and the partition's admission (which it answers with silence, and we with a code):
//
//	ErrResourceNotFound      stream_id, topic_id, partitioning or messages_count do not
//	                         decode from the bytes after metadata_length
//	ErrInvalidCommand        metadata_length is not the metadata's exact size; a batch
//	                         shorter than its header, or whose batch_length is not the
//	                         rest of the body
//	ErrInvalidMessagesCount  messages_count 0 or different from the batch's
//
// Decode does not allocate.
func (r *SendMessages) Decode(body []byte) error {
	*r = SendMessages{}
	if len(body) < 4 {
		return ErrResourceNotFound
	}
	metadataLength := binary.LittleEndian.Uint32(body)
	d := newDecoder(body[4:])
	streamID := d.identifier()
	topicID := d.identifier()
	partitioning := d.partitioning()
	messagesCount := d.u32()
	if d.err != nil {
		return ErrResourceNotFound
	}
	if uint64(d.off) != uint64(metadataLength) {
		return ErrInvalidCommand
	}
	metadataEnd := 4 + d.off

	batch := body[metadataEnd:]
	header, err := ViewBatchHeader(batch)
	if err != nil {
		return ErrInvalidCommand
	}
	if header.BatchLength() != uint64(len(batch)) {
		return ErrInvalidCommand
	}
	if messagesCount == 0 || header.MessageCount() != messagesCount {
		return ErrInvalidMessagesCount
	}
	*r = SendMessages{
		StreamID:      streamID,
		TopicID:       topicID,
		Partitioning:  partitioning,
		MessagesCount: messagesCount,
		Batch:         batch,
	}
	return nil
}

// Append encodes r: the metadata, then a copy of r.Batch. It refuses what Decode
// would refuse, leaving b untouched: the encoding errors of Identifier and
// Partitioning, ErrInvalidCommand when r.Batch is shorter than a header or its
// batch_length is not its length, ErrInvalidMessagesCount when it does not hold
// r.MessagesCount (> 0) messages.
func (r *SendMessages) Append(b []byte) ([]byte, error) {
	header, err := ViewBatchHeader(r.Batch)
	if err != nil || header.BatchLength() != uint64(len(r.Batch)) {
		return b, ErrInvalidCommand
	}
	if r.MessagesCount == 0 || header.MessageCount() != r.MessagesCount {
		return b, ErrInvalidMessagesCount
	}
	out, err := r.AppendMetadata(b)
	if err != nil {
		return b, err
	}
	return append(out, r.Batch...), nil
}

// AppendMetadata encodes the body up to the batch: [metadata_length] through
// messages_count, from r.StreamID, r.TopicID, r.Partitioning and r.MessagesCount
// (r.Batch is ignored). A client builds the batch in place behind it, with no copy:
//
//	body, err := req.AppendMetadata(buf[:0])
//	builder.Reset(body)
//	... builder.Append(...) once per message ...
//	body, err = builder.Finish()
func (r *SendMessages) AppendMetadata(b []byte) ([]byte, error) {
	metadataLength := r.StreamID.EncodedLen() + r.TopicID.EncodedLen() + r.Partitioning.EncodedLen() + 4
	e := encoder{b: appendU32(b, uint32(metadataLength))}
	e.identifier(r.StreamID)
	e.identifier(r.TopicID)
	e.partitioning(r.Partitioning)
	e.u32(r.MessagesCount)
	return e.finish(b)
}

// SendConfirmation reports where a committed batch went.
type SendConfirmation struct {
	StreamID, TopicID, PartitionID uint32
	BaseOffset                     uint64 // the offset of the batch's first message
}

// EncodedLen is SendConfirmationSize.
func (c SendConfirmation) EncodedLen() int { return SendConfirmationSize }

// Append encodes c.
func (c SendConfirmation) Append(b []byte) []byte {
	b = appendU32(b, c.StreamID)
	b = appendU32(b, c.TopicID)
	b = appendU32(b, c.PartitionID)
	return appendU64(b, c.BaseOffset)
}

// AppendSendConfirmations encodes the SendMessages reply body: the count, then each
// confirmation. The reference server sends one per batch, or none (count 0) when it
// cannot tell the offsets.
func AppendSendConfirmations(b []byte, confirmations ...SendConfirmation) []byte {
	b = appendU32(b, uint32(len(confirmations)))
	for _, c := range confirmations {
		b = c.Append(b)
	}
	return b
}

// SendConfirmations is a decoded SendMessages reply: a view of its confirmations.
type SendConfirmations struct {
	entries []byte
}

// Decode reads a SendMessages reply body, which must be exactly [count u32] and count
// 20-byte confirmations. An empty body is ErrInvalidCommand, as in the Go SDK; so is
// any other length. It does not allocate.
func (r *SendConfirmations) Decode(body []byte) error {
	r.entries = nil
	if len(body) < 4 {
		return ErrInvalidCommand
	}
	count := binary.LittleEndian.Uint32(body)
	if uint64(len(body)-4) != uint64(count)*SendConfirmationSize {
		return ErrInvalidCommand
	}
	r.entries = body[4:]
	return nil
}

// Len is the number of confirmations.
func (r SendConfirmations) Len() int { return len(r.entries) / SendConfirmationSize }

// At returns confirmation i, 0 <= i < Len().
func (r SendConfirmations) At(i int) SendConfirmation {
	e := r.entries[i*SendConfirmationSize : (i+1)*SendConfirmationSize]
	return SendConfirmation{
		StreamID:    binary.LittleEndian.Uint32(e[0:]),
		TopicID:     binary.LittleEndian.Uint32(e[4:]),
		PartitionID: binary.LittleEndian.Uint32(e[8:]),
		BaseOffset:  binary.LittleEndian.Uint64(e[12:]),
	}
}
