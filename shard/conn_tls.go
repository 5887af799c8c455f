package shard

import (
	"crypto/tls"
	"errors"
	"io"
	"net/netip"

	"github.com/iggy-shard/iggy-shard/arena"
)

// A client's TLS session runs on its connection's shard once its handshake is done
// (the handshake cannot wait on a ring, so it runs elsewhere, e.g. on a goroutine of
// package tlsterm, and the session is handed over with its socket: Runtime.AdoptTLS).
// The connection's ring reads the ciphertext as it reads a plaintext connection's
// bytes; crypto/tls reads it over an in-memory transport (tlsRecords) and the
// plaintext goes through the same framer; replies are sealed into records in arena
// buffers that the ring sends. No goroutine and no socketpair sit between:
//
//	recv (provided buffer; a large frame's: 64 KiB arena buffers, conn_tls_recv.go)
//	   ─► tls.Conn.Read (record buffer, decrypted in place)
//	   ─► 16 KiB scratch, or a large frame's buffer ─► Framer ─► Handler
//	send queue (replies) ─► tls.Conn.Write, 16 KiB records (small pieces gathered
//	   first) ─► sealed records in 64 KiB arena buffers ─► send or sendmsg
//
// The transport answers a read it has no bytes for with errRecordsEmpty, a
// temporary net.Error: crypto/tls keeps a record partly read and stays usable, and
// is read again when the ring brings more. Bytes the client sent right after its
// Finished are either in the session's record buffer (read with the handshake) or
// still in the socket; both are read once the shard has the session.
//
// Back-pressure is the plaintext connection's: a throttled connection reads no
// more from its session, and what arrived before the cancel of its recv waits as
// ciphertext (bounded as the plaintext backlog is). Replies are sealed at most
// tlsSealBytesMax at a time, and the plaintext they carry stays queued (and counted)
// until their records are sent, so the send queue's bounds and SendTimeout hold as
// they do for plaintext.
//
// Ends are passed on as on plain TCP: the client's close_notify or FIN is the
// framer's end of input (the replies owed are sent); the shard's orderly close sends
// a close_notify after the last reply; a broken record ends the connection.

// TLSTransport is the transport under a session handed to the runtime
// (tlsterm.Transport): the runtime attaches it to the connection's record buffers
// on its shard, and closes it when the connection ends.
type TLSTransport interface {
	// Attach sends the session's reads and writes of ciphertext to records.
	Attach(records io.ReadWriter)
	// Close tells the transport's owner that the session ended; the runtime has
	// closed the socket.
	Close() error
}

// tlsHandover is a TLS session on its way to its shard.
type tlsHandover struct {
	session   *tls.Conn
	transport TLSTransport
}

// AdoptTLS is Adopt for a client's TLS session whose handshake is done: fd is its
// socket (blocking), session the crypto/tls server connection made over transport.
// The runtime attaches the transport to the connection's buffers on the shard that
// takes it, which from then on is the session's only user. On success the runtime
// owns fd, the session and the transport (it closes the transport when the
// connection ends); on ErrRuntimeStopped the caller does.
func (rt *Runtime) AdoptTLS(fd int, peer netip.AddrPort, session *tls.Conn, transport TLSTransport) error {
	return rt.adoptions.push(rt, adoption{fd: fd, peer: peer, tls: &tlsHandover{session: session, transport: transport}})
}

// tlsRecordBytes is the plaintext of a full TLS record (2^14, RFC 8446 5.1): the
// most one read of a session returns, and what a record is sealed to.
const tlsRecordBytes = 16 << 10

// tlsSealBytesMax bounds the reply bytes sealed at once, the plaintext of one send:
// five 64 KiB arena buffers a connection at most. Sealing a 1 MB poll reply whole
// for one sendmsg made it no faster (BenchmarkTransport, 64 KiB to 1 MiB alike),
// and took seventeen. Nor did a smaller first seal after an idle queue (16 or 64
// KiB, so that the client decrypts while the rest is sealed; ten interleaved runs
// of BenchmarkTLSCeiling's iggy/tls each), nor 64 KiB seals throughout (five): the
// round trip is bound by crypto/tls at the client as much as by our sealing.
const tlsSealBytesMax = 256 << 10

// tlsDirectReadBytesMin is the room left in a frame's body from which the session
// reads straight into the frame buffer rather than through the scratch: a record's
// worth, since a read returns at most one record.
const tlsDirectReadBytesMin = 4 << 10

