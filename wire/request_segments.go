package wire

// Segment request body:
//
//	DeleteSegments (503)  [stream_id Identifier][topic_id Identifier]
//	                      [partition_id u32][segments_count u32]

// DeleteSegments (503): deletes the SegmentsCount oldest sealed segments of a
// partition.
type DeleteSegments struct {
	StreamID, TopicID Identifier
	PartitionID       uint32
	SegmentsCount     uint32
}

// Decode reads the body.
func (r *DeleteSegments) Decode(body []byte) error {
	d := newDecoder(body)
	r.StreamID = d.identifier()
	r.TopicID = d.identifier()
	r.PartitionID = d.u32()
	r.SegmentsCount = d.u32()
	return d.endIgnoringTrailing()
}

// Append encodes r.
func (r *DeleteSegments) Append(b []byte) ([]byte, error) {
	e := encoder{b: b}
	e.identifier(r.StreamID)
	e.identifier(r.TopicID)
	e.u32(r.PartitionID)
	e.u32(r.SegmentsCount)
	return e.finish(b)
}
