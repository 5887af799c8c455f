package client

import (
	"strconv"

	"github.com/iggy-shard/iggy-shard/wire"
)

// EvictionError is a server's Eviction frame: the session is dead and the connection
// has been closed. errors.Is matches it against Code, the error both official SDKs
// surface for the reason (apache/iggy core/common/src/error/eviction.rs), so
// errors.Is(err, wire.ErrInvalidCredentials) holds after a refused password.
type EvictionError struct {
	Reason wire.EvictionReason
	// Code is what the SDKs surface: 42 for InvalidCredentials, 53 InvalidToken,
	// 40 for the dead-session reasons, 30 StaleClient, 14003 or 40 for
	// IncompatibleProtocol, 4 MalformedLogin, 3 for the rest.
	Code wire.ErrorCode
	// ServerProtocolVersion and ServerProtocolVersionMin are the window of client
	// protocol versions the server accepts, set only for reason 14.
	ServerProtocolVersion    wire.ProtocolVersion
	ServerProtocolVersionMin wire.ProtocolVersion
}

func newEvictionError(h *wire.EvictionHeader) *EvictionError {
	e := &EvictionError{Reason: h.Reason, Code: h.ErrorCode()}
	if h.Reason == wire.EvictionIncompatibleProtocol {
		e.ServerProtocolVersion = wire.ProtocolVersion(h.ServerProtocolVersion)
		e.ServerProtocolVersionMin = wire.ProtocolVersion(h.ServerProtocolVersionMin)
	}
	return e
}

func (e *EvictionError) Error() string {
	s := "client: evicted (" + e.Reason.String() + "): " + e.Code.Error()
	if e.Reason == wire.EvictionIncompatibleProtocol {
		s += "; server accepts protocol " + e.ServerProtocolVersionMin.String() +
			" to " + e.ServerProtocolVersion.String()
	}
	return s
}

// Unwrap exposes Code to errors.Is and errors.As.
func (e *EvictionError) Unwrap() error { return e.Code }

// ConnectionError means the connection is gone: a read or write failed, the request
// deadline passed or its context was cancelled, or the server sent a frame that
// breaks the protocol. The client has closed the connection; every later call fails
// with this same error. errors.Is matches Code (Disconnected for I/O failures and for
// a reply echoing the wrong request, InvalidCommand for a malformed frame) and the
// underlying cause (io.EOF, os.ErrDeadlineExceeded, context.Canceled, a
// wire.HeaderFault, ...).
type ConnectionError struct {
	// Op is what the client was doing: "dial", "write", "read" or "reply".
	Op   string
	Code wire.ErrorCode
	Err  error
}

func (e *ConnectionError) Error() string {
	s := "client: connection broken on " + e.Op + ": " + e.Code.Error()
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap exposes both the code and the cause.
func (e *ConnectionError) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Code}
	}
	return []error{e.Code, e.Err}
}

// echoMismatch is the cause of a ConnectionError for a reply to another request.
type echoMismatch struct {
	sent, got uint64
}

func (e echoMismatch) Error() string {
	return "reply echoes request " + strconv.FormatUint(e.got, 10) + ", sent " +
		strconv.FormatUint(e.sent, 10)
}
