// Package metafiles is the metadata plane's files on one node: the journal of
// its prepares, the snapshot and the state record, and the file work on them.
// The plane itself is package metaplane (admission, proposal, apply,
// checkpoints and installs, sans-IO); its host on shard 0 (server/metahost.go)
// hands this package the work a Ready, a checkpoint or an install asks for,
// through a Storage (storage.go):
//
//	local_data/metadata/journal.wal    prepares back to back, from the snapshot's op
//	                                   on: [PrepareHeader 256][body] ... (vsr.ScanJournal;
//	                                   in a cluster with holes, journal.go)
//	local_data/metadata/snapshot.bin   the state as of one applied op (metaplane's
//	                                   snapshot: ISV1, the metadata and the client table)
//	local_data/metadata/state.bin      the replica's durable state (vsr.DurableState
//	                                   and the view headers of Ready.ViewHeaders):
//
//	+------+--------+----------+------------+----------------+--------------------------+------------+
//	| ISR1 | view   | log view | commit max | headers count  | PrepareHeader 256 each,  | xxh3-64 of |
//	|      | u32    | u32      | u64        | u32            | head first               | all before |
//	+------+--------+----------+------------+----------------+--------------------------+------------+
//
// The state record plays the part of the reference's superblock (its vsr_state):
// small, replaced whole and atomically whenever a Ready carries a new State, after
// that Ready's journal cut is durable and before its journal writes. A group of
// one replica never changes view, so it is written at the first start and after
// that only by a view change a cluster would make; recovery reads it back. A
// missing record is the zero state (a data directory older than the record).
//
// The file work (a Ready's journal work, a checkpoint, an install) runs on the
// journal writer's goroutine (writer.go) while shard 0 goes on serving, one task
// at a time and in the order the plane asked for them; each is laid out against
// the journal's index when it starts, after the one before it. A Ready's writes
// are appended in one write and one fdatasync (group commit: the writes that came
// while the last was out share it). At a start and on a stopping shard 0 the work
// runs inline.
//
// A checkpoint writes the snapshot, then replaces the journal by its entries from
// the snapshot's op on (the entry at the snapshot's op included: Core.Recover
// anchors the log on it), each atomically. A crash between the two leaves journal
// entries below the snapshot's op, which recovery skips.
package metafiles

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/zeebo/xxh3"

	"github.com/iggy-shard/iggy-shard/metadata"
	"github.com/iggy-shard/iggy-shard/metaplane"
	"github.com/iggy-shard/iggy-shard/vsr"
	"github.com/iggy-shard/iggy-shard/wire"
)

// The files, and the largest frame the journal holds.
const (
	stateRecordMagic = "ISR1"
	SnapshotFileName = "snapshot.bin"
	JournalFileName  = "journal.wal"
	StateFileName    = "state.bin"
	FrameMax         = 64 << 20
)

// Files are the plane's files: the journal and its index, the state record,
// the snapshot, and the work on them.
type Files struct {
	log       *slog.Logger
	dir       string // for log lines
	store     Storage
	journal   Journal
	clustered bool
	// ObserveFsync, when set, is told each journal fdatasync's duration, on the
	// writer's goroutine.
	ObserveFsync func(time.Duration)
	// ClientsTableMax sizes the client table Recover makes or reads back
	// ([metadata] clients_table_max; 0: vsr.ClientsTableMaxDefault). A snapshot
	// written with another size loads when it holds no more sessions than this
	// and the journal has nothing to replay (tablesize.go).
	ClientsTableMax int

	// The journal's entries: journalFirstOp is the op of the first, journalEnds[i]
	// the end offset of op journalFirstOp+i; holes are the ops whose spans are
	// holes (journal.go).
	journalFirstOp uint64
	journalEnds    []int64
	holes          map[uint64]bool
	// viewHeaders are the last persisted Ready.ViewHeaders (the state record's).
	viewHeaders []wire.PrepareHeader
	// Durable reads the core's durable state, for a Ready that changes its view
	// headers only.
	Durable func() vsr.DurableState

	appending appendWork
	// writer runs the work off shard 0 (nil while the plane opens, and inline
	// once shard 0 stops: sync); queue holds the work waiting for it, each laid
	// out when it starts; out is the task with it.
	writer *Writer
	sync   bool
	queue  []func() *journalTask
	out    *journalTask
	// manual (tests): the queued work waits until runQueued.
	manual bool
}

