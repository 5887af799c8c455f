package wire

// The seals of a replica frame, as a sender stamps them and a receiver checks them
// (iggy.apache.org/docs/binary-protocol/cluster, Frame integrity):
//
//   - the body seal (checksum_body): metadata-plane Prepare and RepairPrepare, and
//     the DoViewChange and StartView suffixes; every other frame leaves it zero;
//   - the frame seal (checksum) on every FrameSealed command;
//   - the identity (checksum) of a Prepare or RepairPrepare, in place of a frame
//     seal. A RepairPrepare is a journaled Prepare with only its command byte
//     rewritten, so its identity is computed with the command read as Prepare.

// BodySealed reports whether a frame with this header carries a body seal.
func (h *GenericHeader) BodySealed() bool {
	switch h.Command {
	case CommandDoViewChange, CommandStartView:
		return true
	case CommandPrepare, CommandRepairPrepare:
		return h.asPrepare().Group == MetadataGroup
	}
	return false
}

// ReplicaIdentity is the identity of a Prepare or RepairPrepare header, the command
// read as Prepare. It copies the header (256 bytes on the stack) and allocates nothing.
func ReplicaIdentity(h *GenericHeader) Uint128 {
	covered := *h.Bytes()
	covered[CommandFieldOffset] = byte(CommandPrepare)
	return PrepareIdentity(&covered)
}

// SealReplica stamps a replica frame's seals in place, the body seal before the frame
// seal or identity that covers it. Call it once every other field is final. A
// Prepare's identity is a function of its header, so stamping one that consensus
// already stamped writes the same bytes again. The handshake frames are left alone:
// their MACs are their integrity.
func SealReplica(h *GenericHeader, body []byte) {
	if h.BodySealed() {
		h.SealBody(body)
	}
	switch {
	case h.Command == CommandPrepare || h.Command == CommandRepairPrepare:
		h.Checksum = ReplicaIdentity(h)
	case h.Command.FrameSealed():
		SealFrame(h.Bytes())
	}
}

// ReplicaHeaderSealValid checks what of the seals a header alone can show, for a
// header DecodeReplicaHeader accepted (which verified the frame seal of sealed
// commands): the identity of a Prepare or RepairPrepare.
func ReplicaHeaderSealValid(h *GenericHeader) bool {
	if h.Command == CommandPrepare || h.Command == CommandRepairPrepare {
		return h.Checksum == ReplicaIdentity(h)
	}
	return true
}

// ReplicaBodySealValid checks the body seal of a frame that carries one (BodySealed);
// true for the others.
func ReplicaBodySealValid(h *GenericHeader, body []byte) bool {
	return !h.BodySealed() || h.BodySealValid(body)
}
