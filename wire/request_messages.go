package wire

// Message request bodies (SendMessages, 101, lives in send.go):
//
//	PollMessages (100)        [consumer Consumer][stream_id Identifier][topic_id Identifier]
//	                          [partition_flag u8][partition_id u32]
//	                          [strategy PollingStrategy, 9 bytes][count u32][auto_commit u8]
//	FlushUnsavedBuffer (102)  [stream_id Identifier][topic_id Identifier]
//	                          [partition_id u32][fsync u8]
//
// An undecodable PollMessages is not answered with a status: the reference server
// replies with the 16-byte PolledMessages prefix holding partition 0 and no messages,
// so the server maps this Decode's ErrInvalidCommand to that reply. (A later protocol
// build appends an optional u64 wait timeout; 0.11.0 has none, and the trailing bytes
// are refused.) FlushUnsavedBuffer decodes, but the server answers every call, valid
// body or not, with status 5 FeatureUnavailable.

// PollMessages (100). A plain consumer without a partition polls partition 0; a group
// poll must name its partition (the Go SDK resolves it client-side).
type PollMessages struct {
	Consumer          Consumer
	StreamID, TopicID Identifier
	Partition         OptionalPartition
	Strategy          PollingStrategy
	Count             uint32
	AutoCommit        bool // any non-zero byte
}

// Decode reads the body.
func (r *PollMessages) Decode(body []byte) error {
	d := newDecoder(body)
	r.Consumer = d.consumer()
	r.StreamID = d.identifier()
	r.TopicID = d.identifier()
	r.Partition = d.optionalPartition()
	r.Strategy = d.pollingStrategy()
	r.Count = d.u32()
	r.AutoCommit = d.u8() != 0
	return d.endIgnoringTrailing()
}

// Append encodes r.
func (r *PollMessages) Append(b []byte) ([]byte, error) {
	e := encoder{b: b}
	e.consumer(r.Consumer)
	e.identifier(r.StreamID)
	e.identifier(r.TopicID)
	e.optionalPartition(r.Partition)
	e.pollingStrategy(r.Strategy)
	e.u32(r.Count)
	e.flag(r.AutoCommit)
	return e.finish(b)
}

// FlushUnsavedBuffer (102).
type FlushUnsavedBuffer struct {
	StreamID, TopicID Identifier
	PartitionID       uint32
	Fsync             bool // any non-zero byte
}

// Decode reads the body.
func (r *FlushUnsavedBuffer) Decode(body []byte) error {
	d := newDecoder(body)
	r.StreamID = d.identifier()
	r.TopicID = d.identifier()
	r.PartitionID = d.u32()
	r.Fsync = d.u8() != 0
	return d.endIgnoringTrailing()
}

// Append encodes r.
func (r *FlushUnsavedBuffer) Append(b []byte) ([]byte, error) {
	e := encoder{b: b}
	e.identifier(r.StreamID)
	e.identifier(r.TopicID)
	e.u32(r.PartitionID)
	e.flag(r.Fsync)
	return e.finish(b)
}
