package wire

import "testing"

func TestFrameGroup(t *testing.T) {
	group, _ := PartitionGroup(1, 2, 3)
	var h GenericHeader
	h.Command = CommandCommit
	h.Commit().Group = group
	if g, ok := FrameGroup(&h); !ok || g != group {
		t.Fatalf("Commit: group %#x, %v", g, ok)
	}
	h = GenericHeader{}
	h.Command = CommandForwardLogout
	if g, ok := FrameGroup(&h); !ok || g != MetadataGroup {
		t.Fatalf("ForwardLogout: group %#x, %v, want the metadata group", g, ok)
	}
	h = GenericHeader{}
	h.Command = CommandReplicaHello
	if _, ok := FrameGroup(&h); ok {
		t.Fatal("a handshake frame named a group")
	}
}