// New returns the files of dir (named in log lines) on store, of a cluster's
// replica when clustered. Their work runs inline until StartWriter.
func New(log *slog.Logger, dir string, store Storage, clustered bool) *Files {
	return &Files{log: log, dir: dir, store: store, clustered: clustered, holes: make(map[uint64]bool), sync: true}
}

// Recover reads the plane's files back: the snapshot (a first start writes the
// initial one: on a single node the root user comes from the configuration,
// once; a cluster's replicas start without users), the state record and the
// journal, whose entries below the snapshot's op in front (a crash between the
// snapshot and the journal's replacement) are dropped; and opens the journal for
// appends.
func (f *Files) Recover(rootUsername, rootPassword string, nowMicros uint64) (*metaplane.Recovered, error) {
	rec := &metaplane.Recovered{}
	raw, err := f.store.ReadFile(SnapshotFileName)
	rec.Fresh = errors.Is(err, fs.ErrNotExist)
	switch {
	case rec.Fresh:
		// A cluster's root user comes from an op the first primary proposes
		// (metaplane's ensureRootUser), so that every replica holds the same one,
		// hash and creation time included; until it commits, logins are answered
		// 58. The state is snapshotted at op 0 right away, so a later start never
		// reads the credentials again.
		var state *metadata.State
		if f.clustered {
			state = metadata.NewStateWithoutRoot()
		} else {
			salt := make([]byte, metadata.PasswordSaltBytes)
			if _, err := io.ReadFull(rand.Reader, salt); err != nil {
				return nil, err
			}
			state = metadata.NewState(rootUsername, metadata.HashPassword([]byte(rootPassword), salt), nowMicros)
		}
		rec.Snapshot = &metaplane.Snapshot{State: state, Table: vsr.NewClientTable(f.clientsTableMax())}
		if err := f.store.ReplaceFile(StateFileName, EncodeStateRecord(vsr.DurableState{}, nil)); err != nil {
			return nil, fmt.Errorf("metadata state record: %w", err)
		}
		if err := f.store.ReplaceFile(SnapshotFileName, metaplane.AppendSnapshot(nil, metaplane.Applied{}, state, rec.Snapshot.Table)); err != nil {
			return nil, fmt.Errorf("metadata snapshot: %w", err)
		}
		if f.clustered {
			f.log.Info("metadata created; the root user comes from the first primary", "dir", f.dir)
		} else {
			f.log.Info("metadata created", "root_user", rootUsername, "dir", f.dir)
		}
	case err != nil:
		return nil, fmt.Errorf("metadata snapshot: %w", err)
	default:
		if rec.Snapshot, err = metaplane.DecodeSnapshot(raw, f.clientsTableMax()); err != nil {
			return nil, fmt.Errorf("metadata snapshot %s: %w", filepath.Join(f.dir, SnapshotFileName), err)
		}
	}

	switch raw, err := f.store.ReadFile(StateFileName); {
	case errors.Is(err, fs.ErrNotExist):
		// A data directory from before the record: the zero state, recorded now.
		if err := f.store.ReplaceFile(StateFileName, EncodeStateRecord(rec.Durable, nil)); err != nil {
			return nil, fmt.Errorf("metadata state record: %w", err)
		}
	case err != nil:
		return nil, fmt.Errorf("metadata state record: %w", err)
	default:
		if rec.Durable, f.viewHeaders, err = decodeStateRecord(raw); err != nil {
			return nil, fmt.Errorf("metadata state record %s: %w", filepath.Join(f.dir, StateFileName), err)
		}
		rec.ViewHeaders = f.viewHeaders
	}

	path := filepath.Join(f.dir, JournalFileName)
	raw, err = f.store.ReadFile(JournalFileName)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("metadata journal: %w", err)
	}
	// A cluster's replica keeps the holes it finds and reports their ops as
	// faulty (journal.go).
	scan, err := scanMetaJournal(raw, rec.Snapshot.At, f.clustered)
	if err != nil {
		// A single node refuses damage that intact entries follow: with no peer to
		// repair a corrupt synced entry from, that is data loss, and it does not
		// serve without it. A cluster's replica refuses only entries out of order.
		f.log.Error("metadata journal refused", "path", path, "err", err)
		return nil, fmt.Errorf("metadata journal %s: %w", path, err)
	}
	rec.Entries, rec.Faulty = scan.entries, scan.faulty
	f.journalFirstOp, f.journalEnds, f.holes = scan.firstOp, scan.ends, scan.holes
	if len(scan.faulty) > 0 {
		f.log.Warn("metadata journal: corrupt entries, to repair from the cluster", "path", path, "ops", scan.faulty)
	}
	if s := scan.scan; s.TornTailBytes > 0 && !scan.tornKept {
		f.log.Warn("metadata journal: torn tail truncated", "path", path, "valid_bytes", s.ValidBytes,
			"torn_bytes", s.TornTailBytes, "reason", s.TornTailReason)
	}
	if scan.skipBytes > 0 {
		// The plane counts offsets from the first kept entry: the journal is
		// rewritten without the snapshotted ones.
		kept := raw[scan.skipBytes : scan.skipBytes+scan.sizeBytes]
		if err := f.store.ReplaceFile(JournalFileName, kept); err != nil {
			return nil, fmt.Errorf("metadata journal rewrite: %w", err)
		}
	}
	if err := f.keepTableSize(rec); err != nil {
		return nil, err
	}
	if f.journal, err = f.store.OpenJournal(JournalFileName, scan.sizeBytes); err != nil {
		return nil, err
	}
	return rec, nil
}

