package partition

import (
	"errors"
	"fmt"
	"slices"

	"github.com/iggy-shard/iggy-shard/segment"
	"github.com/iggy-shard/iggy-shard/vsr"
	"github.com/iggy-shard/iggy-shard/wire"
)

// The durable partition journal of an enforce_fsync topic (in groups of more than
// one replica by default: Replication.JournalFile). The reference server
// keeps the partition journal in memory only, so a message its replicas acknowledged
// and had not flushed is lost when every replica crashes at once. Here a group of
// such a topic writes each Ready's journal entries to the file partition.journal in
// the partition directory, through the partition's segment.Storage (so the shard's
// ring, or segment.SimDisk in tests, carries it), fdatasynced, before the Ready's
// frames go out (a backup's PrepareOk) and before its commits are applied (the
// primary's own ack on a single node): an acknowledged message is in the journal
// file, durable, on every replica of its quorum.
//
// The file is a sequence of records, each a journaled prepare as it would go on the
// wire, its 256-byte header then its body:
//
//	[PrepareHeader: identity-sealed, size = 256 + body][body]
//	[PrepareHeader of operation TruncatePartition, op 0, commit = offset]   a cut
//	[PrepareHeader of operation TruncatePartition, op k, request 1 or 0]   a discard
//
// A discard record says the core removed op k (request 1) or every op from k on
// (request 0) from its log (vsr.Ready's Discards and Truncate): the records of
// those ops before it are void, so that a restart does not take an entry of an
// older view for its journal.
//
// A record is intact when its identity checks, it is of this group and its body is
// the one its header binds (checkBinding: for a batch, every frame checksum and
// request_checksum = batch_checksum). A cut record says the log was cut back to that
// offset (a storage failure) and later prepares are stamped from there: the batch
// records before it at or above the offset are void.
//
// Writes of one Ready are linked to each other and to the fdatasync that ends them,
// and the next Ready's writes start only after it, so after a crash the intact
// records are a prefix of the file, plus perhaps part of the last unsynced Ready;
// the scan stops at the first record that is not intact.
//
// Recovery (openDurable) of a group of one replays into the log the batch records
// that continue it (base_offset = the log's next offset after its own recovery),
// with the offset ops that came after the first of them, makes them durable, and
// empties the file. A replica of a larger group does not replay: its records are
// prepared ops, and the group decides which commit (recoverReplicated). At run time
// the file is emptied (truncated, fdatasynced) once it passes journalCompactBytes
// and everything in it is applied and durable in the log (and, in a cluster,
// covered by a durable checkpoint).

const journalFileName = "partition.journal"

// journalCompactBytes is the size past which the journal file is emptied once
// everything it holds is durable in the log: big enough that emptying it (a truncate
// and an fdatasync) is rare next to the appends, small enough that a restart reads
// and replays little.
var journalCompactBytes int64 = 64 << 20

type durableJournal struct {
	p *Partition
	// file is 0 until the file is created, with the first write (ensureOpen);
	// openErr: that failed, and the write that needed it fails (resume).
	file      segment.File
	openErr   error
	sizeBytes int64
	// Requests of the write in flight (one Ready's chain, or a compaction).
	free       []*segment.Request
	inFlight   int
	failed     error
	compacting bool
	done       func(*segment.Request) // d.complete, bound once
	// syncs counts the Readies written (one fdatasync each).
	syncs uint64
	// The cut to write before the next Ready's records, and the discards
	// (noteDiscard).
	cutPending bool
	cutHeader  wire.PrepareHeader
	discards   []wire.PrepareHeader
	// discardsOut are the discard records of the write in flight.
	discardsOut []wire.PrepareHeader
}

