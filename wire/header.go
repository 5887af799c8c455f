// Headers are viewed in place by casting a pointer to the frame buffer, which reads
// multi-byte fields in host order. The build is therefore limited to little-endian
// targets: on a big-endian one the package fails to compile rather than misread.
//
//go:build 386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64 || wasm

package wire

import (
	"encoding/binary"
	"strconv"
	"unsafe"
)

// Every frame on both planes is a 256-byte header followed by size-256 body bytes:
//
//	 0               16              32              48   52   56   60 61 62          128
//	+---------------+---------------+---------------+----+----+----+--+--+-------------+
//	| checksum u128 | checksum_body | cluster u128  |size|view|rel.|cm|rp| reserved 66 |
//	+---------------+---------------+---------------+----+----+----+--+--+-------------+
//	128                                                                               256
//	+---------------------------------------------------------------------------------+
//	| per-command fields: RequestHeader, ReplyHeader, PrepareHeader, ...               |
//	+---------------------------------------------------------------------------------+
//
// The first 128 bytes are CommonHeader, embedded in every header type; the command byte
// at 60 says which type the rest is. Each header type is a Go struct laid out exactly
// as the wire (the offsets are checked at compile time below), viewed in place over a
// 16-byte-aligned buffer: decoding is a bounds check, an alignment check and a pointer
// cast, with no copy and no allocation. Encoding writes the fields through the same
// view, or copies a header value into the caller's buffer with Put.

const (
	// HeaderSize is the length of every header on both planes.
	HeaderSize = 256
	// HeaderAlignment is what a buffer must be aligned to for a header view: the
	// u128 fields are 16-byte aligned on the wire, as the reference server requires.
	HeaderAlignment = 16
	// SizeFieldOffset and CommandFieldOffset are protocol constants: framers read
	// them before the header is typed.
	SizeFieldOffset    = 48
	CommandFieldOffset = 60
	// DefaultMessageSizeMax is the largest frame accepted by default
	// (message_bus.max_message_size), header included.
	DefaultMessageSizeMax = 64 << 20
)

// PeekSize returns the frame size (header included) from the first bytes of a frame,
// before the header is typed; false when fewer than 52 bytes have arrived.
func PeekSize(b []byte) (uint32, bool) {
	if len(b) < SizeFieldOffset+4 {
		return 0, false
	}
	return binary.LittleEndian.Uint32(b[SizeFieldOffset:]), true
}

// PeekCommand returns the command byte from the first bytes of a frame; false when
// fewer than 61 bytes have arrived.
func PeekCommand(b []byte) (Command, bool) {
	if len(b) <= CommandFieldOffset {
		return 0, false
	}
	return Command(b[CommandFieldOffset]), true
}

// CommonHeader is the first 128 bytes of every header.
type CommonHeader struct {
	// Checksum is the frame seal on sealed replica commands, the identity of a
	// prepare, and zero on client-plane frames.
	Checksum Uint128
	// ChecksumBody is the body seal where one is used, zero otherwise.
	ChecksumBody Uint128
	// Cluster is the cluster id (ClusterID of the cluster name) on replica frames.
	Cluster Uint128
	// Size is the whole frame length, header included.
	Size    uint32
	View    uint32
	Release uint32
	Command Command
	Replica uint8
	// ReservedFrame is zero on every frame this package encodes.
	ReservedFrame [66]byte
}

// GenericHeader is the untyped view of a header: the frame fields and the 128-byte
// per-command area. DecodeReplicaHeader returns one; its typed accessors (Prepare,
// Commit, ...) reinterpret it in place.
type GenericHeader struct {
	CommonHeader
	CommandArea [128]byte
}

// AnyHeader lists every header type; ViewHeader works for each of them.
type AnyHeader interface {
	GenericHeader | RequestHeader | ReplyHeader | EvictionHeader |
		PrepareHeader | PrepareOkHeader | CommitHeader | StartViewChangeHeader |
		DoViewChangeHeader | StartViewHeader | RequestStartViewHeader |
		RequestPreparesHeader | RepairRangeHeader | RequestStateTransferHeader |
		StateTransferTargetHeader | RequestStateChunkHeader | StateChunkHeader |
		ForwardRegisterHeader | ForwardRegisterResultHeader | ForwardLogoutHeader |
		ForwardLogoutResultHeader | HandshakeHeader
}

// ViewHeader returns b's first 256 bytes as a T, in place, without validating any
// field: use it to build a header in a frame buffer, or after a Decode function has
// validated the frame. It fails only when b is shorter than a header or not 16-byte
// aligned (an arena buffer always is).
func ViewHeader[T AnyHeader](b []byte) (*T, error) {
	p, fault := viewHeader[T](b)
	if fault != FaultNone {
		return nil, fault
	}
	return p, nil
}

