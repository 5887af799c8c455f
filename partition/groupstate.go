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
//   - the view and log view, with the headers of the log view's suffix (vsr.Ready's
//     State and ViewHeaders), made durable before any frame of the Ready that moved
//     them goes out: a replica never goes back to an older view, and never speaks
//     for a shorter log than the one it adopted;
//   - a checkpoint: the header of the last applied op whose batch the log has
//     written, and the log's end after it. A restart whose log ends there resumes
//     from that op (vsr.Core.Recover with the checkpoint and, with enforce_fsync,
//     the journal file's ops above it: durable.go), probes its group and repairs or
//     transfers what it lacks. A log that ends elsewhere (batches applied after the
//     last checkpoint, or bytes lost in a power failure) is of ops the replica
//     cannot number: it resumes from op 0 and takes the state of its primary once
//     its log does not continue the primary's.
//
// The reference keeps the same facts in a partition superblock (view, log_view,
// commit_max, checkpoint_op, checkpoint_checksum, offset_frontier: apache/iggy
// core/journal, the superblock of a partition directory); this record is our own
// layout, in two slots of groupStateSlotBytes written in turn, the newest intact
// one read:
//
//	magic "IPGS" u32 | version u16 = 1 | view_headers u16 @6 | sequence u64 @8
//	view u32 @16 | log_view u32 @20 | commit_max u64 @24 | checkpoint_end u64 @32
//	checkpoint PrepareHeader (256) @40            zero when no op was checkpointed
//	view_headers x PrepareHeader (256) @296       the log view's suffix, head first
//	XxHash3-64 of everything before               @296 + 256 x view_headers
//
// A write is one slot, linked to an fdatasync: a torn write spoils only the slot
// being written, and the other still holds the previous record. A state file with
// no intact slot is the torn first write of a group that never had a durable state
// (the Ready that asked for it sent nothing): the replica is where a fresh group
// is, view 0 and no checkpoint, with its journal file's ops.
const (
	groupStateFileName = "partition.state"
	groupStatePrefix   = 40
	groupStateMagic    = 0x53475049 // "IPGS" little-endian
	groupStateVersion  = 1
	// groupStateHeadersMax bounds the view headers a record carries: a partition
	// group's suffix above its commit point is at most its pipeline
	// (vsr.PipelineDepthMax); more is refused at decode.
	groupStateHeadersMax = 2 * vsr.PipelineDepthMax
	groupStateSlotBytes  = groupStatePrefix + wire.HeaderSize*(1+groupStateHeadersMax) + 8
)

// groupState is one record of partition.state.
type groupState struct {
	durable     vsr.DurableState
	viewHeaders []wire.PrepareHeader
	// checkpoint is the header of the last applied op the log holds (zero: none);
	// checkpointEnd the log's next offset after it.
	checkpoint    wire.PrepareHeader
	checkpointEnd uint64
}

func (g *groupState) checkpointOf() vsr.Checkpoint {
	return vsr.Checkpoint{Op: g.checkpoint.Op, Identity: g.checkpoint.Checksum, Timestamp: g.checkpoint.Timestamp}
}

func (g *groupState) encode(sequence uint64, b []byte) []byte {
	le := binary.LittleEndian
	headers := g.viewHeaders[:min(len(g.viewHeaders), groupStateHeadersMax)]
	b = le.AppendUint32(b[:0], groupStateMagic)
	b = le.AppendUint16(b, groupStateVersion)
	b = le.AppendUint16(b, uint16(len(headers)))
	b = le.AppendUint64(b, sequence)
	b = le.AppendUint32(b, g.durable.View)
	b = le.AppendUint32(b, g.durable.LogView)
	b = le.AppendUint64(b, g.durable.CommitMax)
	b = le.AppendUint64(b, g.checkpointEnd)
	b = append(b, wire.HeaderBytes(&g.checkpoint)[:]...)
	for i := range headers {
		b = append(b, wire.HeaderBytes(&headers[i])[:]...)
	}
	return le.AppendUint64(b, xxh3.Hash(b))
}

