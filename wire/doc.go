// Package wire knows every byte of the Apache Iggy binary protocol 0.11.0: the 256-byte
// headers of the client and replica planes, the command payloads, message batches,
// checksums, versions and error codes.
//
// It is a pure codec: no I/O, no goroutines, no clock. Decoders are views over the
// caller's bytes (a 16-byte-aligned frame buffer on the server) and never copy or
// allocate on the hot path. Every decoder accepts untrusted input and answers with a
// value or an error carrying the IggyError code or eviction reason that a server must
// reply with; none panics.
//
// All multi-byte integers are little-endian.
package wire
