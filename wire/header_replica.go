//go:build 386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64 || wasm

package wire

import "unsafe"

// The replica-plane headers (commands 6, 7, 9..12, 14..29). Field names follow the
// spec; "group" is the u64 consensus group (MetadataGroup or a PartitionGroup).

// PrepareHeader replicates one operation (command 6); RepairPrepare (19) is the same
// bytes with only the command rewritten. Its checksum is the prepare's identity
// (PrepareIdentity), not a frame seal.
//
//	128 client u128 | 144 parent u128 | 160 request_checksum u128 | 176 op u64
//	184 commit u64 | 192 timestamp u64 | 200 request u64 | 208 operation u8
//	209 padding 7 | 216 group u64 | 224 user_id u32 | 228 reserved 28
type PrepareHeader struct {
	CommonHeader
	Client Uint128
	// Parent is the previous prepare's identity: the hash chain.
	Parent           Uint128
	RequestChecksum  Uint128
	Op               uint64
	Commit           uint64
	Timestamp        uint64
	Request          uint64
	Operation        Operation
	OperationPadding [7]byte
	Group            uint64
	UserID           uint32
	Reserved         [28]byte
}

// PrepareOkHeader acknowledges a prepare (command 7). View and Commit are the
// acker's own; the other fields echo the prepare.
type PrepareOkHeader struct {
	CommonHeader
	Parent           Uint128
	PrepareChecksum  Uint128
	Op               uint64
	Commit           uint64
	Timestamp        uint64
	Request          uint64
	Operation        Operation
	OperationPadding [7]byte
	Group            uint64
	Reserved         [48]byte
}

// CommitHeader is the primary's commit point broadcast and heartbeat (command 9,
// header-only). CommitChecksum and CheckpointOp are declared but unused in 0.11.0.
type CommitHeader struct {
	CommonHeader
	CommitChecksum Uint128
	// TimestampMonotonic is the liveness token: only a strictly newer value
	// resets a receiver's heartbeat timer.
	TimestampMonotonic uint64
	Commit             uint64
	CheckpointOp       uint64
	Group              uint64
	Reserved           [80]byte
}

// StartViewChangeHeader proposes a view change (command 10, header-only).
type StartViewChangeHeader struct {
	CommonHeader
	Group    uint64
	Reserved [120]byte
}

// DoViewChangeHeader is a view-change vote (command 11). The body is the log suffix:
// up to DoViewChangeSuffixMax packed PrepareHeaders.
type DoViewChangeHeader struct {
	CommonHeader
	Op     uint64
	Commit uint64
	Group  uint64
	// LogView is the view the sender was last in Normal status.
	LogView  uint32
	Reserved [68]byte
	// NackBitset bit i: the sender never prepared suffix entry i.
	NackBitset Uint128
	// PresentBitset bit i: the sender can serve suffix entry i's body.
	PresentBitset Uint128
}

// StartViewHeader installs a new view (command 12). The body is the view's suffix,
// highest op first, possibly empty.
type StartViewHeader struct {
	CommonHeader
	Op       uint64
	Commit   uint64
	Group    uint64
	Reserved [88]byte
	// Incarnation echoes the RequestStartView this answers; zero when unsolicited.
	Incarnation Uint128
}

// RequestStartViewHeader is a restarted replica's probe (command 17, header-only).
type RequestStartViewHeader struct {
	CommonHeader
	Group       uint64
	Reserved    [104]byte
	Incarnation Uint128
}

// RequestPreparesHeader asks a peer for the prepares in [FromOp, ToOp] (command 18).
type RequestPreparesHeader struct {
	CommonHeader
	Nonce    Uint128
	FromOp   uint64
	ToOp     uint64
	Group    uint64
	Reserved [88]byte
}

// RepairRangeHeader ends a repair stream: RepairDone (20), where Op is the last op
// served, or RangeEvicted (21), where Op is the oldest op the peer still retains.
type RepairRangeHeader struct {
	CommonHeader
	Nonce    Uint128
	Op       uint64
	Group    uint64
	Reserved [96]byte
}

// RequestStateTransferHeader asks the primary for a transfer target (command 22,
// header-only).
type RequestStateTransferHeader struct {
	CommonHeader
	Nonce    Uint128
	Group    uint64
	Reserved [104]byte
}

