package partition

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/iggy-shard/iggy-shard/segment"
	"github.com/iggy-shard/iggy-shard/vsr"
	"github.com/iggy-shard/iggy-shard/wire"
	"github.com/zeebo/xxh3"
)

// The durable state of a partition's group, in a cluster: partition.state in the
// partition directory, written through the partition's segment.Storage. It is what
// lets a restarted replica rejoin its group instead of starting a fresh one at op 0
// (which, with its peers far ahead, could never take their prepares):
//
//   - the view and log view, made durable before any frame of the Ready that moved
//     them goes out (a replica never goes back to an older view), with the commit
//     point;
//   - a checkpoint: the last applied op (its identity and timestamp) whose batch the
//     log holds durably, and the log's end after it. A restart whose log ends there
//     resumes from that op (vsr.Core.Recover with the checkpoint), probes its group
//     and repairs or transfers what it lacks; a log that ends elsewhere (batches
//     applied after the last checkpoint, or replayed from the journal file) is of
//     ops the replica cannot number, so it resumes from the checkpoint and takes a
//     state transfer once its log does not continue the primary's.
//
// The reference keeps the same facts in a partition superblock (view, log_view,
// commit_max, checkpoint_op, checkpoint_checksum, offset_frontier:
// apache/iggy core/journal, the superblock of a partition directory); this record is
// our own layout, two 4096-byte slots written in turn, the newest intact one read:
//
//	magic "IPGS" u32 | version u16 = 1 | reserved u16 | sequence u64 @8
//	view u32 @16 | log_view u32 @20 | commit_max u64 @24
//	checkpoint_op u64 @32 | checkpoint_identity u128 @40 | checkpoint_timestamp u64 @56
//	checkpoint_end u64 @64 | XxHash3-64 of bytes 0..72 @72
//
// A write is one slot, linked to an fdatasync: a torn write spoils only the slot
// being written, and the other still holds the previous record. A state file with
// no intact slot is trusted for nothing: the replica resumes from op 0 and takes a
// state transfer (its peers hold the partition).
const (
	groupStateFileName  = "partition.state"
	groupStateSlotBytes = 4096
	groupStateBytes     = 80
	groupStateMagic     = 0x53475049 // "IPGS" little-endian
	groupStateVersion   = 1
)

// groupState is one record of partition.state.
type groupState struct {
	durable vsr.DurableState
	// checkpoint is the last applied op the log holds durably; checkpointEnd the
	// log's next offset after it.
	checkpoint    vsr.Checkpoint
	checkpointEnd uint64
}

func (g *groupState) encode(sequence uint64, b *[groupStateBytes]byte) {
	le := binary.LittleEndian
	le.PutUint32(b[0:], groupStateMagic)
	le.PutUint16(b[4:], groupStateVersion)
	le.PutUint16(b[6:], 0)
	le.PutUint64(b[8:], sequence)
	le.PutUint32(b[16:], g.durable.View)
	le.PutUint32(b[20:], g.durable.LogView)
	le.PutUint64(b[24:], g.durable.CommitMax)
	le.PutUint64(b[32:], g.checkpoint.Op)
	le.PutUint64(b[40:], g.checkpoint.Identity.Lo)
	le.PutUint64(b[48:], g.checkpoint.Identity.Hi)
	le.PutUint64(b[56:], g.checkpoint.Timestamp)
	le.PutUint64(b[64:], g.checkpointEnd)
	le.PutUint64(b[72:], xxh3.Hash(b[:72]))
}

