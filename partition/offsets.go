package partition

import (
	"errors"

	"github.com/iggy-shard/iggy-shard/wire"
)

// Consumer offsets (120 GetConsumerOffset, 121 StoreConsumerOffset, 122
// DeleteConsumerOffset) live with the partition's log, one file per consumer or
// group under offsets/ (segment/offsets.go): [offset u64][XxHash3-64 of it].

// ConsumerOffset returns the GetConsumerOffset reply of a consumer on partition k,
// and false when nothing is stored (the reply is then an empty body: the SDKs read
// it as "no offset"). Not owning k is 3007 PartitionNotFound.
func (s *Store) ConsumerOffset(k Key, c Consumer) (wire.ConsumerOffset, bool, error) {
	p, ok := s.partitions[k]
	if !ok {
		return wire.ConsumerOffset{}, false, wire.ErrPartitionNotFound
	}
	stored, ok := p.log.ConsumerOffset(c.segmentKind(), c.ID)
	if !ok {
		return wire.ConsumerOffset{}, false, nil
	}
	current, _ := p.log.CurrentOffset()
	return wire.ConsumerOffset{PartitionID: k.PartitionID, CurrentOffset: current, StoredOffset: stored}, true, nil
}

// AppendConsumerOffsetReply appends the GetConsumerOffset reply body: the 20-byte
// ConsumerOffset, or nothing when no offset is stored.
func (s *Store) AppendConsumerOffsetReply(dst []byte, k Key, c Consumer) ([]byte, error) {
	o, ok, err := s.ConsumerOffset(k, c)
	if err != nil || !ok {
		return dst, err
	}
	return o.Append(dst), nil
}

// StoreConsumerOffset stores a consumer's offset on partition k. Errors are the reply's
// status: 20 ResourceNotFound when the store does not own k (as the reference answers
// an unresolved partition write), 4100 InvalidOffset for an offset above the
// partition's current offset or any offset in an empty partition, 3 InvalidCommand for
// an unknown consumer kind.
//
// Both ack levels acknowledge after the store: AckNoAck once the offset is in memory
// and its file write submitted; AckQuorum, on a single node, once that write has
// completed (fdatasynced too when the topic enforces fsync). The Quorum wait polls
// the partition's storage until the log is idle, a short blocking step on the
// shard (segment gives no completion for offset writes).
func (s *Store) StoreConsumerOffset(k Key, c Consumer, offset uint64, ack wire.AckLevel) error {
	p, ok := s.partitions[k]
	if !ok {
		return wire.ErrResourceNotFound
	}
	if err := p.log.StoreConsumerOffset(c.segmentKind(), c.ID, offset); err != nil {
		return statusOf(err)
	}
	if ack == wire.AckQuorum {
		p.log.WaitIdle()
		p.settleSends()
	}
	return nil
}

// DeleteConsumerOffset deletes a consumer's offset on partition k and its file (the
// removal is done when it returns, for both ack levels). Errors: 20 ResourceNotFound
// when the store does not own k, 3021 ConsumerOffsetNotFound when nothing is stored.
func (s *Store) DeleteConsumerOffset(k Key, c Consumer, _ wire.AckLevel) error {
	p, ok := s.partitions[k]
	if !ok {
		return wire.ErrResourceNotFound
	}
	if err := p.log.DeleteConsumerOffset(c.segmentKind(), c.ID); err != nil {
		return statusOf(err)
	}
	p.settleSends()
	return nil
}

// commitForward is auto-commit: store offset unless the consumer is already there or
// further. A failure is dropped: the poll was served, and the consumer's next poll
// commits again.
func (p *Partition) commitForward(c Consumer, offset uint64) {
	if stored, ok := p.log.ConsumerOffset(c.segmentKind(), c.ID); ok && stored >= offset {
		return
	}
	_ = p.log.StoreConsumerOffset(c.segmentKind(), c.ID, offset)
}

// statusOf returns the wire code an error carries, or 10006 CannotWriteToFile for
// a storage failure that carries none.
func statusOf(err error) error {
	var code wire.ErrorCode
	if errors.As(err, &code) {
		return code
	}
	return wire.ErrCannotWriteToFile
}
