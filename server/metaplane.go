package server

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/zeebo/xxh3"

	"github.com/iggy-shard/iggy-shard/metadata"
	"github.com/iggy-shard/iggy-shard/segment"
	"github.com/iggy-shard/iggy-shard/vsr"
	"github.com/iggy-shard/iggy-shard/wire"
)

// The metadata plane lives on shard 0: a one-replica VSR group over the metadata
// state machine, with its client table, journal and snapshot.
//
//	local_data/metadata/journal.wal    committed prepares back to back:
//	                                   [PrepareHeader 256][body] ... (vsr.ScanJournal)
//	local_data/metadata/snapshot.bin   the state as of one op:
//
//	+------+---------+--------+------------------+------------------+-----------+---------------+----------+------+------------+
//	| ISV1 | op u64  | view   | last identity    | last timestamp   | meta len  | metadata      | ict len  | ICT2 | xxh3-64 of |
//	|      |         | u32    | u128             | u64 µs           | u64       | snapshot      | u64      |      | all before |
//	+------+---------+--------+------------------+------------------+-----------+---------------+----------+------+------------+
//
// A write goes: Preflight (client table) -> Admit (state) -> Propose (hash a
// password, mint a token) -> Replica.Prepare -> journal append + fdatasync ->
// OnJournaled -> NextCommit -> Apply -> FillReply -> CommitRequest (cache) -> reply.
// The append and its fdatasync run on the journal writer's goroutine (journal.go)
// while shard 0 goes on serving; the router runs one metadata write at a time, the
// next ones waiting their turn, so each is admitted against the state its
// predecessors left, as when the append blocked.
//
// Every SnapshotIntervalOps commits a snapshot is encoded on shard 0 and written by
// the journal writer (temp file, fsync, rename, directory fsync), and the journal is
// replaced by an empty one the same way; a crash between the two leaves journal
// entries at or below the snapshot's op, which recovery skips.

const (
	snapshotMagic    = "ISV1"
	snapshotFileName = "snapshot.bin"
	journalFileName  = "journal.wal"
	serverVersion    = "0.11.0"
	metadataFrameMax = 64 << 20
)

type metaPlane struct {
	log     *slog.Logger
	dir     string
	state   *metadata.State
	table   *vsr.ClientTable
	replica *vsr.Replica
	journal *os.File
	out     metadata.Output

	snapshotIntervalOps uint64
	snapshotOp          uint64
	// lastCommitted is the header of the last committed prepare: the point a
	// checkpoint snapshots.
	lastCommitted wire.PrepareHeader
	// broken is set when a journal write failed after a prepare was numbered: the
	// replica cannot take the op back, so the plane refuses writes until restart.
	broken error
}

// snapshotHead is what a snapshot records beside the two encodings.
type snapshotHead struct {
	op             uint64
	view           uint32
	lastIdentity   wire.Uint128
	lastTimestamp  uint64
	metadataBytes  []byte
	clientTableICT []byte
}

func openMetaPlane(log *slog.Logger, systemPath string, cfg *Config, nowMicros uint64) (*metaPlane, error) {
	dir := filepath.Join(systemPath, "metadata")
	if err := os.MkdirAll(dir, segment.DataDirMode); err != nil {
		return nil, fmt.Errorf("metadata directory: %w", err)
	}
	replica, err := vsr.NewReplica(vsr.Config{ReplicaCount: 1, Group: wire.MetadataGroup})
	if err != nil {
		return nil, err
	}
	m := &metaPlane{log: log, dir: dir, replica: replica, snapshotIntervalOps: cfg.SnapshotIntervalOps}

	var head snapshotHead
	raw, err := os.ReadFile(filepath.Join(dir, snapshotFileName))
	switch {
	case errors.Is(err, os.ErrNotExist):
		// First start: the root user comes from the configuration, once. The state is
		// snapshotted at op 0 right away, so a later start never reads the
		// credentials again.
		salt := make([]byte, metadata.PasswordSaltBytes)
		if _, err := io.ReadFull(rand.Reader, salt); err != nil {
			return nil, err
		}
		m.state = metadata.NewState(cfg.RootUsername, metadata.HashPassword([]byte(cfg.RootPassword), salt), nowMicros)
		m.table = vsr.NewClientTable(vsr.ClientsTableMaxDefault)
		if err := m.writeSnapshot(0, 0, wire.Uint128{}, 0); err != nil {
			return nil, err
		}
		log.Info("metadata created", "root_user", cfg.RootUsername, "dir", dir)
	case err != nil:
		return nil, fmt.Errorf("metadata snapshot: %w", err)
	default:
		head, err = decodeSnapshotFile(raw)
		if err != nil {
			return nil, fmt.Errorf("metadata snapshot %s: %w", filepath.Join(dir, snapshotFileName), err)
		}
		state, op, err := metadata.DecodeSnapshot(head.metadataBytes)
		if err != nil {
			return nil, fmt.Errorf("metadata snapshot: %w", err)
		}
		if op != head.op {
			return nil, fmt.Errorf("metadata snapshot: state op %d differs from file op %d", op, head.op)
		}
		table, err := vsr.DecodeICT2(head.clientTableICT, vsr.ClientsTableMaxDefault)
		if err != nil {
			return nil, fmt.Errorf("metadata snapshot client table: %w", err)
		}
		m.state, m.table, m.snapshotOp = state, table, head.op
	}

	if err := m.recoverJournal(head); err != nil {
		return nil, err
	}
	return m, nil
}

