// Package shard is the server's runtime: one event loop per CPU, each a goroutine locked
// to its OS thread (optionally pinned), owning an io_uring ring, a buffer arena and the
// connections delegated to it. It frames requests, validates their headers and hands
// them to a Handler; it knows nothing of streams, users or partitions.
//
// # The loop
//
// Each iteration of a shard:
//
//	read the clock once ─► drain the inboxes (messages from other shards)
//	     ▲                 fire due timers (frame, idle, send deadlines; accept backoff;
//	     │                   turns the handler asked for with WakeAt)
//	     │                 the handler's Tick (Ticker): e.g. reap the disk ring
//	     │                 flush: one send or sendmsg per connection with queued replies
//	     │                 wake every shard posted to (one MSG_RING each)
//	     │                 submit + wait for a completion or the next timer
//	     └──────────────── copy out a batch of completions, then act on each
//
// A turn that a completion started ends with a short busy poll (Config.BusyPoll) before
// the shard sleeps; one that a timer started sleeps at once. Turns asked for without a
// wait (a busy Ticker, a message to itself, a timer already due) that make no progress
// are throttled after 64 in a row (wait.go): a handler stuck asking for turns costs a
// few of them a second, not a core.
//
// Completions never run inside the reap: acting on one may submit, and submitting may
// post more completions. All of a shard's ring submissions happen on its thread (the
// ring is SINGLE_ISSUER with DEFER_TASKRUN).
//
// # Connections
//
// Shard 0 listens with one multishot accept and delegates each accepted socket to the
// least loaded shard (connections, plus handoffs still on the way; ties round-robin)
// through fdpass: msg_ring send-fd installs it straight into the target
// ring's registered-file table (the target then addresses it as a fixed file and never
// holds a descriptor), or, on kernels without send-fd, a duplicate travels through the
// target's inbox followed by a MSG_RING wake-up. On EMFILE, ENFILE, ENOBUFS or ENOMEM
// accept backs off (10 ms doubling to 1 s) and re-arms; pending connections wait in the
// kernel's queue. (io_uring reads RLIMIT_NOFILE when an accept is prepared, so a lower
// limit applies from the next re-arm.)
//
// Client and replica connections share one lifecycle (link.go): a socket in a slot
// of its plane's table (slotTable), one recv and one send in flight, open (a
// replica's after its handshake), then draining (it reads no more and closes once
// what it owes is sent) or aborting (it drops what is queued), and freed only once
// the kernel holds none of its buffers. Both planes' listeners are one acceptor
// (acceptor.go) with an acceptPolicy each; connections from outside the runtime's
// sockets come through one adoptionQueue (adopt.go); every socket reaches its shard
// by one handoff (handoff.go), its cookie naming the plane. What differs stays with
// each plane: the client's framing (Framer), multishot recv, reply order and send
// queue (conn.go, conn_recv.go, replyorder.go, sendqueue.go); the replica's framing
// (replicaFramer), handshake, dials and two send classes (replica_*.go).
//
// A client's TLS session, its handshake done off the shards (package tlsterm), comes
// with its socket (Runtime.AdoptTLS) and is then the shard's: crypto/tls reads the
// ciphertext the ring received over an in-memory transport and the plaintext goes
// into the same framer; replies are sealed into records in arena buffers that the
// ring sends (conn_tls.go). Back-pressure, timeouts and ends are a plaintext
// connection's.
//
// A connection keeps one multishot recv armed. Arrivals land in 8 KiB buffers of a
// provided-buffer ring (an arena class lent to the kernel), so an idle connection holds
// no receive buffer; the Framer copies the bytes into the connection's 16-byte-aligned
// frame buffer (a 4 KiB standing one, or a larger one that grows with the bytes that
// arrived) and the receive buffer goes straight back to the ring. Once a frame's
// header is in and more than 256 KiB of its body is to come, the multishot recv is
// cancelled and one-shot recvs read the rest straight into the frame buffer, a copy
// fewer (conn_recv.go, armRecvDirect):
//
//	0          48     52          60        61                      256        size
//	+----------+------+-----------+---------+-----------------------+----------+
//	| checksums| size | view, rel.| command | ... request fields ... |   body   |
//	+----------+------+-----------+---------+-----------------------+----------+
//
// The size must lie in [256, FrameSizeMax] and the command must be Request (5), or the
// client gets an Eviction frame (reason 6, resp. 4) and the connection closes. Then
// wire.DecodeRequestHeader validates the header: a fault answers with an eviction, a
// status reply or a close, as wire says; the request_checksum is checked (status 4);
// then the Handler gets the header view and the body, both in the frame buffer.
//
// Replies leave in the order the connection's requests arrived, whichever shard
// served each (replyorder.go): every request gets a Ticket; a handler that answers
// later defers it (Request.Defer) and answers between Conn.Answer and Conn.Answered;
// replies of later requests that are ready first wait, parked, behind it. An
// eviction leaves after the replies owed before it, and nothing follows it.
//
// Replies go through a bounded per-connection send queue: Reserve copies small replies
// into arena buffers, SendVectored lends bytes (stored batches) without copying, and
// SendFileRuns queues runs of files that are spliced to the socket, file -> pipe ->
// socket through a pipe of the shard's pool (splice.go). Queued pieces leave in one
// send, or one sendmsg over up to 64 iovecs, up to a spliced piece, which is then the
// connection's send in flight. While more than half of
// SendQueueBytesMax (or of the 64 pieces) is queued or parked, or the connection owes
// 256 replies, its requests are not served and its recv is cancelled (back-pressure):
// bytes that arrive before the cancel lands wait in a backlog (at most what the
// receive ring holds: all the kernel can deliver before the cancel), and
// serving resumes as the replies drain. A reply the queue has no room for waits,
// parked, for the room; one larger than SendQueueBytesMax is sent alone. Replies
// unread for SendTimeout close the connection.
//
// Requests are back-pressured the same way: a connection whose requests the handler
// retained (Request.Retain) hold more than 4 MiB of frame buffers is not read until
// some are released, and a frame for which the arena has no buffer left waits, unread,
// in a first-come-first-served line until requests in flight give theirs back. The
// server's own shortage never closes a connection; TCP flow control slows its client.
//
// A started frame must complete within FrameTimeout (time spent waiting for a buffer
// does not count); a silent connection closes after IdleTimeout (when set). Each of
// these ends only the offending connection.
//
// # Disk I/O
//
// With Config.DiskIO each shard also owns a disk ring (Shard.Disk) for its partition
// logs' reads, writes and fdatasyncs. It is a second ring so that a log that must
// wait for its I/O (a close, an offsets read) waits on disk completions only. Its
// completions signal an eventfd registered with it, whose read stays armed on the
// connection ring: a finished write wakes the loop like a socket would, and Tick
// runs its completion hooks. No shard blocks in a pwrite or an fdatasync.
//
// # Between shards
//
// Every ordered pair of shards has a bounded single-producer single-consumer Queue, and
// a small second one served first (PostControl) for messages that must not wait behind
// a flood; replica frames on their way to the shard that owns their peer's connection
// take queues of their own, one per send class (replica_queue.go). A shard that posted
// to another rings it once per loop iteration with MSG_RING, which wakes it from
// io_uring_enter. Goroutines outside the shards (signal handling, tests)
// cannot send MSG_RING without a ring: they wake a shard through an eventfd the shard
// keeps a read armed on. No mutex is shared between shards.
//
// # Stopping
//
// Runtime.Shutdown stops the accept, lets each connection send what it is owed and
// closes it, cutting the rest after ShutdownTimeout, then checks that every arena buffer
// came back.
package shard
