package wire

// Topic request bodies:
//
//	GetTopics (301)                      [stream_id Identifier]
//	GetTopic (300), DeleteTopic (303),
//	PurgeTopic (305)                     [stream_id Identifier][topic_id Identifier]
//	CreateTopic (302)                    [stream_id Identifier][partitions_count u32]
//	                                     [name Name][options block to end]
//	UpdateTopic (304)                    [stream_id Identifier][topic_id Identifier]
//	                                     [name Name][options block to end]
//
// Every topic setting rides the options block
// (iggy.apache.org/docs/server/topic-options); the block is validated structurally here
// and its keys and values by the catalog.

// GetTopics (301).
type GetTopics struct {
	StreamID Identifier
}

// Decode reads the body.
func (r *GetTopics) Decode(body []byte) error { return decodeIdentifierBody(body, &r.StreamID) }

// Append encodes r.
func (r *GetTopics) Append(b []byte) ([]byte, error) { return r.StreamID.Append(b) }

// GetTopic (300).
type GetTopic struct {
	StreamID, TopicID Identifier
}

// Decode reads the body.
func (r *GetTopic) Decode(body []byte) error {
	return decodeTopicBody(body, &r.StreamID, &r.TopicID)
}

// Append encodes r.
func (r *GetTopic) Append(b []byte) ([]byte, error) { return appendTopicBody(b, r.StreamID, r.TopicID) }

// DeleteTopic (303).
type DeleteTopic struct {
	StreamID, TopicID Identifier
}

// Decode reads the body.
func (r *DeleteTopic) Decode(body []byte) error {
	return decodeTopicBody(body, &r.StreamID, &r.TopicID)
}

// Append encodes r.
func (r *DeleteTopic) Append(b []byte) ([]byte, error) {
	return appendTopicBody(b, r.StreamID, r.TopicID)
}

// PurgeTopic (305).
type PurgeTopic struct {
	StreamID, TopicID Identifier
}

// Decode reads the body.
func (r *PurgeTopic) Decode(body []byte) error {
	return decodeTopicBody(body, &r.StreamID, &r.TopicID)
}

// Append encodes r.
func (r *PurgeTopic) Append(b []byte) ([]byte, error) {
	return appendTopicBody(b, r.StreamID, r.TopicID)
}

// CreateTopic (302). PartitionsCount is an argument consumed at admission (above
// 1000 the server answers 2015), never a persisted setting.
type CreateTopic struct {
	StreamID        Identifier
	PartitionsCount uint32
	Name            []byte
	Options         []byte
}

// Decode reads the body.
func (r *CreateTopic) Decode(body []byte) error {
	d := newDecoder(body)
	r.StreamID = d.identifier()
	r.PartitionsCount = d.u32()
	r.Name = d.name()
	r.Options = d.optionsBlock()
	return d.end()
}

// Append encodes r.
func (r *CreateTopic) Append(b []byte) ([]byte, error) {
	e := encoder{b: b}
	e.identifier(r.StreamID)
	e.u32(r.PartitionsCount)
	e.name(r.Name)
	e.optionsBlock(r.Options)
	return e.finish(b)
}

// CheckPartitionsCount is the admission check: ErrTooManyPartitions (status 2015)
// above PartitionsCountMax. A topic may be created with no partitions.
func (r *CreateTopic) CheckPartitionsCount() error {
	return checkPartitionsCount(r.PartitionsCount, true)
}

// UpdateTopic (304): a patch; only compression_algorithm, message_expiry and
// max_topic_size may appear in the options block (the catalog checks that).
type UpdateTopic struct {
	StreamID, TopicID Identifier
	Name              []byte
	Options           []byte
}

// Decode reads the body.
func (r *UpdateTopic) Decode(body []byte) error {
	d := newDecoder(body)
	r.StreamID = d.identifier()
	r.TopicID = d.identifier()
	r.Name = d.name()
	r.Options = d.optionsBlock()
	return d.end()
}

// Append encodes r.
func (r *UpdateTopic) Append(b []byte) ([]byte, error) {
	e := encoder{b: b}
	e.identifier(r.StreamID)
	e.identifier(r.TopicID)
	e.name(r.Name)
	e.optionsBlock(r.Options)
	return e.finish(b)
}

// decodeTopicBody reads a body that starts with a stream and a topic Identifier.
func decodeTopicBody(body []byte, stream, topic *Identifier) error {
	d := newDecoder(body)
	*stream = d.identifier()
	*topic = d.identifier()
	return d.endIgnoringTrailing()
}

func appendTopicBody(b []byte, stream, topic Identifier) ([]byte, error) {
	e := encoder{b: b}
	e.identifier(stream)
	e.identifier(topic)
	return e.finish(b)
}
