package server

// The buffers Do lends its callers for poll replies (finishCall): a poll over
// HTTP answers up to a megabyte and more, which a fresh slice per call would
// allocate and the GC collect each time. A caller that has written the reply out
// gives its buffer back (Server.GiveBack); one that does not leaves it to the
// GC, and the next poll allocates anew.
//
// The free list is bounded in count and in each buffer's size, so that what it
// holds stays small beside the poll-memory budget: a reply larger than
// replyBufferKeptMaxBytes is allocated as it comes and never kept. (A sync.Pool
// would drop every buffer at each GC, which a stream of megabyte replies calls
// often.)

const (
	// replyBuffersKept is how many buffers the free list holds at most: one per
	// poll in flight on a loaded node's HTTP API.
	replyBuffersKept = 8
	// replyBufferKeptMaxBytes is the largest buffer kept: 4 MiB, four polls of
	// 1000 messages of 1000 bytes.
	replyBufferKeptMaxBytes = 4 << 20
)

// replyBuffers is the free list; safe from any goroutine (the shards take, the
// callers give back).
type replyBuffers struct {
	free chan []byte
}

func newReplyBuffers() replyBuffers {
	return replyBuffers{free: make(chan []byte, replyBuffersKept)}
}

// take returns an empty buffer of at least size bytes' capacity: a kept one when
// it is large enough, else a new one.
func (r *replyBuffers) take(size int) []byte {
	if size <= replyBufferKeptMaxBytes {
		select {
		case b := <-r.free:
			if cap(b) >= size {
				return b[:0]
			}
		default:
		}
	}
	return make([]byte, 0, size)
}

// giveBack keeps b for a later reply, unless it is too large or the list is full.
func (r *replyBuffers) giveBack(b []byte) {
	if cap(b) == 0 || cap(b) > replyBufferKeptMaxBytes {
		return
	}
	select {
	case r.free <- b[:0]:
	default:
	}
}

// GiveBack returns a reply Do answered to the server's free list of reply
// buffers, once the caller is done with it (every slice of it): the server may
// write the next poll's reply into it at once. Give a reply back once, and only
// one Do returned; not giving it back is always safe.
func (s *Server) GiveBack(reply []byte) { s.transport.replies.giveBack(reply) }