// recoverJournal replays the journal over the snapshot and opens it for appends.
func (m *metaPlane) recoverJournal(head snapshotHead) error {
	path := filepath.Join(m.dir, journalFileName)
	raw, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("metadata journal: %w", err)
	}
	rec := vsr.Recovered{View: head.view, Op: head.op, Commit: head.op, LastIdentity: head.lastIdentity, LastTimestamp: head.lastTimestamp}
	replayed := 0
	scan, err := vsr.ScanJournal(raw, metadataFrameMax, func(h *wire.PrepareHeader, body []byte) error {
		if h.Op <= head.op {
			return nil // snapshotted before a crash emptied the journal
		}
		if h.Op != rec.Op+1 || h.Parent != rec.LastIdentity {
			return fmt.Errorf("%w: op %d does not follow the snapshot's op %d", vsr.ErrJournalCorrupt, h.Op, rec.Op)
		}
		m.applyCommitted(h, body)
		rec.Op, rec.Commit, rec.LastIdentity, rec.LastTimestamp, rec.View = h.Op, h.Op, h.Checksum, h.Timestamp, h.View
		replayed++
		return nil
	})
	if err != nil {
		m.log.Error("metadata journal refused", "path", path, "err", err)
		return fmt.Errorf("metadata journal %s: %w", path, err)
	}
	if scan.TornTailBytes > 0 {
		m.log.Warn("metadata journal: torn tail truncated", "path", path, "valid_bytes", scan.ValidBytes,
			"torn_bytes", scan.TornTailBytes, "reason", scan.TornTailReason)
		if err := os.Truncate(path, int64(scan.ValidBytes)); err != nil {
			return fmt.Errorf("metadata journal truncate: %w", err)
		}
	}
	if err := m.replica.Restore(rec); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, segment.DataFileMode)
	if err != nil {
		return fmt.Errorf("metadata journal: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("metadata journal sync: %w", err)
	}
	m.journal = f
	if replayed > 0 || head.op > 0 {
		m.log.Info("metadata recovered", "snapshot_op", head.op, "replayed_ops", replayed, "op", rec.Op)
	}
	return nil
}

// applyCommitted applies a committed prepare to the state and the client table and
// returns the reply frame (header and body), which the table caches. It is the one
// path of both a live commit and a replay, so both cache the same bytes.
func (m *metaPlane) applyCommitted(h *wire.PrepareHeader, body []byte) []byte {
	var rh wire.ReplyHeader
	m.replica.FillReply(&rh, h)
	// The table keeps the frame: each commit gets its own (metadata writes are rare).
	frame := make([]byte, wire.HeaderSize, 512)
	switch h.Operation {
	case wire.OperationRegister:
		// The session epoch is the register's op.
		frame = wire.AppendResultSuccess(frame)
		login := wire.LoginRegisterReply{UserID: h.UserID, Session: h.Op, ServerProtocolVersion: wire.ServerProtocolVersion, ServerVersion: []byte(serverVersion)}
		frame, _ = login.Append(frame)
		rh.Size = uint32(len(frame))
		rh.Put(frame)
		m.table.CommitRegister(h.Client, h.UserID, h.Op, frame)
		return frame
	default:
		m.state.Apply(metadata.Header{Operation: h.Operation, Client: h.Client, UserID: h.UserID, TimestampMicros: h.Timestamp}, body, &m.out)
		frame = append(frame, m.out.Reply...)
		rh.Size = uint32(len(frame))
		rh.Operation = m.out.Operation
		rh.Put(frame)
		switch h.Operation {
		case wire.OperationLogout:
			m.table.Remove(h.Client)
		case wire.OperationRemoveConsumerGroupMember:
		default:
			m.table.CommitRequest(h.Client, h.Request, h.RequestChecksum, h.Op, frame)
		}
		return frame
	}
}

