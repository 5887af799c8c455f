package partition

import (
	"encoding/binary"

	"github.com/iggy-shard/iggy-shard/segment"
	"github.com/iggy-shard/iggy-shard/wire"
)

// Consumer names whose offsets a poll or an offset call reads or writes: a single
// consumer or a consumer group, by the numeric id the glue resolved (for a group
// poll the glue has also resolved the member's partition).
type Consumer struct {
	Kind wire.ConsumerKind // wire.ConsumerSingle or wire.ConsumerGroup
	ID   uint32
}

func (c Consumer) segmentKind() segment.ConsumerKind { return segment.ConsumerKind(c.Kind) }

// PollRequest is a decoded PollMessages (100) for one partition.
type PollRequest struct {
	Consumer Consumer
	// Strategy: offset (from Value), timestamp (from the first batch stamped at or
	// after Value µs), first, last (the newest Count messages), next (after the
	// consumer's stored offset, or from the first when none is stored).
	Strategy wire.PollingStrategy
	// Count is the most messages to return; 0 returns none.
	Count uint32
	// AutoCommit stores the offset of the last polled message as the consumer's
	// offset once the poll is served. Like the reference server's, it only moves an
	// offset forward: polling an older range does not rewind the consumer.
	AutoCommit bool
	// MaxBytes bounds the stored bytes one poll reads into memory (at least one
	// batch is read); 0 = segment.DefaultReadBytesMax (64 MiB).
	MaxBytes int64
}

// PollCompletion learns that a poll was served.
type PollCompletion interface {
	// PollDone runs once per Poll, with the result to send (AppendPollBuffers or
	// AppendPollReply). err non-nil means a read failed (an I/O error, or a batch
	// failing its checksum at rest, segment.CorruptBatchError): the result then
	// holds no message, which is the reply to send (the reference server fails such
	// a poll closed with an empty result: its reply has no error channel); log err.
	PollDone(token uint64, r *PollResult, err error)
}

// PollResult is one poll's answer, owned by the caller and reused from poll to poll:
// its buffers grow to the largest poll and stay, so steady-state polls allocate
// nothing. What it refers to stays valid until its next use.
type PollResult struct {
	polled      segment.Polled
	partitionID uint32
	prefix      [wire.PolledMessagesPrefixSize]byte

	// One poll in flight at most; these are set by Poll for its completion.
	inFlight   bool
	partition  *Partition
	autoCommit bool
	consumer   Consumer
	done       PollCompletion
	token      uint64
	readDone   func(*segment.Polled, error) // r.complete, bound once
}

// SetReadBuffers has the result's reads take their buffers from alloc (see
// segment.Polled.Alloc) instead of keeping one that grows to the largest read: a
// caller bounding the memory of many results lends each read a buffer and takes it
// back with TakeReadBuffer. Set it once, while no poll is in flight.
func (r *PollResult) SetReadBuffers(alloc func(n int) []byte) { r.polled.Alloc = alloc }

// TakeReadBuffer returns the buffer the last read took from SetReadBuffers' alloc,
// and forgets it (nil when it holds none). The result's records refer to it: take it
// once they are sent.
func (r *PollResult) TakeReadBuffer() []byte { return r.polled.TakeBuffer() }

// HoldsReadBuffer reports whether the last read took a buffer from SetReadBuffers'
// alloc and holds it.
func (r *PollResult) HoldsReadBuffer() bool { return r.polled.HoldsBuffer() }

// MessageCount is the number of messages in the result.
func (r *PollResult) MessageCount() uint32 { return r.polled.MessageCount }

// CurrentOffset is the partition's newest offset when polled (0 when empty).
func (r *PollResult) CurrentOffset() uint64 { return r.polled.CurrentOffset }

// PartitionID is the polled partition.
func (r *PollResult) PartitionID() uint32 { return r.partitionID }

// FirstOffset is the offset of the first message of the result, and false when it
// holds none. Offsets in a result are consecutive.
func (r *PollResult) FirstOffset() (uint64, bool) {
	if r.polled.MessageCount == 0 {
		return 0, false
	}
	rec := &r.polled.Records[0]
	header, _ := wire.ViewBatchHeader(rec.Header)
	// The first frame's offset_delta (frame bytes 24..28): a record sliced from a
	// stored batch keeps the stored base_offset and the frames' deltas.
	return header.BaseOffset() + uint64(binary.LittleEndian.Uint32(rec.Frames[24:28])), true
}

