package wire

// Permissions travel in UserDetails replies and in the CreateUser and
// UpdatePermissions requests. Every flag is one byte; the per-stream and per-topic
// maps are linked lists whose continuation byte says whether another entry follows:
//
//	global (10 flag bytes):
//	  manage_servers read_servers manage_users read_users manage_streams
//	  read_streams manage_topics read_topics poll_messages send_messages
//	has_streams u8
//	while the previous continuation byte is 1 (stream entry, 12 + 9·T bytes):
//	  +-----------+------------------+------------+-------------+-----------------+
//	  | stream_id | 6 flag bytes     | has_topics | topic entry*| has_next_stream |
//	  | u32       | manage_stream .. |     u8     |             |       u8        |
//	  +-----------+------------------+------------+-------------+-----------------+
//	  topic entry (9 bytes): [topic_id u32][manage_topic read_topic poll send][has_next_topic u8]
//
// Ids are the 0-based stream and topic ids. Decoders read any non-zero flag byte as
// true (the reference server does); encoders write 0 or 1. A continuation byte must be
// 0 or 1: anything else is a malformed body.

const (
	permissionsGlobalSizeBytes     = 10
	permissionsStreamFixedBytes    = 4 + 6 + 1 + 1 // id, flags, has_topics, has_next_stream
	permissionsTopicEntrySizeBytes = 4 + 4 + 1     // id, flags, has_next_topic
)

// GlobalPermissions are the ten server-wide flags, in wire order.
type GlobalPermissions struct {
	ManageServers bool
	ReadServers   bool
	ManageUsers   bool
	ReadUsers     bool
	ManageStreams bool
	ReadStreams   bool
	ManageTopics  bool
	ReadTopics    bool
	PollMessages  bool
	SendMessages  bool
}

// StreamPermissions grant rights on one stream and, through Topics, on some of its
// topics.
type StreamPermissions struct {
	StreamID     uint32
	ManageStream bool
	ReadStream   bool
	ManageTopics bool
	ReadTopics   bool
	PollMessages bool
	SendMessages bool
	Topics       []TopicPermissions
}

// TopicPermissions grant rights on one topic of the enclosing stream.
type TopicPermissions struct {
	TopicID      uint32
	ManageTopic  bool
	ReadTopic    bool
	PollMessages bool
	SendMessages bool
}

// Permissions is a user's complete permission set. Streams is kept in wire order;
// the protocol attaches no meaning to that order.
type Permissions struct {
	Global  GlobalPermissions
	Streams []StreamPermissions
}

// EncodedLen is the exact number of bytes Append writes.
func (p *Permissions) EncodedLen() int {
	n := permissionsGlobalSizeBytes + 1
	for i := range p.Streams {
		n += permissionsStreamFixedBytes + permissionsTopicEntrySizeBytes*len(p.Streams[i].Topics)
	}
	return n
}

// Append encodes p onto b.
func (p *Permissions) Append(b []byte) []byte {
	g := &p.Global
	b = appendFlagBytes(b, g.ManageServers, g.ReadServers, g.ManageUsers, g.ReadUsers,
		g.ManageStreams, g.ReadStreams, g.ManageTopics, g.ReadTopics,
		g.PollMessages, g.SendMessages)
	b = appendFlagByte(b, len(p.Streams) > 0)
	for i := range p.Streams {
		s := &p.Streams[i]
		b = appendU32(b, s.StreamID)
		b = appendFlagBytes(b, s.ManageStream, s.ReadStream, s.ManageTopics, s.ReadTopics,
			s.PollMessages, s.SendMessages)
		b = appendFlagByte(b, len(s.Topics) > 0)
		for j := range s.Topics {
			t := &s.Topics[j]
			b = appendU32(b, t.TopicID)
			b = appendFlagBytes(b, t.ManageTopic, t.ReadTopic, t.PollMessages, t.SendMessages)
			b = appendFlagByte(b, j+1 < len(s.Topics))
		}
		b = appendFlagByte(b, i+1 < len(p.Streams))
	}
	return b
}