// commit prepares, journals, commits and applies one proposal and returns the
// reply frame. Effects of the apply are left in m.out.Effects for the caller.
// preparedEntry is a numbered prepare on its way into the journal:
// [PrepareHeader 256][body], written and fdatasynced before it commits.
type preparedEntry struct {
	header wire.PrepareHeader
	entry  []byte
}

// prepare numbers a proposal (Replica.Prepare) and builds its journal entry. The
// entry must then reach the journal durably and come back through journaled; no other
// prepare may start meanwhile (the router serializes them).
func (m *metaPlane) prepare(p vsr.Proposal, body []byte, nowMicros uint64) (*preparedEntry, error) {
	if m.broken != nil {
		return nil, m.broken
	}
	pe := &preparedEntry{}
	if err := m.replica.Prepare(&pe.header, p, body, nowMicros); err != nil {
		return nil, err
	}
	pe.entry = make([]byte, wire.HeaderSize+len(body))
	pe.header.Put(pe.entry)
	copy(pe.entry[wire.HeaderSize:], body)
	return pe, nil
}

// appendToJournal writes an entry to the journal and fdatasyncs it, blocking: what
// the journal writer's goroutine runs, and shard 0 itself while it stops. beforeSync,
// when set, runs between the two (tests hold the journal there).
func appendToJournal(journal *os.File, entry []byte, beforeSync func()) error {
	if _, err := journal.Write(entry); err != nil {
		return fmt.Errorf("metadata journal write: %w", err)
	}
	if beforeSync != nil {
		beforeSync()
	}
	if err := journal.Sync(); err != nil {
		return fmt.Errorf("metadata journal fdatasync: %w", err)
	}
	return nil
}

// journaled commits and applies a prepare once the journal holds it (journalErr nil)
// and returns the reply frame. A failed append breaks the plane: the op was numbered
// and cannot be taken back, so writes are refused until a restart recovers the
// journal. When a snapshot is due it says so (checkpointDue); the caller has it
// written (checkpointBytes, then checkpointFiles off the shard, then checkpointed).
func (m *metaPlane) journaled(pe *preparedEntry, journalErr error) ([]byte, error) {
	if journalErr != nil {
		m.broken = journalErr
		m.log.Error("metadata journal append failed; metadata writes refused until restart", "err", journalErr)
		return nil, m.broken
	}
	h := &pe.header
	m.out.Effects = m.out.Effects[:0]
	m.replica.OnJournaled(0, h.Op, h.Checksum)
	var reply []byte
	for {
		op, ok := m.replica.NextCommit()
		if !ok {
			break
		}
		if op != h.Op {
			panic(fmt.Sprintf("server: metadata commit of op %d while op %d is the only one in flight", op, h.Op))
		}
		reply = m.applyCommitted(h, pe.entry[wire.HeaderSize:])
		m.replica.OnApplied(op)
	}
	if reply == nil {
		panic("server: a one-replica group did not commit its own journaled prepare")
	}
	m.lastCommitted = *h
	return reply, nil
}

// checkpointDue reports whether enough ops have committed since the last snapshot.
func (m *metaPlane) checkpointDue() bool {
	return m.lastCommitted.Op-m.snapshotOp >= m.snapshotIntervalOps
}

// checkpointBytes encodes the snapshot of the state as of the last commit, on shard 0;
// checkpointFiles writes it, anywhere.
func (m *metaPlane) checkpointBytes() (snapshot []byte, op uint64) {
	h := &m.lastCommitted
	return m.encodeSnapshot(h.View, h.Op, h.Checksum, h.Timestamp), h.Op
}

// checkpointFiles writes a snapshot and replaces the journal by an empty one (each a
// temporary file, fsync, rename, directory fsync) and opens the new journal. It
// touches no plane state, so it runs on the journal writer's goroutine while no
// append is in flight. A crash between the two renames leaves journal entries at or
// below the snapshot's op, which recovery skips.
func checkpointFiles(dir string, snapshot []byte) (*os.File, error) {
	if err := writeFileAtomic(filepath.Join(dir, snapshotFileName), snapshot); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, journalFileName)
	if err := writeFileAtomic(path, nil); err != nil {
		return nil, err
	}
	return os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, segment.DataFileMode)
}