func viewHeader[T AnyHeader](b []byte) (*T, HeaderFault) {
	if len(b) < HeaderSize {
		return nil, FaultShortHeader
	}
	data := unsafe.SliceData(b)
	if uintptr(unsafe.Pointer(data))%HeaderAlignment != 0 {
		return nil, FaultMisaligned
	}
	return (*T)(unsafe.Pointer(data)), FaultNone
}

// HeaderBytes returns the 256 wire bytes of any header, aliasing it: writes through
// either are visible in both.
func HeaderBytes[T AnyHeader](h *T) *[HeaderSize]byte { return headerBytes(h) }

// PutHeader copies any header into dst[:256]. Building a header as a Go value and
// putting it is the simple way; viewing the frame buffer (ViewHeader) and setting
// fields in place saves the copy.
func PutHeader[T AnyHeader](dst []byte, h *T) { copy(dst[:HeaderSize], headerBytes(h)[:]) }

func headerBytes[T AnyHeader](h *T) *[HeaderSize]byte {
	return (*[HeaderSize]byte)(unsafe.Pointer(h))
}

// Bytes returns the header's 256 wire bytes, aliasing the header.
func (h *GenericHeader) Bytes() *[HeaderSize]byte { return headerBytes(h) }

// Put copies the header into dst[:256].
func (h *GenericHeader) Put(dst []byte) { copy(dst[:HeaderSize], h.Bytes()[:]) }

// checkSize is the framing rule shared by both planes.
func checkSize(size, sizeMax uint32) HeaderFault {
	if size < HeaderSize {
		return FaultSizeBelowHeader
	}
	if size > sizeMax {
		return FaultSizeAboveMax
	}
	return FaultNone
}

// allZero reports whether every byte of b is zero. It ORs eight bytes at a time: the
// reserved regions are 28..120 bytes, where the byte loop cost more than the rest of
// a header's validation (BenchmarkAllZero).
func allZero(b []byte) bool {
	var acc uint64
	for len(b) >= 8 {
		acc |= binary.LittleEndian.Uint64(b)
		b = b[8:]
	}
	for _, v := range b {
		acc |= uint64(v)
	}
	return acc == 0
}

// HeaderFault is why a header was refused. It is an error that carries what the
// receiver must do about it:
//
//   - Eviction() != 0: a server answers a client with an Eviction frame of that
//     reason and closes the session (the frame cannot be trusted, or the session is
//     unusable);
//   - Status() != 0: a server answers with a status-only Reply echoing the request
//     number (the frame is well formed but its content is refused); a client
//     decoding a server's frame surfaces this code and closes the connection;
//   - both zero: drop the frame, or the connection when it cannot be resynchronised
//     (a short or misaligned buffer, which only a framer bug produces).
//
// A fault with both (a size out of range, an unknown command) gets the eviction from
// a server and the status on a client. On the replica plane every fault means drop
// the frame, whatever Eviction and Status say: peers are not answered.
//
// HeaderFault is a byte, so returning it as an error never allocates.
type HeaderFault uint8

const (
	FaultNone HeaderFault = iota

	// Framing, both planes.
	FaultShortHeader
	FaultMisaligned
	FaultSizeBelowHeader
	FaultSizeAboveMax
	FaultSizeNotHeaderOnly
	FaultCommandUnknown
	FaultReleaseNonZero

	// Client plane.
	FaultCommandNotRequest
	FaultOperationRefused
	FaultClientZero
	FaultReservedNonZero
	FaultPaddingNonZero
	FaultRegisterSessionNonZero
	FaultRegisterRequestNonZero
	FaultSessionZero
	FaultRequestZero
	FaultUnknownCommandCode
	FaultReplicatedCodeAsRead
	FaultLegacyLoginCode

	// Client side of the client plane: frames a server sent.
	FaultCommandNotReply
	FaultCommandNotEviction
	FaultReplyOperationUnknown
	FaultStatusWithBody
	FaultSendReplyEmpty

	// Replica plane.
	FaultCommandNotReplica
	FaultFrameChecksum
	FaultOperationUnknown
	FaultLogViewAboveView
	FaultCommitAboveOp
	FaultSuffixSize
	FaultBitsetBeyondSuffix
	FaultRepairRangeInvalid
	FaultFlagInvalid
	FaultAvailableAndTransient
	FaultChunkLenZero
	FaultNonceZero
	FaultOutcomeUnknown
	FaultResultOnFailure

	faultCount
)

type faultInfo struct {
	text     string
	eviction EvictionReason
	status   ErrorCode
}

