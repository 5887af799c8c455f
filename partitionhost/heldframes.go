package partitionhost

import (
	"time"

	"github.com/iggy-shard/iggy-shard/partition"
	"github.com/iggy-shard/iggy-shard/wire"
)

// A partition group's frame can arrive before this node has applied the metadata
// op that creates the partition: the primary's node applied it and answered the
// client, whose first send the group prepares at once, while here the op's Commit
// is still on its way (it travels apart from the group's frames when the node has
// several shards) or the op is still being journaled down the chain. Dropped, the
// prepare came back only with the group's retransmission, 250 ms later and then
// with backoff; a first send to a new partition took up to a second. So such a
// frame is held, bounded, for a partition this shard's view does not have yet, and
// stepped as soon as a commit brings the partition; after HeldFrameTimeout it is
// dropped (the op that would create it never came: a deleted partition's late
// frames), and the group's retransmission takes over, as for any lost frame.

const (
	// heldFramesMax and heldBodyBytesMax bound the frames a shard holds and the
	// bytes of their bodies (copies); a frame beyond them is dropped.
	heldFramesMax    = 1024
	heldBodyBytesMax = 8 << 20
	// HeldFrameTimeout is how long a frame is held: a few of its group's
	// retransmissions later, the retransmission is worth more than the frame.
	HeldFrameTimeout = 2 * time.Second
)

type heldFrame struct {
	key    partition.Key
	peer   uint8
	header wire.GenericHeader
	body   []byte
	heldNs int64
}

// frameHold holds frames for partitions this shard's view does not have, oldest
// first.
type frameHold struct {
	frames    []heldFrame
	bodyBytes int
	counts    HeldFrameCounts
}

// HeldFrameCounts count what became of the frames held, for /metrics and tests.
type HeldFrameCounts struct {
	// Held were kept; Stepped stepped once their partition came; Expired dropped
	// after HeldFrameTimeout; Refused dropped at once, the hold being full.
	Held, Stepped, Expired, Refused uint64
}

// viewHasPartition reports whether the shard's view has partition k.
func (h *Host) viewHasPartition(k partition.Key) bool {
	st := h.shard.ViewState().Stream(k.StreamID)
	if st == nil {
		return false
	}
	t := st.Topic(k.TopicID)
	return t != nil && int(k.PartitionID) < len(t.Partitions)
}

// HoldFrame keeps a frame for partition k, which the view does not have, and
// reports whether it did.
func (h *Host) HoldFrame(k partition.Key, peer uint8, hdr *wire.GenericHeader, body []byte) bool {
	if h.viewHasPartition(k) {
		return false // the partition is the view's: the store has it or failed to open it
	}
	hold := &h.hold
	if len(hold.frames) == heldFramesMax || hold.bodyBytes+len(body) > heldBodyBytesMax {
		hold.counts.Refused++
		return false
	}
	f := heldFrame{key: k, peer: peer, header: *hdr, heldNs: h.shard.NowNs()}
	if len(body) > 0 {
		f.body = append([]byte(nil), body...)
		hold.bodyBytes += len(body)
	}
	hold.frames = append(hold.frames, f)
	hold.counts.Held++
	h.shard.WakeAt(f.heldNs + int64(HeldFrameTimeout))
	return true
}

// StepHeld steps, oldest first, the frames held for partitions the view has now,
// and keeps the others.
func (h *Host) StepHeld() {
	hold := &h.hold
	kept := hold.frames[:0]
	for i := range hold.frames {
		f := &hold.frames[i]
		if !h.viewHasPartition(f.key) {
			kept = append(kept, *f)
			continue
		}
		h.EnsureCreated(f.key)
		h.StepFrame(f.key, f.peer, &f.header, f.body)
		hold.bodyBytes -= len(f.body)
		hold.counts.Stepped++
	}
	clear(hold.frames[len(kept):])
	hold.frames = kept
}

// ExpireHeld drops the frames held for HeldFrameTimeout, and asks for a turn when
// the next one is due.
func (h *Host) ExpireHeld() {
	hold := &h.hold
	now := h.shard.NowNs()
	n := 0
	for n < len(hold.frames) && now-hold.frames[n].heldNs >= int64(HeldFrameTimeout) {
		hold.bodyBytes -= len(hold.frames[n].body)
		n++
	}
	if n > 0 {
		hold.counts.Expired += uint64(n)
		rest := copy(hold.frames, hold.frames[n:])
		clear(hold.frames[rest:])
		hold.frames = hold.frames[:rest]
	}
	if len(hold.frames) > 0 {
		h.shard.WakeAt(hold.frames[0].heldNs + int64(HeldFrameTimeout))
	}
}
