package segment

import "fmt"

// inflightRing holds the appends in flight, oldest first, in a ring that grows by
// doubling up to Config.InflightBatchesMax slots (an idle partition keeps a few;
// one of 4,096 slots would cost 128 KiB on each of thousands). An entry leaves
// from the head once durable; written counts the head entries whose writes have
// completed, contiguously, and headSeq is the head entry's sequence number.
type inflightRing struct {
	slots   []inflight
	head    int
	count   int
	written int
	headSeq uint64
}

// inflight is one append in flight: its segment, its offsets [base, end), and
// whether its write and its fdatasync have completed.
type inflight struct {
	seg     *segment
	base    uint64
	end     uint64
	written bool
	durable bool
}

// fifoSlotsInitial is the in-flight ring's size at open.
const fifoSlotsInitial = 16

// growFifo doubles the in-flight ring, up to InflightBatchesMax slots.
func (l *Log) growFifo() {
	grown := make([]inflight, min(2*len(l.fifo.slots), l.cfg.InflightBatchesMax))
	for i := 0; i < l.fifo.count; i++ {
		grown[i] = l.fifo.slots[(l.fifo.head+i)%len(l.fifo.slots)]
	}
	l.fifo.slots, l.fifo.head = grown, 0
}

func (l *Log) entry(seq uint64) *inflight {
	if seq < l.fifo.headSeq || seq >= l.fifo.headSeq+uint64(l.fifo.count) {
		panic(fmt.Sprintf("segment: in-flight append %d outside [%d, %d)", seq, l.fifo.headSeq, l.fifo.headSeq+uint64(l.fifo.count)))
	}
	return &l.fifo.slots[(l.fifo.head+int(seq-l.fifo.headSeq))%len(l.fifo.slots)]
}

func (l *Log) advanceWritten() {
	before := l.writtenEnd
	for l.fifo.written < l.fifo.count {
		e := &l.fifo.slots[(l.fifo.head+l.fifo.written)%len(l.fifo.slots)]
		if !e.written {
			break
		}
		l.writtenEnd = e.end
		l.fifo.written++
	}
	if l.writtenEnd != before && l.hooks.Written != nil && !l.failure.active {
		l.hooks.Written(l.writtenEnd)
	}
	if !l.cfg.EnforceFsync {
		l.advanceDurable()
	}
}

// advanceDurable moves the durable end. A segment's batches are durable up to its
// syncedEnd; the end may only cross into a segment once the one before it is sealed
// durably (log and index synced), which is what lets recovery trust every segment
// but the last without reading it.
func (l *Log) advanceDurable() {
	// Retire appends from the head of the queue: once durable with EnforceFsync;
	// once written without, because then durability is tracked per segment by the
	// save syncs' targets (syncedEnd), and holding entries until the next save
	// would let a high save threshold fill the queue and stall appends.
	for l.fifo.written > 0 {
		e := &l.fifo.slots[l.fifo.head]
		if l.cfg.EnforceFsync && !e.durable && e.end > e.seg.syncedEnd {
			break
		}
		if e.durable {
			e.seg.syncedEnd = max(e.seg.syncedEnd, e.end)
		}
		*e = inflight{}
		l.fifo.head = (l.fifo.head + 1) % len(l.fifo.slots)
		l.fifo.count--
		l.fifo.written--
		l.fifo.headSeq++
	}
	before := l.durableEnd
	for l.durableSeg < len(l.segments) {
		s := l.segments[l.durableSeg]
		if s.state == segmentSealed {
			l.durableEnd = max(l.durableEnd, s.endOffset)
			l.durableSeg++
			continue
		}
		l.durableEnd = max(l.durableEnd, s.syncedEnd)
		break
	}
	if l.durableEnd != before && l.hooks.Durable != nil && !l.failure.active {
		l.hooks.Durable(l.durableEnd)
	}
}
