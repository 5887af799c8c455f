package ring

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// BenchmarkPollReply measures a whole poll reply sent each way the server can
// build it (partition.Store.Poll's copy, partition.Store.PlanPoll's plan): a
// reply of 24 bytes of header and prefix then N bytes of stored batches from
// a segment file in the page cache, to a loopback TCP socket whose peer, a
// goroutine of this process, reads and drops everything, by
//
//	loopback        a send of the whole reply already in memory (the baseline:
//	                the socket's own cost)
//	copy            a read of the batches into a heap buffer behind the header,
//	                linked to a send of it
//	splice          one linked chain: a send of the header (MSG_MORE,
//	                MSG_WAITALL), then per pipe's worth a file -> pipe and a
//	                pipe -> socket splice (a 1 MiB pipe, as shard/pipepool.go
//	                makes them)
//	splice-syscall  the same splices as blocking splice(2) calls on the
//	                benchmark's thread: what io_uring's hand-off of each splice
//	                to its workers costs (a shard cannot block: a yardstick)
//
// for N from 16 KiB to 4 MiB, one reply in flight (replyRig.run says what it
// reports).
func BenchmarkPollReply(b *testing.B) {
	const fileBytes = 64 << 20
	data := make([]byte, fileBytes)
	for i := range data {
		data[i] = byte(i * 7)
	}
	path := filepath.Join(b.TempDir(), "segment.log")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		b.Fatal(err)
	}
	for _, size := range []int{16 << 10, 64 << 10, 256 << 10, 512 << 10, 1 << 20, 2 << 20, 4 << 20} {
		for _, way := range []string{"loopback", "copy", "splice", "splice-syscall"} {
			b.Run(fmt.Sprintf("bytes=%d/%s", size, way), func(b *testing.B) {
				benchPollReply(b, path, fileBytes, size, way)
			})
		}
	}
}

// pollReplyHeadBytes is the reply header (status, length) and the
// PolledMessages prefix before the batches.
const pollReplyHeadBytes = 8 + 16

type pollReply struct {
	*replyRig
	reply []byte // head then body: the copy's buffer, the loopback's bytes
	size  int
}

func benchPollReply(b *testing.B, path string, fileBytes, size int, way string) {
	pr := &pollReply{replyRig: newReplyRig(b, path), reply: make([]byte, pollReplyHeadBytes+size), size: size}
	reply := map[string]func(int64) error{"loopback": pr.loopback, "copy": pr.copyReply, "splice": pr.splice, "splice-syscall": pr.spliceSyscall}[way]
	pr.run(b, int64(pollReplyHeadBytes+size), int64(size), int64(fileBytes), reply)
}

func (pr *pollReply) sqe() (*SQE, error) { return pr.r.GetSQE() }

func (pr *pollReply) loopback(int64) error { return pr.sendAll(pr.reply) }

func (pr *pollReply) copyReply(offset int64) error {
	read, err := pr.sqe()
	if err != nil {
		return err
	}
	read.PrepareRead(pr.file, pr.reply[pollReplyHeadBytes:], uint64(offset))
	read.Flags |= SQEIOLink
	read.UserData = 1
	send, err := pr.sqe()
	if err != nil {
		return err
	}
	send.PrepareSend(pr.sock, pr.reply, unix.MSG_NOSIGNAL)
	send.UserData = 2
	if _, err := pr.r.Submit(); err != nil {
		return err
	}
	sent := int32(0)
	for range 2 {
		c, err := pr.wait()
		if err != nil {
			return err
		}
		switch {
		case c.UserData == 1 && int(c.Res) != pr.size:
			return fmt.Errorf("read %d of %d: %v", c.Res, pr.size, c.Err())
		case c.UserData == 2 && c.Res <= 0:
			return fmt.Errorf("send: %v", c.Err())
		case c.UserData == 2:
			sent = c.Res
		}
	}
	return pr.sendAll(pr.reply[sent:])
}

