package server

import (
	"fmt"
	"log/slog"

	"github.com/iggy-shard/iggy-shard/vsr"
)

// The metadata plane's checkpoints: a snapshot of the state (snapshot.bin) and the
// journal cut to the ops from it on, taken every snapshotIntervalOps applied ops.
// In a cluster the core's primary proposes no op a header window or more above
// the last snapshot (vsr.CoreConfig.ReportsCheckpoints), so the interval obeys
// vsr's checkpoint rule (vsr/checkpoint.go): at most the window less two
// pipelines, 960 ops for the window of 1,024. A larger one could never come due:
// the cluster stopped committing for good a window above its last snapshot (at
// 1,024, the old default, after about a thousand metadata operations, logins
// included). A single node counts its window from the applied op and could honour
// more, but one rule with one number serves both: a configuration file moves from
// a single node to a cluster unchanged.
//
// A snapshot that fails (a full or failing disk) is tried again, counting still
// from the last one written: in a cluster after snapshotRetryTicks of the core's
// clock, since the primary may be stopped a window above its snapshot and apply
// nothing until one succeeds; on a single node after another interval of ops,
// not at every turn of a failing disk.

// SnapshotIntervalOpsMax is the largest snapshot interval the metadata plane
// honours, 960 ops for its header window of 1,024: a larger one is used as this,
// with a warning (clampSnapshotInterval).
func SnapshotIntervalOpsMax() uint64 {
	return vsr.CheckpointIntervalOpsMax(journalSlotsMin, vsr.PipelineDepthDefault)
}

// snapshotIntervalOpsDefault is the largest interval the window allows: fewer
// snapshots (each encodes the whole state on shard 0 and rewrites the journal)
// cost less, and a restart replays at most one interval (under a millisecond of
// applies); the rule's two pipelines of room are margin enough.
var snapshotIntervalOpsDefault = SnapshotIntervalOpsMax()

// snapshotRetryTicks is how long a clustered plane waits, in cluster ticks
// (10 ms), before it tries a failed snapshot again.
const snapshotRetryTicks = 100

// metaJournalSlotsBase is the metadata core's header window before a long
// recovered journal grows it (recoverJournal): the window the rule is held to.
func (c *Config) metaJournalSlotsBase() int {
	if c.metaJournalSlots > 0 {
		return c.metaJournalSlots
	}
	return journalSlotsMin
}

// clampSnapshotInterval lowers a snapshot interval the metadata plane cannot
// honour to the largest it can, with one warning naming the setting and the value
// used: the old default (1,024) is in every existing configuration file, and a
// start refused for it would help no one.
func clampSnapshotInterval(cfg *Config, log *slog.Logger) {
	limit := vsr.CheckpointIntervalOpsMax(cfg.metaJournalSlotsBase(), vsr.PipelineDepthDefault)
	if cfg.SnapshotIntervalOps <= limit || cfg.metaOldCheckpointRule {
		return
	}
	log.Warn("system.metadata.snapshot_interval_ops clamped: a metadata snapshot must come due well inside the journal window",
		"setting", "system.metadata.snapshot_interval_ops", "configured", cfg.SnapshotIntervalOps, "used", limit,
		"journal_window_ops", cfg.metaJournalSlotsBase())
	cfg.SnapshotIntervalOps = limit
}

// checkpointDue reports whether the plane takes a snapshot now.
func (m *metaPlane) checkpointDue() bool {
	if m.applied.op-m.snapshotOp < m.snapshotIntervalOps {
		return false
	}
	switch {
	case !m.snapshotRetrying:
		return true
	case m.clustered:
		return m.replica.Now() >= m.snapshotRetryTick
	default:
		return m.applied.op >= m.snapshotRetryOp
	}
}

// checkpointTask snapshots the state as of the last applied op (encoded here, on
// shard 0) and has the journal writer write it and cut the journal to the entries
// from that op on. It touches no plane state off the shard.
func (m *metaPlane) checkpointTask() *journalTask {
	at := m.applied
	snapshot := m.encodeSnapshot(at)
	keepFrom, ok := m.journalOffset(at.op)
	if !ok {
		panic(fmt.Sprintf("server: the metadata journal (ops from %d, %d entries) does not hold the applied op %d",
			m.journalFirstOp, len(m.journalEnds), at.op))
	}
	sizeBytes := m.journalSizeBytes()
	store, old := m.store, m.journal
	var (
		snapshotWritten, journalReplaced bool
		journal                          metaJournal
	)
	m.taskOut = true
	return &journalTask{
		work: func(func()) error {
			raw, err := store.ReadFile(journalFileName)
			if err != nil {
				return fmt.Errorf("metadata journal read: %w", err)
			}
			if int64(len(raw)) < sizeBytes {
				return fmt.Errorf("metadata journal read: %d bytes, %d written", len(raw), sizeBytes)
			}
			if err := store.ReplaceFile(snapshotFileName, snapshot); err != nil {
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
		then: func(err error) {
			m.taskOut = false
			if journalReplaced {
				if err != nil {
					// The old journal is unlinked: nothing can be appended safely.
					m.breakPlane(err)
					return
				}
				m.journal = journal
				m.cutJournalIndex(at.op, keepFrom)
			}
			if snapshotWritten {
				// A restart resumes from this snapshot (the entries below it
				// that a journal not cut still holds are skipped).
				m.snapshotOp = at.op
				m.snapshotRetrying = false
				m.snapshotsTaken.Add(1)
				if m.clustered {
					m.replica.Checkpointed(at.op)
				}
			}
			if err != nil {
				if !snapshotWritten {
					// Tried again later, counting from the last snapshot written
					// (see above).
					m.snapshotRetrying = true
					m.snapshotRetryOp = at.op + m.snapshotIntervalOps
					if m.clustered {
						m.snapshotRetryTick = m.replica.Now() + snapshotRetryTicks
					}
				}
				m.log.Error("metadata snapshot failed", "op", at.op, "snapshot_op", m.snapshotOp, "snapshot_written", snapshotWritten, "err", err)
				return
			}
			m.log.Info("metadata snapshot", "op", at.op)
		},
	}
}

// cutJournalIndex follows the journal's replacement by its entries from op on,
// which started at keepFrom in the old one.
func (m *metaPlane) cutJournalIndex(op uint64, keepFrom int64) {
	for i := range m.journalEnds {
		m.journalEnds[i] -= keepFrom
	}
	m.journalEnds = append(m.journalEnds[:0], m.journalEnds[op-m.journalFirstOp:]...)
	m.journalFirstOp = op
	// A cluster keeps the bodies of the core's header window: its repair serves
	// them to a replica that fell behind.
	keepBodiesFrom := op
	if m.clustered {
		keepBodiesFrom -= min(keepBodiesFrom, uint64(m.journalSlots))
	}
	for k := range m.bodies.byOp {
		if k < keepBodiesFrom {
			delete(m.bodies.byOp, k)
		}
	}
}
