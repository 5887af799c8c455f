package partitionhost

import (
	"fmt"
	"os"

	"github.com/iggy-shard/iggy-shard/partition"
	"github.com/iggy-shard/iggy-shard/partitiondir"
)

// Partition effects are applied at most once in effect, however often their op is
// applied again.
//
// A committed metadata op asks things of the partitions (metadata.Effect): create,
// delete, purge, delete segments, drop a deleted consumer group's offsets, take the
// topic's new options. The owner shards carry them out after the op commits, and an
// op may be applied again: a clustered node that restarts opens the partitions of
// its metadata snapshot, and the committed ops above the snapshot (up to a snapshot
// interval of them) are applied again, with their effects, as the cluster commits
// them to it; and a crash may cut an effect short. What makes a second application
// harmless is one durable record in each partition directory of what its contents
// reflect of the metadata (package partitiondir draws it: generation,
// created_revision, revision), synced before the contents it speaks for.
//
// A metadata revision is an op's prepare timestamp (µs): every replica applies the
// op with it, and it rises strictly along the committed log (a primary never stamps
// a prepare at or below the one before it, vsr.Core.Propose). created_revision is
// the revision of the op that created the partition, its created_at: it names the
// incarnation of the partition ids the directory holds, which a deletion frees for
// the next create (ids are the lowest free). generation is the topic's purge
// generation the contents reflect; revision, that of the last effect carried out on
// the directory. An effect of revision R:
//
//   - create: a directory of the same incarnation (created_revision R) is opened as
//     it is. One of an older incarnation, left by a deletion that a crash cut short,
//     is cleared and the partition created anew. One of a newer incarnation, which a
//     later op created (to be applied again after this one), is left alone: the
//     partition stays closed until that op opens it.
//   - every other effect touches open partitions created at or before R only. With
//     the rule above, a newer incarnation is never open when an older op applies.
//   - delete (partitions, topic, stream): removes the directory; applied again, it
//     finds the partition gone.
//   - purge: skipped where generation reaches the op's; otherwise the partition is
//     emptied and the record then takes the generation.
//   - delete segments: the op's count is of the oldest sealed segments of a log,
//     which each replica's partition reaches at its own time; so the partition's
//     primary resolves it into an offset and every replica deletes below it when
//     that op applies in the partition's order (partition/deletesegments.go,
//     segmentdeletes.go), each partition op applied once by its own record. The
//     effect is skipped where revision reaches R; otherwise the record takes R
//     first and the proposal goes after: a crash between the two proposes nothing
//     from this node (at most once), and a node that applies the op again after a
//     restart proposes nothing either.
//   - drop a deleted consumer group's offsets: a topic never reuses a group id
//     (metadata assigns them upward), so a second drop finds nothing; a drop asked
//     again later (groupoffsets.go) is over once its partition is gone.
//   - take the topic's options: sets what the op left, a value and not a change, so
//     applied again it sets the same; the ops after it, applied again in order, set
//     theirs. Until they are, the partition holds an older op's options, which a
//     retention pass (once a minute per shard) would go by.
//
// At start (openAtStart) each partition of the recovered state is brought to its
// committed record: a newer incarnation in its directory is left to the op that made
// it (above the snapshot, applied again later); an older one, or an older generation
// (a deletion or a purge committed but not carried out before a stop), is emptied;
// then the record says so, never with a lower generation than it had (a purge above
// the snapshot carried out already). A metadata state a node took by transfer is
// followed alike (followReplacedView): an open partition of another incarnation than
// the state's goes, the state's are created or opened, a generation behind is
// purged. A partition state transfer replaces the partition plane's own files only
// (partition/transfer.go, installReplaces), so the record survives it. A directory
// without a record (from a server older than the record) is taken as it is, at
// start and by a create, and the record written: nothing is lost for the doubt. A 16-byte record, from before revisions, reads with revision =
// created_revision.

// writeRecord replaces an open partition's record durably, making its directory
// first when nothing was written in it yet (partitiondir.Storages makes it with its first
// file): a record that changes with an op (a purge's generation, a deletion of
// segments' revision) must be durable before the op's effect counts as carried out,
// whether or not the partition holds anything.
func (h *Host) writeRecord(dir string, r partitiondir.Record) error {
	if err := h.storages.EnsureDir(dir); err != nil {
		return err
	}
	return partitiondir.WriteRecord(dir, r)
}

// Open is a partition of the recovered metadata state, with its topic's config
// and purge generation.
type Open struct {
	Key             partition.Key
	Cfg             partition.Config
	CreatedAt       uint64
	PurgeGeneration uint64 // the topic's, committed: the partition must be at least there
}

