package wire

import "strconv"

// ErrorCode is an IggyError code as it travels in a reply header's status field or in
// a result section. It implements error, so decoders return the very code the server
// must answer with, and errors.Is matches codes by value.
type ErrorCode uint32

// Error returns the protocol name with its numeric code, for example
// "InvalidCommand (3)".
func (c ErrorCode) Error() string {
	return c.String() + " (" + strconv.FormatUint(uint64(c), 10) + ")"
}

// String returns the protocol name of the code, or "ErrorCode(N)" for a code the
// protocol does not define.
func (c ErrorCode) String() string {
	if name, ok := errorCodeNames[c]; ok {
		return name
	}
	return "ErrorCode(" + strconv.FormatUint(uint64(c), 10) + ")"
}

// Known reports whether the protocol defines the code.
func (c ErrorCode) Known() bool {
	_, ok := errorCodeNames[c]
	return ok
}