// splice sends the reply as one linked chain, submitted at once: the head
// (MSG_WAITALL, so that io_uring retries a short send rather than let the
// splices behind it go first), then per pipe's worth a file -> pipe splice
// and a pipe -> socket splice. A splice that moves less than asked breaks the
// chain (the rest completes canceled); what it left is then sent step by step.
func (pr *pollReply) splice(offset int64) error {
	sqe, err := pr.sqe()
	if err != nil {
		return err
	}
	sqe.PrepareSend(pr.sock, pr.reply[:pollReplyHeadBytes], unix.MSG_NOSIGNAL|unix.MSG_MORE|unix.MSG_WAITALL)
	sqe.Flags |= SQEIOLink
	sqe.UserData = 0
	want := 1
	for off, left := offset, pr.size; left > 0; {
		chunk := min(left, pr.pipeBytes)
		in, err := pr.sqe()
		if err != nil {
			return err
		}
		in.PrepareSplice(pr.file, uint64(off), pr.pipeWrite, SpliceNoOffset, uint32(chunk), unix.SPLICE_F_MOVE)
		in.Flags |= SQEIOLink
		in.UserData = 1
		out, err := pr.sqe()
		if err != nil {
			return err
		}
		left -= chunk
		off += int64(chunk)
		flags := uint32(unix.SPLICE_F_MOVE)
		if left > 0 {
			flags |= unix.SPLICE_F_MORE
			out.Flags |= SQEIOLink
		}
		out.PrepareSplice(pr.pipeRead, SpliceNoOffset, pr.sock, SpliceNoOffset, uint32(chunk), flags)
		out.UserData = 2
		want += 2
	}
	if _, err := pr.r.Submit(); err != nil {
		return err
	}
	var headSent, moved, sent int64
	for range want {
		c, err := pr.wait()
		if err != nil {
			return err
		}
		res := int64(max(c.Res, 0)) // a canceled step moved nothing
		switch c.UserData {
		case 0:
			headSent = int64(c.Res)
		case 1:
			moved += res
		case 2:
			sent += res
		}
	}
	if headSent != pollReplyHeadBytes {
		return fmt.Errorf("send head: %d", headSent)
	}
	if err := pr.drainPipe(moved - sent); err != nil {
		return err
	}
	return pr.spliceSteps(offset+moved, pr.size-int(moved))
}

// drainPipe sends the n bytes left in the pipe.
func (pr *pollReply) drainPipe(n int64) error {
	for n > 0 {
		sqe, err := pr.sqe()
		if err != nil {
			return err
		}
		sqe.PrepareSplice(pr.pipeRead, SpliceNoOffset, pr.sock, SpliceNoOffset, uint32(n), unix.SPLICE_F_MOVE)
		if _, err := pr.r.Submit(); err != nil {
			return err
		}
		c, err := pr.wait()
		if err != nil {
			return err
		}
		if c.Res <= 0 {
			return fmt.Errorf("pipe -> socket: %v", c.Err())
		}
		n -= int64(c.Res)
	}
	return nil
}

// spliceSteps sends left bytes from offset one file -> pipe step at a time.
func (pr *pollReply) spliceSteps(offset int64, left int) error {
	for left > 0 {
		sqe, err := pr.sqe()
		if err != nil {
			return err
		}
		sqe.PrepareSplice(pr.file, uint64(offset), pr.pipeWrite, SpliceNoOffset, uint32(min(left, pr.pipeBytes)), unix.SPLICE_F_MOVE)
		if _, err := pr.r.Submit(); err != nil {
			return err
		}
		c, err := pr.wait()
		if err != nil {
			return err
		}
		if c.Res <= 0 {
			return fmt.Errorf("file -> pipe: %v", c.Err())
		}
		if err := pr.drainPipe(int64(c.Res)); err != nil {
			return err
		}
		offset += int64(c.Res)
		left -= int(c.Res)
	}
	return nil
}

// spliceSyscall is splice's steps as blocking system calls.
func (pr *pollReply) spliceSyscall(offset int64) error {
	if err := pr.sendAll(pr.reply[:pollReplyHeadBytes]); err != nil {
		return err
	}
	for left := pr.size; left > 0; {
		off := offset
		moved, err := unix.Splice(pr.file, &off, pr.pipeWrite, nil, min(left, pr.pipeBytes), unix.SPLICE_F_MOVE)
		if err != nil || moved <= 0 {
			return fmt.Errorf("file -> pipe: %d, %v", moved, err)
		}
		for inPipe := moved; inPipe > 0; {
			flags := unix.SPLICE_F_MOVE
			if left > int(moved) {
				flags |= unix.SPLICE_F_MORE
			}
			sent, err := unix.Splice(pr.pipeRead, nil, pr.sock, nil, int(inPipe), flags)
			if err != nil || sent <= 0 {
				return fmt.Errorf("pipe -> socket: %d, %v", sent, err)
			}
			inPipe -= sent
		}
		offset += moved
		left -= int(moved)
	}
	return nil
}