// OpenAtStart opens a partition of the recovered metadata state and brings it to
// its committed record (settle), unless its directory holds a newer incarnation.
func (h *Host) OpenAtStart(p Open) {
	dir := h.Store.Dir(p.Key)
	have, present, readErr := partitiondir.ReadRecord(dir)
	if readErr != nil {
		h.log.Error("partition record unreadable; the partition is opened as it is", "partition", p.Key.String(), "err", readErr)
	}
	if present && have.CreatedRevision > p.CreatedAt {
		h.log.Info("partition left closed at start: its directory holds a newer partition of the same ids, which an op above the metadata snapshot created and opens again",
			"partition", p.Key.String(), "revision", have.CreatedRevision, "snapshot_revision", p.CreatedAt)
		return
	}
	if readErr == nil && !present {
		// Taken as it is, with the record the storage writes (createPartition).
		h.storages.AnnounceRecord(dir, partitiondir.Record{Generation: p.PurgeGeneration, CreatedRevision: p.CreatedAt,
			Revision: p.CreatedAt})
	}
	report, err := h.Store.Open(p.Key, p.Cfg, openedLife(p.CreatedAt, p.PurgeGeneration, have, present))
	h.storages.ClearAnnounced()
	if err != nil {
		h.log.Error("partition failed to open", "partition", p.Key.String(), "err", err)
		return
	}
	if present {
		if err := h.settle(p.Key, partitiondir.Record{Generation: p.PurgeGeneration, CreatedRevision: p.CreatedAt}); err != nil {
			h.log.Error("partition record", "partition", p.Key.String(), "err", err)
		}
	}
	if report != nil && (len(report.Truncations) > 0 || len(report.RebuiltIndexes) > 0 ||
		len(report.RemovedSegments) > 0 || len(report.RemovedFiles) > 0) {
		h.log.Info("partition recovered", "partition", p.Key.String(), "report", report.String())
	}
	h.PublishStats(p.Key)
}

// createPartition carries out a create effect: a new partition, or the one of the
// same incarnation a restart found (the op applied again), or nothing while the
// directory holds a newer incarnation.
func (h *Host) createPartition(e *effect) error {
	k := e.key
	if open, ok := h.OpenCreatedAt(k); ok {
		if open == e.createdAt {
			return nil
		}
		return fmt.Errorf("%w: %v, created at %d", partition.ErrPartitionExists, k, open)
	}
	dir := h.Store.Dir(k)
	_, statErr := os.Stat(dir)
	exists := statErr == nil
	var have partitiondir.Record
	var present bool
	var readErr error
	if exists {
		have, present, readErr = partitiondir.ReadRecord(dir)
		if readErr != nil {
			h.log.Warn("partition record unreadable; the directory is taken as the partition's", "partition", k.String(), "err", readErr)
		}
	}
	rec := partitiondir.Record{Generation: e.purgeGeneration, CreatedRevision: e.createdAt, Revision: e.createdAt}
	switch {
	case present && have.CreatedRevision > e.createdAt:
		h.log.Info("partition not created again: its directory holds a newer partition of the same ids, which a later op opens",
			"partition", k.String(), "revision", have.CreatedRevision, "op_revision", e.createdAt)
		return nil
	case present && have.CreatedRevision == e.createdAt, !present && exists:
		// The op is applied again (a restart from an older snapshot): what the
		// partition holds stays, with the record the storage writes when it has none.
		if readErr == nil && !present {
			h.storages.AnnounceRecord(dir, rec)
		}
		report, err := h.Store.Open(k, e.cfg, openedLife(e.createdAt, e.purgeGeneration, have, present))
		h.storages.ClearAnnounced()
		if err != nil {
			return err
		}
		if report != nil && (len(report.Truncations) > 0 || len(report.RemovedSegments) > 0 || len(report.RemovedFiles) > 0) {
			h.log.Info("partition recovered", "partition", k.String(), "report", report.String())
		}
		if readErr == nil && !present {
			return nil
		}
		return h.settle(k, partitiondir.Record{Generation: e.purgeGeneration, CreatedRevision: e.createdAt})
	}
	// None, or an older incarnation's leftovers, which CreateInView clears.
	//
	// A created partition's record costs it nothing until it is written: the
	// storage writes the record, durably (the file, then its directory entry), just
	// before the first file is created in the directory (its first batch, its group
	// state, its journal file), and never if none is. What a crash leaves:
	//   - before the record: a directory that holds nothing (or is not there yet:
	//     it is made durable with the others created since, partition.DirSyncs,
	//     before anything is written in it). An empty directory without a record is
	//     taken as the partition's, as it is, at the next start or when the op is
	//     applied again: it is empty, so nothing of another incarnation or purge
	//     generation can show. A crash while the record itself is written leaves an
	//     empty record at most, read as none, in a directory as empty.
	//   - after it: as when the record was written with the directory. What the
	//     record guards against, a directory whose contents are of another
	//     incarnation or generation than the committed metadata says, needs
	//     contents, and none is created before the record is durable.
	// An older incarnation's leftovers are removed durably before (a tombstone
	// rename, partition.OSStorages.Remove). A thousand partitions created at once
	// cost a thousand mkdirs and a few directory fsyncs, no file and no fsync each;
	// each pays two fsyncs when it is first written.
	h.storages.AnnounceCreation(dir, rec, !exists)
	defer h.storages.ClearAnnounced()
	return h.Store.CreateInView(k, e.cfg, partition.Incarnation{CreatedAtMicros: e.createdAt, PurgeGeneration: e.purgeGeneration}, e.view)
}

