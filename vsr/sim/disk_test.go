package sim

import (
	"slices"
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

// journalOf writes and syncs ops 1..count of one group, chained as a core would.
func journalOf(t *testing.T, seed, group uint64, count int) *disk {
	t.Helper()
	d := newDisk(seed)
	parent := wire.Uint128{}
	for op := uint64(1); op <= uint64(count); op++ {
		body := sealPartitionBody([]byte{byte(op), 1, 2, 3})
		var h wire.PrepareHeader
		h.Command = wire.CommandPrepare
		h.Cluster = wire.ClusterID(clusterName)
		h.Size = uint32(wire.HeaderSize + len(body))
		h.Op, h.Parent, h.Group = op, parent, group
		if group == wire.MetadataGroup {
			h.ChecksumBody = wire.BodyChecksum(body)
		}
		h.SetIdentity()
		parent = h.Checksum
		d.write(&h, body)
	}
	d.sync()
	return d
}

// Rot damages only entries at or below the bound and never the highest one, and
// recovery drops exactly what rotted, by the checksums of both planes.
func TestRotIsNoticedAtRecovery(t *testing.T) {
	for _, group := range []uint64{wire.MetadataGroup, 1 << 32} {
		for seed := uint64(0); seed < 400; seed++ {
			d := journalOf(t, seed, group, 10)
			rotten := d.rot(10, 4, newPartitionMachine().bodyIntact)
			if len(rotten) != 4 {
				t.Fatalf("group %#x: %d entries rotted, want 4", group, len(rotten))
			}
			if slices.Contains(rotten, 10) {
				t.Fatalf("group %#x: the highest entry rotted", group)
			}
			rec, dropped := d.recover(newPartitionMachine().bodyIntact)
			slices.Sort(rotten)
			if !slices.Equal(rotten, dropped) {
				t.Fatalf("group %#x seed %d: rotted %v, recovery dropped %v", group, seed, rotten, dropped)
			}
			if len(rec.Headers) != 10-len(rotten) {
				t.Fatalf("group %#x: %d headers recovered, want %d", group, len(rec.Headers), 10-len(rotten))
			}
		}
	}
	if d := journalOf(t, 1, wire.MetadataGroup, 10); len(d.rot(3, 10, newPartitionMachine().bodyIntact)) != 3 {
		t.Fatal("rot went above its bound")
	}
}