// openDurable opens p's journal file when its topic enforces fsync (and
// Replication.JournalFile wants it), and in any case replays one an earlier run left
// (the topic or the policy may have changed since). A file that does not exist yet
// is created with its first write (ensureOpen), so that a partition created and
// never written holds no file, whatever its topic's options.
func (p *Partition) openDurable() error {
	names, err := p.storage.List("")
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	want := p.store.repl.journalFileWanted(p.cfg)
	exists := slices.Contains(names, journalFileName)
	if !exists {
		if want {
			p.durable = &durableJournal{p: p}
			p.durable.done = p.durable.complete
		}
		return nil
	}
	f, size, err := p.storage.Open(journalFileName, false, 0)
	if err != nil {
		return fmt.Errorf("journal: open: %w", err)
	}
	d := &durableJournal{p: p, file: f}
	d.done = d.complete
	if size > 0 {
		if err := d.replay(size); err != nil {
			_ = p.storage.Close(f)
			return err
		}
	}
	if !want {
		return p.storage.Close(f)
	}
	p.durable = d
	return nil
}

// wait submits r and polls p's storage until it has completed.
func (d *durableJournal) wait(r *segment.Request) error { return waitRequest(d.p.storage, r) }

// replayRecord is one intact record of the journal file.
type replayRecord struct {
	header wire.PrepareHeader
	body   []byte
	void   bool
	// discard: a discard record (discardRecord), not a prepare.
	discard bool
}

func (d *durableJournal) replay(size int64) error {
	p := d.p
	buf := make([]byte, size)
	read := &segment.Request{Op: segment.OpRead, File: d.file, Data: buf}
	if err := d.wait(read); err != nil {
		return fmt.Errorf("journal: read: %w", err)
	}
	buf = buf[:read.Result]
	group, _ := p.groupID()
	var records []replayRecord
	intact := 0
	for pos := 0; pos+wire.HeaderSize <= len(buf); intact = pos {
		var h wire.PrepareHeader
		copy(wire.HeaderBytes(&h)[:], buf[pos:pos+wire.HeaderSize])
		if h.Command != wire.CommandPrepare || !h.IdentityValid() || !p.journalsGroup(h.Group, group) || h.Size < wire.HeaderSize ||
			int64(h.Size) > int64(len(buf)-pos) {
			break // the torn tail of the last Ready, never acknowledged
		}
		body := buf[pos+wire.HeaderSize : pos+int(h.Size)]
		pos += int(h.Size)
		if h.Op != 0 && h.Operation == wire.OperationTruncatePartition {
			// A discard: the core removed op h.Op (Request 1) or every op from it
			// on (Request 0) from its log; earlier records of them are void.
			records = append(records, replayRecord{header: h, discard: true})
			continue
		}
		if h.Op == 0 && h.Operation == wire.OperationTruncatePartition {
			for i := range records {
				if records[i].header.Operation == wire.OperationSendMessages {
					if bh, _ := wire.ViewBatchHeader(records[i].body); bh.BaseOffset() >= h.Commit {
						records[i].void = true
					}
				}
			}
			continue
		}
		if p.checkBinding(&h, body) != nil {
			break
		}
		records = append(records, replayRecord{header: h, body: body})
	}
	if p.group.state != nil {
		return d.recoverReplicated(records, int64(intact))
	}
	replaying := false
	for i := range records {
		r := &records[i]
		if r.void || r.discard {
			continue
		}
		if r.header.Operation != wire.OperationSendMessages {
			if replaying {
				// Applied after a batch the log lost, so perhaps not applied: again.
				p.reapplyNonBatchOp(r)
			}
			continue
		}
		bh, _ := wire.ViewBatchHeader(r.body)
		next := p.log.NextOffset()
		if bh.BaseOffset() < next {
			continue // in the log already
		}
		if bh.BaseOffset() > next {
			break // a hole: nothing past it continues the log
		}
		if err := d.appendReplayed(r.body); err != nil {
			return err
		}
		replaying = true
	}
	p.log.WaitIdle()
	if err := p.log.Err(); err != nil {
		return fmt.Errorf("journal: replay: %w", err)
	}
	if p.log.DurableEnd() != p.log.NextOffset() {
		return errors.New("journal: replayed batches are not durable in the log")
	}
	if err := d.wait(&segment.Request{Op: segment.OpTruncate, File: d.file, Offset: 0}); err != nil {
		return fmt.Errorf("journal: empty: %w", err)
	}
	if err := d.wait(&segment.Request{Op: segment.OpSync, File: d.file}); err != nil {
		return fmt.Errorf("journal: sync: %w", err)
	}
	return nil
}