// StateTransferTargetHeader offers a state transfer (command 23). With Available 1
// the body is the state manifest (DecodeManifest); Available 0 is a header-only
// refusal, UnavailableTransient 1 meaning "not right now".
//
//	128 nonce u128 | 144 commit_op u64 | 152 group u64 | 160 available u8
//	161 unavailable_transient u8 | 162 reserved 6 | 168 commit_max u64
//	176 commit_checksum u128 (ours) | 192 reserved 64
//
// CommitChecksum is ours: the identity of the prepare at CommitOp, the op the
// offered state ends with, so that a requester can refuse a state its own log
// contradicts before it fetches a byte. The reference leaves bytes 176..256
// reserved and, for this header, covered by the frame seal only, unvalidated
// (iggy.apache.org/docs/binary-protocol/server-to-server, "Frame integrity" and
// "State transfer"): a node that predates the field sends zero there and ignores
// ours, and zero means "not named".
type StateTransferTargetHeader struct {
	CommonHeader
	Nonce                Uint128
	CommitOp             uint64
	Group                uint64
	Available            uint8
	UnavailableTransient uint8
	ReservedAlignment    [6]byte
	CommitMax            uint64
	CommitChecksum       Uint128
	Reserved             [64]byte
}

// RequestStateChunkHeader pulls one chunk of a manifest artifact (command 24,
// header-only). Len describes the reply and is clamped by the server.
type RequestStateChunkHeader struct {
	CommonHeader
	Nonce    Uint128
	Offset   uint64
	Group    uint64
	Len      uint32
	Artifact uint32
	Reserved [88]byte
}

// StateChunkHeader carries artifact bytes at Offset in its body (command 25).
type StateChunkHeader struct {
	CommonHeader
	Nonce    Uint128
	Offset   uint64
	Group    uint64
	Artifact uint32
	Reserved [92]byte
}

// ForwardRegisterHeader relays a login a backup verified (command 26, header-only).
type ForwardRegisterHeader struct {
	CommonHeader
	Client   Uint128
	Nonce    Uint128
	UserID   uint32
	Reserved [92]byte
}

// ForwardRegisterResultHeader is the primary's verdict (command 27, header-only).
// Epoch and Watermark are zero unless Outcome is Ok.
type ForwardRegisterResultHeader struct {
	CommonHeader
	Nonce     Uint128
	Client    Uint128
	Epoch     uint64
	Watermark uint64
	Reserved  [79]byte
	Outcome   ForwardRegisterOutcome
}

// ForwardLogoutHeader relays a logout (command 28, header-only).
type ForwardLogoutHeader struct {
	CommonHeader
	Client   Uint128
	Nonce    Uint128
	Session  uint64
	Request  uint64
	Reserved [80]byte
}

// ForwardLogoutResultHeader is the primary's verdict on a logout (command 29,
// header-only). Commit is zero unless Outcome is Ok.
type ForwardLogoutResultHeader struct {
	CommonHeader
	Nonce    Uint128
	Client   Uint128
	Commit   uint64
	Reserved [87]byte
	Outcome  ForwardLogoutOutcome
}

// HandshakeHeader is the layout of ReplicaHello (14), ReplicaChallenge (15) and
// ReplicaFinish (16): raw header-only frames whose per-command area carries the
// handshake (see handshake.go).
type HandshakeHeader struct {
	CommonHeader
	// Nonce is the dialer's in Hello, the acceptor's in Challenge.
	Nonce [32]byte
	// MAC is the acceptor's in Challenge, the dialer's in Finish.
	MAC [32]byte
	// Status is set in Challenge only.
	Status   HandshakeStatus
	Reserved [63]byte
}