// tlsSealBufferBytes is the size of the arena buffers sealed records go to.
const tlsSealBufferBytes = 64 << 10

// tlsScratch is a shard's plaintext scratch for its TLS connections: where a record
// is read before the framer copies it, and where small reply pieces gather into a
// full record.
type tlsScratch struct {
	plain [tlsRecordBytes]byte
	stage [tlsRecordBytes]byte
}

// tlsRecords is a TLS connection's transport on its shard (the io.ReadWriter its
// session is attached to) and the session itself.
type tlsRecords struct {
	conn      *Conn
	session   *tls.Conn
	transport TLSTransport

	// Inbound ciphertext: lent is the receive buffer being read (only while its
	// completion is handled); pending is what the session did not read of earlier
	// ones, from pendingFrom on.
	lent        []byte
	pending     inputBacklog
	pendingFrom int
	eof         bool // the client's FIN arrived: reads end once pending is read
	// recv is the buffer of the large recv in flight (armRecvDirectTLS), if any.
	recv arena.Buffer

	// Outbound: sealed records in buffers of tlsSealBufferBytes; sentBytes of
	// sealedBytes have been sent. sealedPlainBytes is the plaintext at the head of the
	// send queue that they carry: it leaves the queue once they are all sent.
	sealed           []sealedBuffer
	sealedBytes      int
	sentBytes        int
	sealedPlainBytes int
	closeNotifySent  bool
}

// sealedBuffer is a buffer of sealed records: data is its bytes, in owned (the
// arena's) or, when the arena had none, on the heap.
type sealedBuffer struct {
	data  []byte
	owned arena.Buffer
}

// tlsRecordOverheadBytesMax bounds what sealing adds to a record's plaintext: header,
// explicit nonce or IV, tag or MAC and padding of any suite crypto/tls offers.
const tlsRecordOverheadBytesMax = 256

// errRecordsEmpty is the transport's "no ciphertext yet": temporary, so crypto/tls
// keeps what it holds and may be read again.
var errRecordsEmpty error = recordsEmptyError{}

type recordsEmptyError struct{}

func (recordsEmptyError) Error() string   { return "shard: no TLS records received yet" }
func (recordsEmptyError) Timeout() bool   { return false }
func (recordsEmptyError) Temporary() bool { return true }

// Read gives crypto/tls the ciphertext received: what waits from earlier receive
// buffers, then the one being handled.
func (r *tlsRecords) Read(p []byte) (int, error) {
	if r.pending.bytes > r.pendingFrom {
		n := copy(p, r.pending.data[r.pendingFrom:r.pending.bytes])
		r.pendingFrom += n
		if r.pendingFrom == r.pending.bytes {
			r.pending.release(r.conn.shard.arena)
			r.pendingFrom = 0
		}
		return n, nil
	}
	if len(r.lent) > 0 {
		n := copy(p, r.lent)
		r.lent = r.lent[n:]
		return n, nil
	}
	if r.eof {
		return 0, io.EOF
	}
	return 0, errRecordsEmpty
}

// Write takes sealed records from crypto/tls: replies (seal), and what the session
// writes on its own (a KeyUpdate's answer, alerts, close_notify).
func (r *tlsRecords) Write(p []byte) (int, error) {
	for written := 0; written < len(p); {
		if len(r.sealed) == 0 || len(r.last().data) == cap(r.last().data) {
			r.addBuffer(true)
		}
		last := r.last()
		n := copy(last.data[len(last.data):cap(last.data)], p[written:])
		last.data = last.data[:len(last.data)+n]
		written += n
		r.sealedBytes += n
	}
	return len(p), nil
}

func (r *tlsRecords) last() *sealedBuffer { return &r.sealed[len(r.sealed)-1] }

// roomForRecord makes sure a full record fits the last buffer, with a new one when
// it would not; it reports false when the arena has none and records are sealed
// already (they are sent first). With nothing sealed, a heap buffer does: a
// connection's replies always move.
func (r *tlsRecords) roomForRecord() bool {
	if len(r.sealed) > 0 && cap(r.last().data)-len(r.last().data) >= tlsRecordBytes+tlsRecordOverheadBytesMax {
		return true
	}
	return r.addBuffer(r.sealedBytes == 0)
}