// StartWriter has the file work run off shard 0 from now on.
func (f *Files) StartWriter(w *Writer) {
	f.writer, f.sync = w, false
}

// submit runs file work: inline when the files are in sync mode (then through
// done), else queued behind the work out; start lays it out when it starts.
func (f *Files) submit(start func() *journalTask) {
	f.queue = append(f.queue, start)
	f.pump()
}

// pump starts the queued work the writer can take: one task at a time, or all of
// them inline in sync mode.
func (f *Files) pump() {
	for f.out == nil && len(f.queue) > 0 && !f.manual {
		start := f.queue[0]
		f.queue[0] = nil
		f.queue = f.queue[1:]
		t := start()
		if f.sync {
			t.then(t.work(nil))
			continue
		}
		f.out = t
		f.writer.submit(t)
	}
}

// RunQueued (tests) runs the queued work inline, in order, with what it leads
// to, and reports how many tasks ran.
func (f *Files) RunQueued() int {
	n := 0
	for len(f.queue) > 0 {
		start := f.queue[0]
		f.queue[0] = nil
		f.queue = f.queue[1:]
		t := start()
		t.then(t.work(nil))
		n++
	}
	return n
}

// Finish completes the task the writer finished, if any, and starts the next.
func (f *Files) Finish() {
	if f.writer == nil {
		return
	}
	if t := f.writer.collect(); t != nil {
		f.out = nil
		t.then(t.err)
		f.pump()
	}
}

// Stop has every later file work run inline: the task out is waited for, and
// the queued ones run.
func (f *Files) Stop() {
	f.sync = true
	if f.writer != nil && f.out != nil {
		if t := f.writer.await(); t != nil {
			f.out = nil
			t.then(t.err)
		}
	}
	f.pump()
}

