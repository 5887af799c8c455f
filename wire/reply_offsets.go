package wire

// ConsumerOffset is the GetConsumerOffset reply
// (iggy.apache.org/docs/binary-protocol/commands, "Consumer offsets"), 20 bytes:
//
//	+--------------+----------------+---------------+
//	| partition_id | current_offset | stored_offset |
//	| u32          | u64            | u64           |
//	+--------------+----------------+---------------+
//
// An empty body means nothing is stored for that consumer (or the group or stream is
// unknown); the Go SDK returns nil for it.
type ConsumerOffset struct {
	PartitionID   uint32
	CurrentOffset uint64
	StoredOffset  uint64
}

const consumerOffsetNumBytes = 20

// EncodedLen is the exact number of bytes Append writes.
func (o *ConsumerOffset) EncodedLen() int { return consumerOffsetNumBytes }

// Append encodes o onto b.
func (o *ConsumerOffset) Append(b []byte) []byte {
	b = appendU32(b, o.PartitionID)
	b = appendU64(b, o.CurrentOffset)
	return appendU64(b, o.StoredOffset)
}

func (o *ConsumerOffset) decodeFrom(d *decoder) {
	o.PartitionID = d.u32()
	o.CurrentOffset = d.u64()
	o.StoredOffset = d.u64()
}

// Decode reads a GetConsumerOffset body. An empty body ("no stored offset")
// decodes as ErrConsumerOffsetNotFound; any length but 0 and 20 is malformed.
func (o *ConsumerOffset) Decode(body []byte) error {
	if len(body) == 0 {
		return ErrConsumerOffsetNotFound
	}
	return decodeExact(o, body)
}
