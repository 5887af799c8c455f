package partitionhost

import (
	"errors"
	"time"

	"github.com/iggy-shard/iggy-shard/partition"
	"github.com/iggy-shard/iggy-shard/wire"
)

// A deleted consumer group's stored offsets go with it (the DeleteConsumerGroup
// effect), on every partition of its topic, on every node. In a cluster only a
// partition's primary can delete one, through the partition's group, and its
// backups apply the deletion from there: so the node whose store leads the
// partition (Store.IsPrimary) proposes it, and every other node only looks
// (Store.ConsumerOffset) until the primary's deletion has applied there; a
// primary that cannot take it now (a Ready out, a view changing: 58, or a
// proposal whose outcome is unknown: 57, isTransient) and a backup
// whose offset is still there look again a little later (a backup may have become
// the primary meanwhile). That is no error. Bounded:
// the group's id is never used again in its topic (metadata assigns ids upward),
// so an offset a cluster never gets to delete is unreachable, bytes only; it is
// logged, once. A topic created again under the same ids starts its group ids
// afresh: a deletion asked again touches only the partition it was for, created
// before the op (handler.madeBefore), and is over once that one is gone.
// A failure of another kind (the partition's files) is an error.

const (
	// groupOffsetDeleteRetry is the pause before a deletion is asked again.
	groupOffsetDeleteRetry = 50 * time.Millisecond
	// groupOffsetDeleteAttemptsMax bounds the attempts: ten seconds, past any
	// view change of the partition's group.
	groupOffsetDeleteAttemptsMax = 200
)

// groupOffsetDelete is one deleted group's offset on one partition this shard
// owns, until it is gone.
type groupOffsetDelete struct {
	h     *Host
	key   partition.Key
	group uint32
	// revision is the deleting op's (record.go).
	revision uint64
	attempts int
	dueNs    int64
}

// deleteGroupOffset drops group's stored offset on k, for the op of revision.
func (h *Host) deleteGroupOffset(k partition.Key, group uint32, revision uint64) {
	(&groupOffsetDelete{h: h, key: k, group: group, revision: revision}).try()
}

func (d *groupOffsetDelete) try() {
	if !d.h.madeBefore(d.key, d.revision) {
		return // the partition went, and maybe another took its ids since
	}
	d.attempts++
	c := partition.Consumer{Kind: wire.ConsumerGroup, ID: d.group}
	store := d.h.Store
	if !store.IsPrimary(d.key) {
		// Not this replica's to propose: done once the primary's deletion (or
		// the partition's) has reached this store.
		if _, held, err := store.ConsumerOffset(d.key, c); err != nil || !held {
			return
		}
		d.settle(wire.ErrTransientNotAccepted) // looked at again later
		return
	}
	d.h.groupOffsets.proposals++
	deferred, err := store.ReplicateConsumerOffset(d.key, c, 0, true, d, 0)
	if deferred {
		d.h.scheduleIO()
		return
	}
	d.settle(err)
}

// OffsetDone implements partition.OffsetCompletion: the deletion proposed here
// was applied, or did not commit (a view change).
func (d *groupOffsetDelete) OffsetDone(_ uint64, err error) { d.settle(err) }

func (d *groupOffsetDelete) settle(err error) {
	h := d.h
	switch {
	case err == nil, errors.Is(err, wire.ErrConsumerOffsetNotFound), errors.Is(err, wire.ErrResourceNotFound):
		// Deleted, or gone already (by the primary's deletion, or with the
		// partition).
	case isTransient(err) && d.attempts < groupOffsetDeleteAttemptsMax:
		d.dueNs = h.shard.NowNs() + int64(groupOffsetDeleteRetry)
		h.groupOffsets.deletes = append(h.groupOffsets.deletes, d)
		h.shard.WakeAt(d.dueNs)
	case isTransient(err):
		h.log.Info("a deleted consumer group's offset is left on a partition: no primary took its deletion; it is unreachable",
			"partition", d.key.String(), "group", d.group, "attempts", d.attempts)
	default:
		h.log.Error("a deleted consumer group's offset could not be deleted", "partition", d.key.String(), "group", d.group, "err", err)
	}
}

// isTransient says a deletion's proposal may be asked again: 58, not admitted, or
// 57, its outcome unknown. The store answers 57 a deletion prepared and not
// applied when its partition closes (a DeleteTopic right after the
// DeleteConsumerGroup, or a shutdown: partition.Store's quiesce) or a view change
// cancels it. Asking again is safe, as a deletion of what is gone is
// ConsumerOffsetNotFound, and quiet when the partition went (madeBefore); a
// partition whose storage failed answers the next attempt with its own error,
// logged below.
func isTransient(err error) bool {
	return errors.Is(err, wire.ErrTransientNotAccepted) || errors.Is(err, wire.ErrTransientNotCommitted)
}

// RetryGroupOffsetDeletes asks again for the deletions due. It runs on the
// shard's every turn (handler.Tick).
func (h *Host) RetryGroupOffsetDeletes() { retryDue(h, &h.groupOffsets.deletes) }

// retried is an effect asked again, a little later, until its op has applied
// here: a deleted group's offsets (this file), a DeleteSegments
// (segmentdeletes.go). try puts it back in its list if it is still refused.
type retried interface {
	try()
	due() int64
}

// retryDue tries the effects of list that are due and keeps the others, with a
// turn asked for when each comes due.
func retryDue[T retried](h *Host, list *[]T) {
	if len(*list) == 0 {
		return
	}
	now := h.shard.NowNs()
	due := *list
	*list = nil
	for _, d := range due {
		if now >= d.due() {
			d.try() // back in the list if it is still refused
			continue
		}
		*list = append(*list, d)
		h.shard.WakeAt(d.due())
	}
}

func (d *groupOffsetDelete) due() int64 { return d.dueNs }

// QueueGroupOffsetDelete queues the deletion of a group's offset on partition k,
// as its op of revision asked, to be asked at once by the next retry (tests: a
// deletion meant for an older partition of the same ids).
func (h *Host) QueueGroupOffsetDelete(k partition.Key, group uint32, revision uint64) {
	h.groupOffsets.deletes = append(h.groupOffsets.deletes, &groupOffsetDelete{h: h, key: k, group: group, revision: revision})
}
