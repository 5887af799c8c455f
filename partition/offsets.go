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
// The ack levels are the reference server's (architecture of its partition plane,
// iggy.apache.org/docs/binary-protocol/messages): AckQuorum is a prepare of the
// partition's group (operation StoreConsumerOffset, the body its payload with the
// resolved numeric ids), applied at commit on every replica; on a single node it
// commits at once, and the call returns once the offset file write has completed
// (fdatasynced too when the topic enforces fsync). AckNoAck writes locally on the
// primary, as the reference does: the offset is in memory and its file write
// submitted. The waits poll the partition's storage, a short blocking step on the
// shard (segment gives no completion for offset writes).
func (s *Store) StoreConsumerOffset(k Key, c Consumer, offset uint64, ack wire.AckLevel) error {
	p, ok := s.partitions[k]
	if !ok {
		return wire.ErrResourceNotFound
	}
	if s.SyncDirs() != nil {
		return wire.ErrCannotWriteToFile
	}
	s.activate(p)
	if ack != wire.AckQuorum {
		if err := p.log.StoreConsumerOffset(c.segmentKind(), c.ID, offset); err != nil {
			return statusOf(err)
		}
		return nil
	}
	if c.Kind != wire.ConsumerSingle && c.Kind != wire.ConsumerGroup {
		return wire.ErrInvalidCommand
	}
	if current, ok := p.log.CurrentOffset(); !ok || offset > current {
		return wire.ErrInvalidOffset
	}
	if err := p.replicateOffsetOp(wire.OperationStoreConsumerOffset, c, offset); err != nil {
		return statusOf(err)
	}
	p.log.WaitIdle()
	p.settleSends()
	return nil
}

// DeleteConsumerOffset deletes a consumer's offset on partition k and its file (the
// removal is done when it returns, for both ack levels; AckQuorum through the
// partition's group, as StoreConsumerOffset). Errors: 20 ResourceNotFound when the
// store does not own k, 3021 ConsumerOffsetNotFound when nothing is stored (checked
// before replication, as the reference does).
func (s *Store) DeleteConsumerOffset(k Key, c Consumer, ack wire.AckLevel) error {
	p, ok := s.partitions[k]
	if !ok {
		return wire.ErrResourceNotFound
	}
	if s.SyncDirs() != nil {
		return wire.ErrCannotWriteToFile
	}
	s.activate(p)
	if ack != wire.AckQuorum {
		if err := p.log.DeleteConsumerOffset(c.segmentKind(), c.ID); err != nil {
			return statusOf(err)
		}
		p.settleSends()
		return nil
	}
	if c.Kind != wire.ConsumerSingle && c.Kind != wire.ConsumerGroup {
		return wire.ErrInvalidCommand
	}
	if _, ok := p.log.ConsumerOffset(c.segmentKind(), c.ID); !ok {
		return wire.ErrConsumerOffsetNotFound
	}
	if err := p.replicateOffsetOp(wire.OperationDeleteConsumerOffset, c, 0); err != nil {
		return statusOf(err)
	}
	p.settleSends()
	return nil
}

// OffsetCompletion is told once a deferred offset op is applied, or failed.
type OffsetCompletion interface {
	OffsetDone(token uint64, err error)
}

// IsPrimary reports whether this replica is the primary of partition k's group in
// a normal view: the one replica that proposes the group's ops (Send,
// ReplicateConsumerOffset, AckQuorum offset writes), which a backup, or a replica
// whose group is changing views, refuses with 58 and applies once its primary's
// commit reaches it. A caller that needs an op done on every replica (a deleted
// consumer group's offsets) asks the primary and, elsewhere, waits for the
// primary's op to arrive instead of asking again. False for a partition the store
// does not own; always true in a group of one replica.
func (s *Store) IsPrimary(k Key) bool {
	p, ok := s.partitions[k]
	return ok && p.group.core != nil && p.group.core.IsPrimary()
}

