package partitionhost

import "time"

// The scrubber: a poll verifies a batch's checksum once and its segment remembers
// the ranges verified (segment/verified.go), so bit rot under a verified range is
// found by partition.Store.ScrubAsync, which re-verifies the sealed segments at
// partition.Replication.ScrubBytesPerSecond and quarantines a corrupt batch (its
// polls fail as a poll of a corrupt batch does). Its reads go through the shard's
// disk ring, one step of at most 1 MiB in flight, each step's completion (from
// Store.PollIO) starting the next while the turn's credit lasts, so the shard never
// waits for them. A shard gives it a turn at most once a second: its credit holds a
// second's worth, so the rate is kept. It arms a wake-up for its next turn only
// while it finds something to verify or a step is in flight (whose bytes the next
// turn counts), so that a node with nothing sealed stays idle.

// scrubIntervalNs is how often a shard's scrubber takes its turn.
const scrubIntervalNs = int64(time.Second)

// ScrubIfDue gives the scrubber its turn when one is due.
func (h *Host) ScrubIfDue() {
	now := h.shard.NowNs()
	if now < h.due.scrubNs {
		return
	}
	first := h.due.scrubNs == 0
	h.due.scrubNs = now + scrubIntervalNs
	scrubbed, err := h.Store.ScrubAsync(now)
	if err != nil {
		h.log.Error("the scrubber found corrupt batches: they are no longer served", "err", err)
	}
	inFlight := h.Store.ScrubInFlight()
	if inFlight {
		// This turn's Store.PollIO submits the step's read, or completes it
		// at once when its file could not be opened (a lazy storage's
		// failure, which leaves nothing in the ring to poll for).
		h.scheduleIO()
	}
	// The first turn only starts the clock; the next comes a second later.
	h.due.scrubbing = first || scrubbed > 0 || inFlight
}
