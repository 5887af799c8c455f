package jsonview

import "github.com/iggy-shard/iggy-shard/wire"

// Stream is a stream (the list's entries), StreamDetails with its topics (GET of
// one stream, its creation).
type Stream struct {
	ID            uint32            `json:"id"`
	CreatedAt     uint64            `json:"created_at"`
	Name          string            `json:"name"`
	Size          string            `json:"size"`
	MessagesCount uint64            `json:"messages_count"`
	TopicsCount   uint32            `json:"topics_count"`
	Topics        *[]Topic          `json:"topics,omitempty"`
	Options       map[string]Option `json:"options"`
}

func StreamOf(h *wire.StreamHeader) Stream {
	return Stream{ID: h.ID, CreatedAt: h.CreatedAtMicros, Name: string(h.Name), Size: ByteSize(h.SizeBytes),
		MessagesCount: h.MessagesCount, TopicsCount: h.TopicsCount, Options: PlainOptions(h.Options)}
}

func StreamDetailsOf(s *wire.StreamDetails) Stream {
	v := StreamOf(&s.StreamHeader)
	topics := make([]Topic, len(s.Topics))
	for i := range s.Topics {
		topics[i] = TopicOf(&s.Topics[i])
	}
	v.Topics = &topics
	return v
}

// Topic is a topic (the list's entries, a stream's), with its partitions for GET
// of one topic and its creation.
type Topic struct {
	ID                   uint32            `json:"id"`
	CreatedAt            uint64            `json:"created_at"`
	Name                 string            `json:"name"`
	Size                 string            `json:"size"`
	MessageExpiry        uint64            `json:"message_expiry"`
	CompressionAlgorithm string            `json:"compression_algorithm"`
	MaxTopicSize         uint64            `json:"max_topic_size"`
	MessagesCount        uint64            `json:"messages_count"`
	PartitionsCount      uint32            `json:"partitions_count"`
	Partitions           *[]Partition      `json:"partitions,omitempty"`
	Options              map[string]Option `json:"options"`
}

type Partition struct {
	ID            uint32 `json:"id"`
	CreatedAt     uint64 `json:"created_at"`
	SegmentsCount uint32 `json:"segments_count"`
	CurrentOffset uint64 `json:"current_offset"`
	Size          string `json:"size"`
	MessagesCount uint64 `json:"messages_count"`
}

func TopicOf(t *wire.TopicHeader) Topic {
	return Topic{ID: t.ID, CreatedAt: t.CreatedAtMicros, Name: string(t.Name), Size: ByteSize(t.SizeBytes),
		MessageExpiry: t.MessageExpiryMicros, CompressionAlgorithm: CompressionName(t.CompressionAlgorithm),
		MaxTopicSize: t.MaxTopicSizeBytes, MessagesCount: t.MessagesCount, PartitionsCount: t.PartitionsCount,
		Options: TopicOptions(t.ExplicitOptions, t.DerivedOptions)}
}

func TopicDetailsOf(t *wire.TopicDetails) Topic {
	v := TopicOf(&t.TopicHeader)
	partitions := make([]Partition, len(t.Partitions))
	for i, p := range t.Partitions {
		partitions[i] = Partition{ID: p.ID, CreatedAt: p.CreatedAtMicros, SegmentsCount: p.SegmentsCount,
			CurrentOffset: p.CurrentOffset, Size: ByteSize(p.SizeBytes), MessagesCount: p.MessagesCount}
	}
	v.Partitions = &partitions
	return v
}

// Group is a consumer group, with its members for GET of one group and its
// creation.
type Group struct {
	ID              uint32         `json:"id"`
	Name            string         `json:"name"`
	PartitionsCount uint32         `json:"partitions_count"`
	MembersCount    uint32         `json:"members_count"`
	Members         *[]GroupMember `json:"members,omitempty"`
}

type GroupMember struct {
	ID              uint32   `json:"id"`
	PartitionsCount uint32   `json:"partitions_count"`
	Partitions      []uint32 `json:"partitions"`
}

func GroupOf(g *wire.ConsumerGroupHeader) Group {
	return Group{ID: g.ID, Name: string(g.Name), PartitionsCount: g.PartitionsCount, MembersCount: g.MembersCount}
}

func GroupDetailsOf(g *wire.ConsumerGroupDetails) Group {
	v := GroupOf(&g.ConsumerGroupHeader)
	members := make([]GroupMember, len(g.Members))
	for i, m := range g.Members {
		members[i] = GroupMember{ID: m.ID, PartitionsCount: uint32(len(m.PartitionIDs)), Partitions: append([]uint32{}, m.PartitionIDs...)}
	}
	v.Members = &members
	return v
}

// ConsumerOffset is a consumer's offset in a partition.
type ConsumerOffset struct {
	PartitionID   uint32 `json:"partition_id"`
	CurrentOffset uint64 `json:"current_offset"`
	StoredOffset  uint64 `json:"stored_offset"`
}
