package wire

import "testing"

// sealedFrame returns an aligned frame of command with a body of bodyBytes, sealed.
func sealedFrame(t *testing.T, command Command, group uint64, bodyBytes int) (*GenericHeader, []byte) {
	t.Helper()
	buf := alignedBuffer(HeaderSize + bodyBytes)
	copy(buf, replicaFrame(command))
	h, _ := ViewHeader[GenericHeader](buf)
	h.Size = uint32(HeaderSize + bodyBytes)
	if command == CommandPrepare || command == CommandRepairPrepare {
		h.asPrepare().Group = group
	}
	body := buf[HeaderSize:]
	for i := range body {
		body[i] = byte(i)
	}
	SealReplica(h, body)
	return h, body
}

func TestSealReplicaIsWhatReceiversCheck(t *testing.T) {
	partition, _ := PartitionGroup(1, 2, 3)
	for _, tc := range []struct {
		name       string
		command    Command
		group      uint64
		bodyBytes  int
		bodySealed bool
	}{
		{"commit", CommandCommit, 0, 0, false},
		{"state chunk", CommandStateChunk, 0, 1000, false},
		{"metadata prepare", CommandPrepare, MetadataGroup, 500, true},
		{"partition prepare", CommandPrepare, partition, 500, false},
		{"metadata repair prepare", CommandRepairPrepare, MetadataGroup, 500, true},
		{"start view", CommandStartView, 0, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, body := sealedFrame(t, tc.command, tc.group, tc.bodyBytes)
			if _, err := DecodeReplicaHeader(h.Bytes()[:], DefaultMessageSizeMax); err != nil {
				t.Fatalf("decode: %v", err)
			}
			if !ReplicaHeaderSealValid(h) || !ReplicaBodySealValid(h, body) {
				t.Fatal("a sealed frame fails its checks")
			}
			if h.BodySealed() != tc.bodySealed || tc.bodySealed == h.ChecksumBody.IsZero() {
				t.Fatalf("body sealed %v, checksum_body %v", h.BodySealed(), h.ChecksumBody)
			}
			if tc.bodyBytes > 0 {
				body[0] ^= 1
				if ReplicaBodySealValid(h, body) == tc.bodySealed {
					t.Fatalf("a changed body: body seal valid %v", !tc.bodySealed)
				}
				body[0] ^= 1
			}
			// Sealing again changes nothing: consensus may have stamped first.
			before := *h.Bytes()
			SealReplica(h, body)
			if *h.Bytes() != before {
				t.Fatal("sealing a sealed frame changed it")
			}
		})
	}
}

func TestRepairPrepareKeepsThePrepareIdentity(t *testing.T) {
	h, body := sealedFrame(t, CommandPrepare, MetadataGroup, 64)
	identity := h.Checksum
	if identity != h.asPrepare().Identity() {
		t.Fatal("SealReplica's identity is not PrepareHeader.Identity")
	}
	h.Command = CommandRepairPrepare // the journaled prepare, command rewritten
	if !ReplicaHeaderSealValid(h) {
		t.Fatal("a RepairPrepare of a journaled prepare fails the identity check")
	}
	SealReplica(h, body)
	if h.Checksum != identity {
		t.Fatal("sealing a RepairPrepare changed the identity")
	}
	h.View++ // a retransmission re-stamps the view: the identity holds
	if !ReplicaHeaderSealValid(h) {
		t.Fatal("the view is part of the identity")
	}
	h.asPrepare().Op++
	if ReplicaHeaderSealValid(h) {
		t.Fatal("a changed op keeps the identity")
	}
}

func TestReplicaIdentityDoesNotAllocate(t *testing.T) {
	h, body := sealedFrame(t, CommandPrepare, MetadataGroup, 64)
	if n := testing.AllocsPerRun(100, func() { SealReplica(h, body); _ = ReplicaHeaderSealValid(h) }); n != 0 {
		t.Fatalf("SealReplica and ReplicaHeaderSealValid allocate %v times", n)
	}
}