// addBuffer appends a buffer for sealed records: the arena's, or when it has none
// and orHeap, the heap's.
func (r *tlsRecords) addBuffer(orHeap bool) bool {
	buf, err := r.conn.shard.arena.Acquire(tlsSealBufferBytes)
	switch {
	case err == nil:
		r.sealed = append(r.sealed, sealedBuffer{data: buf.Full()[:0:tlsSealBufferBytes], owned: buf})
	case orHeap:
		r.sealed = append(r.sealed, sealedBuffer{data: make([]byte, 0, tlsSealBufferBytes)})
	default:
		return false
	}
	return true
}

// unsent is the sealed bytes not sent yet.
func (r *tlsRecords) unsent() int { return r.sealedBytes - r.sentBytes }

// startTLS attaches a handed-over session to c, just opened, and reads what the
// session already holds (the bytes that came with the end of the handshake).
func (c *Conn) startTLS(h *tlsHandover) {
	s := c.shard
	if s.clients.tls == nil {
		s.clients.tls = new(tlsScratch)
	}
	c.tls = &tlsRecords{conn: c, session: h.session, transport: h.transport}
	h.transport.Attach(c.tls)
	c.readTLS()
}

// receiveTLS takes ciphertext from the ring: the session reads it now when the
// connection may read, and what it leaves waits (copied: the receive buffer goes
// back to the ring) until the connection reads again.
func (c *Conn) receiveTLS(data []byte) {
	r := c.tls
	r.lent = data
	c.readTLS()
	if len(r.lent) > 0 && c.state == linkOpen {
		if r.pendingFrom > 0 { // keep the backlog's front at 0, so it grows only by what waits
			r.pending.bytes = copy(r.pending.data, r.pending.data[r.pendingFrom:r.pending.bytes])
			r.pendingFrom = 0
		}
		c.keep(&r.pending, r.lent)
	}
	r.lent = nil
}

// readTLS decrypts and serves what the session has until it has no more, the
// connection stops reading (throttled, waiting for a frame buffer, plaintext
// stashed), or it ends.
func (c *Conn) readTLS() {
	r := c.tls
	unsent := r.unsent()
	plain := c.shard.clients.tls.plain[:]
	for c.state == linkOpen && !c.throttled && !c.waitingForBuffer && c.in.bytes == 0 {
		var n int
		var err error
		if body := c.framer.Space(); len(body) >= tlsDirectReadBytesMin && !c.overloaded() {
			// The body of a large frame: decrypted straight into its frame buffer.
			n, err = r.session.Read(body)
			if n > 0 {
				frame := c.framer.Filled(n)
				if frame != nil {
					c.serve(frame)
				}
				c.trackFrame(c.framer.Partial(), frame != nil)
			}
		} else {
			n, err = r.session.Read(plain)
			if n > 0 {
				if rest := c.consumeInput(plain[:n]); len(rest) > 0 {
					c.stash(rest)
				}
			}
		}
		if err == nil {
			continue
		}
		if err != errRecordsEmpty {
			c.endTLSInput(err)
		}
		break
	}
	if r.unsent() > unsent && c.state != linkFree {
		c.sessionWrote(unsent) // a KeyUpdate's answer, an alert
	}
}

// sessionWrote sends what the session sealed on its own, beside the replies; its
// SendTimeout counts from now when nothing else was on its way out.
func (c *Conn) sessionWrote(unsentBefore int) {
	if unsentBefore == 0 && c.out.count == 0 {
		c.sendWaitFromNs = c.shard.clock.nowNs
		c.out.sentSinceMarkBytes = 0
	}
	c.shard.markDirty(c)
}

// endTLSInput ends a connection whose session will read no more: the client's
// close_notify or FIN is an orderly end, as a plaintext EOF; anything else (a
// record that does not authenticate, an alert) ends it after the alert the session
// sent, if any.
func (c *Conn) endTLSInput(err error) {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		c.closeAfterFlush("peer closed")
		return
	}
	c.shard.log.Debug("connection closed: TLS", "conn", c.id, "err", err)
	c.closeAfterFlush("tls: " + err.Error())
}

