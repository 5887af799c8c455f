package metahost

import (
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

// Two nodes may hold one committed op under different views: the view is outside
// the prepare's identity (a retransmission re-stamps it, a view change's suffix
// carries 0). The view the op's partition groups start in must not follow it: the
// groups used to start in each node's header view, and a group of two replicas
// (replication quorum 1) could then have two primaries.
func TestGroupsViewIsTheSameForOneOp(t *testing.T) {
	const replicas = 3
	var h wire.PrepareHeader
	h.Command, h.Replica, h.View, h.Op = wire.CommandPrepare, 2, 41, 9
	h.Group = wire.MetadataGroup
	identity := wire.PrepareIdentity(wire.HeaderBytes(&h))
	for _, view := range []uint32{0, 41, 44} { // from a StartView's suffix, as prepared, re-stamped
		held := h
		held.View = view
		if wire.PrepareIdentity(wire.HeaderBytes(&held)) != identity {
			t.Fatalf("view %d changed the op's identity", view)
		}
		if got := groupsView(&held); got != groupsView(&h) || got%replicas != uint32(h.Replica) {
			t.Fatalf("op held in view %d: its groups start in view %d, want %d, led by replica %d", view, got, groupsView(&h), h.Replica)
		}
	}
}
