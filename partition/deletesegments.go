package partition

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/iggy-shard/iggy-shard/segment"
	"github.com/iggy-shard/iggy-shard/wire"
)

// DELETE_SEGMENTS deletes "the segments_count oldest sealed segments" of a
// partition (iggy.apache.org/docs/binary-protocol/commands, "Delete segments"). A
// count means something only against one log: the replicas of a partition apply
// the metadata op that asks it each at its own moment, and a backup whose log has
// not yet applied the primary's latest batches holds fewer sealed segments. Were
// each to delete its own oldest `count`, the backup would delete fewer, then
// receive the rest and keep them for good: the replicas would serve different
// first offsets, and a consumer reading a backup after a failover would see
// messages the command deleted.
//
// So the count is resolved once, by the partition's primary, against its applied
// log, into an offset: below, the end of the count-th oldest sealed segment. The
// primary proposes it as an op of the partition's group (operation DeleteSegments,
// body [revision u64][below u64], revision the metadata op's:
// partitionhost/record.go), and every replica applies it in the group's order:
// after every batch below `below`, whatever its log held when the metadata op
// reached it. Applying it deletes the oldest sealed segments that end at or below
// it (segment.Log's DeleteSegmentsBelow): whole segments only, never the open
// one, so no message at or above `below` goes, and none the command did not ask
// for. The reference
// resolves the count the same way, on the owning shard, into a replicated watermark
// (apache/iggy core/binary_protocol/src/consensus/operation.rs, TruncatePartition;
// core/metadata/src/stm/stream.rs, Partition::deleted_up_to_offset), carried by the
// metadata log where ours rides the partition's own.
//
// Each replica records the last such op it applied in segments.deleted, durably,
// before it deletes anything: a crash in the middle of the deletions is finished
// when the partition opens again (the sealed segments ending at or below the
// record's offset go), and an op of a revision the record reaches already is
// applied as nothing. That makes the op count once on every replica even when two
// primaries resolve the same metadata op (a view change between the first's
// proposal and the second's turn): the second op, resolved against a log the first
// already trimmed, would otherwise take `count` more. A primary also resolves
// nothing while its journal or its proposals hold the op already.
//
// The record is a replica's own and survives a state transfer (installReplaces):
// the installed segments are the primary's, trimmed at least as far. But the ops
// the state stands for are not replayed here, so the record cannot tell which
// DeleteSegments ops they held: an install marks it so, durably, before the
// install counts, and a primary whose record is so marked proposes no op of a
// revision above it (ErrDeleteSegmentsUncertain): an op it cannot tell applied is
// better left undone, on every replica alike, than done twice. The mark goes
// once an op applies here: the ops after the installed state are the group's own.
// (An op of a lower revision applied after a higher one, which two primaries'
// retries could order so, is then nothing: fewer deletions, never more.)

// ErrDeleteSegmentsUncertain: a primary that installed a state since its last
// DeleteSegments op cannot tell whether the state held the op asked for, and
// proposes none.
var ErrDeleteSegmentsUncertain = errors.New("partition: a state installed since the last DeleteSegments op applied here may hold this one")

// deletedSegmentsFileName is the record of the last DeleteSegments op applied.
const deletedSegmentsFileName = "segments.deleted"

// deletedSegmentsSlotBytes is one record: [sequence u64][revision u64][below u64]
// [installed u64: 1 after a state install][checksum u64]. The file holds two,
// written in turn, so a torn write leaves the other intact.
const deletedSegmentsSlotBytes = 40

// deleteSegmentsBodyBytes is the op's body: [revision u64][below u64].
const deleteSegmentsBodyBytes = 16

// deletedSegments is the last DeleteSegments op a partition applied.
type deletedSegments struct {
	revision uint64 // the metadata op's; 0: none applied
	below    uint64
	// installed: a state was installed since (see above).
	installed bool
	sequence  uint64 // of its record in the file; 0: no file
}

func encodeDeleteSegmentsOp(revision, below uint64) []byte {
	b := make([]byte, deleteSegmentsBodyBytes)
	binary.LittleEndian.PutUint64(b, revision)
	binary.LittleEndian.PutUint64(b[8:], below)
	return b
}

func decodeDeleteSegmentsOp(body []byte) (revision, below uint64, err error) {
	if len(body) != deleteSegmentsBodyBytes {
		return 0, 0, wire.ErrInvalidCommand
	}
	return binary.LittleEndian.Uint64(body), binary.LittleEndian.Uint64(body[8:]), nil
}