var (
	_ = offsetCheck[unsafe.Sizeof(PrepareHeader{})-HeaderSize]
	_ = offsetCheck[unsafe.Offsetof(PrepareHeader{}.Client)-128]
	_ = offsetCheck[unsafe.Offsetof(PrepareHeader{}.Parent)-144]
	_ = offsetCheck[unsafe.Offsetof(PrepareHeader{}.RequestChecksum)-160]
	_ = offsetCheck[unsafe.Offsetof(PrepareHeader{}.Op)-176]
	_ = offsetCheck[unsafe.Offsetof(PrepareHeader{}.Commit)-184]
	_ = offsetCheck[unsafe.Offsetof(PrepareHeader{}.Timestamp)-192]
	_ = offsetCheck[unsafe.Offsetof(PrepareHeader{}.Request)-200]
	_ = offsetCheck[unsafe.Offsetof(PrepareHeader{}.Operation)-208]
	_ = offsetCheck[unsafe.Offsetof(PrepareHeader{}.OperationPadding)-209]
	_ = offsetCheck[unsafe.Offsetof(PrepareHeader{}.Group)-216]
	_ = offsetCheck[unsafe.Offsetof(PrepareHeader{}.UserID)-224]
	_ = offsetCheck[unsafe.Offsetof(PrepareHeader{}.Reserved)-228]

	_ = offsetCheck[unsafe.Sizeof(PrepareOkHeader{})-HeaderSize]
	_ = offsetCheck[unsafe.Offsetof(PrepareOkHeader{}.Parent)-128]
	_ = offsetCheck[unsafe.Offsetof(PrepareOkHeader{}.PrepareChecksum)-144]
	_ = offsetCheck[unsafe.Offsetof(PrepareOkHeader{}.Op)-160]
	_ = offsetCheck[unsafe.Offsetof(PrepareOkHeader{}.Commit)-168]
	_ = offsetCheck[unsafe.Offsetof(PrepareOkHeader{}.Timestamp)-176]
	_ = offsetCheck[unsafe.Offsetof(PrepareOkHeader{}.Request)-184]
	_ = offsetCheck[unsafe.Offsetof(PrepareOkHeader{}.Operation)-192]
	_ = offsetCheck[unsafe.Offsetof(PrepareOkHeader{}.OperationPadding)-193]
	_ = offsetCheck[unsafe.Offsetof(PrepareOkHeader{}.Group)-200]
	_ = offsetCheck[unsafe.Offsetof(PrepareOkHeader{}.Reserved)-208]

	_ = offsetCheck[unsafe.Sizeof(CommitHeader{})-HeaderSize]
	_ = offsetCheck[unsafe.Offsetof(CommitHeader{}.CommitChecksum)-128]
	_ = offsetCheck[unsafe.Offsetof(CommitHeader{}.TimestampMonotonic)-144]
	_ = offsetCheck[unsafe.Offsetof(CommitHeader{}.Commit)-152]
	_ = offsetCheck[unsafe.Offsetof(CommitHeader{}.CheckpointOp)-160]
	_ = offsetCheck[unsafe.Offsetof(CommitHeader{}.Group)-168]
	_ = offsetCheck[unsafe.Offsetof(CommitHeader{}.Reserved)-176]

	_ = offsetCheck[unsafe.Sizeof(StartViewChangeHeader{})-HeaderSize]
	_ = offsetCheck[unsafe.Offsetof(StartViewChangeHeader{}.Group)-128]
	_ = offsetCheck[unsafe.Offsetof(StartViewChangeHeader{}.Reserved)-136]

	_ = offsetCheck[unsafe.Sizeof(DoViewChangeHeader{})-HeaderSize]
	_ = offsetCheck[unsafe.Offsetof(DoViewChangeHeader{}.Op)-128]
	_ = offsetCheck[unsafe.Offsetof(DoViewChangeHeader{}.Commit)-136]
	_ = offsetCheck[unsafe.Offsetof(DoViewChangeHeader{}.Group)-144]
	_ = offsetCheck[unsafe.Offsetof(DoViewChangeHeader{}.LogView)-152]
	_ = offsetCheck[unsafe.Offsetof(DoViewChangeHeader{}.Reserved)-156]
	_ = offsetCheck[unsafe.Offsetof(DoViewChangeHeader{}.NackBitset)-224]
	_ = offsetCheck[unsafe.Offsetof(DoViewChangeHeader{}.PresentBitset)-240]

	_ = offsetCheck[unsafe.Sizeof(StartViewHeader{})-HeaderSize]
	_ = offsetCheck[unsafe.Offsetof(StartViewHeader{}.Op)-128]
	_ = offsetCheck[unsafe.Offsetof(StartViewHeader{}.Commit)-136]
	_ = offsetCheck[unsafe.Offsetof(StartViewHeader{}.Group)-144]
	_ = offsetCheck[unsafe.Offsetof(StartViewHeader{}.Reserved)-152]
	_ = offsetCheck[unsafe.Offsetof(StartViewHeader{}.Incarnation)-240]

	_ = offsetCheck[unsafe.Sizeof(RequestStartViewHeader{})-HeaderSize]
	_ = offsetCheck[unsafe.Offsetof(RequestStartViewHeader{}.Group)-128]
	_ = offsetCheck[unsafe.Offsetof(RequestStartViewHeader{}.Reserved)-136]
	_ = offsetCheck[unsafe.Offsetof(RequestStartViewHeader{}.Incarnation)-240]

	_ = offsetCheck[unsafe.Sizeof(RequestPreparesHeader{})-HeaderSize]
	_ = offsetCheck[unsafe.Offsetof(RequestPreparesHeader{}.Nonce)-128]
	_ = offsetCheck[unsafe.Offsetof(RequestPreparesHeader{}.FromOp)-144]
	_ = offsetCheck[unsafe.Offsetof(RequestPreparesHeader{}.ToOp)-152]
	_ = offsetCheck[unsafe.Offsetof(RequestPreparesHeader{}.Group)-160]
	_ = offsetCheck[unsafe.Offsetof(RequestPreparesHeader{}.Reserved)-168]

	_ = offsetCheck[unsafe.Sizeof(RepairRangeHeader{})-HeaderSize]
	_ = offsetCheck[unsafe.Offsetof(RepairRangeHeader{}.Nonce)-128]
	_ = offsetCheck[unsafe.Offsetof(RepairRangeHeader{}.Op)-144]
	_ = offsetCheck[unsafe.Offsetof(RepairRangeHeader{}.Group)-152]
	_ = offsetCheck[unsafe.Offsetof(RepairRangeHeader{}.Reserved)-160]

	_ = offsetCheck[unsafe.Sizeof(RequestStateTransferHeader{})-HeaderSize]
	_ = offsetCheck[unsafe.Offsetof(RequestStateTransferHeader{}.Nonce)-128]
	_ = offsetCheck[unsafe.Offsetof(RequestStateTransferHeader{}.Group)-144]
	_ = offsetCheck[unsafe.Offsetof(RequestStateTransferHeader{}.Reserved)-152]

	_ = offsetCheck[unsafe.Sizeof(StateTransferTargetHeader{})-HeaderSize]
	_ = offsetCheck[unsafe.Offsetof(StateTransferTargetHeader{}.Nonce)-128]
	_ = offsetCheck[unsafe.Offsetof(StateTransferTargetHeader{}.CommitOp)-144]
	_ = offsetCheck[unsafe.Offsetof(StateTransferTargetHeader{}.Group)-152]
	_ = offsetCheck[unsafe.Offsetof(StateTransferTargetHeader{}.Available)-160]
	_ = offsetCheck[unsafe.Offsetof(StateTransferTargetHeader{}.UnavailableTransient)-161]
	_ = offsetCheck[unsafe.Offsetof(StateTransferTargetHeader{}.ReservedAlignment)-162]
	_ = offsetCheck[unsafe.Offsetof(StateTransferTargetHeader{}.CommitMax)-168]
	_ = offsetCheck[unsafe.Offsetof(StateTransferTargetHeader{}.CommitChecksum)-176]
	_ = offsetCheck[unsafe.Offsetof(StateTransferTargetHeader{}.Reserved)-192]

	_ = offsetCheck[unsafe.Sizeof(RequestStateChunkHeader{})-HeaderSize]
	_ = offsetCheck[unsafe.Offsetof(RequestStateChunkHeader{}.Nonce)-128]
	_ = offsetCheck[unsafe.Offsetof(RequestStateChunkHeader{}.Offset)-144]
	_ = offsetCheck[unsafe.Offsetof(RequestStateChunkHeader{}.Group)-152]
	_ = offsetCheck[unsafe.Offsetof(RequestStateChunkHeader{}.Len)-160]
	_ = offsetCheck[unsafe.Offsetof(RequestStateChunkHeader{}.Artifact)-164]
	_ = offsetCheck[unsafe.Offsetof(RequestStateChunkHeader{}.Reserved)-168]

	_ = offsetCheck[unsafe.Sizeof(StateChunkHeader{})-HeaderSize]
	_ = offsetCheck[unsafe.Offsetof(StateChunkHeader{}.Nonce)-128]
	_ = offsetCheck[unsafe.Offsetof(StateChunkHeader{}.Offset)-144]
	_ = offsetCheck[unsafe.Offsetof(StateChunkHeader{}.Group)-152]
	_ = offsetCheck[unsafe.Offsetof(StateChunkHeader{}.Artifact)-160]
	_ = offsetCheck[unsafe.Offsetof(StateChunkHeader{}.Reserved)-164]

	_ = offsetCheck[unsafe.Sizeof(ForwardRegisterHeader{})-HeaderSize]
	_ = offsetCheck[unsafe.Offsetof(ForwardRegisterHeader{}.Client)-128]
	_ = offsetCheck[unsafe.Offsetof(ForwardRegisterHeader{}.Nonce)-144]
	_ = offsetCheck[unsafe.Offsetof(ForwardRegisterHeader{}.UserID)-160]
	_ = offsetCheck[unsafe.Offsetof(ForwardRegisterHeader{}.Reserved)-164]

	_ = offsetCheck[unsafe.Sizeof(ForwardRegisterResultHeader{})-HeaderSize]
	_ = offsetCheck[unsafe.Offsetof(ForwardRegisterResultHeader{}.Nonce)-128]
	_ = offsetCheck[unsafe.Offsetof(ForwardRegisterResultHeader{}.Client)-144]
	_ = offsetCheck[unsafe.Offsetof(ForwardRegisterResultHeader{}.Epoch)-160]
	_ = offsetCheck[unsafe.Offsetof(ForwardRegisterResultHeader{}.Watermark)-168]
	_ = offsetCheck[unsafe.Offsetof(ForwardRegisterResultHeader{}.Reserved)-176]
	_ = offsetCheck[unsafe.Offsetof(ForwardRegisterResultHeader{}.Outcome)-255]

	_ = offsetCheck[unsafe.Sizeof(ForwardLogoutHeader{})-HeaderSize]
	_ = offsetCheck[unsafe.Offsetof(ForwardLogoutHeader{}.Client)-128]
	_ = offsetCheck[unsafe.Offsetof(ForwardLogoutHeader{}.Nonce)-144]
	_ = offsetCheck[unsafe.Offsetof(ForwardLogoutHeader{}.Session)-160]
	_ = offsetCheck[unsafe.Offsetof(ForwardLogoutHeader{}.Request)-168]
	_ = offsetCheck[unsafe.Offsetof(ForwardLogoutHeader{}.Reserved)-176]

	_ = offsetCheck[unsafe.Sizeof(ForwardLogoutResultHeader{})-HeaderSize]
	_ = offsetCheck[unsafe.Offsetof(ForwardLogoutResultHeader{}.Nonce)-128]
	_ = offsetCheck[unsafe.Offsetof(ForwardLogoutResultHeader{}.Client)-144]
	_ = offsetCheck[unsafe.Offsetof(ForwardLogoutResultHeader{}.Commit)-160]
	_ = offsetCheck[unsafe.Offsetof(ForwardLogoutResultHeader{}.Reserved)-168]
	_ = offsetCheck[unsafe.Offsetof(ForwardLogoutResultHeader{}.Outcome)-255]

	_ = offsetCheck[unsafe.Sizeof(HandshakeHeader{})-HeaderSize]
	_ = offsetCheck[unsafe.Offsetof(HandshakeHeader{}.Nonce)-128]
	_ = offsetCheck[unsafe.Offsetof(HandshakeHeader{}.MAC)-160]
	_ = offsetCheck[unsafe.Offsetof(HandshakeHeader{}.Status)-192]
	_ = offsetCheck[unsafe.Offsetof(HandshakeHeader{}.Reserved)-193]
)

