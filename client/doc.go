// Package client is a Go client of the Apache Iggy binary protocol 0.11.0: connect,
// log in (password or personal access token), every command of the protocol with
// typed arguments and results, typed errors, and producer and consumer helpers whose
// hot paths do not allocate. It encodes and decodes only through package wire and
// imports nothing of the server.
//
// # Frames
//
// Every request is one frame, a 256-byte RequestHeader and a body; every answer is a
// ReplyHeader and a body, or a bodiless Eviction:
//
//	request  [RequestHeader 256: size, command 5, client, request_checksum, request,
//	          operation, session, code (operation 2 only)][body: size-256 bytes]
//	reply    [ReplyHeader 256: size, command 8, request echo, operation, status][body]
//	eviction [EvictionHeader 256: command 13, protocol window, reason at byte 255]
//
// A Client keeps exactly one request in flight, as every official SDK does, and matches
// the reply by position, then checks that it echoes the request number. It mirrors what
// the official Go SDK puts on the wire (apache/iggy foreign/go/internal/vsr):
//
//   - a fresh random non-zero client id at Dial, at every later login and after Logout;
//   - Register (login) with request 0 and session 0; reads (operation 2) with the
//     current request number and the bound session; metadata writes and Logout
//     with the current number, which then advances by one; partition writes
//     (SendMessages, offset writes) with the current number, not advanced;
//   - the session from the login reply echoed in every later request;
//   - request_checksum (XxHash3-64 of the body) stamped on metadata writes, as the
//     Rust SDK does (the Go SDK leaves it zero; WithRequestChecksums(false) does too);
//   - GetClusterMetadata right after every successful login, and in a cluster the
//     move to the leader it names (leader.go: the Go SDK's leader redirection, at
//     most MaxLeaderRedirects moves; WithLeaderRedirection(false) turns it off).
//
// # Pipelining
//
// A PipelinedProducer (DialPipelinedProducer) owns a connection of its own and keeps
// up to InFlightMax SendMessages batches in flight on it, so that the client's
// encoding, the network and the server's writes overlap. Send returns once the batch
// is on the socket; its Pending reports the confirmation or the failure, and Flush
// waits for every batch in flight. It departs from the SDKs' numbering in one way:
// each batch carries a request number of its own (the counter advanced per batch),
// because the server may answer batches out of order (they are served on their
// partitions' shards) and a reply is matched by its echo. The server does not track
// the numbers of partition operations, so any non-zero value is admissible.
//
// # Errors
//
// A non-zero reply status and a non-zero committed result both come back as the
// wire.ErrorCode itself, so errors.Is(err, wire.ErrStreamNameAlreadyExists) works. An
// eviction is an *EvictionError carrying the reason, the mapped code (apache/iggy
// core/common/src/error/eviction.rs) and, for reason 14, the server's protocol window;
// it also matches its code with errors.Is. A connection that broke (I/O error, timeout,
// cancelled context, a frame that breaks the protocol, a reply that echoes the wrong
// request) is a *ConnectionError; after one every call fails at once without touching
// the network: Dial again. Replies 57 TransientNotCommitted and 58 TransientNotAccepted
// are replayed on the same connection, byte for byte, every 50 ms until the request's
// deadline, as the Go SDK does; after 2 s of 58s the client checks for the leader and,
// if it moved, replays the write there, stamped under the new login.
//
// # Time
//
// Each request runs under its context: the context's deadline, or the client's
// request timeout (30 s by default, WithRequestTimeout) when that comes first, becomes
// the socket deadline. A context without a deadline and without a Done channel
// (context.Background) costs nothing per request; a cancellable one costs one small
// allocation to watch it.
//
// # Views
//
// SendMessages, PollMessages and the Producer and Consumer helpers reuse one request
// buffer and one reply buffer per Client and return views into them, valid until the
// next call on the same Client. Everything else returns values it owns. Use
// PollMessagesCopy to keep polled messages past the next call.
//
// # Not here
//
// There is no automatic reconnect (Dial again after a *ConnectionError or an
// *EvictionError; in a cluster, Dial any live node and the login finds the leader),
// no list of known nodes to dial on a reconnect, and no client-side compression. The
// Go SDK's 5 s heartbeat is opt-in: WithHeartbeat.
//
// # Examples
//
// The examples need a running server, so they are compiled but not run by go test.
package client
