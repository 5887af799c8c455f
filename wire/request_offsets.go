package wire

// Consumer offset request bodies:
//
//	GetConsumerOffset (120)     [consumer Consumer][stream_id Identifier][topic_id Identifier]
//	                            [partition_flag u8][partition_id u32]
//	StoreConsumerOffset (121)   ... same prefix ... [offset u64][ack u8]
//	DeleteConsumerOffset (122)  ... same prefix ... [ack u8]
//
// The trailing ack byte of the two writes is mandatory and must be 0 (NoAck) or 1
// (Quorum). The reference server answers any decode failure of these two partition
// writes with status 20 ResourceNotFound, like every other resolution failure of a
// partition operation, so their Decode returns ErrResourceNotFound. An undecodable
// GetConsumerOffset gets the "nothing stored" reply (an empty status-0 body), not a
// status; its Decode returns ErrInvalidCommand and the server maps that.

// GetConsumerOffset (120). For a consumer group the partition is normally unset and
// the server resolves it.
type GetConsumerOffset struct {
	Consumer          Consumer
	StreamID, TopicID Identifier
	Partition         OptionalPartition
}

// Decode reads the body.
func (r *GetConsumerOffset) Decode(body []byte) error {
	d := newDecoder(body)
	d.offsetTarget(&r.Consumer, &r.StreamID, &r.TopicID, &r.Partition)
	return d.endIgnoringTrailing()
}

// Append encodes r.
func (r *GetConsumerOffset) Append(b []byte) ([]byte, error) {
	e := encoder{b: b}
	e.offsetTarget(r.Consumer, r.StreamID, r.TopicID, r.Partition)
	return e.finish(b)
}

// StoreConsumerOffset (121).
type StoreConsumerOffset struct {
	Consumer          Consumer
	StreamID, TopicID Identifier
	Partition         OptionalPartition
	Offset            uint64
	Ack               AckLevel
}

// Decode reads the body; any failure is ErrResourceNotFound (see above).
func (r *StoreConsumerOffset) Decode(body []byte) error {
	d := newDecoder(body)
	d.offsetTarget(&r.Consumer, &r.StreamID, &r.TopicID, &r.Partition)
	r.Offset = d.u64()
	r.Ack = d.ackLevel()
	return partitionWriteError(d.endIgnoringTrailing())
}

// Append encodes r.
func (r *StoreConsumerOffset) Append(b []byte) ([]byte, error) {
	e := encoder{b: b}
	e.offsetTarget(r.Consumer, r.StreamID, r.TopicID, r.Partition)
	e.u64(r.Offset)
	e.ackLevel(r.Ack)
	return e.finish(b)
}

// DeleteConsumerOffset (122).
type DeleteConsumerOffset struct {
	Consumer          Consumer
	StreamID, TopicID Identifier
	Partition         OptionalPartition
	Ack               AckLevel
}

// Decode reads the body; any failure is ErrResourceNotFound (see above).
func (r *DeleteConsumerOffset) Decode(body []byte) error {
	d := newDecoder(body)
	d.offsetTarget(&r.Consumer, &r.StreamID, &r.TopicID, &r.Partition)
	r.Ack = d.ackLevel()
	return partitionWriteError(d.endIgnoringTrailing())
}

// Append encodes r.
func (r *DeleteConsumerOffset) Append(b []byte) ([]byte, error) {
	e := encoder{b: b}
	e.offsetTarget(r.Consumer, r.StreamID, r.TopicID, r.Partition)
	e.ackLevel(r.Ack)
	return e.finish(b)
}

func (d *decoder) offsetTarget(c *Consumer, stream, topic *Identifier, p *OptionalPartition) {
	*c = d.consumer()
	*stream = d.identifier()
	*topic = d.identifier()
	*p = d.optionalPartition()
}

func (e *encoder) offsetTarget(c Consumer, stream, topic Identifier, p OptionalPartition) {
	e.consumer(c)
	e.identifier(stream)
	e.identifier(topic)
	e.optionalPartition(p)
}

func (d *decoder) ackLevel() AckLevel {
	a := AckLevel(d.u8())
	if d.err == nil && !a.Known() {
		d.fail(ErrInvalidCommand)
	}
	return a
}

func (e *encoder) ackLevel(a AckLevel) {
	if !a.Known() {
		e.fail(ErrInvalidCommand)
		return
	}
	e.u8(uint8(a))
}

// partitionWriteError turns a decode failure of a partition write into the status
// the reference server answers it with.
func partitionWriteError(err error) error {
	if err != nil {
		return ErrResourceNotFound
	}
	return nil
}
