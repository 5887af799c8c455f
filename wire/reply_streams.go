package wire

import "encoding/binary"

// StreamHeader is one stream in GetStreams and the head of GetStream and CreateStream
// replies (apache/iggy core/binary_protocol/src/responses/streams/), 37 + N + M bytes:
//
//	+----+------------+--------------+------------+----------------+-----+------+-------------+---------+
//	| id | created_at | topics_count | size_bytes | messages_count | N   | name | options_len | options |
//	| u32| u64 µs     | u32          | u64        | u64            | u8  | N    | u32 (M)     | M bytes |
//	+----+------------+--------------+------------+----------------+-----+------+-------------+---------+
type StreamHeader struct {
	ID              uint32
	CreatedAtMicros uint64
	TopicsCount     uint32
	SizeBytes       uint64
	MessagesCount   uint64
	Name            []byte
	// Options is the client-explicit options TLV block, without its length prefix
	// (always empty today: streams have no options).
	Options []byte
}

// streamHeaderFixedBytes covers id .. messages_count.
const streamHeaderFixedBytes = 32

// EncodedLen is the exact number of bytes Append writes.
func (h *StreamHeader) EncodedLen() int { return 37 + len(h.Name) + len(h.Options) }

// Append encodes h onto b.
func (h *StreamHeader) Append(b []byte) []byte {
	b = appendU32(b, h.ID)
	b = appendU64(b, h.CreatedAtMicros)
	b = appendU32(b, h.TopicsCount)
	b = appendU64(b, h.SizeBytes)
	b = appendU64(b, h.MessagesCount)
	b = appendReplyName(b, h.Name)
	return appendBlock32(b, h.Options)
}

func (h *StreamHeader) decodeFrom(d *decoder) {
	b := d.take(streamHeaderFixedBytes)
	if b == nil {
		return
	}
	h.ID = binary.LittleEndian.Uint32(b[0:])
	h.CreatedAtMicros = binary.LittleEndian.Uint64(b[4:])
	h.TopicsCount = binary.LittleEndian.Uint32(b[12:])
	h.SizeBytes = binary.LittleEndian.Uint64(b[16:])
	h.MessagesCount = binary.LittleEndian.Uint64(b[24:])
	h.Name = d.name()
	h.Options = d.block32()
}

// Decode reads a body that holds exactly one StreamHeader.
func (h *StreamHeader) Decode(body []byte) error { return decodeExact(h, body) }

// IterStreams walks a GetStreams body: StreamHeaders back to back, no count.
func IterStreams(body []byte) ListIter[StreamHeader, *StreamHeader] {
	return newUncountedIter[StreamHeader](body)
}

// AppendStreams decodes a GetStreams body onto dst.
func AppendStreams(dst []StreamHeader, body []byte) ([]StreamHeader, error) {
	return collect(dst, IterStreams(body))
}

// AppendStreamsReply encodes a GetStreams body: the headers back to back.
func AppendStreamsReply(b []byte, streams []StreamHeader) []byte {
	for i := range streams {
		b = streams[i].Append(b)
	}
	return b
}

// StreamDetails is the GetStream reply and the CreateStream success payload: a
// StreamHeader followed by exactly TopicsCount TopicHeaders in ascending id order
// (no partitions). The header's TopicsCount drives the decoder, so Append requires
// it to equal len(Topics).
type StreamDetails struct {
	StreamHeader
	Topics []TopicHeader
}

// EncodedLen is the exact number of bytes Append writes.
func (s *StreamDetails) EncodedLen() int {
	n := s.StreamHeader.EncodedLen()
	for i := range s.Topics {
		n += s.Topics[i].EncodedLen()
	}
	return n
}

// Append encodes s onto b. It panics when TopicsCount disagrees with Topics: a
// client would read a different number of topics than were written.
func (s *StreamDetails) Append(b []byte) []byte {
	if int(s.TopicsCount) != len(s.Topics) {
		panic("wire: StreamDetails.TopicsCount != len(Topics)")
	}
	b = s.StreamHeader.Append(b)
	for i := range s.Topics {
		b = s.Topics[i].Append(b)
	}
	return b
}

// Decode reads a GetStream body (or a CreateStream payload). An empty body is the
// server's "stream not found" and decodes as ErrStreamIdNotFound. Decode reuses the
// capacity of s.Topics. On error s is left in an unspecified state.
func (s *StreamDetails) Decode(body []byte) error {
	if len(body) == 0 {
		return ErrStreamIdNotFound
	}
	d := newDecoder(body)
	s.StreamHeader.decodeFrom(&d)
	it := newCountedIter[TopicHeader](d, s.TopicsCount, topicHeaderMinBytes)
	topics, err := collect(s.Topics[:0], it)
	s.Topics = topics
	return err
}
