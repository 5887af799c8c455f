package server

import (
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
