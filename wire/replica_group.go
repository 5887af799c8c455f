package wire

// FrameGroup is the consensus group a replica-plane frame belongs to, read from
// the group field of its command's layout; the session-forwarding frames carry none
// and belong to the metadata plane. ok is false for a command that is not
// consensus traffic (the handshake, client commands).
func FrameGroup(h *GenericHeader) (uint64, bool) {
	switch h.Command {
	case CommandPrepare, CommandRepairPrepare:
		return h.Prepare().Group, true
	case CommandPrepareOk:
		return h.PrepareOk().Group, true
	case CommandCommit:
		return h.Commit().Group, true
	case CommandStartViewChange:
		return h.StartViewChange().Group, true
	case CommandDoViewChange:
		return h.DoViewChange().Group, true
	case CommandStartView:
		return h.StartView().Group, true
	case CommandRequestStartView:
		return h.RequestStartView().Group, true
	case CommandRequestPrepares:
		return h.RequestPrepares().Group, true
	case CommandRepairDone, CommandRangeEvicted:
		return h.RepairRange().Group, true
	case CommandRequestStateTransfer:
		return h.RequestStateTransfer().Group, true
	case CommandStateTransferTarget:
		return h.StateTransferTarget().Group, true
	case CommandRequestStateChunk:
		return h.RequestStateChunk().Group, true
	case CommandStateChunk:
		return h.StateChunk().Group, true
	case CommandForwardRegister, CommandForwardRegisterResult, CommandForwardLogout, CommandForwardLogoutResult:
		return MetadataGroup, true
	}
	return 0, false
}
