//go:build 386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64 || wasm

package wire

import "unsafe"

// The three client-plane headers. Their checksum fields are never sealed: SDKs send
// and expect zero.

// RequestHeader is what a client sends (command 5).
//
//	128 client u128 | 144 request_checksum u128 | 160 timestamp u64 | 168 request u64
//	176 operation u8 | 177 padding 7 | 184 session u64 | 192 user_id u32
//	196 command code u32 (operation 2 only, else zero) | 200 reserved 56
type RequestHeader struct {
	CommonHeader
	// Client is the client-chosen session identity, never zero.
	Client Uint128
	// RequestChecksum is XxHash3-64 of the body widened to u128 (RequestChecksum),
	// or zero for unstamped.
	RequestChecksum Uint128
	// Timestamp is informational; the reply echoes it.
	Timestamp uint64
	// Request is the per-client request number.
	Request          uint64
	Operation        Operation
	OperationPadding [7]byte
	// Session is the fence epoch from the login reply; zero on Register.
	Session uint64
	// UserID is ignored on the wire: the server stamps the authenticated user.
	UserID uint32
	// NonReplicatedCode is the command code of an operation-2 request (bytes
	// 196..200 of the spec's reserved area); zero for every other operation.
	NonReplicatedCode CommandCode
	Reserved          [56]byte
}

// ReplyHeader is what a server answers a request with (command 8).
//
//	128 request_checksum u128 | 144 context u128 | 160 client u128 | 176 op u64
//	184 commit u64 | 192 timestamp u64 | 200 request u64 | 208 operation u8
//	209 padding 7 | 216 status u32 | 220 reserved 36
type ReplyHeader struct {
	CommonHeader
	RequestChecksum  Uint128
	Context          Uint128
	Client           Uint128
	Op               uint64
	Commit           uint64
	Timestamp        uint64
	Request          uint64
	Operation        Operation
	OperationPadding [7]byte
	// Status is zero on a served or committed reply, else the IggyError code of a
	// pre-commit denial, and then the body is empty.
	Status   ErrorCode
	Reserved [36]byte
}

// EvictionHeader is a server's session-terminal answer (command 13, size 256).
//
//	128 client u128 | 144 server_protocol_version u32 | 148 ..._min u32
//	152 reserved 103 | 255 reason u8
type EvictionHeader struct {
	CommonHeader
	Client Uint128
	// ServerProtocolVersion and ServerProtocolVersionMin are the accepted protocol
	// window, set only for EvictionIncompatibleProtocol.
	ServerProtocolVersion    uint32
	ServerProtocolVersionMin uint32
	Reserved                 [103]byte
	Reason                   EvictionReason
}

var offsetCheck [1]struct{} // indexing it with a non-zero constant fails the build

