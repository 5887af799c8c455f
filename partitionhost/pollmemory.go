package partitionhost

import (
	"github.com/iggy-shard/iggy-shard/pollmemory"
	"github.com/iggy-shard/iggy-shard/request"
)

// The owner shard's side of its poll memory (package pollmemory).

// admitPoll starts a poll once its shard's poll memory has room for it, or leaves it
// waiting its turn.
func (h *Host) admitPoll(j *request.Job) {
	if h.pollMemory.Admit(j) {
		h.startPoll(j)
	}
}

// startWaitingPolls starts the waiting polls, oldest first, while they fit.
func (h *Host) startWaitingPolls() { h.pollMemory.StartWaiting(h.startPoll) }

// PollBufferReturned is a poll's read buffer (its first byte) coming back to
// its owner shard once its reply was sent.
func (h *Host) PollBufferReturned(first *byte) {
	h.pollMemory.GiveBack(first)
	h.startWaitingPolls()
}

// DropIdlePollMemoryIfDue lets the garbage collector have, every
// pollmemory.DropIdleInterval, the free poll buffers no read took since the last
// time: a burst of polls leaves its buffers for a while, not for the shard's life.
// An idle shard still takes its maintenance turn (shard.Config.MaintenanceInterval).
func (h *Host) DropIdlePollMemoryIfDue() {
	now := h.shard.NowNs()
	if now < h.due.pollMemoryNs {
		return
	}
	h.due.pollMemoryNs = now + int64(pollmemory.DropIdleInterval)
	h.pollMemory.DropIdle()
}