func (d *deletedSegments) encodeSlot(sequence uint64) []byte {
	b := make([]byte, deletedSegmentsSlotBytes)
	binary.LittleEndian.PutUint64(b, sequence)
	binary.LittleEndian.PutUint64(b[8:], d.revision)
	binary.LittleEndian.PutUint64(b[16:], d.below)
	if d.installed {
		binary.LittleEndian.PutUint64(b[24:], 1)
	}
	binary.LittleEndian.PutUint64(b[32:], wire.BodyChecksum(b[:32]).Lo)
	return b
}

func decodeDeletedSegmentsSlot(b []byte) (deletedSegments, bool) {
	if len(b) < deletedSegmentsSlotBytes || binary.LittleEndian.Uint64(b[32:]) != wire.BodyChecksum(b[:32]).Lo {
		return deletedSegments{}, false
	}
	d := deletedSegments{sequence: binary.LittleEndian.Uint64(b), revision: binary.LittleEndian.Uint64(b[8:]),
		below: binary.LittleEndian.Uint64(b[16:]), installed: binary.LittleEndian.Uint64(b[24:]) == 1}
	return d, d.sequence > 0
}

// noteStateInstalled marks the record installed over, durably: a state install
// calls it before the install counts.
func (p *Partition) noteStateInstalled() error {
	if p.store.repl.replicaCount() == 1 || p.deleted.installed {
		return nil
	}
	d := p.deleted
	d.installed = true
	if err := p.recordDeletedSegments(d); err != nil {
		return fmt.Errorf("deleted segments record: %w", err)
	}
	return nil
}

// openDeletedSegments reads the partition's record, if any, and finishes the
// deletion it records: a crash may have cut it short.
func (p *Partition) openDeletedSegments() error {
	p.deleted = deletedSegments{}
	if p.store.repl.replicaCount() == 1 {
		return nil // a group of one deletes by count (ReplicateDeleteSegments)
	}
	names, err := p.storage.List("")
	if err != nil {
		return fmt.Errorf("deleted segments: %w", err)
	}
	if !slices.Contains(names, deletedSegmentsFileName) {
		return nil
	}
	f, _, err := p.storage.Open(deletedSegmentsFileName, false, 0)
	if err != nil {
		return fmt.Errorf("deleted segments: open: %w", err)
	}
	defer func() { _ = p.storage.Close(f) }()
	buf := make([]byte, 2*deletedSegmentsSlotBytes)
	read := &segment.Request{Op: segment.OpRead, File: f, Data: buf}
	if err := waitRequest(p.storage, read); err != nil {
		return fmt.Errorf("deleted segments: read: %w", err)
	}
	buf = buf[:read.Result]
	for slot := 0; (slot+1)*deletedSegmentsSlotBytes <= len(buf); slot++ {
		if d, ok := decodeDeletedSegmentsSlot(buf[slot*deletedSegmentsSlotBytes:]); ok && d.sequence > p.deleted.sequence {
			p.deleted = d
		}
	}
	if p.deleted.revision == 0 {
		return nil
	}
	if _, err := p.log.DeleteSegmentsBelow(p.deleted.below); err != nil {
		return fmt.Errorf("deleted segments: below %d: %w", p.deleted.below, err)
	}
	return nil
}

// recordDeletedSegments makes d the partition's record, durably, in the slot the
// current record does not use.
func (p *Partition) recordDeletedSegments(d deletedSegments) error {
	sequence := p.deleted.sequence + 1
	f, _, err := p.storage.Open(deletedSegmentsFileName, true, 0)
	if err != nil {
		return err
	}
	defer func() { _ = p.storage.Close(f) }()
	slot := d.encodeSlot(sequence)
	if err := waitRequest(p.storage, &segment.Request{Op: segment.OpWrite, File: f, Offset: int64(sequence%2) * deletedSegmentsSlotBytes, Data: slot}); err != nil {
		return err
	}
	if err := waitRequest(p.storage, &segment.Request{Op: segment.OpSync, File: f}); err != nil {
		return err
	}
	d.sequence = sequence
	p.deleted = d
	return nil
}