// decodeGroupState returns the record in b and its sequence, or false when b does
// not hold an intact one.
func decodeGroupState(b []byte) (groupState, uint64, bool) {
	le := binary.LittleEndian
	if len(b) < groupStateBytes || le.Uint32(b[0:]) != groupStateMagic || le.Uint16(b[4:]) != groupStateVersion ||
		le.Uint64(b[72:]) != xxh3.Hash(b[:72]) {
		return groupState{}, 0, false
	}
	g := groupState{
		durable: vsr.DurableState{View: le.Uint32(b[16:]), LogView: le.Uint32(b[20:]), CommitMax: le.Uint64(b[24:])},
		checkpoint: vsr.Checkpoint{
			Op:        le.Uint64(b[32:]),
			Identity:  wire.Uint128{Lo: le.Uint64(b[40:]), Hi: le.Uint64(b[48:])},
			Timestamp: le.Uint64(b[56:]),
		},
		checkpointEnd: le.Uint64(b[64:]),
	}
	if g.durable.LogView > g.durable.View || g.checkpoint.Op > 0 && g.checkpoint.Identity.IsZero() {
		return groupState{}, 0, false
	}
	return g, le.Uint64(b[8:]), true
}

// stateFile is a partition's open partition.state: what is durable, what is being
// written (one write at a time) and what waits to be written next.
type stateFile struct {
	p    *Partition
	file segment.File
	// found: the file existed at open (the replica had a prior life in the group);
	// intact: a slot of it held a record, recovered.
	found, intact bool
	recovered     groupState
	// durable is the last record made durable; sequence its sequence number.
	durable  groupState
	sequence uint64
	// The write in flight, and the generation of the record it carries; wanted and
	// wantedGen the record to write after it (the newest asked for).
	writing     bool
	writingGen  uint64
	wanted      groupState
	wantedGen   uint64
	durableGen  uint64
	buf         [groupStateBytes]byte
	write, sync segment.Request
	failed      error
	done        func(*segment.Request) // s.complete, bound once
}

// openState opens (or, for a replica of a fresh group, creates) p's state file in a
// replicated store and reads the newest intact record.
func (p *Partition) openState() error {
	if p.store.repl.replicaCount() == 1 {
		return nil
	}
	names, err := p.storage.List("")
	if err != nil {
		return fmt.Errorf("group state: %w", err)
	}
	found := slices.Contains(names, groupStateFileName)
	f, size, err := p.storage.Open(groupStateFileName, true, 0)
	if err != nil {
		return fmt.Errorf("group state: open: %w", err)
	}
	s := &stateFile{p: p, file: f, found: found && size > 0}
	s.done = s.complete
	if s.found {
		buf := make([]byte, 2*groupStateSlotBytes)
		read := &segment.Request{Op: segment.OpRead, File: f, Data: buf}
		if err := waitRequest(p.storage, read); err != nil {
			_ = p.storage.Close(f)
			return fmt.Errorf("group state: read: %w", err)
		}
		buf = buf[:read.Result]
		for slot := 0; slot*groupStateSlotBytes < len(buf); slot++ {
			g, seq, ok := decodeGroupState(buf[slot*groupStateSlotBytes:])
			if ok && (!s.intact || seq > s.sequence) {
				s.recovered, s.sequence, s.intact = g, seq, true
			}
		}
		s.durable = s.recovered
		s.wanted = s.recovered
	}
	p.state = s
	return nil
}

// waitRequest submits r and polls st until it has completed: for the rare,
// administrative requests of opening a partition.
func waitRequest(st segment.Storage, r *segment.Request) error {
	finished := false
	r.Done = func(*segment.Request) { finished = true }
	st.Submit(r)
	for !finished {
		if st.Poll(true) == 0 && !finished {
			return errors.New("storage lost a request")
		}
	}
	return r.Err
}

// persistView asks for the core's durable state to be made durable, with the
// newest checkpoint, and returns the generation of that record: durable once
// durableGen reaches it. A write in flight finishes first; records asked for
// meanwhile are folded into the newest.
func (s *stateFile) persistView(d vsr.DurableState) uint64 {
	s.wanted.durable = d
	return s.persist()
}

// persistCheckpoint records a newer checkpoint, with the newest view state.
func (s *stateFile) persistCheckpoint(cp vsr.Checkpoint, end uint64) uint64 {
	s.wanted.checkpoint, s.wanted.checkpointEnd = cp, end
	return s.persist()
}