// SealBody stamps BodyChecksum(body) into ChecksumBody: metadata prepares and the
// DoViewChange and StartView suffixes seal their bodies; partition prepares and every
// other frame leave the field zero. Seal the body before the frame, which covers it.
func (h *CommonHeader) SealBody(body []byte) { h.ChecksumBody = BodyChecksum(body) }

// BodySealValid reports whether ChecksumBody is BodyChecksum(body). Which frames carry
// a body seal is the receiver's knowledge (see SealBody), so decoding does not check it.
func (h *CommonHeader) BodySealValid(body []byte) bool { return h.ChecksumBody == BodyChecksum(body) }

// SuffixPrepare views entry i of a DoViewChange or StartView body (the packed
// PrepareHeaders after the header) in place. The body must be the frame's bytes after
// a validated header, so that it holds SuffixLen entries and is 16-byte aligned;
// anything else fails like ViewHeader. The entries' own fields are not validated.
func SuffixPrepare(body []byte, i int) (*PrepareHeader, error) {
	if i < 0 || (i+1)*HeaderSize > len(body) {
		return nil, FaultShortHeader
	}
	return ViewHeader[PrepareHeader](body[i*HeaderSize:])
}

// DoViewChangeSuffixMax is the most prepare headers a DoViewChange or StartView body
// carries: one bit per entry in each u128 bitset.
const DoViewChangeSuffixMax = 128

