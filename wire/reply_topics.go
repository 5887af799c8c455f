package wire

import "encoding/binary"

// TopicHeader is one topic in GetTopics and GetStream, and the head of GetTopic and
// CreateTopic replies (apache/iggy core/binary_protocol/src/responses/topics/),
// 58 + N + E + D bytes:
//
//	 0 id                     u32
//	 4 created_at             u64 µs
//	12 partitions_count       u32
//	16 message_expiry         u64 µs; 0 = server default, MaxUint64 = never
//	24 compression_algorithm  u8: 1 none, 2 gzip
//	25 max_topic_size         u64 bytes; 0 = server default, MaxUint64 = unlimited
//	33 size_bytes             u64
//	41 messages_count         u64
//	49 name                   Name (u8 length N, 1..255)
//	   explicit options       [E u32][E bytes TLV]: the keys the client set
//	   derived options        [D u32][D bytes TLV]: defaults resolved at create
//
// The three fixed option fields are a projection of the effective options; a key
// lives in exactly one of the two blocks.
type TopicHeader struct {
	ID                   uint32
	CreatedAtMicros      uint64
	PartitionsCount      uint32
	MessageExpiryMicros  uint64
	CompressionAlgorithm uint8
	MaxTopicSizeBytes    uint64
	SizeBytes            uint64
	MessagesCount        uint64
	Name                 []byte
	// ExplicitOptions and DerivedOptions are options TLV blocks without their
	// length prefixes. Decode frames them but does not walk them: read them with
	// NewTLVIterator, which reports a malformed block, or TopicOptionsFromBlocks.
	ExplicitOptions []byte
	DerivedOptions  []byte
}

// The compression_algorithm codes of the fixed TopicHeader byte.
const (
	TopicCompressionNone uint8 = 1
	TopicCompressionGzip uint8 = 2
)

const (
	topicHeaderFixedBytes = 49 // id .. messages_count
	topicHeaderMinBytes   = 58 + 1
	partitionInfoNumBytes = 40
)

// EncodedLen is the exact number of bytes Append writes.
func (h *TopicHeader) EncodedLen() int {
	return 58 + len(h.Name) + len(h.ExplicitOptions) + len(h.DerivedOptions)
}

// Append encodes h onto b.
func (h *TopicHeader) Append(b []byte) []byte {
	b = appendU32(b, h.ID)
	b = appendU64(b, h.CreatedAtMicros)
	b = appendU32(b, h.PartitionsCount)
	b = appendU64(b, h.MessageExpiryMicros)
	b = appendU8(b, h.CompressionAlgorithm)
	b = appendU64(b, h.MaxTopicSizeBytes)
	b = appendU64(b, h.SizeBytes)
	b = appendU64(b, h.MessagesCount)
	b = appendReplyName(b, h.Name)
	b = appendBlock32(b, h.ExplicitOptions)
	return appendBlock32(b, h.DerivedOptions)
}

func (h *TopicHeader) decodeFrom(d *decoder) {
	// One bounds check for the 49 fixed bytes instead of one per field: GetTopics
	// and GetStream decode many of these.
	b := d.take(topicHeaderFixedBytes)
	if b == nil {
		return
	}
	h.ID = binary.LittleEndian.Uint32(b[0:])
	h.CreatedAtMicros = binary.LittleEndian.Uint64(b[4:])
	h.PartitionsCount = binary.LittleEndian.Uint32(b[12:])
	h.MessageExpiryMicros = binary.LittleEndian.Uint64(b[16:])
	h.CompressionAlgorithm = b[24]
	h.MaxTopicSizeBytes = binary.LittleEndian.Uint64(b[25:])
	h.SizeBytes = binary.LittleEndian.Uint64(b[33:])
	h.MessagesCount = binary.LittleEndian.Uint64(b[41:])
	h.Name = d.name()
	h.ExplicitOptions = d.block32()
	h.DerivedOptions = d.block32()
}

// Decode reads a body that holds exactly one TopicHeader.
func (h *TopicHeader) Decode(body []byte) error { return decodeExact(h, body) }

