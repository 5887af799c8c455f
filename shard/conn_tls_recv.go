package shard

import (
	"golang.org/x/sys/unix"

	"github.com/iggy-shard/iggy-shard/arena"
)

// A TLS connection receiving a large frame reads its ciphertext in large pieces: a
// one-shot recv into a tlsRecvBufferBytes arena buffer, not the multishot recv's 8
// KiB receive-ring buffers. crypto/tls copies the ciphertext into its record buffer
// either way (it reads through the transport), so this saves no copy; it saves the
// kernel's per-recv work and the shard's per-completion work (BenchmarkTransport's
// TLS producer: ~40 io_uring completions of all kinds a 1 MB batch, not ~113). It
// starts and stops as a plaintext connection's recv into the frame buffer does
// (wantsRecvDirect: the body still awaited), from a smaller body on; unlike that
// one it may read past the frame, since every byte goes through the session anyway.
//
// A readv into four such buffers was no better (eight interleaved runs: server CPU
// a batch 1,054 µs against 964).

// tlsRecvDirectBytesMin is the body still awaited from which a TLS connection
// reads in large recvs.
const tlsRecvDirectBytesMin = 64 << 10

// tlsRecvBufferBytes is the size of a large recv: an arena class.
const tlsRecvBufferBytes = 64 << 10

// armRecvDirectTLS arms the large recv into an arena buffer, held in c.tls.recv
// until its completion; with none free, it arms the multishot recv instead.
func (c *Conn) armRecvDirectTLS() {
	buf, err := c.shard.arena.Acquire(tlsRecvBufferBytes)
	if err != nil {
		c.armRecv()
		return
	}
	c.tls.recv = buf
	sqe := c.shard.getSQE()
	sqe.PrepareRecv(c.fd, buf.Full(), 0)
	c.markFixed(sqe)
	sqe.UserData = userData(kindRecv, c.id)
	c.recvInFlight, c.recvDirect = true, true
	c.recvCancelSent = false
}

// onRecvDirectTLS handles the completion of armRecvDirectTLS's recv: its res
// bytes of ciphertext go to the session as a multishot recv's would, and the
// buffer goes back to the arena whatever became of the connection (the kernel is
// done with it).
func (c *Conn) onRecvDirectTLS(res int32) {
	s := c.shard
	// The buffer is this completion's from here on: serving what it holds may arm
	// the next recv, into a buffer of its own.
	buf := c.tls.recv
	c.tls.recv = arena.Buffer{}
	defer s.arena.Release(buf)
	c.recvInFlight, c.recvDirect = false, false
	if c.state != linkOpen {
		c.maybeFinish()
		return
	}
	switch {
	case res == 0:
		c.tls.eof = true
		c.in.eofPending = true // read no more; the session's EOF closes it once read
		c.readTLS()
		return
	case res < 0:
		if errno := unix.Errno(-res); errno != unix.ECANCELED {
			c.abort(errno.Error())
			return
		}
		c.maybeRearm()
		return
	}
	c.lastRecvNs = s.clock.nowNs
	s.counters.bytesReceived += uint64(res)
	c.receiveTLS(buf.Full()[:res])
	if c.state != linkOpen {
		c.maybeFinish()
		return
	}
	c.maybeRearm()
}
