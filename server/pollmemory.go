package server

import (
	"unsafe"

	"github.com/iggy-shard/iggy-shard/shard"
)

// returnPollBuffer gives a finished poll's read buffer back to the shard that lent
// it; it runs where the job is recycled, once its reply has been sent.
func (h *handler) returnPollBuffer(j *job) {
	b := j.Poll.Res.TakeReadBuffer()
	if b == nil {
		return
	}
	first := unsafe.SliceData(b)
	if owner := h.srv.ownerOf(j.Poll.Key); owner != h.index {
		h.post(owner, shard.Message{Kind: msgPollBuffer, Payload: first})
		return
	}
	h.owned.PollBufferReturned(first)
}