// flushTLS seals the head of the send queue when nothing sealed waits, and sends
// what is sealed.
func (c *Conn) flushTLS() {
	r := c.tls
	if r.unsent() == 0 && c.out.count > 0 {
		if !c.seal() {
			return
		}
	}
	if r.unsent() == 0 {
		c.out.consume(0, c.shard) // only empty pieces were queued
		return
	}
	n, skip := 0, r.sentBytes
	for i := 0; i < len(r.sealed) && n < sendVectorMax; i++ {
		data := r.sealed[i].data
		if skip >= len(data) {
			skip -= len(data)
			continue
		}
		c.vec.set(n, data[skip:])
		skip = 0
		n++
	}
	c.submitSend(n, false)
}

// seal seals up to tlsSealBytesMax of the replies queued into full records: a piece
// of a record's size or more goes to crypto/tls from where it lies, smaller ones
// gather in the shard's scratch first. It stops early when the arena is short of
// buffers for the records. It reports false when the session failed (the
// connection is aborted).
func (c *Conn) seal() bool {
	r := c.tls
	stage := c.shard.clients.tls.stage[:0]
	sealed := 0 // plaintext bytes sealed or staged
	for i := 0; i < c.out.count && sealed < tlsSealBytesMax; i++ {
		seg := c.out.at(i)
		data := seg.data[seg.sent:]
		for len(data) > 0 && sealed < tlsSealBytesMax {
			if len(stage) == 0 && !r.roomForRecord() {
				return r.sealedPlain(sealed) // the arena is short: send what is sealed
			}
			if len(stage) == 0 && len(data) >= tlsRecordBytes && tlsSealBytesMax-sealed >= tlsRecordBytes {
				if !c.sealRecord(data[:tlsRecordBytes]) {
					return false
				}
				data, sealed = data[tlsRecordBytes:], sealed+tlsRecordBytes
				continue
			}
			k := min(len(data), tlsRecordBytes-len(stage), tlsSealBytesMax-sealed)
			stage = append(stage, data[:k]...)
			data, sealed = data[k:], sealed+k
			if len(stage) == tlsRecordBytes {
				if !c.sealRecord(stage) {
					return false
				}
				stage = stage[:0]
			}
		}
	}
	if len(stage) > 0 && !c.sealRecord(stage) {
		return false
	}
	return r.sealedPlain(sealed)
}

// sealedPlain notes the plaintext bytes the records sealed carry.
func (r *tlsRecords) sealedPlain(n int) bool {
	r.sealedPlainBytes = n
	return true
}

func (c *Conn) sealRecord(plain []byte) bool {
	if _, err := c.tls.session.Write(plain); err != nil {
		c.shard.log.Warn("connection closed: TLS seal failed", "conn", c.id, "err", err)
		c.abort("tls: " + err.Error())
		return false
	}
	return true
}

// sentTLS accounts for n sealed bytes sent; once all are, the replies they carry
// leave the send queue and the buffers go back to the arena.
func (c *Conn) sentTLS(n int) {
	r := c.tls
	r.sentBytes += n
	if r.sentBytes < r.sealedBytes {
		return
	}
	c.out.consume(r.sealedPlainBytes, c.shard)
	r.sealedPlainBytes = 0
	r.releaseSealed(c.shard.arena)
}

func (r *tlsRecords) releaseSealed(a *arena.Arena) {
	for i, b := range r.sealed {
		if !b.owned.IsZero() {
			a.Release(b.owned)
		}
		r.sealed[i] = sealedBuffer{}
	}
	r.sealed = r.sealed[:0]
	r.sealedBytes, r.sentBytes = 0, 0
}

// tlsOwing reports, for a draining connection that owes no reply, whether its
// session still has bytes to send; the first time, it seals the close_notify that
// ends the session.
func (c *Conn) tlsOwing() bool {
	r := c.tls
	if !r.closeNotifySent {
		r.closeNotifySent = true
		unsent := r.unsent()
		if err := r.session.CloseWrite(); err != nil {
			c.shard.log.Debug("TLS close_notify not sealed", "conn", c.id, "err", err)
		}
		if r.unsent() > unsent {
			c.sessionWrote(unsent)
			c.flush()
		}
	}
	return r.unsent() > 0
}

// endTLS gives back what the session holds as the connection is freed, and tells
// the transport's owner that it ended.
func (c *Conn) endTLS() {
	r := c.tls
	a := c.shard.arena
	r.releaseSealed(a)
	r.pending.release(a)
	r.lent = nil
	r.transport.Close()
	c.tls = nil
}
