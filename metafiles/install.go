package metafiles

import (
	"fmt"
	"maps"
	"slices"

	"github.com/iggy-shard/iggy-shard/metaplane"
)

// Install writes a transferred state: inline in sync mode (done), else on the
// writer, completed through installed (metaplane.Plane.StateInstalled).
//
// The core keeps the ops above the installed one as journaled (Core.installed):
// this replica may have acknowledged them, so the journal keeps them, durably,
// entries and holes as they are (installedJournal), before the Advance that has
// the core resume from the state. Emptying the journal would lose them to a crash
// right after the install, and a view change could then lose a committed op.
//
// The snapshot is replaced first: a crash before the journal's replacement leaves
// the new snapshot with the old journal, which holds the same ops above the
// state's op (the restart skips those below it, scanMetaJournal). A restart
// would refuse it if its entry at the state's op, or the one after, were of
// another log: such entries are first marked as holes in the old journal (the
// bridge of planInstalledJournal), which either snapshot then reads.
func (f *Files) Install(in *metaplane.Install, installed func(error)) (bool, error) {
	if f.sync && f.out == nil && len(f.queue) == 0 {
		t, result := f.installTask(in)
		return true, result(t.work(nil))
	}
	f.submit(func() *journalTask {
		t, result := f.installTask(in)
		t.then = func(err error) { installed(result(err)) }
		return t
	})
	return false, nil
}

// installTask is the file work of an install; result brings the journal and its
// index along.
func (m *Files) installTask(in *metaplane.Install) (*journalTask, func(error) error) {
	journal, store := m.journal, m.store
	firstOp, ends, holes := m.journalFirstOp, slices.Clone(m.journalEnds), maps.Clone(m.holes)
	var (
		kept     *installedJournal
		reopened Journal
	)
	t := &journalTask{
		work: func(func()) error {
			raw, err := store.ReadFile(JournalFileName)
			if err != nil {
				return fmt.Errorf("metadata journal read: %w", err)
			}
			var bridge *installedJournal
			if kept, bridge, err = planInstalledJournal(raw, firstOp, ends, holes, in.At); err != nil {
				return err
			}
			if bridge != nil {
				b, err := layJournal(raw, nil, bridge.pieces)
				if err != nil {
					return err
				}
				if err := store.ReplaceFile(JournalFileName, b); err != nil {
					return fmt.Errorf("metadata journal rewrite: %w", err)
				}
			}
			if err := store.ReplaceFile(SnapshotFileName, in.Snapshot); err != nil {
				return fmt.Errorf("metadata snapshot: %w", err)
			}
			reopened, err = replaceJournal(store, journal, raw, nil, kept.pieces)
			return err
		},
	}
	result := func(err error) error {
		if err != nil {
			return err
		}
		m.journal = reopened
		m.setJournalIndex(kept.firstOp, kept.ends, kept.holes)
		m.log.Info("metadata journal kept by the install", "op", in.At.Op, "journal_ops_kept", len(kept.ends), "faulty_ops", len(kept.holes))
		return nil
	}
	return t, result
}