// Persist does a Ready's durable work: inline in sync mode (done), else on the
// writer, completed through persisted (metaplane.Plane.Persisted).
func (f *Files) Persist(rd *vsr.Ready, persisted func(error)) (bool, error) {
	if f.sync && f.out == nil && len(f.queue) == 0 {
		a := f.appendTask(rd)
		err := a.work(nil)
		return true, f.appended(rd, err)
	}
	f.submit(func() *journalTask {
		a := f.appendTask(rd)
		a.then = func(err error) { persisted(f.appended(rd, err)) }
		return a
	})
	return false, nil
}

// PersistNow (tests) does a Ready's durable work inline, whatever the mode.
func (f *Files) PersistNow(rd *vsr.Ready) error {
	a := f.appendTask(rd)
	return f.appended(rd, a.work(nil))
}

// Manual (tests) has the file work wait in its queue until RunQueued, or (off)
// run inline again.
func (f *Files) Manual(on bool) { f.sync, f.manual = !on, on }

// Queued (tests) is how many file works wait in the queue.
func (f *Files) Queued() int { return len(f.queue) }

// HoleCount (tests) is how many ops the journal holds as holes.
func (f *Files) HoleCount() int { return len(f.holes) }

// appendTask is a Ready's durable work, in the Ready's order: the truncation, the
// state record, then the writes in one append and one fdatasync.
func (m *Files) appendTask(rd *vsr.Ready) *journalTask {
	a := &m.appending
	// The truncation, and the discards (journal.go).
	m.journalCut(a, rd)
	a.stateRecord = nil
	if rd.State != nil || rd.ViewHeaders != nil {
		state := m.Durable()
		if rd.State != nil {
			state = *rd.State
		}
		headers := m.viewHeaders
		if rd.ViewHeaders != nil {
			headers = rd.ViewHeaders
		}
		a.stateRecord = EncodeStateRecord(state, headers)
	}
	a.entries = a.entries[:0]
	a.sizes = a.sizes[:0]
	// One append at the journal's end, or a rewrite for a write beyond a gap or
	// into a hole (journal.go).
	m.placeWrites(a, rd, m.journalKept(a.truncateAt))
	a.journal, a.store, a.observeFsync = m.journal, m.store, m.ObserveFsync
	a.task = journalTask{work: a.work}
	return &a.task
}

// appendWork is a Ready's file work, reused Ready after Ready (one is out at a
// time): shard 0 fills it before handing task over, and touches it again only once
// the writer is done with it.
type appendWork struct {
	task        journalTask
	truncateAt  int64 // -1: none
	stateRecord []byte
	entries     []byte // the Ready's writes back to back: one append
	// firstOp is the op of the first entry appended, sizes their sizes in order.
	firstOp uint64
	sizes   []uint32
	// rewrite, when active, lays the journal out anew instead (journal.go).
	rewrite journalRewrite
	journal Journal
	store   Storage
	// observeFsync is Files.ObserveFsync.
	observeFsync func(time.Duration)
}

// work does a Ready's file work. The cut is made durable before the state
// record's replacement (vsr's rule 3): on a filesystem that does not keep
// metadata operations in order, a crash between them would restart the new log
// view over the old tail, an op its view change removed coming back as the head.
func (a *appendWork) work(beforeSync func()) error {
	if a.truncateAt >= 0 {
		if err := a.journal.Truncate(a.truncateAt); err != nil {
			return err
		}
		if a.stateRecord != nil {
			if err := a.journal.Sync(); err != nil {
				return err
			}
		}
	}
	if a.stateRecord != nil {
		if err := a.store.ReplaceFile(StateFileName, a.stateRecord); err != nil {
			return fmt.Errorf("metadata state record: %w", err)
		}
	}
	if a.rewrite.active {
		return a.rewriteJournal()
	}
	if len(a.entries) == 0 {
		return nil
	}
	if err := a.journal.Append(a.entries); err != nil {
		return err
	}
	if beforeSync != nil {
		beforeSync()
	}
	start := time.Now() // off the shards: the journal writer's own clock
	err := a.journal.Sync()
	if a.observeFsync != nil {
		a.observeFsync(time.Since(start))
	}
	return err
}

