package server

import (
	"unsafe"

	"github.com/iggy-shard/iggy-shard/pollmemory"
	"github.com/iggy-shard/iggy-shard/shard"
)

// The owner shard's side of its poll memory (package pollmemory).

// pollMemoryOf is the poll memory of the shard h runs on.
func (h *handler) pollMemoryOf() *pollmemory.Memory[*job] { return h.srv.pollMemories[h.index] }

// admitPoll starts a poll once its shard's poll memory has room for it, or leaves it
// waiting its turn.
func (h *handler) admitPoll(j *job) {
	if h.pollMemoryOf().Admit(j) {
		h.startPoll(j)
	}
}

// startWaitingPolls starts the waiting polls, oldest first, while they fit.
func (h *handler) startWaitingPolls() { h.pollMemoryOf().StartWaiting(h.startPoll) }

// pollBufferReturned is a lent buffer coming back to its owner shard.
func (h *handler) pollBufferReturned(first *byte) {
	h.pollMemoryOf().GiveBack(first)
	h.startWaitingPolls()
}

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
	h.pollBufferReturned(first)
}
