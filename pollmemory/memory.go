// Package pollmemory bounds, per shard, the bytes the polls it serves hold at
// once, and lends them read buffers it keeps for the next polls.
package pollmemory

import (
	"math/bits"
	"time"
	"unsafe"
)

// Memory bounds the bytes the polls an owner shard serves hold at once, and
// lends them read buffers it keeps for the next polls instead of letting each poll
// keep a buffer of its own. A poll's read buffer is held from its read until its
// reply has been sent (the reply refers to the stored bytes in it, no copy), on the
// connection's shard, which gives it back (GiveBack, on the owner shard).
//
// The memory it holds is the buffers lent (to polls whose replies are not sent yet)
// and the free ones (given back, kept for the next read of their size class), and
//
//	lentBytes + freeBytes <= budgetBytes
//
// always holds. A poll is admitted when its read, whatever its size, will fit:
// reservationBytes is the most a read can take (the server's read bound plus one
// batch, which is at most a frame), and the admitted polls not planned yet (whose size is
// not known) each count that much until their read is planned (lendBuffer, usually
// at once):
//
//	lentBytes + unplannedPolls*reservationBytes <= budgetBytes
//
// Free buffers are dropped (to the garbage collector), largest first, when a lent
// buffer needs their room, and by DropIdle once they have lain idle a whole
// interval: a shard that served one burst of large polls does not keep the burst's
// buffers (up to the budget) for the rest of its life. A poll that is not admitted waits, first come first
// served, behind the others (as frames wait for arena buffers); each buffer given
// back lets waiting ones in (StartWaiting). P is what stands for a poll. So however many polls arrive, and however large, a
// shard's polls hold at most budgetBytes (config.Config.PollMemoryBytesMax) and every
// one is answered in turn. One shard owns one; it is touched on that shard only.
type Memory[P any] struct {
	budgetBytes      int64
	reservationBytes int64
	lentBytes        int64
	freeBytes        int64
	unplannedPolls   int64

	free map[int]*freeBuffers // idle buffers by size class
	lent map[*byte]int        // lent buffers by their first byte: their size class

	waiting  []P  // polls waiting for room, oldest first
	starting bool // StartWaiting is running (a poll it starts may finish at once)

	// Lend is a read's segment.Polled.Alloc (lendBuffer), bound once so that a
	// poll allocates no closure.
	Lend func(n int) []byte
}

// BytesMaxDefault is a shard's default poll budget: at least two polls of the
// server's 32 MiB reads at once with the default 64 MiB frames, or thousands of
// small ones.
const BytesMaxDefault = 256 << 20

// New is a shard's poll memory of budgetBytes (0: BytesMaxDefault), for reads of
// at most readBytesMax each.
func New[P any](budgetBytes, readBytesMax int64) *Memory[P] {
	m := &Memory[P]{
		reservationBytes: int64(bufferClassBytes(int(readBytesMax))),
		free:             make(map[int]*freeBuffers),
		lent:             make(map[*byte]int),
	}
	if budgetBytes == 0 {
		budgetBytes = BytesMaxDefault
	}
	// One poll at a time must always fit, or polls would wait for ever.
	m.budgetBytes = max(budgetBytes, m.reservationBytes)
	m.Lend = m.lendBuffer
	return m
}

// Admit counts p in and reports true, or puts it in line to wait (false). Polls
// already waiting go first.
func (m *Memory[P]) Admit(p P) bool {
	if !m.admit(false) {
		m.waiting = append(m.waiting, p)
		return false
	}
	return true
}

// StartWaiting starts the waiting polls, oldest first, while they fit. A poll it
// starts may finish at once and give its room back (GiveBack, Unplanned, and a
// call of StartWaiting in start): the loop goes on, rather than a call in a call.
func (m *Memory[P]) StartWaiting(start func(P)) {
	if m.starting {
		return
	}
	m.starting = true
	for len(m.waiting) > 0 && m.admit(true) {
		p := m.waiting[0]
		var none P
		m.waiting[0] = none
		m.waiting = m.waiting[1:]
		start(p)
	}
	if len(m.waiting) == 0 {
		m.waiting = m.waiting[:0:0] // let the array go once the queue drains
	}
	m.starting = false
}

// admit counts one more poll in, or reports false (it waits). Polls already waiting
// go first.
func (m *Memory[P]) admit(waitingFirst bool) bool {
	if !waitingFirst && len(m.waiting) > 0 {
		return false
	}
	if m.lentBytes+(m.unplannedPolls+1)*m.reservationBytes > m.budgetBytes {
		return false
	}
	m.unplannedPolls++
	return true
}