func (s *stateFile) persist() uint64 {
	s.wantedGen++
	if !s.writing {
		s.start()
	}
	return s.wantedGen
}

func (s *stateFile) start() {
	s.writing, s.writingGen = true, s.wantedGen
	s.failed = nil
	next := s.sequence + 1
	s.wanted.encode(next, &s.buf)
	s.write = segment.Request{Op: segment.OpWrite, File: s.file, Offset: int64(next%2) * groupStateSlotBytes, Data: s.buf[:], Link: true, Done: s.done}
	s.sync = segment.Request{Op: segment.OpSync, File: s.file, Done: s.done}
	s.p.storage.Submit(&s.write)
	s.p.storage.Submit(&s.sync)
}

func (s *stateFile) complete(r *segment.Request) {
	if r.Err != nil && s.failed == nil {
		s.failed = r.Err
	}
	if r == &s.write {
		return // the sync completes the pair (canceled when the write failed)
	}
	s.writing = false
	if s.failed != nil {
		s.p.onStateWritten(s.failed)
		return
	}
	s.sequence++
	s.durable = s.wanted
	if s.wantedGen != s.writingGen {
		// A newer record was asked for meanwhile: s.wanted is it, not what was
		// written; the durable one is what the buffer holds.
		s.durable, _, _ = decodeGroupState(s.buf[:])
	}
	s.durableGen = s.writingGen
	if s.wantedGen != s.durableGen {
		s.start()
	}
	s.p.onStateWritten(nil)
}

// close waits for the write in flight and closes the file.
func (s *stateFile) close() error {
	for s.writing {
		if s.p.storage.Poll(true) == 0 {
			break
		}
	}
	return s.p.storage.Close(s.file)
}

// appliedRing remembers the last applied ops and the log's end after each, so that
// a checkpoint can name the newest one the log has written.
type appliedRing struct {
	ops  [appliedRingLen]appliedOp
	head int // the next slot to fill
	n    int
}

type appliedOp struct {
	cp  vsr.Checkpoint
	end uint64
}

// appliedRingLen is how many applied ops wait for their batch to be written: more
// than the log's write window holds batches in the common case; when the window
// holds more, a checkpoint waits for a quieter moment.
const appliedRingLen = 64

// noteApplied records an applied op (the log's next offset after it is end) and
// checkpoints it once written.
func (p *Partition) noteApplied(cp vsr.Checkpoint, end uint64) {
	if p.state == nil {
		return
	}
	r := &p.applied
	r.ops[r.head] = appliedOp{cp: cp, end: end}
	r.head = (r.head + 1) % appliedRingLen
	r.n = min(r.n+1, appliedRingLen)
	p.maybeCheckpoint()
}

// maybeCheckpoint persists the newest applied op whose batch the log has written
// (not necessarily fdatasynced: a restart checks the log's end against the
// checkpoint's, so a log that lost unsynced bytes is never taken for the
// checkpoint's).
func (p *Partition) maybeCheckpoint() {
	r := &p.applied
	if p.state == nil || r.n == 0 || p.state.failed != nil {
		return
	}
	written := p.log.WrittenEnd()
	for i := 0; i < r.n; i++ {
		e := &r.ops[(r.head-1-i+2*appliedRingLen)%appliedRingLen]
		if e.end > written {
			continue
		}
		if e.cp.Op > p.state.wanted.checkpoint.Op {
			p.state.persistCheckpoint(e.cp, e.end)
		}
		r.n = i // what is older than it is checkpointed too
		return
	}
}

// onStateWritten is the completion of a state file write: a held Ready that waited
// for its view state goes on.
func (p *Partition) onStateWritten(err error) {
	if err != nil {
		p.journalErr = fmt.Errorf("partition %v: group state write: %w", p.key, err)
	}
	if p.held && p.heldStateGen != 0 && (err != nil || p.state.durableGen >= p.heldStateGen) {
		p.heldStateGen = 0
		p.heldDone(err)
	}
}