// openedLife is the life an existing directory of the incarnation created at
// createdAt opens in: the one its contents are of, which its record names (a purge
// whose op is above the snapshot may have been carried out before the stop), or,
// without a record of the incarnation, the committed purge generation. Were it
// opened in a later life than its contents, it would take that life's frames on top
// of them until settle purged it (partition/incarnation.go).
func openedLife(createdAt, committedGeneration uint64, have partitiondir.Record, present bool) partition.Incarnation {
	if present && have.CreatedRevision == createdAt {
		return partition.Incarnation{CreatedAtMicros: createdAt, PurgeGeneration: have.Generation}
	}
	return partition.Incarnation{CreatedAtMicros: createdAt, PurgeGeneration: committedGeneration}
}

// settle brings an open partition to the committed record want (its incarnation
// and its topic's purge generation): a directory of an older incarnation or
// generation is emptied, then the record written. A higher generation than want
// that the directory reached is kept: a purge whose op is above the snapshot was
// carried out before the stop.
func (h *Host) settle(k partition.Key, want partitiondir.Record) error {
	dir := h.Store.Dir(k)
	have, present, err := partitiondir.ReadRecord(dir)
	if err != nil {
		return err
	}
	switch {
	case !present:
		// From before the record, or replaced by a partition state transfer.
		want.Revision = want.CreatedRevision
	case have.CreatedRevision > want.CreatedRevision:
		return fmt.Errorf("partition %v: its directory holds a newer incarnation (revision %d) than the one settled (%d)",
			k, have.CreatedRevision, want.CreatedRevision)
	case have.CreatedRevision == want.CreatedRevision && have.Generation >= want.Generation:
		return nil
	default:
		h.log.Warn("partition emptied: its purge (or an older partition's deletion) was committed but not carried out before a stop",
			"partition", k.String(), "generation", have.Generation, "committed_generation", want.Generation,
			"revision", have.CreatedRevision, "committed_revision", want.CreatedRevision)
		if err := h.Store.PurgeMissed(k, want.Generation); err != nil {
			return err
		}
		want.Revision = want.CreatedRevision
		if have.CreatedRevision == want.CreatedRevision {
			want.Revision = have.Revision
		}
	}
	return h.writeRecord(dir, want)
}

// OpenCreatedAt is the incarnation of a partition open here (its created_at); ok
// is false when it is not open.
func (h *Host) OpenCreatedAt(k partition.Key) (createdAt uint64, ok bool) {
	info, err := h.Store.Info(k)
	if err != nil {
		return 0, false
	}
	return info.CreatedAtMicros, true
}

// madeBefore reports whether k is open here in an incarnation created at or before
// revision: the one an op of that revision is about.
func (h *Host) madeBefore(k partition.Key, revision uint64) bool {
	createdAt, ok := h.OpenCreatedAt(k)
	return ok && createdAt <= revision
}

// purgePartition carries out a purge effect on an open partition: emptied, unless
// its record reaches the generation already; the record then takes it.
func (h *Host) purgePartition(k partition.Key, generation, revision uint64) error {
	dir := h.Store.Dir(k)
	have, present, err := partitiondir.ReadRecord(dir)
	if err != nil {
		return err
	}
	if present && have.Generation >= generation {
		return nil
	}
	if err := h.Store.Purge(k, generation); err != nil {
		return err
	}
	createdAt, _ := h.OpenCreatedAt(k)
	return h.writeRecord(dir, partitiondir.Record{Generation: generation, CreatedRevision: createdAt, Revision: revision})
}

// deleteSegments carries out a delete-segments effect on an open partition, unless
// its record reaches the op's revision already: the record first, then the
// deletion, through the partition's group (segmentdeletes.go).
func (h *Host) deleteSegments(e *effect) error {
	dir := h.Store.Dir(e.key)
	have, present, err := partitiondir.ReadRecord(dir)
	if err != nil {
		return err
	}
	if present && have.Revision >= e.revision {
		return nil
	}
	if !present {
		createdAt, _ := h.OpenCreatedAt(e.key)
		have = partitiondir.Record{Generation: e.purgeGeneration, CreatedRevision: createdAt}
	}
	have.Revision = e.revision
	if err := h.writeRecord(dir, have); err != nil {
		return err
	}
	(&segmentsDelete{h: h, key: e.key, count: e.count, revision: e.revision, generation: e.purgeGeneration}).try()
	return nil
}