// DecodeReplicaHeader views b as a frame that arrived on the replica listener and
// validates it completely, before any field is believed: size within [256, sizeMax];
// a replica-plane command (Request, Reply, Eviction and the unused 0..4 are refused);
// the frame seal, verified first for every sealed command; release zero; then the
// command's own rules (reserved zero on prepares and session forwarding, header-only
// sizes, DoViewChange and StartView suffix shape, repair range, transfer flags,
// forwarding nonces and outcomes). The typed accessors of the result (Prepare,
// Commit, ...) reinterpret it in place. It neither copies nor allocates.
func DecodeReplicaHeader(b []byte, sizeMax uint32) (*GenericHeader, error) {
	h, fault := viewHeader[GenericHeader](b)
	if fault == FaultNone {
		fault = h.validateReplica(sizeMax)
	}
	if fault != FaultNone {
		return nil, fault
	}
	return h, nil
}

func (h *GenericHeader) validateReplica(sizeMax uint32) HeaderFault {
	if fault := checkSize(h.Size, sizeMax); fault != FaultNone {
		return fault
	}
	command := h.Command
	if !command.ReplicaPlane() {
		if command > CommandMax {
			return FaultCommandUnknown
		}
		return FaultCommandNotReplica
	}
	// A header that did not arrive intact cannot have any field believed, the
	// ones validation reads included, so the seal goes first.
	if command.FrameSealed() && h.Checksum != FrameChecksum(h.Bytes()) {
		return FaultFrameChecksum
	}
	if h.Release != 0 {
		return FaultReleaseNonZero
	}
	switch command {
	case CommandPrepare, CommandRepairPrepare:
		return h.asPrepare().validate()
	case CommandPrepareOk:
		if !h.asPrepareOk().Operation.Known() {
			return FaultOperationUnknown
		}
	case CommandCommit, CommandReplicaHello, CommandReplicaChallenge, CommandReplicaFinish,
		CommandRequestStateTransfer:
		return headerOnly(h.Size)
	case CommandDoViewChange:
		return h.asDoViewChange().validate()
	case CommandStartView:
		return h.asStartView().validate()
	case CommandRequestPrepares:
		p := h.asRequestPrepares()
		if p.FromOp == 0 || p.FromOp > p.ToOp {
			return FaultRepairRangeInvalid
		}
	case CommandStateTransferTarget:
		return h.asStateTransferTarget().validate()
	case CommandRequestStateChunk:
		if fault := headerOnly(h.Size); fault != FaultNone {
			return fault
		}
		if h.asRequestStateChunk().Len == 0 {
			return FaultChunkLenZero
		}
	case CommandForwardRegister:
		f := h.asForwardRegister()
		return forwardRules(&f.CommonHeader, f.Client, f.Nonce, f.Reserved[:], false)
	case CommandForwardRegisterResult:
		f := h.asForwardRegisterResult()
		if fault := forwardRules(&f.CommonHeader, f.Client, f.Nonce, f.Reserved[:], false); fault != FaultNone {
			return fault
		}
		if f.Outcome > ForwardRegisterOutcomeMax {
			return FaultOutcomeUnknown
		}
		if f.Outcome != ForwardRegisterOk && (f.Epoch != 0 || f.Watermark != 0) {
			return FaultResultOnFailure
		}
	case CommandForwardLogout:
		f := h.asForwardLogout()
		if fault := forwardRules(&f.CommonHeader, f.Client, f.Nonce, f.Reserved[:], true); fault != FaultNone {
			return fault
		}
		if f.Client.IsZero() {
			// A read barrier (vsr.Core.ForwardReadBarrier): no session, no request.
			if f.Session != 0 || f.Request != 0 {
				return FaultClientZero
			}
			break
		}
		if f.Session == 0 {
			return FaultSessionZero
		}
		// A request of 0 ends a session whose connection closed (vsr.Core.
		// ForwardSessionEnd), no client's logout.
	case CommandForwardLogoutResult:
		f := h.asForwardLogoutResult()
		if fault := forwardRules(&f.CommonHeader, f.Client, f.Nonce, f.Reserved[:], true); fault != FaultNone {
			return fault
		}
		if f.Outcome > ForwardLogoutOutcomeMax {
			return FaultOutcomeUnknown
		}
		if f.Outcome != ForwardLogoutOk && f.Commit != 0 {
			return FaultResultOnFailure
		}
	}
	// StartViewChange, RequestStartView, RepairDone, RangeEvicted and StateChunk
	// have nothing beyond the seal and the size range.
	return FaultNone
}

