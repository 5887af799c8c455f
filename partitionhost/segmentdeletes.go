package partitionhost

import (
	"errors"
	"time"

	"github.com/iggy-shard/iggy-shard/partition"
	"github.com/iggy-shard/iggy-shard/partitiondir"
	"github.com/iggy-shard/iggy-shard/wire"
)

// A DeleteSegments effect is carried out through the partition's own group: its
// primary resolves the count into an offset against its log and proposes it, and
// every replica deletes up to that offset when the op applies there, in the
// partition's order (partition/deletesegments.go, which says why a count applied
// on each replica's log would not agree). So the node whose store leads the
// partition (Store.IsPrimary) proposes it, and every other node only looks
// (Store.DeletedSegmentsRevision) until the primary's op has applied there; a
// primary that cannot propose now (a Ready out, a view changing: 58, or a
// proposal whose outcome is unknown: 57) and a backup the op has not reached look
// again a little later (a backup may have become the primary meanwhile), as a
// deleted group's offsets are (groupoffsets.go). In a group of one the store
// deletes within the call.
//
// Bounded: after ten seconds of attempts the node stops looking and logs it. No
// replica deleted anything for the op then unless its op applied, and an op
// applies on all or none, so the replicas agree either way; the command was not
// carried out where no primary took it, nor where the primary installed a state
// since its last op (partition.ErrDeleteSegmentsUncertain), which is logged too.

const (
	// segmentsDeleteRetry is the pause before a deletion is asked again.
	segmentsDeleteRetry = 50 * time.Millisecond
	// segmentsDeleteAttemptsMax bounds the attempts: ten seconds, past any view
	// change of the partition's group and any pause of a backup.
	segmentsDeleteAttemptsMax = 200
)

// segmentsDelete is one DeleteSegments effect on a partition this shard owns,
// until its op has applied here.
type segmentsDelete struct {
	h        *Host
	key      partition.Key
	count    uint32
	revision uint64 // the metadata op's (record.go)
	// generation is the topic's purge generation the op was committed in.
	generation uint64
	attempts   int
	dueNs      int64
}

func (d *segmentsDelete) try() {
	h := d.h
	if rec, present, _ := partitiondir.ReadRecord(h.Store.Dir(d.key)); present && rec.Generation > d.generation {
		// Purged here since (a purge of its topic committed after it, carried out
		// while its op waited): the segments it meant are gone, and a count
		// resolved now would take messages written after the purge.
		h.log.Info("a DeleteSegments op is over: its partition was purged since",
			"partition", d.key.String(), "revision", d.revision, "generation", d.generation, "purged_to", rec.Generation)
		return
	}
	if !h.madeBefore(d.key, d.revision) {
		return // the partition went, and maybe another took its ids since
	}
	if applied, ok := h.Store.DeletedSegmentsRevision(d.key); !ok || applied >= d.revision {
		h.PublishStats(d.key)
		return // applied here (or a later one was, which makes this one nothing)
	}
	d.attempts++
	if !h.Store.IsPrimary(d.key) {
		d.settle(wire.ErrTransientNotAccepted) // looked at again later
		return
	}
	h.segmentDeletes.proposals++
	deferred, err := h.Store.ReplicateDeleteSegments(d.key, d.count, d.revision, d, 0)
	if deferred {
		h.scheduleIO()
		return
	}
	d.settle(err)
}

// OffsetDone implements partition.OffsetCompletion: the op proposed here was
// applied, or did not commit (a view change).
func (d *segmentsDelete) OffsetDone(_ uint64, err error) { d.settle(err) }

func (d *segmentsDelete) settle(err error) {
	h := d.h
	switch {
	case err == nil, err == wire.ErrPartitionNotFound:
		h.PublishStats(d.key)
	case isTransient(err) && d.attempts < segmentsDeleteAttemptsMax:
		d.dueNs = h.shard.NowNs() + int64(segmentsDeleteRetry)
		h.segmentDeletes.pending = append(h.segmentDeletes.pending, d)
		h.shard.WakeAt(d.dueNs)
	case isTransient(err):
		h.log.Warn("a DeleteSegments op did not apply here: no primary of the partition took it",
			"partition", d.key.String(), "revision", d.revision, "attempts", d.attempts)
	case errors.Is(err, partition.ErrDeleteSegmentsUncertain):
		h.log.Warn("a DeleteSegments op is not proposed: this replica installed a state since its last one and cannot tell whether the state held it",
			"partition", d.key.String(), "revision", d.revision)
	default:
		h.log.Error("partition effect failed", "effect", "DeleteSegments", "partition", d.key.String(), "err", err)
	}
}

// RetrySegmentDeletes asks again for the DeleteSegments effects due. It runs on
// the shard's every turn.
func (h *Host) RetrySegmentDeletes() { retryDue(h, &h.segmentDeletes.pending) }

func (d *segmentsDelete) due() int64 { return d.dueNs }

// segmentDeletes are the DeleteSegments effects waiting for their op.
type segmentDeletes struct {
	pending []*segmentsDelete
	// proposals counts the ops this shard proposed as its partitions' primary
	// (tests).
	proposals int
}

// SegmentDeletesPending is how many DeleteSegments effects wait for their op here
// (tests).
func (h *Host) SegmentDeletesPending() int { return len(h.segmentDeletes.pending) }