// ReplicateConsumerOffset is StoreConsumerOffset (or, with del, DeleteConsumerOffset)
// at AckQuorum for a caller that can wait for its answer: in a group of more than
// one replica the quorum's acknowledgements travel outside any call, so the op is
// proposed and done.OffsetDone(token, err) fires once it is applied (or fails); it
// reports deferred. In a group of one it is answered within the call (deferred
// false, err the answer), as the synchronous calls are.
func (s *Store) ReplicateConsumerOffset(k Key, c Consumer, offset uint64, del bool, done OffsetCompletion, token uint64) (deferred bool, err error) {
	p, ok := s.partitions[k]
	if !ok {
		return false, wire.ErrResourceNotFound
	}
	if s.SyncDirs() != nil {
		return false, wire.ErrCannotWriteToFile
	}
	s.activate(p)
	if s.repl.replicaCount() == 1 {
		if del {
			return false, s.DeleteConsumerOffset(k, c, wire.AckQuorum)
		}
		return false, s.StoreConsumerOffset(k, c, offset, wire.AckQuorum)
	}
	if c.Kind != wire.ConsumerSingle && c.Kind != wire.ConsumerGroup {
		return false, wire.ErrInvalidCommand
	}
	operation := wire.OperationStoreConsumerOffset
	if del {
		operation = wire.OperationDeleteConsumerOffset
		if _, ok := p.log.ConsumerOffset(c.segmentKind(), c.ID); !ok {
			return false, wire.ErrConsumerOffsetNotFound
		}
	} else if current, ok := p.log.CurrentOffset(); !ok || offset > current {
		return false, wire.ErrInvalidOffset
	}
	if err := p.broken(); err != nil {
		return false, wire.ErrCannotWriteToFile
	}
	if !p.group.core.IsPrimary() || p.journal.len()+p.proposing.queue.n >= journalEntriesMax {
		// Not the group's primary, or its journal is full: the client asks again.
		return false, wire.ErrTransientNotAccepted
	}
	body := encodeOffsetOp(make([]byte, 0, offsetOpBodyMax), operation, p.key, c, offset)
	seq, err := p.propose(proposal{operation: operation, body: body, offsetDone: done, token: token, syncCall: true})
	if err != nil {
		return false, wire.ErrTransientNotAccepted
	}
	p.afterRun()
	if e := p.proposing.queue.bySeq(seq); e != nil {
		e.syncCall = false // proposed after the Ready out: OffsetDone tells
		return true, nil
	}
	if p.proposing.syncOp == 0 {
		err, p.proposing.syncErr = p.proposing.syncErr, nil // refused when proposed
		return false, err
	}
	return true, nil
}

// offsetOpBodyMax is the largest offset op payload: consumer (1 + 5), stream and
// topic ids (5 each), partition (1 + 4), offset 8, ack 1.
const offsetOpBodyMax = 64