func headerOnly(size uint32) HeaderFault {
	if size != HeaderSize {
		return FaultSizeNotHeaderOnly
	}
	return FaultNone
}

// forwardRules are shared by the four session-forwarding headers: header-only, a
// client and a nonce, and every reserved byte zero (they only travel between
// replicas of one release, so a non-zero byte is a bug or a mangled frame). A
// logout and its result may name client 0 (zeroClient): a read barrier, which asks
// the primary for its commit point and ends no session (vsr.Core.ForwardReadBarrier).
func forwardRules(f *CommonHeader, client, nonce Uint128, reserved []byte, zeroClient bool) HeaderFault {
	if fault := headerOnly(f.Size); fault != FaultNone {
		return fault
	}
	if client.IsZero() && !zeroClient {
		return FaultClientZero
	}
	if nonce.IsZero() {
		return FaultNonceZero
	}
	if !allZero(f.ReservedFrame[:]) || !allZero(reserved) {
		return FaultReservedNonZero
	}
	return FaultNone
}

func (p *PrepareHeader) validate() HeaderFault {
	// Both reserved regions and the padding sit inside the identity checksum: a
	// peer filling them would change an op's identity while changing nothing a
	// view change can see.
	if !allZero(p.ReservedFrame[:]) || !allZero(p.Reserved[:]) {
		return FaultReservedNonZero
	}
	if !allZero(p.OperationPadding[:]) {
		return FaultPaddingNonZero
	}
	if !p.Operation.Known() {
		return FaultOperationUnknown
	}
	return FaultNone
}

// suffixLen is the number of PrepareHeaders a DoViewChange or StartView body holds.
func suffixLen(size uint32) (int, HeaderFault) {
	body := int(size) - HeaderSize
	if body%HeaderSize != 0 || body/HeaderSize > DoViewChangeSuffixMax {
		return 0, FaultSuffixSize
	}
	return body / HeaderSize, FaultNone
}

// SuffixLen is the number of PrepareHeaders in the body of a validated header.
func (d *DoViewChangeHeader) SuffixLen() int { n, _ := suffixLen(d.Size); return n }