// journalsGroup reports whether a journal record of group id group is p's, whose
// group is own. A record keeps the id its primary gave the prepare: tagged with
// p's incarnation, or untagged (a node sending untagged ids, or a binary before the
// tag, wrote it: incarnation.go). An untagged record is of this incarnation
// because the file is: Create removes the partition's directory before the
// incarnation writes anything, and Delete removes it, so partition.journal holds
// the records of the one incarnation that created it, whatever ids they carry.
// Purge removes it too, so it holds one life's; a binary before purge generations
// tagged a purged life's records with the incarnation's own tag, so that one is
// taken as well.
func (p *Partition) journalsGroup(group, own uint64) bool {
	return wire.SameGroup(group, own) &&
		(p.ofIncarnation(group) || wire.GroupIncarnationTag(group) == wire.IncarnationTag(p.createdAtMicros))
}

// appendReplayed appends a recovered batch, waiting while the log's window is full.
func (d *durableJournal) appendReplayed(batch []byte) error {
	for range quiesceRoundsMax {
		err := d.p.log.Append(batch)
		if err != wire.ErrTransientNotAccepted {
			if err != nil {
				return fmt.Errorf("journal: replay: %w", err)
			}
			return nil
		}
		d.p.log.WaitIdle()
	}
	return errors.New("journal: replay: the log takes no append")
}

// noteDiscard records that the core removed op from its log (above: and every op
// after it): a discard record goes before the next Ready's records, so that a
// restart does not take the file's earlier record of it for the replica's
// journal. The core promises the removal durable with the Ready (vsr.Ready's
// order), and a stale entry of an older view would speak in a view change for a
// log it is not of.
func (d *durableJournal) noteDiscard(op uint64, above bool) {
	request := uint64(1)
	if above {
		request = 0
	}
	d.discards = append(d.discards, d.markRecord(op, 0, request))
}

// markRecord is a header-only record of operation TruncatePartition: a cut (op 0,
// commit the offset) or a discard (op, request).
func (d *durableJournal) markRecord(op, commit, request uint64) wire.PrepareHeader {
	group, _ := d.p.groupID()
	var h wire.PrepareHeader
	h.Command = wire.CommandPrepare
	h.Size = wire.HeaderSize
	h.Cluster = d.p.store.repl.Cluster
	h.Operation = wire.OperationTruncatePartition
	h.Op, h.Commit, h.Request = op, commit, request
	h.Group = group
	h.SetIdentity()
	return h
}

// noteCut records that the next prepare is stamped at offset, below where the last
// one ended: a cut record goes before the next Ready's records.
func (d *durableJournal) noteCut(offset uint64) {
	d.cutHeader = d.markRecord(0, offset, 0)
	d.cutPending = true
}

func (d *durableJournal) request(op segment.Op) *segment.Request {
	var r *segment.Request
	if n := len(d.free); n > 0 {
		r = d.free[n-1]
		d.free = d.free[:n-1]
	} else {
		r = new(segment.Request)
	}
	*r = segment.Request{Op: op, File: d.file, Done: d.done}
	d.inFlight++
	return r
}

func (d *durableJournal) write(data []byte) {
	r := d.request(segment.OpWrite)
	r.Offset = d.sizeBytes
	r.Data = data
	r.Link = true
	d.sizeBytes += int64(len(data))
	d.p.storage.Submit(r)
}

// ensureOpen creates the journal file when it does not exist yet: with the first
// write, not when the partition is opened (a server that creates a partition's
// directory only for its first file keeps a created partition free on disk).
func (d *durableJournal) ensureOpen() error {
	if d.file != 0 {
		return nil
	}
	f, _, err := d.p.storage.Open(journalFileName, true, 0)
	if err != nil {
		return fmt.Errorf("journal: create: %w", err)
	}
	d.file = f
	return nil
}