// appended brings the journal's index up to a Ready's durable work, done (or
// failed: the plane stops then, and a restart reads the journal back).
func (m *Files) appended(rd *vsr.Ready, err error) error {
	if err != nil {
		return err
	}
	m.journalWritten()
	if rd.ViewHeaders != nil {
		m.viewHeaders = append(m.viewHeaders[:0], rd.ViewHeaders...)
	}
	return nil
}

var errStateRecord = errors.New("state record corrupt")

// stateRecordFixedBytes is the record without its headers: magic, view, log view,
// commit max, headers count, checksum.
const stateRecordFixedBytes = 4 + 4 + 4 + 8 + 4 + 8

// EncodeStateRecord is the state record of s and the view headers.
func EncodeStateRecord(s vsr.DurableState, headers []wire.PrepareHeader) []byte {
	b := make([]byte, 0, stateRecordFixedBytes+len(headers)*wire.HeaderSize)
	b = append(b, stateRecordMagic...)
	b = binary.LittleEndian.AppendUint32(b, s.View)
	b = binary.LittleEndian.AppendUint32(b, s.LogView)
	b = binary.LittleEndian.AppendUint64(b, s.CommitMax)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(headers)))
	for i := range headers {
		start := len(b)
		b = append(b, make([]byte, wire.HeaderSize)...)
		headers[i].Put(b[start:])
	}
	return binary.LittleEndian.AppendUint64(b, xxh3.Hash(b))
}

func decodeStateRecord(b []byte) (vsr.DurableState, []wire.PrepareHeader, error) {
	var s vsr.DurableState
	if len(b) < stateRecordFixedBytes || string(b[:4]) != stateRecordMagic {
		return s, nil, fmt.Errorf("%w: bad magic or too short (%d bytes)", errStateRecord, len(b))
	}
	body, sum := b[:len(b)-8], binary.LittleEndian.Uint64(b[len(b)-8:])
	if xxh3.Hash(body) != sum {
		return s, nil, fmt.Errorf("%w: checksum mismatch", errStateRecord)
	}
	s.View = binary.LittleEndian.Uint32(b[4:])
	s.LogView = binary.LittleEndian.Uint32(b[8:])
	s.CommitMax = binary.LittleEndian.Uint64(b[12:])
	count := binary.LittleEndian.Uint32(b[20:])
	if uint64(count)*wire.HeaderSize != uint64(len(b)-stateRecordFixedBytes) {
		return s, nil, fmt.Errorf("%w: %d headers in %d bytes", errStateRecord, count, len(b))
	}
	headers := make([]wire.PrepareHeader, count)
	for i := range headers {
		copy(wire.HeaderBytes(&headers[i])[:], b[24+i*wire.HeaderSize:])
	}
	return s, headers, nil
}

// JournalSizeBytes is the end of the journal's last entry.
func (m *Files) JournalSizeBytes() int64 {
	if len(m.journalEnds) == 0 {
		return 0
	}
	return m.journalEnds[len(m.journalEnds)-1]
}

// JournalOffset is where op's entry starts in the journal, if the journal holds
// op or is about to (op one past its last entry).
func (m *Files) JournalOffset(op uint64) (int64, bool) {
	switch {
	case op < m.journalFirstOp || op > m.journalFirstOp+uint64(len(m.journalEnds)):
		return 0, false
	case op == m.journalFirstOp:
		return 0, true
	}
	return m.journalEnds[op-m.journalFirstOp-1], true
}

// Close syncs and closes the journal.
func (f *Files) Close() error {
	if f.journal == nil {
		return nil
	}
	err := f.journal.Sync()
	if cerr := f.journal.Close(); err == nil {
		err = cerr
	}
	f.journal = nil
	return err
}

// JournalIndex is the journal's index: the op of its first entry and the end
// offset of each entry from it on (holes included). The caller must not change it.
func (m *Files) JournalIndex() (firstOp uint64, ends []int64) {
	return m.journalFirstOp, m.journalEnds
}