// decodeGroupState returns the record at the start of b and its sequence, or false
// when b does not hold an intact one.
func decodeGroupState(b []byte) (groupState, uint64, bool) {
	le := binary.LittleEndian
	if len(b) < groupStatePrefix+wire.HeaderSize+8 || le.Uint32(b[0:]) != groupStateMagic || le.Uint16(b[4:]) != groupStateVersion {
		return groupState{}, 0, false
	}
	count := int(le.Uint16(b[6:]))
	size := groupStatePrefix + wire.HeaderSize*(1+count)
	if count > groupStateHeadersMax || len(b) < size+8 || le.Uint64(b[size:]) != xxh3.Hash(b[:size]) {
		return groupState{}, 0, false
	}
	g := groupState{
		durable:       vsr.DurableState{View: le.Uint32(b[16:]), LogView: le.Uint32(b[20:]), CommitMax: le.Uint64(b[24:])},
		checkpointEnd: le.Uint64(b[32:]),
	}
	copy(wire.HeaderBytes(&g.checkpoint)[:], b[groupStatePrefix:])
	if count > 0 {
		g.viewHeaders = make([]wire.PrepareHeader, count)
		for i := range g.viewHeaders {
			copy(wire.HeaderBytes(&g.viewHeaders[i])[:], b[groupStatePrefix+wire.HeaderSize*(1+i):])
		}
	}
	if g.durable.LogView > g.durable.View || g.checkpoint.Op > 0 && !g.checkpoint.IdentityValid() {
		return groupState{}, 0, false
	}
	return g, le.Uint64(b[8:]), true
}

// stateFile is a partition's open partition.state: what is durable, what is being
// written (one write at a time) and what waits to be written next.
type stateFile struct {
	p    *Partition
	file segment.File
	// found: the file existed with a record at open (the replica had a prior life
	// in the group); intact: recovered is trustworthy (a slot held an intact
	// record, or there was none: op 0).
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
	buf         []byte
	write, sync segment.Request
	failed      error
	done        func(*segment.Request) // s.complete, bound once
	// openErr: creating the file for the first record failed (start); the write
	// fails with it (failOpen).
	openErr error
}

// failOpen completes the write whose file could not be created, as a failed write.
func (s *stateFile) failOpen() {
	err := s.openErr
	s.openErr, s.writing, s.failed = nil, false, err
	s.p.onStateWritten(err)
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
	s := &stateFile{p: p}
	s.done = s.complete
	if !slices.Contains(names, groupStateFileName) {
		// A fresh group: the file is created with its first record (start), so a
		// partition created and never used holds no file.
		s.intact = true
		p.group.state = s
		return nil
	}
	f, size, err := p.storage.Open(groupStateFileName, false, 0)
	if err != nil {
		return fmt.Errorf("group state: open: %w", err)
	}
	s.file, s.found = f, size > 0
	// No record yet (a group that never changed view nor checkpointed): the
	// replica is at op 0 with an empty log; its journal file may hold ops above.
	s.intact = !s.found
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
		if !s.intact {
			// No slot holds a record: the first write was torn (the group never
			// had a durable state: the Ready that asked for it sent nothing), as
			// the other slot holds the previous record whenever one existed.
			s.intact, s.found = true, false
		}
		s.durable = s.recovered
		s.wanted = s.recovered
	}
	p.group.state = s
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

// persistView asks for the core's durable state (and, when non-nil, its view
// headers) to be made durable, with the newest checkpoint, and returns the
// generation of that record: durable once durableGen reaches it. A write in flight
// finishes first; records asked for meanwhile are folded into the newest.
func (s *stateFile) persistView(d vsr.DurableState, viewHeaders []wire.PrepareHeader) uint64 {
	s.wanted.durable = d
	if viewHeaders != nil {
		s.wanted.viewHeaders = append(s.wanted.viewHeaders[:0], viewHeaders...)
	}
	return s.persist()
}