// submit writes a Ready's journal entries, one chain ending in an fdatasync; the
// Ready finishes when it completes (onJournalDurable). The bytes are the journal
// entries' own: the header in the entry, the body the request buffer or the entry's
// copy, untouched until the Ready is done. A file that cannot be created fails the
// write after the poll (resume), never inside the call that made the Ready.
func (d *durableJournal) submit(p *Partition, writes []vsr.Write) {
	d.failed = nil
	if err := d.ensureOpen(); err != nil {
		d.openErr = err
		p.activity.resumeWanted = true
		p.store.activate(p)
		return
	}
	if d.cutPending {
		d.cutPending = false
		d.write(wire.HeaderBytes(&d.cutHeader)[:])
	}
	// The discard records stay put until written: the slice is swapped, not
	// reused, while its bytes are in flight.
	d.discardsOut, d.discards = d.discards, d.discardsOut[:0]
	for i := range d.discardsOut {
		d.write(wire.HeaderBytes(&d.discardsOut[i])[:])
	}
	for i := range writes {
		e := p.journal.at(writes[i].Header.Op)
		if e == nil || !e.present {
			continue // applied already
		}
		d.write(wire.HeaderBytes(&e.header)[:])
		if len(e.body) > 0 {
			d.write(e.body)
		}
	}
	p.storage.Submit(d.request(segment.OpSync))
	d.syncs++
}

// maybeCompact empties the journal file once it is large and everything in it is
// applied and durable in the log (offset files included: the log is idle).
func (d *durableJournal) maybeCompact(p *Partition) {
	if d.compacting || d.inFlight > 0 || d.sizeBytes < journalCompactBytes || p.journal.len() > 0 || p.proposing.queue.n > 0 || p.holding() ||
		!p.log.Idle() || p.log.DurableEnd() != p.log.NextOffset() {
		return
	}
	if p.group.state != nil && p.group.state.durable.checkpoint.Op+1 < p.journal.firstOp {
		// A restart places its log by the checkpoint and the file's ops after it:
		// the file is emptied only once the checkpoint covers every applied op.
		return
	}
	d.compacting = true
	d.failed = nil
	truncate := d.request(segment.OpTruncate)
	truncate.Offset = 0
	truncate.Link = true
	p.storage.Submit(truncate)
	p.storage.Submit(d.request(segment.OpSync))
}

func (d *durableJournal) complete(r *segment.Request) {
	if r.Err != nil && d.failed == nil {
		d.failed = r.Err
	}
	*r = segment.Request{}
	d.free = append(d.free, r)
	d.inFlight--
	if d.inFlight > 0 {
		return
	}
	if d.compacting {
		d.compacting = false
		if d.failed != nil {
			d.p.persist.journalErr = fmt.Errorf("partition %v: journal compaction: %w", d.p.key, d.failed)
		} else {
			d.sizeBytes = 0
		}
		d.p.activity.resumeWanted = true // a journal write that waited for it goes after the poll
		return
	}
	d.p.onJournalDurable(d.failed)
}

// failOpen completes the write whose file could not be created, as a failed
// write.
func (d *durableJournal) failOpen() {
	err := d.openErr
	d.openErr = nil
	d.p.onJournalDurable(err)
}

// close waits for the journal's requests and closes the file.
func (d *durableJournal) close(p *Partition) error {
	for d.inFlight > 0 {
		if p.storage.Poll(true) == 0 {
			break
		}
	}
	if d.file == 0 {
		return nil
	}
	return p.storage.Close(d.file)
}

// journalRecovery is what a replica of a group of more than one found in its
// journal file: the last op its log holds (the checkpoint, carried forward through
// the file's ops the log already has) and the journaled ops above it, which it
// prepared and has not applied.
type journalRecovery struct {
	checkpoint wire.PrepareHeader
	unapplied  []replayRecord
}

