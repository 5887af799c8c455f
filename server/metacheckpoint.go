package server

import (
	"fmt"
	"log/slog"

	"github.com/iggy-shard/iggy-shard/metaplane"
)

// The metadata plane's checkpoints (package metaplane decides when, at most what
// vsr's checkpoint rule allows for the header window: 960 ops for 1,024) are a
// snapshot file and the journal cut to the ops from it on. A larger interval
// could never come due in a cluster: it stopped committing for good a window
// above its last snapshot (at 1,024, the old default, after about a thousand
// metadata operations, logins included). A single node counts its window from the
// applied op and could honour more, but one rule with one number serves both: a
// configuration file moves from a single node to a cluster unchanged.

// metaJournalSlotsBase is the metadata core's header window before a long
// recovered journal grows it: the window the rule is held to.
func (c *setup) metaJournalSlotsBase() int {
	if c.metaJournalSlots > 0 {
		return c.metaJournalSlots
	}
	return journalSlotsMin
}

// clampSnapshotInterval lowers a snapshot interval the metadata plane cannot
// honour to the largest it can, with one warning naming the setting and the value
// used: the old default (1,024) is in every existing configuration file, and a
// start refused for it would help no one.
func clampSnapshotInterval(cfg *setup, log *slog.Logger) {
	limit := metaplane.CheckpointIntervalOpsMax(cfg.metaJournalSlotsBase())
	if cfg.SnapshotIntervalOps <= limit || cfg.metaOldCheckpointRule {
		return
	}
	log.Warn("system.metadata.snapshot_interval_ops clamped: a metadata snapshot must come due well inside the journal window",
		"setting", "system.metadata.snapshot_interval_ops", "configured", cfg.SnapshotIntervalOps, "used", limit,
		"journal_window_ops", cfg.metaJournalSlotsBase())
	cfg.SnapshotIntervalOps = limit
}

// writeCheckpointFiles writes a checkpoint: inline in sync mode (done), else on
// the writer, completed through m.CheckpointWritten.
func (m *metaPlane) writeCheckpointFiles(cp *metaplane.Checkpoint) (metaplane.CheckpointResult, bool) {
	f := m.files
	if f.sync && f.out == nil && len(f.queue) == 0 {
		t, result := f.checkpointTask(cp)
		return result(t.work(nil)), true
	}
	f.submit(func() *journalTask {
		t, result := f.checkpointTask(cp)
		t.then = func(err error) { m.CheckpointWritten(cp.At, result(err)) }
		return t
	})
	return metaplane.CheckpointResult{}, false
}

// checkpointTask writes the snapshot and cuts the journal to the entries from its
// op on; result brings the journal's index along and says how it went. It
// touches no shard state off the shard.
func (m *metaFiles) checkpointTask(cp *metaplane.Checkpoint) (*journalTask, func(error) metaplane.CheckpointResult) {
	at := cp.At
	keepFrom, ok := m.journalOffset(at.Op)
	if !ok {
		panic(fmt.Sprintf("server: the metadata journal (ops from %d, %d entries) does not hold the applied op %d",
			m.journalFirstOp, len(m.journalEnds), at.Op))
	}
	sizeBytes := m.journalSizeBytes()
	store, old := m.store, m.journal
	var (
		snapshotWritten, journalReplaced bool
		journal                          metaJournal
	)
	t := &journalTask{
		work: func(func()) error {
			raw, err := store.ReadFile(journalFileName)
			if err != nil {
				return fmt.Errorf("metadata journal read: %w", err)
			}
			if int64(len(raw)) < sizeBytes {
				return fmt.Errorf("metadata journal read: %d bytes, %d written", len(raw), sizeBytes)
			}
			if err := store.ReplaceFile(snapshotFileName, cp.Snapshot); err != nil {
				return fmt.Errorf("metadata snapshot: %w", err)
			}
			snapshotWritten = true
			tail := raw[keepFrom:sizeBytes]
			if err := store.ReplaceFile(journalFileName, tail); err != nil {
				return fmt.Errorf("metadata journal replace: %w", err)
			}
			journalReplaced = true
			old.Close()
			journal, err = store.OpenJournal(journalFileName, int64(len(tail)))
			return err
		},
	}
	result := func(err error) metaplane.CheckpointResult {
		r := metaplane.CheckpointResult{Written: snapshotWritten, Err: err}
		if journalReplaced {
			if err != nil {
				// The old journal is unlinked: nothing can be appended safely.
				r.Broken = true
				return r
			}
			m.journal = journal
			m.cutJournalIndex(at.Op, keepFrom)
		}
		return r
	}
	return t, result
}

// cutJournalIndex follows the journal's replacement by its entries from op on,
// which started at keepFrom in the old one.
func (m *metaFiles) cutJournalIndex(op uint64, keepFrom int64) {
	for i := range m.journalEnds {
		m.journalEnds[i] -= keepFrom
	}
	m.journalEnds = append(m.journalEnds[:0], m.journalEnds[op-m.journalFirstOp:]...)
	m.journalFirstOp = op
	for k := range m.holes {
		if k < op {
			delete(m.holes, k)
		}
	}
}