// persistCheckpoint records a newer checkpoint, with the newest view state.
func (s *stateFile) persistCheckpoint(h *wire.PrepareHeader, end uint64) uint64 {
	s.wanted.checkpoint, s.wanted.checkpointEnd = *h, end
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
	if s.file == 0 {
		f, _, err := s.p.storage.Open(groupStateFileName, true, 0)
		if err != nil {
			// Completed as a failed write is, after the poll (resume): never
			// inside the call that asked for the record.
			s.openErr = fmt.Errorf("group state: open: %w", err)
			s.p.activity.resumeWanted = true
			s.p.store.activate(s.p)
			return
		}
		s.file = f
	}
	next := s.sequence + 1
	s.buf = s.wanted.encode(next, s.buf)
	s.write = segment.Request{Op: segment.OpWrite, File: s.file, Offset: int64(next%2) * groupStateSlotBytes, Data: s.buf, Link: true, Done: s.done}
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
	// What the buffer holds is durable (s.wanted may be newer already).
	s.durable, _, _ = decodeGroupState(s.buf)
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
	if s.file == 0 {
		return nil
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
	op  uint64
	end uint64
	// offsetOp: a consumer offset op, whose effect is in an offset file, not in
	// the log's end.
	offsetOp bool
}

// appliedRingLen is how many applied ops wait for their batch to be written: more
// than the log's write window holds batches in the common case; when the window
// holds more, a checkpoint waits for a quieter moment.
const appliedRingLen = 64

// noteApplied records an applied op (the log's next offset after it is end) and
// checkpoints it once written.
func (p *Partition) noteApplied(op, end uint64, offsetOp bool) {
	if p.group.state == nil {
		return
	}
	r := &p.group.applied
	r.ops[r.head] = appliedOp{op: op, end: end, offsetOp: offsetOp}
	r.head = (r.head + 1) % appliedRingLen
	r.n = min(r.n+1, appliedRingLen)
	p.maybeCheckpoint()
}

// maybeCheckpoint persists the newest applied op whose effects are as safe as the
// topic promises: with enforce_fsync, its batch durable in the log and every
// offset write before it durable (a restart places the journal file's records
// after the checkpoint, and those before it are gone once the file is emptied);
// otherwise its batch written (a restart checks the log's end against the
// checkpoint's, so a log that lost unsynced bytes is never taken for it).
func (p *Partition) maybeCheckpoint() {
	r := &p.group.applied
	if p.group.state == nil || r.n == 0 || p.group.state.failed != nil {
		return
	}
	end := p.log.WrittenEnd()
	offsetsSafe := true
	if p.cfg.EnforceFsync {
		end = p.log.DurableEnd()
		offsetsSafe = p.log.OffsetsWritten()
	}
	// Scanning from the oldest op: the newest eligible one, stopping at the
	// first offset op whose write may not be durable yet.
	best := -1
	for i := r.n - 1; i >= 0; i-- {
		e := &r.ops[(r.head-1-i+2*appliedRingLen)%appliedRingLen]
		if e.offsetOp && !offsetsSafe {
			break
		}
		if e.end <= end {
			best = i
		}
	}
	if best >= 0 {
		i := best
		e := &r.ops[(r.head-1-i+2*appliedRingLen)%appliedRingLen]
		if e.op > p.group.state.wanted.checkpoint.Op {
			h, ok := p.group.core.Header(e.op)
			if !ok {
				return // not a trusted header of the core's (yet): a later op will do
			}
			p.group.state.persistCheckpoint(&h, e.end)
		}
		r.n = i // what is older than it is checkpointed too
	}
}

// onStateWritten is the completion of a state file write: a Ready that waited for
// its view state goes on. A failed write stops the group after the poll (resume).
func (p *Partition) onStateWritten(err error) {
	if err != nil {
		p.persist.journalErr = fmt.Errorf("partition %v: group state write: %w", p.key, err)
		p.activity.resumeWanted = true
	}
	if p.persist.ready != nil && p.persist.stateGen != 0 && (err != nil || p.group.state.durableGen >= p.persist.stateGen) {
		p.persist.stateGen = 0
		p.persistWriteDone(err)
		return
	}
	if p.durable != nil && !p.holding() {
		p.durable.maybeCompact(p) // it may have waited for this checkpoint
	}
}