// replicateOffsetOp proposes an offset op on p's group and waits until it is applied
// (the caller's API answers synchronously): the sends that were waiting go first, so
// the op keeps its place in the partition's order.
func (p *Partition) replicateOffsetOp(operation wire.Operation, c Consumer, offset uint64) error {
	if err := p.broken(); err != nil {
		return wire.ErrCannotWriteToFile
	}
	if !p.group.core.IsPrimary() {
		return wire.ErrTransientNotAccepted
	}
	for range quiesceRoundsMax {
		if !p.holding() && p.proposing.queue.n == 0 {
			break
		}
		if p.holding() {
			if p.pollStorage(true) == 0 && p.holding() {
				panic("partition: a Ready out waits on a storage with nothing in flight")
			}
			continue
		}
		p.run()
		if p.holding() || p.proposing.queue.n == 0 {
			continue
		}
		if p.pollStorage(true) == 0 { // the pipeline is full: let the log drain
			if p.store.repl.replicaCount() > 1 {
				return wire.ErrTransientNotAccepted // only the peers' acks free it
			}
			p.settleSends()
		}
	}
	if p.holding() || p.proposing.queue.n > 0 {
		return wire.ErrTransientNotAccepted
	}
	body := encodeOffsetOp(make([]byte, 0, offsetOpBodyMax), operation, p.key, c, offset)
	p.proposing.offsetErr = nil
	seq, err := p.propose(proposal{operation: operation, body: body, syncCall: true})
	if err != nil {
		return wire.ErrTransientNotAccepted
	}
	p.afterRun()
	if e := p.proposing.queue.bySeq(seq); e != nil {
		// Waiting for room in the pipeline: it is proposed later, with nobody to
		// tell; admitted, so 57 (outcome unknown), and the client retries (a store
		// is idempotent).
		e.syncCall = false
		return wire.ErrTransientNotCommitted
	}
	if p.proposing.syncOp == 0 {
		err, p.proposing.syncErr = p.proposing.syncErr, nil // refused when proposed
		return err
	}
	op := p.proposing.syncOp
	h, _ := p.group.core.Header(op)
	for range quiesceRoundsMax {
		if e := p.journal.at(op); e == nil || !e.present || e.header.Checksum != h.Checksum {
			break // applied
		}
		if p.broken() != nil {
			return wire.ErrCannotWriteToFile
		}
		if p.pollStorage(true) == 0 && !p.holding() {
			if p.store.repl.replicaCount() > 1 {
				// The quorum's acks travel outside this call: the op is prepared and
				// applies at commit, but this synchronous API cannot wait for it: 57
				// (outcome unknown), and the client retries (a store is idempotent);
				// a cluster's server uses ReplicateConsumerOffset, which answers once
				// the op is applied.
				if e := p.journal.at(op); e != nil {
					e.syncCall = false
				}
				return wire.ErrTransientNotCommitted
			}
			p.log.Sync() // the log's window waits for a save
		}
		p.settleSends()
	}
	if e := p.journal.at(op); e != nil && e.present && e.header.Checksum == h.Checksum {
		e.syncCall = false
		return wire.ErrTransientNotCommitted // not applied within the bound: see above
	}
	err, p.proposing.offsetErr = p.proposing.offsetErr, nil
	return err
}

// encodeOffsetOp appends an offset op's body: its command's payload
// (wire.StoreConsumerOffset or wire.DeleteConsumerOffset) with numeric ids and ack
// Quorum.
func encodeOffsetOp(dst []byte, operation wire.Operation, k Key, c Consumer, offset uint64) []byte {
	consumer := wire.Consumer{Kind: c.Kind, ID: wire.NumericIdentifier(c.ID)}
	var out []byte
	var err error
	if operation == wire.OperationStoreConsumerOffset {
		r := wire.StoreConsumerOffset{Consumer: consumer, StreamID: wire.NumericIdentifier(k.StreamID), TopicID: wire.NumericIdentifier(k.TopicID),
			Partition: wire.SomePartition(k.PartitionID), Offset: offset, Ack: wire.AckQuorum}
		out, err = r.Append(dst)
	} else {
		r := wire.DeleteConsumerOffset{Consumer: consumer, StreamID: wire.NumericIdentifier(k.StreamID), TopicID: wire.NumericIdentifier(k.TopicID),
			Partition: wire.SomePartition(k.PartitionID), Ack: wire.AckQuorum}
		out, err = r.Append(dst)
	}
	if err != nil {
		panic("partition: an offset op with numeric ids does not encode: " + err.Error())
	}
	return out
}

// decodeOffsetOp reads an offset op's body back: the consumer and, for a store, the
// offset.
func decodeOffsetOp(operation wire.Operation, body []byte) (Consumer, uint64, error) {
	var consumer wire.Consumer
	var offset uint64
	if operation == wire.OperationStoreConsumerOffset {
		var r wire.StoreConsumerOffset
		if err := r.Decode(body); err != nil {
			return Consumer{}, 0, err
		}
		consumer, offset = r.Consumer, r.Offset
	} else {
		var r wire.DeleteConsumerOffset
		if err := r.Decode(body); err != nil {
			return Consumer{}, 0, err
		}
		consumer = r.Consumer
	}
	if consumer.ID.Kind != wire.IdentifierNumeric {
		return Consumer{}, 0, wire.ErrInvalidCommand
	}
	return Consumer{Kind: consumer.Kind, ID: consumer.ID.Numeric}, offset, nil
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