// applyDeleteSegments applies a committed DeleteSegments op: nothing when the
// partition applied one of its revision (or a later one) already; otherwise the
// record first, then the sealed segments that end at or below the op's offset.
func (p *Partition) applyDeleteSegments(body []byte) error {
	revision, below, err := decodeDeleteSegmentsOp(body)
	if err != nil {
		return err
	}
	if revision <= p.deleted.revision {
		return nil
	}
	if err := p.recordDeletedSegments(deletedSegments{revision: revision, below: max(below, p.deleted.below)}); err != nil {
		return fmt.Errorf("%w: deleted segments record: %v", wire.ErrCannotWriteToFile, err)
	}
	removed, err := p.log.DeleteSegmentsBelow(p.deleted.below)
	if len(removed) > 0 {
		p.noteChanged() // the partition's stats (segments, first offset) moved
	}
	return err
}

// holdsDeleteSegments reports whether p applied, holds in its journal, or has on
// its way in, a DeleteSegments op of revision or later.
func (p *Partition) holdsDeleteSegments(revision uint64) bool {
	if p.deleted.revision >= revision {
		return true
	}
	for op := p.journal.firstOp; op <= p.journal.lastOp(); op++ {
		e := p.journal.at(op)
		if e != nil && e.present && !e.void && e.header.Operation == wire.OperationDeleteSegments {
			if r, _, err := decodeDeleteSegmentsOp(e.body); err == nil && r >= revision {
				return true
			}
		}
	}
	for i := 0; i < p.proposing.queue.n; i++ {
		if e := p.proposing.queue.at(i); e.operation == wire.OperationDeleteSegments {
			if r, _, err := decodeDeleteSegmentsOp(e.body); err == nil && r >= revision {
				return true
			}
		}
	}
	return false
}

// DeletedSegmentsRevision is the revision of the last DeleteSegments op partition
// k applied (0: none); ok is false when the store does not own k.
func (s *Store) DeletedSegmentsRevision(k Key) (revision uint64, ok bool) {
	p, ok := s.partitions[k]
	if !ok {
		return 0, false
	}
	return p.deleted.revision, true
}

// ReplicateDeleteSegments carries out DELETE_SEGMENTS on partition k for the
// metadata op of revision: in a group of one, the count oldest sealed segments go
// within the call (deferred false, err the outcome). In a larger group the primary
// resolves count against its applied log and proposes the offset (see above);
// done.OffsetDone(token, err) fires once the op is applied here or fails, and it
// reports deferred. It answers nil at once when the partition holds the op of
// revision already, and 58 TransientNotAccepted where
// this replica cannot propose now (a backup, a view changing, a full journal): the
// caller asks again later, or waits for the primary's op to apply here
// (DeletedSegmentsRevision).
func (s *Store) ReplicateDeleteSegments(k Key, count uint32, revision uint64, done OffsetCompletion, token uint64) (deferred bool, err error) {
	p, ok := s.partitions[k]
	if !ok {
		return false, wire.ErrPartitionNotFound
	}
	s.activate(p)
	if s.repl.replicaCount() == 1 {
		_, err := p.log.DeleteOldestSegments(int(count))
		return false, err
	}
	if err := p.broken(); err != nil {
		return false, wire.ErrCannotWriteToFile
	}
	if !p.group.core.IsPrimary() || p.journal.len()+p.proposing.queue.n >= journalEntriesMax {
		return false, wire.ErrTransientNotAccepted
	}
	if p.holdsDeleteSegments(revision) {
		return false, nil
	}
	if p.deleted.installed {
		return false, ErrDeleteSegmentsUncertain
	}
	// Proposed even when nothing is sealed (below 0): every replica then records
	// the revision, which is how the others learn the op is over.
	below, _, err := p.log.OldestSealedEnd(int(count))
	if err != nil {
		return false, err
	}
	body := encodeDeleteSegmentsOp(revision, below)
	seq, err := p.propose(proposal{operation: wire.OperationDeleteSegments, body: body, offsetDone: done, token: token, syncCall: true})
	if err != nil {
		return false, wire.ErrTransientNotAccepted
	}
	p.afterRun()
	if e := p.proposing.queue.bySeq(seq); e != nil {
		e.syncCall = false // proposed after the Ready out: done tells
		return true, nil
	}
	if p.proposing.syncOp == 0 {
		err, p.proposing.syncErr = p.proposing.syncErr, nil // refused when proposed
		return false, err
	}
	return true, nil
}