// lendBuffer is a read's segment.Polled.Alloc, called once the read is planned: the
// poll's reservation becomes a buffer of its size class, an idle one when there is
// one, and free buffers are dropped while the memory held exceeds the budget.
func (m *Memory[P]) lendBuffer(n int) []byte {
	if m.unplannedPolls == 0 {
		panic("pollmemory: a poll read planned without a reservation")
	}
	class := bufferClassBytes(n)
	if int64(class) > m.reservationBytes {
		panic("pollmemory: a poll read larger than its reservation")
	}
	m.unplannedPolls--
	var b []byte
	if f := m.free[class]; f != nil && len(f.bufs) > 0 {
		b = f.pop()
		m.freeBytes -= int64(class)
	} else {
		b = make([]byte, class)
	}
	m.lentBytes += int64(class)
	m.lent[unsafe.SliceData(b)] = class
	for m.lentBytes+m.freeBytes > m.budgetBytes {
		m.dropFree() // admit left room for the lent: there is a free buffer
	}
	return b
}

// dropFree lets the garbage collector have one idle buffer, of the largest class.
func (m *Memory[P]) dropFree() {
	largest := 0
	for class, f := range m.free {
		if len(f.bufs) > 0 && class > largest {
			largest = class
		}
	}
	m.free[largest].pop()
	m.freeBytes -= int64(largest)
}

// DropIdleInterval is how often a shard should call DropIdle: a free buffer is
// then dropped between one and two intervals after it was last given back.
const DropIdleInterval = 10 * time.Second

// DropIdle lets the garbage collector have the free buffers that no read took
// since the previous DropIdle, and returns their bytes. Its owner calls it every
// DropIdleInterval or so (it has no clock): buffers in steady use stay, those a
// burst needed beyond them go.
func (m *Memory[P]) DropIdle() (droppedBytes int64) {
	for class, f := range m.free {
		idle := f.untaken
		clear(f.bufs[:idle])
		f.bufs = f.bufs[:copy(f.bufs, f.bufs[idle:])]
		clear(f.bufs[len(f.bufs) : len(f.bufs)+idle])
		droppedBytes += int64(idle) * int64(class)
		if len(f.bufs) == 0 {
			delete(m.free, class) // the class comes back with its next buffer
			continue
		}
		f.untaken = len(f.bufs)
	}
	m.freeBytes -= droppedBytes
	return droppedBytes
}

// freeBuffers are the free buffers of one size class, a stack (the buffer given
// back last is lent first). The untaken at its bottom have not been lent since the
// previous DropIdle.
type freeBuffers struct {
	bufs    [][]byte
	untaken int
}

func (f *freeBuffers) pop() []byte {
	b := f.bufs[len(f.bufs)-1]
	f.bufs[len(f.bufs)-1] = nil
	f.bufs = f.bufs[:len(f.bufs)-1]
	f.untaken = min(f.untaken, len(f.bufs))
	return b
}

// FreeBytes is the bytes of the free buffers kept for the next polls.
func (m *Memory[P]) FreeBytes() int64 { return m.freeBytes }

// Unplanned gives back the reservation of a poll whose read took no buffer (nothing
// to read, or a failure before it was planned).
func (m *Memory[P]) Unplanned() { m.unplannedPolls-- }

// GiveBack takes back a lent buffer, by its first byte, to keep for the next read.
func (m *Memory[P]) GiveBack(first *byte) {
	class, ok := m.lent[first]
	if !ok {
		panic("pollmemory: a poll buffer given back that was not lent")
	}
	delete(m.lent, first)
	m.lentBytes -= int64(class)
	f := m.free[class]
	if f == nil {
		f = &freeBuffers{}
		m.free[class] = f
	}
	f.bufs = append(f.bufs, unsafe.Slice(first, class))
	m.freeBytes += int64(class)
}

// bufferClassBytes is the size of the buffer lent for a read of n bytes: n
// rounded up to an eighth of its power of two (at least 64 KiB), so a buffer given
// back fits the next read of about its size and wastes at most an eighth.
func bufferClassBytes(n int) int {
	const minBytes = 64 << 10
	if n <= minBytes {
		return minBytes
	}
	step := 1 << (bits.Len(uint(n-1)) - 3)
	return (n + step - 1) / step * step
}
