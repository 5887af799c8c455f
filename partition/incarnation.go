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
// (wire.IncarnationGroup of its created_at), its core takes frames of that group
// only, and the store drops another incarnation's frames before anything looks at
// them (IngressOtherIncarnation). Nothing is lost: the old incarnation is deleted by
// a committed op, so nothing of it is to be kept, and a node behind takes the new
// group's retransmissions once its metadata creates the partition.

var errOtherIncarnation = errors.New("partition: frame of another incarnation of the partition's ids: dropped")

// groupID is p's consensus group id: its key, tagged with its incarnation.
func (p *Partition) groupID() (uint64, error) {
	group, ok := wire.PartitionGroup(p.key.StreamID, p.key.TopicID, p.key.PartitionID)
	if !ok {
		return 0, fmt.Errorf("partition %v: ids outside the consensus group id space", p.key)
	}
	return wire.IncarnationGroup(group, p.createdAtMicros), nil
}

// ofOtherIncarnation reports whether frame h is of another incarnation of p's ids
// than p: the tag its group carries is not p's.
func (p *Partition) ofOtherIncarnation(h *wire.GenericHeader) bool {
	group, ok := wire.FrameGroup(h)
	return !ok || wire.GroupIncarnationTag(group) != wire.IncarnationTag(p.createdAtMicros)
}