func (d *DoViewChangeHeader) validate() HeaderFault {
	if d.LogView > d.View {
		return FaultLogViewAboveView
	}
	if d.Commit > d.Op {
		return FaultCommitAboveOp
	}
	n, fault := suffixLen(d.Size)
	if fault != FaultNone {
		return fault
	}
	// Bits past the suffix name entries never sent: a peer could otherwise
	// smuggle a nack for an op the new primary would truncate.
	if n < DoViewChangeSuffixMax {
		beyond := bitsFrom(n)
		if d.NackBitset.Lo&beyond.Lo != 0 || d.NackBitset.Hi&beyond.Hi != 0 ||
			d.PresentBitset.Lo&beyond.Lo != 0 || d.PresentBitset.Hi&beyond.Hi != 0 {
			return FaultBitsetBeyondSuffix
		}
	}
	return FaultNone
}

// bitsFrom returns a u128 mask with bits n..127 set, for n in [0, 128).
func bitsFrom(n int) Uint128 {
	if n < 64 {
		return Uint128{Lo: ^uint64(0) << n, Hi: ^uint64(0)}
	}
	return Uint128{Hi: ^uint64(0) << (n - 64)}
}

// SuffixLen is the number of PrepareHeaders in the body of a validated header.
func (s *StartViewHeader) SuffixLen() int { n, _ := suffixLen(s.Size); return n }

func (s *StartViewHeader) validate() HeaderFault {
	if s.Commit > s.Op {
		return FaultCommitAboveOp
	}
	_, fault := suffixLen(s.Size)
	return fault
}

func (t *StateTransferTargetHeader) validate() HeaderFault {
	if t.Available > 1 || t.UnavailableTransient > 1 {
		return FaultFlagInvalid
	}
	if t.Available == 1 && t.UnavailableTransient == 1 {
		return FaultAvailableAndTransient
	}
	if t.Available == 0 {
		return headerOnly(t.Size)
	}
	return FaultNone
}

// The typed views of a GenericHeader. Each exported accessor asserts the command:
// calling the wrong one is our bug, not bad input, since DecodeReplicaHeader has
// already validated the frame for its command.

func (h *GenericHeader) expect(a, b Command) {
	if h.Command != a && h.Command != b {
		panic("wire: " + h.Command.String() + " header viewed as " + a.String())
	}
}

func (h *GenericHeader) asPrepare() *PrepareHeader { return (*PrepareHeader)(unsafe.Pointer(h)) }
func (h *GenericHeader) asPrepareOk() *PrepareOkHeader {
	return (*PrepareOkHeader)(unsafe.Pointer(h))
}
func (h *GenericHeader) asDoViewChange() *DoViewChangeHeader {
	return (*DoViewChangeHeader)(unsafe.Pointer(h))
}
func (h *GenericHeader) asStartView() *StartViewHeader {
	return (*StartViewHeader)(unsafe.Pointer(h))
}
func (h *GenericHeader) asRequestPrepares() *RequestPreparesHeader {
	return (*RequestPreparesHeader)(unsafe.Pointer(h))
}
func (h *GenericHeader) asStateTransferTarget() *StateTransferTargetHeader {
	return (*StateTransferTargetHeader)(unsafe.Pointer(h))
}
func (h *GenericHeader) asRequestStateChunk() *RequestStateChunkHeader {
	return (*RequestStateChunkHeader)(unsafe.Pointer(h))
}
func (h *GenericHeader) asForwardRegister() *ForwardRegisterHeader {
	return (*ForwardRegisterHeader)(unsafe.Pointer(h))
}
func (h *GenericHeader) asForwardRegisterResult() *ForwardRegisterResultHeader {
	return (*ForwardRegisterResultHeader)(unsafe.Pointer(h))
}
func (h *GenericHeader) asForwardLogout() *ForwardLogoutHeader {
	return (*ForwardLogoutHeader)(unsafe.Pointer(h))
}
func (h *GenericHeader) asForwardLogoutResult() *ForwardLogoutResultHeader {
	return (*ForwardLogoutResultHeader)(unsafe.Pointer(h))
}

// Prepare views a Prepare or RepairPrepare.
func (h *GenericHeader) Prepare() *PrepareHeader {
	h.expect(CommandPrepare, CommandRepairPrepare)
	return h.asPrepare()
}

// PrepareOk views a PrepareOk.
func (h *GenericHeader) PrepareOk() *PrepareOkHeader {
	h.expect(CommandPrepareOk, CommandPrepareOk)
	return h.asPrepareOk()
}

// Commit views a Commit.
func (h *GenericHeader) Commit() *CommitHeader {
	h.expect(CommandCommit, CommandCommit)
	return (*CommitHeader)(unsafe.Pointer(h))
}

// StartViewChange views a StartViewChange.
func (h *GenericHeader) StartViewChange() *StartViewChangeHeader {
	h.expect(CommandStartViewChange, CommandStartViewChange)
	return (*StartViewChangeHeader)(unsafe.Pointer(h))
}

