package sim

import (
	"slices"
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

// journalOf writes and syncs ops 1..count of the metadata group, chained as a
// core would.
func journalOf(t *testing.T, seed uint64, count int) *disk {
	t.Helper()
	d := newDisk(seed)
	parent := wire.Uint128{}
	for op := uint64(1); op <= uint64(count); op++ {
		body := []byte{byte(op), 1, 2, 3}
		var h wire.PrepareHeader
		h.Command = wire.CommandPrepare
		h.Cluster = wire.ClusterID(clusterName)
		h.Size = uint32(wire.HeaderSize + len(body))
		h.Op, h.Parent, h.Group = op, parent, wire.MetadataGroup
		h.ChecksumBody = wire.BodyChecksum(body)
		h.SetIdentity()
		parent = h.Checksum
		d.write(&h, body)
	}
	d.sync()
	return d
}

// Rot damages only entries at or below the bound and never the highest one, and
// recovery drops exactly what rotted, by the entries' checksums.
func TestRotIsNoticedAtRecovery(t *testing.T) {
	for seed := uint64(0); seed < 400; seed++ {
		d := journalOf(t, seed, 10)
		rotten := d.rot(10, 4)
		if len(rotten) != 4 {
			t.Fatalf("%d entries rotted, want 4", len(rotten))
		}
		if slices.Contains(rotten, 10) {
			t.Fatal("the highest entry rotted")
		}
		_, _, entries, dropped := d.recover()
		slices.Sort(rotten)
		if !slices.Equal(rotten, dropped) {
			t.Fatalf("seed %d: rotted %v, recovery dropped %v", seed, rotten, dropped)
		}
		if len(entries) != 10-len(rotten) {
			t.Fatalf("%d entries recovered, want %d", len(entries), 10-len(rotten))
		}
	}
	if d := journalOf(t, 1, 10); len(d.rot(3, 10)) != 3 {
		t.Fatal("rot went above its bound")
	}
}