// recoverReplicated places the journal file's ops of a replica in a cluster. They
// are not replayed into the log: an op journaled is prepared, not known committed,
// and the group decides (vsr.Core.Recover takes them as the replica's journal, and
// a view change or the primary's commit point commits or discards them). What the
// log already holds beyond the checkpoint is matched op by op to the file's
// records (the hash chain and the batches' offsets), so the replica knows the op
// its log ends at; where that fails (a checkpoint older than the file's first
// record, or a log that lost bytes) it cannot place itself and resumes from op 0
// (groupstate.go). The file keeps its intact prefix: its ops above the log are the
// durable journal until applied.
func (d *durableJournal) recoverReplicated(records []replayRecord, intact int64) error {
	p := d.p
	st := p.group.state
	placed := false
	var rec journalRecovery
	if st.intact && st.recovered.checkpointEnd <= p.log.NextOffset() {
		cur, end := st.recovered.checkpoint, st.recovered.checkpointEnd
		byOp := make(map[uint64]*replayRecord)
		for i := range records {
			r := &records[i]
			switch {
			case r.discard && r.header.Request == 1:
				delete(byOp, r.header.Op)
			case r.discard:
				for op := range byOp {
					if op >= r.header.Op {
						delete(byOp, op)
					}
				}
			case r.void:
				// A batch the log was cut below: never applied, and no group's op.
			case r.header.Op > cur.Op:
				byOp[r.header.Op] = r // a later record of an op is its rewrite
			}
		}
		placed = true
		var reapplied []*replayRecord
		for end < p.log.NextOffset() {
			r := byOp[cur.Op+1]
			if r == nil || cur.Op > 0 && r.header.Parent != cur.Checksum {
				placed = false
				break
			}
			if r.header.Operation == wire.OperationSendMessages {
				bh, _ := wire.ViewBatchHeader(r.body)
				if bh.BaseOffset() != end || end+uint64(bh.MessageCount()) > p.log.NextOffset() {
					placed = false
					break
				}
				end += uint64(bh.MessageCount())
			} else {
				// An offset op (or a DeleteSegments op) the log's later batches
				// prove applied; its own write may not have reached the disk (it
				// has an fdatasync of its own): applied again, to the same value.
				reapplied = append(reapplied, r)
			}
			cur = r.header
			delete(byOp, cur.Op)
		}
		if placed {
			for _, r := range reapplied {
				p.reapplyNonBatchOp(r)
			}
			p.log.WaitIdle()
			rec.checkpoint = cur
			ops := make([]uint64, 0, len(byOp))
			for op := range byOp {
				ops = append(ops, op)
			}
			slices.Sort(ops)
			for _, op := range ops {
				rec.unapplied = append(rec.unapplied, *byOp[op])
			}
		}
	}
	if !placed {
		intact = 0 // ops the replica cannot place: of no use to it
	}
	if err := d.wait(&segment.Request{Op: segment.OpTruncate, File: d.file, Offset: intact}); err != nil {
		return fmt.Errorf("journal: truncate: %w", err)
	}
	if err := d.wait(&segment.Request{Op: segment.OpSync, File: d.file}); err != nil {
		return fmt.Errorf("journal: sync: %w", err)
	}
	d.sizeBytes = intact
	if placed {
		p.group.recovered = &rec
	}
	return nil
}

// reapplyNonBatchOp applies again an op that is not a batch, which the journal file's
// replay cannot tell applied: an offset op sets the same value, and a
// DeleteSegments op is nothing where its record reaches it already.
func (p *Partition) reapplyNonBatchOp(r *replayRecord) {
	switch r.header.Operation {
	case wire.OperationStoreConsumerOffset:
		c, offset, _ := decodeOffsetOp(r.header.Operation, r.body)
		_ = p.log.StoreConsumerOffset(c.segmentKind(), c.ID, offset)
	case wire.OperationDeleteConsumerOffset:
		c, _, _ := decodeOffsetOp(r.header.Operation, r.body)
		_ = p.log.DeleteConsumerOffset(c.segmentKind(), c.ID)
	case wire.OperationDeleteSegments:
		_ = p.applyDeleteSegments(r.body)
	}
}