// LastOffset is the offset of the last message of the result, and false when it
// holds none.
func (r *PollResult) LastOffset() (uint64, bool) {
	first, ok := r.FirstOffset()
	if !ok {
		return 0, false
	}
	return first + uint64(r.polled.MessageCount) - 1, true
}

// ReplySizeBytes is the length of the PolledMessages reply body.
func (r *PollResult) ReplySizeBytes() int {
	n := wire.PolledMessagesPrefixSize
	for i := range r.polled.Records {
		n += len(r.polled.Records[i].Header) + len(r.polled.Records[i].Frames)
	}
	return n
}

// AppendPollBuffers appends the PolledMessages reply body (apache/iggy
// core/binary_protocol/src/responses/messages/poll_messages.rs) as byte slices to send
// with one vectored write, without copying a message:
//
//	[partition_id u32][current_offset u64][messages_count u32]   the 16-byte prefix
//	[batch header 256][frames]                                    per record
//
// A record is a stored batch as the producer sent it (stamped), or at either end of
// the range a slice of one behind a recomputed header (wire.SliceBatch).
func (r *PollResult) AppendPollBuffers(dst [][]byte) [][]byte {
	dst = append(dst, r.prefix[:])
	for i := range r.polled.Records {
		rec := &r.polled.Records[i]
		dst = append(dst, rec.Header, rec.Frames)
	}
	return dst
}

// AppendPollReply appends the PolledMessages reply body as one contiguous run of
// bytes: for tests and a simple server path that does not write vectored.
func AppendPollReply(dst []byte, r *PollResult) []byte {
	dst = append(dst, r.prefix[:]...)
	return r.polled.AppendTo(dst)
}

// AppendEmptyPollReply appends a PolledMessages body with no message: what a poll that
// cannot be served gets instead of a status (handle_poll_messages in apache/iggy
// core/server/src/dispatch.rs: an undecodable body, partition 0; a consumer-group poll
// the member does not own, wire.PollPartitionResync).
func AppendEmptyPollReply(dst []byte, partitionID uint32, currentOffset uint64) []byte {
	p := wire.PolledMessages{PartitionID: partitionID, CurrentOffset: currentOffset}
	return p.AppendPrefix(dst)
}

// Poll reads messages from partition k into res and runs done.PollDone once they
// are there: from the store's I/O polling, or before Poll returns when there is
// nothing to read (an empty partition, an offset past the end, count 0, a timestamp
// after the newest batch). Only acknowledged-or-written batches are served: with
// enforce_fsync only durable ones.
//
// It returns 3007 PartitionNotFound, and runs nothing, when the store does not own
// k. res must not be in use by another poll.
func (s *Store) Poll(k Key, req PollRequest, res *PollResult, done PollCompletion, token uint64) error {
	p, ok := s.partitions[k]
	if !ok {
		return wire.ErrPartitionNotFound
	}
	s.activate(p)
	if res.inFlight {
		panic("partition: PollResult reused while its poll is in flight")
	}
	if res.readDone == nil {
		res.readDone = res.complete
	}
	res.inFlight = true
	res.partition = p
	res.partitionID = k.PartitionID
	res.autoCommit = req.AutoCommit
	res.consumer = req.Consumer
	res.done = done
	res.token = token
	p.log.ReadAsync(req.query(), &res.polled, res.readDone)
	return nil
}

// query is the log's read of a poll.
func (req *PollRequest) query() segment.Query {
	return segment.Query{
		Kind:         segment.PollingKind(req.Strategy.Kind),
		Value:        req.Strategy.Value,
		Count:        req.Count,
		ConsumerKind: req.Consumer.segmentKind(),
		ConsumerID:   req.Consumer.ID,
		MaxBytes:     req.MaxBytes,
	}
}

// complete is the read's completion: auto-commit, then the prefix, then the caller.
func (r *PollResult) complete(_ *segment.Polled, err error) {
	p, done, token := r.partition, r.done, r.token
	r.inFlight, r.partition, r.done = false, nil, nil
	if err == nil && r.autoCommit {
		if last, ok := r.LastOffset(); ok {
			p.commitForward(r.consumer, last)
		}
	}
	prefix := wire.PolledMessages{PartitionID: r.partitionID, CurrentOffset: r.polled.CurrentOffset, MessagesCount: r.polled.MessageCount}
	prefix.AppendPrefix(r.prefix[:0])
	done.PollDone(token, r, err)
}