// PartitionInfo describes one partition in GetTopic and CreateTopic replies
// (apache/iggy core/binary_protocol/src/responses/topics/get_topic.rs), 40 bytes.
type PartitionInfo struct {
	ID              uint32
	CreatedAtMicros uint64
	SegmentsCount   uint32
	// CurrentOffset is the offset of the newest message, 0 when empty.
	CurrentOffset uint64
	SizeBytes     uint64
	MessagesCount uint64
}

// EncodedLen is the exact number of bytes Append writes.
func (p *PartitionInfo) EncodedLen() int { return partitionInfoNumBytes }

// Append encodes p onto b.
func (p *PartitionInfo) Append(b []byte) []byte {
	b = appendU32(b, p.ID)
	b = appendU64(b, p.CreatedAtMicros)
	b = appendU32(b, p.SegmentsCount)
	b = appendU64(b, p.CurrentOffset)
	b = appendU64(b, p.SizeBytes)
	return appendU64(b, p.MessagesCount)
}

func (p *PartitionInfo) decodeFrom(d *decoder) {
	b := d.take(partitionInfoNumBytes)
	if b == nil {
		return
	}
	p.ID = binary.LittleEndian.Uint32(b[0:])
	p.CreatedAtMicros = binary.LittleEndian.Uint64(b[4:])
	p.SegmentsCount = binary.LittleEndian.Uint32(b[12:])
	p.CurrentOffset = binary.LittleEndian.Uint64(b[16:])
	p.SizeBytes = binary.LittleEndian.Uint64(b[24:])
	p.MessagesCount = binary.LittleEndian.Uint64(b[32:])
}

// Decode reads a body that holds exactly one PartitionInfo.
func (p *PartitionInfo) Decode(body []byte) error { return decodeExact(p, body) }

// TopicDetails is the GetTopic reply and the CreateTopic success payload: a
// TopicHeader followed by exactly PartitionsCount PartitionInfos in ascending id
// order, and nothing after them (the Go SDK reads partitions to the end of the body).
type TopicDetails struct {
	TopicHeader
	Partitions []PartitionInfo
}

// EncodedLen is the exact number of bytes Append writes.
func (t *TopicDetails) EncodedLen() int {
	return t.TopicHeader.EncodedLen() + partitionInfoNumBytes*len(t.Partitions)
}

// Append encodes t onto b. It panics when PartitionsCount disagrees with
// Partitions, which would make the reply undecodable.
func (t *TopicDetails) Append(b []byte) []byte {
	if int(t.PartitionsCount) != len(t.Partitions) {
		panic("wire: TopicDetails.PartitionsCount != len(Partitions)")
	}
	b = t.TopicHeader.Append(b)
	for i := range t.Partitions {
		b = t.Partitions[i].Append(b)
	}
	return b
}

// Decode reads a GetTopic body (or a CreateTopic payload). An empty body is the
// server's "stream or topic not found" and decodes as ErrTopicIdNotFound. Decode
// reuses the capacity of t.Partitions.
func (t *TopicDetails) Decode(body []byte) error {
	if len(body) == 0 {
		return ErrTopicIdNotFound
	}
	d := newDecoder(body)
	t.TopicHeader.decodeFrom(&d)
	it := newCountedIter[PartitionInfo](d, t.PartitionsCount, partitionInfoNumBytes)
	parts, err := collect(t.Partitions[:0], it)
	t.Partitions = parts
	return err
}

// IterTopics walks a GetTopics body, [topics_count u32][TopicHeader]*: the only
// list reply with a count prefix. The count is checked against the body's length
// before the first element is read.
func IterTopics(body []byte) ListIter[TopicHeader, *TopicHeader] {
	d := newDecoder(body)
	count := d.u32()
	return newCountedIter[TopicHeader](d, count, topicHeaderMinBytes)
}

// AppendTopics decodes a GetTopics body onto dst.
func AppendTopics(dst []TopicHeader, body []byte) ([]TopicHeader, error) {
	return collect(dst, IterTopics(body))
}

// AppendTopicsReply encodes a GetTopics body: the count, then the headers. An
// unknown stream is answered with zero topics (00 00 00 00), not an empty body.
func AppendTopicsReply(b []byte, topics []TopicHeader) []byte {
	b = appendU32(b, uint32(len(topics)))
	for i := range topics {
		b = topics[i].Append(b)
	}
	return b
}
