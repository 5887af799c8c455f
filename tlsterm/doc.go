// Package tlsterm terminates TLS in front of the shard runtime. The kernel's TLS
// (kTLS) is not assumed, so the record layer runs in user space with Go's crypto/tls,
// on goroutines and the Go netpoller, off the shards: a slow or broken handshake
// holds a goroutine and a handshake slot, never a shard.
//
// Each session, once its handshake is done, is bridged to a socketpair (AF_UNIX,
// SOCK_STREAM) whose other end the caller hands to the runtime (shard.Runtime.Adopt)
// like an accepted socket, with the client's real address. Framing, validation,
// back-pressure and reply order stay the runtime's; the bridge only moves bytes:
//
//	client ══TLS══► TCP socket ─► inbound goroutine ─► socketpair ─► shard's ring
//	       ◄══TLS══            ◄─ outbound goroutine ◄─            ◄─ (recv, send)
//
// Where the bytes are copied, beyond what a plaintext connection costs (kernel to
// the ring's provided buffer, provided buffer to the frame buffer; reply to the
// socket):
//
//	inbound:  TCP → crypto/tls's record buffer (read), decrypted in place,
//	          record buffer → the bridge's buffer (Read), buffer → socketpair (write)
//	outbound: socketpair → the bridge's buffer (read), buffer → sealed record
//	          (encrypt, one pass), record → TCP (write)
//
// so two extra copies and one AES-GCM pass each way. The alternative, feeding the
// ring's ciphertext into a crypto/tls.Conn over an in-memory transport on the shard,
// would save the socketpair's two copies but put the handshake's public-key work and
// every record's encryption on the shard's thread and change the runtime's
// connection code; the bridge keeps the runtime unchanged.
//
// Back-pressure holds end to end with bounded buffers: the socketpair's kernel
// buffers and one 64 KiB buffer per direction are all a session holds (the
// outbound one only while replies move), besides crypto/tls's record buffers. When a shard
// stops reading a connection, the socketpair fills, the inbound goroutine blocks in
// its write and stops reading TCP, and TCP flow control slows the client. When a
// client stops reading, the TLS write blocks, the outbound goroutine stops reading
// the socketpair, and the shard's sends wait as they would on a slow TCP peer (its
// SendTimeout applies).
//
// An end of either side is passed on as the other would see it on plain TCP: the
// client's close (close_notify or FIN) becomes a shutdown(SHUT_WR) of the
// socketpair, so the shard reads EOF; the shard's close ends the TLS session with a
// close_notify and closes the TCP connection; an error on either side closes both.
//
// The same pieces serve the replica plane ([cluster.tls], replica.go): a Replica is a
// terminator of the tcp_replica port (TLS 1.3 only, Config.RequiredALPN
// "iggy-replica") and a dialer for the runtime's outbound connections, each session
// bridged the same way and handed over with its exporter value
// (shard.Runtime.AdoptReplica), which binds the replica handshake to it.
package tlsterm