// checkpointed switches the plane to the journal checkpointFiles opened for the
// snapshot at op. On a failure the old journal, which still holds everything, stays:
// the snapshot is retried after the next commit.
func (m *metaPlane) checkpointed(op uint64, journal *os.File, err error) {
	if err != nil {
		m.log.Error("metadata snapshot failed", "op", op, "err", err)
		if journal != nil {
			journal.Close()
		}
		return
	}
	m.journal.Close()
	m.journal = journal
	m.snapshotOp = op
	m.log.Info("metadata snapshot", "op", op)
}

// writeSnapshot writes the snapshot file at once, blocking: at the first start.
func (m *metaPlane) writeSnapshot(view uint32, op uint64, identity wire.Uint128, timestamp uint64) error {
	b := m.encodeSnapshot(view, op, identity, timestamp)
	m.snapshotOp = op
	return writeFileAtomic(filepath.Join(m.dir, snapshotFileName), b)
}

func (m *metaPlane) encodeSnapshot(view uint32, op uint64, identity wire.Uint128, timestamp uint64) []byte {
	b := []byte(snapshotMagic)
	b = binary.LittleEndian.AppendUint64(b, op)
	b = binary.LittleEndian.AppendUint32(b, view)
	b = binary.LittleEndian.AppendUint64(b, identity.Lo)
	b = binary.LittleEndian.AppendUint64(b, identity.Hi)
	b = binary.LittleEndian.AppendUint64(b, timestamp)
	metaStart := len(b) + 8
	b = binary.LittleEndian.AppendUint64(b, 0)
	b = m.state.AppendSnapshot(b, op)
	binary.LittleEndian.PutUint64(b[metaStart-8:], uint64(len(b)-metaStart))
	ictStart := len(b) + 8
	b = binary.LittleEndian.AppendUint64(b, 0)
	b = m.table.AppendICT2(b)
	binary.LittleEndian.PutUint64(b[ictStart-8:], uint64(len(b)-ictStart))
	b = binary.LittleEndian.AppendUint64(b, xxh3.Hash(b))
	return b
}

var errSnapshotFile = errors.New("snapshot file corrupt")

func decodeSnapshotFile(b []byte) (snapshotHead, error) {
	var h snapshotHead
	const fixed = 4 + 8 + 4 + 16 + 8
	if len(b) < fixed+8+8+8 || string(b[:4]) != snapshotMagic {
		return h, fmt.Errorf("%w: bad magic or too short (%d bytes)", errSnapshotFile, len(b))
	}
	body, sum := b[:len(b)-8], binary.LittleEndian.Uint64(b[len(b)-8:])
	if xxh3.Hash(body) != sum {
		return h, fmt.Errorf("%w: checksum mismatch", errSnapshotFile)
	}
	h.op = binary.LittleEndian.Uint64(b[4:])
	h.view = binary.LittleEndian.Uint32(b[12:])
	h.lastIdentity = wire.Uint128{Lo: binary.LittleEndian.Uint64(b[16:]), Hi: binary.LittleEndian.Uint64(b[24:])}
	h.lastTimestamp = binary.LittleEndian.Uint64(b[32:])
	rest := body[fixed:]
	metaLen := binary.LittleEndian.Uint64(rest)
	if metaLen > uint64(len(rest)-8) {
		return h, fmt.Errorf("%w: metadata length %d beyond the file", errSnapshotFile, metaLen)
	}
	h.metadataBytes = rest[8 : 8+metaLen]
	rest = rest[8+metaLen:]
	if len(rest) < 8 {
		return h, fmt.Errorf("%w: client table missing", errSnapshotFile)
	}
	ictLen := binary.LittleEndian.Uint64(rest)
	if ictLen != uint64(len(rest)-8) {
		return h, fmt.Errorf("%w: client table length %d, %d bytes left", errSnapshotFile, ictLen, len(rest)-8)
	}
	h.clientTableICT = rest[8:]
	return h, nil
}

// writeFileAtomic replaces path with b: a temp file, fsynced, renamed over path, and
// the directory fsynced, so a crash leaves either the old or the new file whole.
func writeFileAtomic(path string, b []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, segment.DataFileMode)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func (m *metaPlane) close() error {
	if m.journal == nil {
		return nil
	}
	err := m.journal.Sync()
	if cerr := m.journal.Close(); err == nil {
		err = cerr
	}
	m.journal = nil
	return err
}
