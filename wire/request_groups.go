package wire

// Consumer group request bodies:
//
//	GetConsumerGroups (601)                    [stream_id Identifier][topic_id Identifier]
//	CreateConsumerGroup (602)                  [stream_id Identifier][topic_id Identifier]
//	                                           [name Name]
//	GetConsumerGroup (600), DeleteConsumerGroup (603), JoinConsumerGroup (604),
//	LeaveConsumerGroup (605), SyncConsumerGroup (606)
//	                                           [stream_id Identifier][topic_id Identifier]
//	                                           [group_id Identifier]
//
// Membership (Join, Leave, Sync) is keyed by the request header's u128 client id,
// not by anything in the body. An undecodable SyncConsumerGroup is answered like a
// non-member (empty status-0 body), not with a status.

// GroupTarget names one consumer group: the body of codes 600 and 603..606.
type GroupTarget struct {
	StreamID, TopicID, GroupID Identifier
}

func (g *GroupTarget) decode(body []byte) error {
	d := newDecoder(body)
	g.StreamID = d.identifier()
	g.TopicID = d.identifier()
	g.GroupID = d.identifier()
	return d.endIgnoringTrailing()
}

func (g *GroupTarget) append(b []byte) ([]byte, error) {
	e := encoder{b: b}
	e.identifier(g.StreamID)
	e.identifier(g.TopicID)
	e.identifier(g.GroupID)
	return e.finish(b)
}

// GetConsumerGroup (600).
type GetConsumerGroup struct{ GroupTarget }

// Decode reads the body.
func (r *GetConsumerGroup) Decode(body []byte) error { return r.decode(body) }

// Append encodes r.
func (r *GetConsumerGroup) Append(b []byte) ([]byte, error) { return r.append(b) }

// DeleteConsumerGroup (603).
type DeleteConsumerGroup struct{ GroupTarget }

// Decode reads the body.
func (r *DeleteConsumerGroup) Decode(body []byte) error { return r.decode(body) }

// Append encodes r.
func (r *DeleteConsumerGroup) Append(b []byte) ([]byte, error) { return r.append(b) }

// JoinConsumerGroup (604): idempotent for an existing member.
type JoinConsumerGroup struct{ GroupTarget }

// Decode reads the body.
func (r *JoinConsumerGroup) Decode(body []byte) error { return r.decode(body) }

// Append encodes r.
func (r *JoinConsumerGroup) Append(b []byte) ([]byte, error) { return r.append(b) }

// LeaveConsumerGroup (605).
type LeaveConsumerGroup struct{ GroupTarget }

// Decode reads the body.
func (r *LeaveConsumerGroup) Decode(body []byte) error { return r.decode(body) }

// Append encodes r.
func (r *LeaveConsumerGroup) Append(b []byte) ([]byte, error) { return r.append(b) }

// SyncConsumerGroup (606): a member asks for its partition assignment.
type SyncConsumerGroup struct{ GroupTarget }

// Decode reads the body.
func (r *SyncConsumerGroup) Decode(body []byte) error { return r.decode(body) }

// Append encodes r.
func (r *SyncConsumerGroup) Append(b []byte) ([]byte, error) { return r.append(b) }

// GetConsumerGroups (601).
type GetConsumerGroups struct {
	StreamID, TopicID Identifier
}

// Decode reads the body.
func (r *GetConsumerGroups) Decode(body []byte) error {
	return decodeTopicBody(body, &r.StreamID, &r.TopicID)
}

// Append encodes r.
func (r *GetConsumerGroups) Append(b []byte) ([]byte, error) {
	return appendTopicBody(b, r.StreamID, r.TopicID)
}

// CreateConsumerGroup (602).
type CreateConsumerGroup struct {
	StreamID, TopicID Identifier
	Name              []byte
}

// Decode reads the body.
func (r *CreateConsumerGroup) Decode(body []byte) error {
	d := newDecoder(body)
	r.StreamID = d.identifier()
	r.TopicID = d.identifier()
	r.Name = d.name()
	return d.endIgnoringTrailing()
}

// Append encodes r.
func (r *CreateConsumerGroup) Append(b []byte) ([]byte, error) {
	e := encoder{b: b}
	e.identifier(r.StreamID)
	e.identifier(r.TopicID)
	e.name(r.Name)
	return e.finish(b)
}