// DoViewChange views a DoViewChange.
func (h *GenericHeader) DoViewChange() *DoViewChangeHeader {
	h.expect(CommandDoViewChange, CommandDoViewChange)
	return h.asDoViewChange()
}

// StartView views a StartView.
func (h *GenericHeader) StartView() *StartViewHeader {
	h.expect(CommandStartView, CommandStartView)
	return h.asStartView()
}

// RequestStartView views a RequestStartView.
func (h *GenericHeader) RequestStartView() *RequestStartViewHeader {
	h.expect(CommandRequestStartView, CommandRequestStartView)
	return (*RequestStartViewHeader)(unsafe.Pointer(h))
}

// RequestPrepares views a RequestPrepares.
func (h *GenericHeader) RequestPrepares() *RequestPreparesHeader {
	h.expect(CommandRequestPrepares, CommandRequestPrepares)
	return h.asRequestPrepares()
}

// RepairRange views a RepairDone or RangeEvicted.
func (h *GenericHeader) RepairRange() *RepairRangeHeader {
	h.expect(CommandRepairDone, CommandRangeEvicted)
	return (*RepairRangeHeader)(unsafe.Pointer(h))
}

// RequestStateTransfer views a RequestStateTransfer.
func (h *GenericHeader) RequestStateTransfer() *RequestStateTransferHeader {
	h.expect(CommandRequestStateTransfer, CommandRequestStateTransfer)
	return (*RequestStateTransferHeader)(unsafe.Pointer(h))
}

// StateTransferTarget views a StateTransferTarget.
func (h *GenericHeader) StateTransferTarget() *StateTransferTargetHeader {
	h.expect(CommandStateTransferTarget, CommandStateTransferTarget)
	return h.asStateTransferTarget()
}

// RequestStateChunk views a RequestStateChunk.
func (h *GenericHeader) RequestStateChunk() *RequestStateChunkHeader {
	h.expect(CommandRequestStateChunk, CommandRequestStateChunk)
	return h.asRequestStateChunk()
}

// StateChunk views a StateChunk.
func (h *GenericHeader) StateChunk() *StateChunkHeader {
	h.expect(CommandStateChunk, CommandStateChunk)
	return (*StateChunkHeader)(unsafe.Pointer(h))
}

// ForwardRegister views a ForwardRegister.
func (h *GenericHeader) ForwardRegister() *ForwardRegisterHeader {
	h.expect(CommandForwardRegister, CommandForwardRegister)
	return h.asForwardRegister()
}

// ForwardRegisterResult views a ForwardRegisterResult.
func (h *GenericHeader) ForwardRegisterResult() *ForwardRegisterResultHeader {
	h.expect(CommandForwardRegisterResult, CommandForwardRegisterResult)
	return h.asForwardRegisterResult()
}

// ForwardLogout views a ForwardLogout.
func (h *GenericHeader) ForwardLogout() *ForwardLogoutHeader {
	h.expect(CommandForwardLogout, CommandForwardLogout)
	return h.asForwardLogout()
}

// ForwardLogoutResult views a ForwardLogoutResult.
func (h *GenericHeader) ForwardLogoutResult() *ForwardLogoutResultHeader {
	h.expect(CommandForwardLogoutResult, CommandForwardLogoutResult)
	return h.asForwardLogoutResult()
}

// Handshake views a ReplicaHello, ReplicaChallenge or ReplicaFinish.
func (h *GenericHeader) Handshake() *HandshakeHeader {
	if h.Command < CommandReplicaHello || h.Command > CommandReplicaFinish {
		panic("wire: " + h.Command.String() + " header viewed as a handshake")
	}
	return (*HandshakeHeader)(unsafe.Pointer(h))
}

// Bytes returns the header's 256 wire bytes, aliasing the header.
func (p *PrepareHeader) Bytes() *[HeaderSize]byte { return headerBytes(p) }

// Put copies the header into dst[:256].
func (p *PrepareHeader) Put(dst []byte) { copy(dst[:HeaderSize], p.Bytes()[:]) }

// Identity is this prepare's identity checksum (PrepareIdentity).
func (p *PrepareHeader) Identity() Uint128 { return PrepareIdentity(p.Bytes()) }

// SetIdentity stamps the identity into Checksum. Call it last: it covers every other
// field but View, checksum_body included.
func (p *PrepareHeader) SetIdentity() { p.Checksum = p.Identity() }

// IdentityValid reports whether Checksum holds the prepare's identity. Decoding does
// not check it (the reference leaves it to consensus, which also decides what a zero,
// never-sealed checksum means); vsr calls this where it accepts a prepare.
func (p *PrepareHeader) IdentityValid() bool { return p.Checksum == p.Identity() }

// Generic returns the prepare as an untyped header, for code that handles any
// replica frame.
func (p *PrepareHeader) Generic() *GenericHeader { return (*GenericHeader)(unsafe.Pointer(p)) }