var (
	_ = offsetCheck[unsafe.Sizeof(CommonHeader{})-128]
	_ = offsetCheck[unsafe.Offsetof(CommonHeader{}.Checksum)-0]
	_ = offsetCheck[unsafe.Offsetof(CommonHeader{}.ChecksumBody)-16]
	_ = offsetCheck[unsafe.Offsetof(CommonHeader{}.Cluster)-32]
	_ = offsetCheck[unsafe.Offsetof(CommonHeader{}.Size)-SizeFieldOffset]
	_ = offsetCheck[unsafe.Offsetof(CommonHeader{}.View)-52]
	_ = offsetCheck[unsafe.Offsetof(CommonHeader{}.Release)-56]
	_ = offsetCheck[unsafe.Offsetof(CommonHeader{}.Command)-CommandFieldOffset]
	_ = offsetCheck[unsafe.Offsetof(CommonHeader{}.Replica)-61]
	_ = offsetCheck[unsafe.Offsetof(CommonHeader{}.ReservedFrame)-62]

	_ = offsetCheck[unsafe.Sizeof(GenericHeader{})-HeaderSize]
	_ = offsetCheck[unsafe.Offsetof(GenericHeader{}.CommandArea)-128]

	_ = offsetCheck[unsafe.Sizeof(RequestHeader{})-HeaderSize]
	_ = offsetCheck[unsafe.Offsetof(RequestHeader{}.Client)-128]
	_ = offsetCheck[unsafe.Offsetof(RequestHeader{}.RequestChecksum)-144]
	_ = offsetCheck[unsafe.Offsetof(RequestHeader{}.Timestamp)-160]
	_ = offsetCheck[unsafe.Offsetof(RequestHeader{}.Request)-168]
	_ = offsetCheck[unsafe.Offsetof(RequestHeader{}.Operation)-176]
	_ = offsetCheck[unsafe.Offsetof(RequestHeader{}.OperationPadding)-177]
	_ = offsetCheck[unsafe.Offsetof(RequestHeader{}.Session)-184]
	_ = offsetCheck[unsafe.Offsetof(RequestHeader{}.UserID)-192]
	_ = offsetCheck[unsafe.Offsetof(RequestHeader{}.NonReplicatedCode)-196]
	_ = offsetCheck[unsafe.Offsetof(RequestHeader{}.Reserved)-200]

	_ = offsetCheck[unsafe.Sizeof(ReplyHeader{})-HeaderSize]
	_ = offsetCheck[unsafe.Offsetof(ReplyHeader{}.RequestChecksum)-128]
	_ = offsetCheck[unsafe.Offsetof(ReplyHeader{}.Context)-144]
	_ = offsetCheck[unsafe.Offsetof(ReplyHeader{}.Client)-160]
	_ = offsetCheck[unsafe.Offsetof(ReplyHeader{}.Op)-176]
	_ = offsetCheck[unsafe.Offsetof(ReplyHeader{}.Commit)-184]
	_ = offsetCheck[unsafe.Offsetof(ReplyHeader{}.Timestamp)-192]
	_ = offsetCheck[unsafe.Offsetof(ReplyHeader{}.Request)-200]
	_ = offsetCheck[unsafe.Offsetof(ReplyHeader{}.Operation)-208]
	_ = offsetCheck[unsafe.Offsetof(ReplyHeader{}.OperationPadding)-209]
	_ = offsetCheck[unsafe.Offsetof(ReplyHeader{}.Status)-216]
	_ = offsetCheck[unsafe.Offsetof(ReplyHeader{}.Reserved)-220]

	_ = offsetCheck[unsafe.Sizeof(EvictionHeader{})-HeaderSize]
	_ = offsetCheck[unsafe.Offsetof(EvictionHeader{}.Client)-128]
	_ = offsetCheck[unsafe.Offsetof(EvictionHeader{}.ServerProtocolVersion)-144]
	_ = offsetCheck[unsafe.Offsetof(EvictionHeader{}.ServerProtocolVersionMin)-148]
	_ = offsetCheck[unsafe.Offsetof(EvictionHeader{}.Reserved)-152]
	_ = offsetCheck[unsafe.Offsetof(EvictionHeader{}.Reason)-255]
)

// DecodeRequestHeader views b's first 256 bytes as a request and validates it the
// way a server's client listener must: frame size within [256, sizeMax]; command 5;
// release zero; an operation a client may send; a non-zero client id; reserved bytes
// 62..128, padding 177..184 and 196..256 zero, except that an operation-2 request
// carries a registered read code in 196..200; Register with session and request zero;
// other replicated operations with both non-zero. It neither copies nor allocates. On
// failure the error is a HeaderFault telling the eviction or status to answer with.
//
// The body's request_checksum is checked later, with the body (VerifyRequestChecksum).
func DecodeRequestHeader(b []byte, sizeMax uint32) (*RequestHeader, error) {
	h, fault := viewHeader[RequestHeader](b)
	if fault == FaultNone {
		fault = h.validate(sizeMax)
	}
	if fault != FaultNone {
		return nil, fault
	}
	return h, nil
}

// Validate applies DecodeRequestHeader's rules to a header already in hand.
func (h *RequestHeader) Validate(sizeMax uint32) error {
	if fault := h.validate(sizeMax); fault != FaultNone {
		return fault
	}
	return nil
}

