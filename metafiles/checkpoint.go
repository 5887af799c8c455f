package metafiles

import (
	"fmt"

	"github.com/iggy-shard/iggy-shard/metaplane"
)

// WriteCheckpoint writes a checkpoint: inline in sync mode (done), else on the
// writer, completed through written (metaplane.Plane.CheckpointWritten).
func (f *Files) WriteCheckpoint(cp *metaplane.Checkpoint, written func(metaplane.Applied, metaplane.CheckpointResult)) (metaplane.CheckpointResult, bool) {
	if f.sync && f.out == nil && len(f.queue) == 0 {
		t, result := f.checkpointTask(cp)
		return result(t.work(nil)), true
	}
	f.submit(func() *journalTask {
		t, result := f.checkpointTask(cp)
		t.then = func(err error) { written(cp.At, result(err)) }
		return t
	})
	return metaplane.CheckpointResult{}, false
}

// checkpointTask writes the snapshot and cuts the journal to the entries from its
// op on; result brings the journal's index along and says how it went. It
// touches no shard state off the shard.
func (m *Files) checkpointTask(cp *metaplane.Checkpoint) (*journalTask, func(error) metaplane.CheckpointResult) {
	at := cp.At
	keepFrom, ok := m.JournalOffset(at.Op)
	if !ok {
		panic(fmt.Sprintf("metafiles: the metadata journal (ops from %d, %d entries) does not hold the applied op %d",
			m.journalFirstOp, len(m.journalEnds), at.Op))
	}
	sizeBytes := m.JournalSizeBytes()
	store, old := m.store, m.journal
	var (
		snapshotWritten, journalReplaced bool
		journal                          Journal
	)
	t := &journalTask{
		work: func(func()) error {
			raw, err := store.ReadFile(JournalFileName)
			if err != nil {
				return fmt.Errorf("metadata journal read: %w", err)
			}
			if int64(len(raw)) < sizeBytes {
				return fmt.Errorf("metadata journal read: %d bytes, %d written", len(raw), sizeBytes)
			}
			if err := store.ReplaceFile(SnapshotFileName, cp.Snapshot); err != nil {
				return fmt.Errorf("metadata snapshot: %w", err)
			}
			snapshotWritten = true
			tail := raw[keepFrom:sizeBytes]
			if err := store.ReplaceFile(JournalFileName, tail); err != nil {
				return fmt.Errorf("metadata journal replace: %w", err)
			}
			journalReplaced = true
			old.Close()
			journal, err = store.OpenJournal(JournalFileName, int64(len(tail)))
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
func (m *Files) cutJournalIndex(op uint64, keepFrom int64) {
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
