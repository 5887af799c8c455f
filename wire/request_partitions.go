package wire

// Partition request bodies:
//
//	CreatePartitions (402), DeletePartitions (403)
//	    [stream_id Identifier][topic_id Identifier][partitions_count u32]
//
// A count of 0 or above 1000 is refused at admission with 2015 TooManyPartitions
// (CheckPartitionsCount); it decodes here, because that refusal is not a malformed
// body.

// PartitionsCountMax is the most partitions CreateTopic, CreatePartitions and
// DeletePartitions may name in one request.
const PartitionsCountMax = 1000

// CreatePartitions (402).
type CreatePartitions struct {
	StreamID, TopicID Identifier
	PartitionsCount   uint32
}

// Decode reads the body.
func (r *CreatePartitions) Decode(body []byte) error {
	return decodePartitionsBody(body, &r.StreamID, &r.TopicID, &r.PartitionsCount)
}

// Append encodes r.
func (r *CreatePartitions) Append(b []byte) ([]byte, error) {
	return appendPartitionsBody(b, r.StreamID, r.TopicID, r.PartitionsCount)
}

// CheckPartitionsCount is the admission check: ErrTooManyPartitions (status 2015)
// for a count of 0 or above PartitionsCountMax.
func (r *CreatePartitions) CheckPartitionsCount() error {
	return checkPartitionsCount(r.PartitionsCount, false)
}

// DeletePartitions (403): removes the partitions with the highest ids.
type DeletePartitions struct {
	StreamID, TopicID Identifier
	PartitionsCount   uint32
}

// Decode reads the body.
func (r *DeletePartitions) Decode(body []byte) error {
	return decodePartitionsBody(body, &r.StreamID, &r.TopicID, &r.PartitionsCount)
}

// Append encodes r.
func (r *DeletePartitions) Append(b []byte) ([]byte, error) {
	return appendPartitionsBody(b, r.StreamID, r.TopicID, r.PartitionsCount)
}

// CheckPartitionsCount is the admission check: ErrTooManyPartitions (status 2015)
// for a count of 0 or above PartitionsCountMax.
func (r *DeletePartitions) CheckPartitionsCount() error {
	return checkPartitionsCount(r.PartitionsCount, false)
}

func checkPartitionsCount(count uint32, zeroAllowed bool) error {
	if count > PartitionsCountMax || count == 0 && !zeroAllowed {
		return ErrTooManyPartitions
	}
	return nil
}

func decodePartitionsBody(body []byte, stream, topic *Identifier, count *uint32) error {
	d := newDecoder(body)
	*stream = d.identifier()
	*topic = d.identifier()
	*count = d.u32()
	return d.endIgnoringTrailing()
}

func appendPartitionsBody(b []byte, stream, topic Identifier, count uint32) ([]byte, error) {
	e := encoder{b: b}
	e.identifier(stream)
	e.identifier(topic)
	e.u32(count)
	return e.finish(b)
}
