// Package tlsterm terminates TLS in front of the shard runtime. The kernel's TLS
// (kTLS) is not assumed, so the record layer runs in user space with Go's crypto/tls.
// Handshakes run on goroutines and the Go netpoller, off the shards: a slow or broken
// handshake holds a goroutine and a handshake slot (HandshakeTimeout,
// HandshakesInFlightMax), never a shard.
//
// An established session then goes to the runtime one of two ways.
//
// Handed over whole (Config.DeliverSession; the client plane): the socket leaves the
// netpoller (a blocking duplicate, the netpoller's descriptor closed, so no byte the
// client sent is lost) and goes to the runtime with the session and its Transport,
// the net.Conn crypto/tls runs over. The runtime attaches the Transport to record
// buffers of its own (shard.Runtime.AdoptTLS): its ring reads the ciphertext and
// sends the sealed records, and the session's reads and writes go to memory. What
// crypto/tls read with the handshake (the bytes a client pipelines behind its
// Finished) stays in the session and is read first. No goroutine, socketpair or
// extra copy is left between the client and the shard: before this, the bridge
// below cost two copies and four system calls a request, and TLS gave 46-51% of
// plaintext produce and 15-22% of PING over 256 connections.
//
// Bridged (Config.Deliver, DeliverState; the replica plane): the session is copied
// to a socketpair (AF_UNIX, SOCK_STREAM) whose other end the caller hands to the
// runtime like an accepted socket, with the peer's real address:
//
//	peer ══TLS══► TCP socket ─► inbound goroutine ─► socketpair ─► shard's ring
//	     ◄══TLS══            ◄─ outbound goroutine ◄─            ◄─ (recv, send)
//
// Framing, validation, back-pressure and reply order stay the runtime's; the bridge
// only moves bytes, with two extra copies each way (crypto/tls's buffer to the
// bridge's, the bridge's to the socketpair). Back-pressure holds end to end with
// bounded buffers: the socketpair's kernel buffers and one 64 KiB buffer per
// direction (the outbound one only while replies move), besides crypto/tls's record
// buffers. When a shard stops reading, the socketpair fills, the inbound goroutine
// blocks and stops reading TCP, and TCP flow control slows the peer. When a peer
// stops reading, the TLS write blocks (WriteTimeout ends it), and the shard's sends
// wait as they would on a slow TCP peer (its SendTimeout applies). An end of either
// side is passed on as the other would see it on plain TCP: the peer's close
// (close_notify or FIN) becomes a shutdown(SHUT_WR) of the socketpair, so the shard
// reads EOF; the shard's close ends the TLS session with a close_notify and closes
// the TCP connection; an error on either side closes both.
//
// The replica plane ([cluster.tls], replica.go) keeps the bridge: a Replica is a
// terminator of the tcp_replica port (TLS 1.3 only, Config.RequiredALPN
// "iggy-replica") and a dialer for the runtime's outbound connections, each session
// bridged and handed over with its exporter value (shard.Runtime.AdoptReplica), which
// binds the replica handshake to it.
package tlsterm