func (h *RequestHeader) validate(sizeMax uint32) HeaderFault {
	if fault := checkSize(h.Size, sizeMax); fault != FaultNone {
		return fault
	}
	if h.Command != CommandRequest {
		if h.Command > CommandMax {
			return FaultCommandUnknown
		}
		return FaultCommandNotRequest
	}
	if h.Release != 0 {
		return FaultReleaseNonZero
	}
	if !h.Operation.ClientAllowed() {
		return FaultOperationRefused
	}
	if h.Client.IsZero() {
		return FaultClientZero
	}
	if !allZero(h.ReservedFrame[:]) || !allZero(h.Reserved[:]) {
		return FaultReservedNonZero
	}
	if !allZero(h.OperationPadding[:]) {
		return FaultPaddingNonZero
	}
	switch h.Operation {
	case OperationNonReplicated:
		// Sessionless by design: ping must work before login. Only the legacy
		// login codes are refused here (eviction 15, logged in or not); an
		// unknown code or a replicated one sent as a read is the server's to
		// answer after its session check, because the reference answers a client
		// that has not logged in with 40 before it looks the code up.
		if fault := NonReplicatedCodeCheck(h.NonReplicatedCode); fault == FaultLegacyLoginCode {
			return fault
		}
		return FaultNone
	case OperationLogout:
		// A logout without a session is answered (an empty reply, as the
		// reference does), not evicted: the server decides.
		if h.NonReplicatedCode != 0 {
			return FaultReservedNonZero
		}
		if h.Request == 0 && h.Session != 0 {
			return FaultRequestZero
		}
	case OperationRegister:
		if h.NonReplicatedCode != 0 {
			return FaultReservedNonZero
		}
		if h.Session != 0 {
			return FaultRegisterSessionNonZero
		}
		if h.Request != 0 {
			return FaultRegisterRequestNonZero
		}
	default:
		if h.NonReplicatedCode != 0 {
			return FaultReservedNonZero
		}
		if h.Session == 0 {
			return FaultSessionZero
		}
		if h.Request == 0 {
			return FaultRequestZero
		}
	}
	return FaultNone
}

// Bytes returns the header's 256 wire bytes, aliasing the header.
func (h *RequestHeader) Bytes() *[HeaderSize]byte { return headerBytes(h) }

// Put copies the header into dst[:256].
func (h *RequestHeader) Put(dst []byte) { copy(dst[:HeaderSize], h.Bytes()[:]) }

// BodySizeBytes is the body length the header announces; call it on a validated
// header (size >= 256).
func (h *RequestHeader) BodySizeBytes() int { return int(h.Size) - HeaderSize }

// DecodeReplyHeader views b as a server's reply and validates it the way a client
// must before reading the body: size within [256, sizeMax], command 8, an operation
// both SDKs accept (Operation.Known), an empty body when status is non-zero, and a
// body on a served SendMessages (the Go SDK's rules). An
// Eviction frame is refused here: peek the command first and use DecodeEvictionHeader.
func DecodeReplyHeader(b []byte, sizeMax uint32) (*ReplyHeader, error) {
	h, fault := viewHeader[ReplyHeader](b)
	if fault == FaultNone {
		fault = h.validate(sizeMax)
	}
	if fault != FaultNone {
		return nil, fault
	}
	return h, nil
}

func (h *ReplyHeader) validate(sizeMax uint32) HeaderFault {
	if h.Command != CommandReply {
		return FaultCommandNotReply
	}
	if fault := checkSize(h.Size, sizeMax); fault != FaultNone {
		return fault
	}
	if !h.Operation.Known() {
		return FaultReplyOperationUnknown
	}
	if h.Status != 0 && h.Size != HeaderSize {
		return FaultStatusWithBody
	}
	// A served SendMessages always confirms with a body; the Go SDK refuses an
	// empty one.
	if h.Status == 0 && h.Operation == OperationSendMessages && h.Size == HeaderSize {
		return FaultSendReplyEmpty
	}
	return FaultNone
}