var headerFaults = [faultCount]faultInfo{
	FaultNone:        {text: "no fault"},
	FaultShortHeader: {text: "buffer shorter than a 256-byte header"},
	FaultMisaligned:  {text: "header buffer not 16-byte aligned"},
	FaultSizeBelowHeader: {text: "size below the 256-byte header", eviction: EvictionInvalidRequestBodySize,
		status: ErrInvalidCommand},
	FaultSizeAboveMax: {text: "size above the message size max", eviction: EvictionInvalidRequestBodySize,
		status: ErrInvalidCommand},
	FaultSizeNotHeaderOnly: {text: "size of a header-only frame is not 256",
		eviction: EvictionInvalidRequestBodySize, status: ErrInvalidCommand},
	FaultCommandUnknown: {text: "command above 29", eviction: EvictionInvalidRequestOperation,
		status: ErrInvalidCommand},
	// A client whose release is not zero is ahead of every 0.11.0 server.
	FaultReleaseNonZero:    {text: "release is not zero", eviction: EvictionClientReleaseTooHigh},
	FaultCommandNotRequest: {text: "command on a client connection is not Request (5)", eviction: EvictionInvalidRequestOperation},
	FaultOperationRefused:  {text: "operation is reserved, server-internal or unknown", eviction: EvictionInvalidRequestOperation},
	// No session can exist for client id zero, and an eviction for it could not
	// be routed, so the connection goes.
	FaultClientZero:             {text: "client id is zero", eviction: EvictionNoSession},
	FaultReservedNonZero:        {text: "reserved bytes are not zero", status: ErrInvalidCommand},
	FaultPaddingNonZero:         {text: "operation padding is not zero", status: ErrInvalidCommand},
	FaultRegisterSessionNonZero: {text: "register carries a session", eviction: EvictionSessionError},
	FaultRegisterRequestNonZero: {text: "register carries a request number", eviction: EvictionSessionError},
	// A replicated request without a bound session: the reference server's answer.
	FaultSessionZero:          {text: "replicated request without a session", eviction: EvictionNoSession},
	FaultRequestZero:          {text: "replicated request number is zero", eviction: EvictionSessionError},
	FaultUnknownCommandCode:   {text: "non-replicated command code not in the registry", status: ErrInvalidCommand},
	FaultReplicatedCodeAsRead: {text: "replicated command code sent as a non-replicated read", status: ErrFeatureUnavailable},
	FaultLegacyLoginCode:      {text: "legacy login command code (38 or 44)", eviction: EvictionMalformedLogin},

	FaultCommandNotReply:       {text: "frame from the server is not Reply (8) or Eviction (13)", status: ErrInvalidCommand},
	FaultCommandNotEviction:    {text: "frame is not Eviction (13)", status: ErrInvalidCommand},
	FaultReplyOperationUnknown: {text: "reply operation is unknown", status: ErrInvalidCommand},
	FaultStatusWithBody:        {text: "reply with a non-zero status carries a body", status: ErrInvalidCommand},
	FaultSendReplyEmpty:        {text: "SendMessages reply without its confirmation body", status: ErrInvalidCommand},

	FaultCommandNotReplica:     {text: "command does not travel on the replica plane"},
	FaultFrameChecksum:         {text: "frame seal mismatch"},
	FaultOperationUnknown:      {text: "operation is unknown"},
	FaultLogViewAboveView:      {text: "log_view above view"},
	FaultCommitAboveOp:         {text: "commit above op"},
	FaultSuffixSize:            {text: "suffix body is not a whole number of at most 128 prepare headers"},
	FaultBitsetBeyondSuffix:    {text: "nack or present bit set past the suffix"},
	FaultRepairRangeInvalid:    {text: "repair range empty or from_op zero"},
	FaultFlagInvalid:           {text: "boolean flag byte above 1"},
	FaultAvailableAndTransient: {text: "unavailable_transient set on an available offer"},
	FaultChunkLenZero:          {text: "state chunk len is zero"},
	FaultNonceZero:             {text: "nonce is zero"},
	FaultOutcomeUnknown:        {text: "outcome byte unknown"},
	FaultResultOnFailure:       {text: "non-Ok outcome carries a result"},
}

func (f HeaderFault) Error() string {
	if f < faultCount {
		return "wire: header: " + headerFaults[f].text
	}
	return "wire: header fault " + strconv.Itoa(int(f))
}

// Eviction is the eviction reason a server sends for this fault, or 0.
func (f HeaderFault) Eviction() EvictionReason {
	if f < faultCount {
		return headerFaults[f].eviction
	}
	return 0
}

// Status is the status code a server replies with for this fault, or a client
// surfaces for a server's frame; 0 when there is none.
func (f HeaderFault) Status() ErrorCode {
	if f < faultCount {
		return headerFaults[f].status
	}
	return 0
}
