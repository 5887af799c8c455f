package partition

import (
	"errors"
	"fmt"

	"github.com/iggy-shard/iggy-shard/wire"
)

// A deletion frees a partition's ids for the next create, and every node applies
// the metadata at its own pace: a node that has not applied the deletion yet still
// runs the old incarnation's group, under the same ids, while the others run the new
// one's. Their histories do not chain, and a replica must never take the other's
// frames: a view change that counted the old replica's vote installed its log over
// the new group's committed ops. So a partition's group id carries its incarnation
// (wire.IncarnationGroup of its created_at), and the store drops a frame tagged
// with another incarnation before anything looks at it (IngressOtherIncarnation).
// Nothing is lost: the old incarnation is deleted by a committed op, so nothing of it
// is to be kept, and a node behind takes the new group's retransmissions once its
// metadata creates the partition.
//
// Binaries before the tag send untagged ids (tag 0) and compare ids exactly, so an
// upgrade from them is two rolling restarts. In the first every upgraded node runs
// with cluster.partition_incarnation_tags = false (Replication.UntaggedGroups): it
// sends untagged ids, which the old nodes take, and takes theirs. In the second
// each node turns it on and sends tagged ids, which only upgraded nodes see by
// then. Throughout, a partition takes an untagged frame as its own incarnation's,
// as every binary before took every frame, and consensus compares ids without the
// tag (wire.SameGroup): the tag is checked here, once. A prepare keeps the id its
// primary gave it, so a log, and a durable journal, may hold both kinds.
//
// Untagged frames are not told apart by incarnation: while some node sends them,
// a node behind on a deletion can still meet the new incarnation's group under the
// same ids, as before the tag. Only once every node sends tagged ids are the
// incarnations kept apart.

// A purge is a new life of the incarnation, kept apart the same way. It empties
// every replica and starts the partition's group anew (Store.Purge), each node when
// it applies the metadata op, so for a while some replicas run the old life and
// some the new, under the same ids. A replica that had purged used to take the old
// life's prepares, repair the history below them from the primary and commit it
// again: the purged batches came back on that replica only, and its log then
// refused the new life's ops. So the tag is of the life: the incarnation's tag moved
// on by the topic's purge generation (wire.PurgedIncarnationTag), the metadata's,
// the same on every node.

var errOtherIncarnation = errors.New("partition: frame of another incarnation of the partition's ids: dropped")

// Incarnation names one life of a partition's ids: the incarnation created at
// CreatedAtMicros (its created_at), after PurgeGeneration purges of its topic.
type Incarnation struct {
	CreatedAtMicros uint64
	PurgeGeneration uint64
}

// tag is the incarnation tag of p's life.
func (p *Partition) tag() uint16 {
	return wire.PurgedIncarnationTag(wire.IncarnationTag(p.createdAtMicros), p.purgeGeneration)
}

// groupID is p's consensus group id: its key, tagged with its life unless the
// store sends untagged ids (Replication.UntaggedGroups).
func (p *Partition) groupID() (uint64, error) {
	group, ok := wire.PartitionGroup(p.key.StreamID, p.key.TopicID, p.key.PartitionID)
	if !ok {
		return 0, fmt.Errorf("partition %v: ids outside the consensus group id space", p.key)
	}
	if p.store.repl.UntaggedGroups {
		return group, nil
	}
	return wire.TaggedGroup(group, p.tag()), nil
}

// ofIncarnation reports whether group id group, of p's ids, is of p's life:
// tagged with it, or untagged.
func (p *Partition) ofIncarnation(group uint64) bool {
	return wire.GroupUntagged(group) || wire.GroupIncarnationTag(group) == p.tag()
}

// ofOtherIncarnation reports whether frame h is of another incarnation of p's ids,
// or another life of p's, than p's: it carries a group tagged with another.
func (p *Partition) ofOtherIncarnation(h *wire.GenericHeader) bool {
	group, ok := wire.FrameGroup(h)
	return !ok || !p.ofIncarnation(group)
}