// Decode parses a complete permissions block (exactly len(b) bytes, as framed by the
// enclosing perm_len). The stream and topic slices are allocated once each at their
// exact size after a validating pass, so a hostile block costs no more memory than a
// small constant times its own length. On error p is left unchanged.
func (p *Permissions) Decode(b []byte) error {
	streams, topics, err := walkPermissions(b, nil, nil)
	if err != nil {
		return err
	}
	var out Permissions
	if streams > 0 {
		out.Streams = make([]StreamPermissions, 0, streams)
	}
	var topicStore []TopicPermissions
	if topics > 0 {
		topicStore = make([]TopicPermissions, 0, topics)
	}
	out.Global = decodeGlobalPermissions(b)
	if _, _, err := walkPermissions(b, &out.Streams, &topicStore); err != nil {
		panic("wire: permissions changed between two walks of the same bytes: " + err.Error())
	}
	*p = out
	return nil
}

// ValidatePermissions checks that b is exactly one well-formed permissions block,
// without allocating; a malformed block is ErrInvalidCommand.
func ValidatePermissions(b []byte) error {
	_, _, err := walkPermissions(b, nil, nil)
	return err
}

// walkPermissions validates the structure of b and counts its stream and topic
// entries. When streams and topics are non-nil it also appends the decoded entries
// to them; each stream's Topics is a capped sub-slice of *topics, so a caller's
// append to one stream's topics cannot overwrite its neighbour's.
func walkPermissions(b []byte, streams *[]StreamPermissions, topics *[]TopicPermissions) (streamCount, topicCount int, err error) {
	d := newDecoder(b)
	d.take(permissionsGlobalSizeBytes)
	more := d.listContinues()
	for more && d.err == nil {
		streamCount++
		id := d.u32()
		f := d.take(6)
		hasTopics := d.listContinues()
		first := topicCount
		for hasTopics && d.err == nil {
			topicCount++
			tid := d.u32()
			tf := d.take(4)
			hasTopics = d.listContinues()
			if topics != nil && d.err == nil {
				*topics = append(*topics, TopicPermissions{
					TopicID: tid, ManageTopic: tf[0] != 0, ReadTopic: tf[1] != 0,
					PollMessages: tf[2] != 0, SendMessages: tf[3] != 0,
				})
			}
		}
		more = d.listContinues()
		if streams != nil && d.err == nil {
			s := StreamPermissions{
				StreamID: id, ManageStream: f[0] != 0, ReadStream: f[1] != 0,
				ManageTopics: f[2] != 0, ReadTopics: f[3] != 0,
				PollMessages: f[4] != 0, SendMessages: f[5] != 0,
			}
			if topicCount > first {
				s.Topics = (*topics)[first:topicCount:topicCount]
			}
			*streams = append(*streams, s)
		}
	}
	return streamCount, topicCount, d.end()
}

func decodeGlobalPermissions(b []byte) GlobalPermissions {
	_ = b[permissionsGlobalSizeBytes-1]
	return GlobalPermissions{
		ManageServers: b[0] != 0, ReadServers: b[1] != 0,
		ManageUsers: b[2] != 0, ReadUsers: b[3] != 0,
		ManageStreams: b[4] != 0, ReadStreams: b[5] != 0,
		ManageTopics: b[6] != 0, ReadTopics: b[7] != 0,
		PollMessages: b[8] != 0, SendMessages: b[9] != 0,
	}
}

// listContinues reads a has_streams / has_topics / has_next_* byte: 1 means another
// entry follows, 0 means the list ends, anything else is a malformed body.
func (d *decoder) listContinues() bool {
	v := d.u8()
	if v > 1 {
		d.fail(ErrInvalidCommand)
		return false
	}
	return v == 1
}

func appendFlagByte(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

func appendFlagBytes(b []byte, vs ...bool) []byte {
	for _, v := range vs {
		b = appendFlagByte(b, v)
	}
	return b
}