// ReplyTo builds the reply to req the way iggy.apache.org/docs/binary-protocol/framing
// ("ReplyHeader") asks: command 8, size 256 + bodySizeBytes, the request's cluster,
// request_checksum, client, timestamp and request number echoed, status, and the
// operation byte ReplyOperation gives for a committed or a denied request. Op, Commit,
// View and Replica are informational and left to the caller. A denial (status non-zero)
// carries no body: asking for one is a caller bug and panics.
func ReplyTo(req *RequestHeader, status ErrorCode, bodySizeBytes int, committed bool) ReplyHeader {
	if status != 0 && bodySizeBytes != 0 {
		panic("wire: a denied reply carries no body")
	}
	var h ReplyHeader
	h.Size = uint32(HeaderSize + bodySizeBytes)
	h.Command = CommandReply
	h.Cluster = req.Cluster
	h.RequestChecksum = req.RequestChecksum
	h.Client = req.Client
	h.Timestamp = req.Timestamp
	h.Request = req.Request
	h.Operation = ReplyOperation(req.Operation, committed && status == 0)
	h.Status = status
	return h
}

// Bytes returns the header's 256 wire bytes, aliasing the header.
func (h *ReplyHeader) Bytes() *[HeaderSize]byte { return headerBytes(h) }

// Put copies the header into dst[:256].
func (h *ReplyHeader) Put(dst []byte) { copy(dst[:HeaderSize], h.Bytes()[:]) }

// BodySizeBytes is the body length the header announces.
func (h *ReplyHeader) BodySizeBytes() int { return int(h.Size) - HeaderSize }

// ResultFramed reports whether this reply's body starts with a result section.
func (h *ReplyHeader) ResultFramed() bool {
	return h.Status == 0 && ReplyResultFramed(h.Operation, h.BodySizeBytes())
}

// DecodeEvictionHeader views b as an eviction and checks command 13 and size 256. The
// reason is not checked: an unknown reason is still an eviction, surfaced as
// InvalidCommand like the SDKs do.
func DecodeEvictionHeader(b []byte) (*EvictionHeader, error) {
	h, fault := viewHeader[EvictionHeader](b)
	if fault == FaultNone {
		switch {
		case h.Command != CommandEviction:
			fault = FaultCommandNotEviction
		case h.Size != HeaderSize:
			fault = FaultSizeNotHeaderOnly
		}
	}
	if fault != FaultNone {
		return nil, fault
	}
	return h, nil
}

// Bytes returns the header's 256 wire bytes, aliasing the header.
func (h *EvictionHeader) Bytes() *[HeaderSize]byte { return headerBytes(h) }

// Put copies the header into dst[:256].
func (h *EvictionHeader) Put(dst []byte) { copy(dst[:HeaderSize], h.Bytes()[:]) }

// ErrorCode is the error an SDK surfaces for this eviction (apache/iggy
// core/common/src/error/eviction.rs). An IncompatibleProtocol eviction whose window is
// unusable (min zero or max below min) surfaces as Unauthenticated.
func (h *EvictionHeader) ErrorCode() ErrorCode {
	if h.Reason == EvictionIncompatibleProtocol &&
		(h.ServerProtocolVersionMin == 0 || h.ServerProtocolVersion < h.ServerProtocolVersionMin) {
		return ErrUnauthenticated
	}
	return h.Reason.ErrorCode()
}

// PutEviction writes a complete eviction frame for client into dst[:256]: size 256,
// command 13, every other byte zero. The protocol window is set only for
// EvictionIncompatibleProtocol, where versionMax and versionMin must be its bounds.
func PutEviction(dst []byte, client Uint128, reason EvictionReason, versionMax, versionMin uint32) {
	var h EvictionHeader
	h.Size = HeaderSize
	h.Command = CommandEviction
	h.Client = client
	h.Reason = reason
	if reason == EvictionIncompatibleProtocol {
		h.ServerProtocolVersion = versionMax
		h.ServerProtocolVersionMin = versionMin
	}
	h.Put(dst)
}
