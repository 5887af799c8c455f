package ring

import "fmt"

// Table maps in-flight operations to their owners through CQE.UserData,
// without maps and without allocating after NewTable. A user_data value it
// hands out packs a slot index and the slot's generation:
//
//	bit 63      62 ........ 32   31 ......... 0
//	+---------+---------------+----------------+
//	|    0    |  generation   |   slot index   |
//	+---------+---------------+----------------+
//
// The generation grows each time a slot is reused, so a late CQE for a
// released slot (a cancelled operation's straggler) is recognised as stale
// instead of reaching the slot's new owner. Generation 0 is never used, so
// user_data 0 is never a table value. Values with bit 63 set are left to the
// caller for untracked operations (e.g. msg_ring wake-ups): Get rejects them.
//
// Multishot operations: one slot serves all CQEs of one SQE. Keep the slot
// while CQE.More() is true and Release it on the first CQE without it. For
// send_zc, that is the notification CQE (or a failed first CQE without More).
// Release is the caller's call, not the table's, because only the caller
// knows when the owner is done (see Complete for the common rule).
type Table[T any] struct {
	slots    []tableSlot[T]
	freeList []uint32 // stack of free slot indexes
}

type tableSlot[T any] struct {
	generation uint32
	live       bool
	value      T
}

const (
	// UserDataUntracked marks user_data values that are not Table entries.
	UserDataUntracked uint64 = 1 << 63
	generationMask    uint32 = 1<<31 - 1
)

// NewTable creates a table of capacity slots, all free.
func NewTable[T any](capacity uint32) *Table[T] {
	if capacity == 0 || capacity > 1<<31 {
		panic(fmt.Sprintf("ring: table capacity %d out of range 1..2^31", capacity))
	}
	t := &Table[T]{slots: make([]tableSlot[T], capacity), freeList: make([]uint32, capacity)}
	for i := range t.freeList {
		// Pop order hands out slot 0 first: easier to read in traces.
		t.freeList[i] = capacity - 1 - uint32(i)
	}
	return t
}

// Add stores value in a free slot and returns the user_data naming it, or
// false when every slot is in use (the caller must wait for completions).
func (t *Table[T]) Add(value T) (userData uint64, ok bool) {
	n := len(t.freeList)
	if n == 0 {
		return 0, false
	}
	index := t.freeList[n-1]
	t.freeList = t.freeList[:n-1]
	slot := &t.slots[index]
	slot.generation = (slot.generation + 1) & generationMask
	if slot.generation == 0 {
		slot.generation = 1
	}
	slot.live = true
	slot.value = value
	return uint64(slot.generation)<<32 | uint64(index), true
}

// Get returns the live entry userData names, or false for a value this table
// did not hand out, one already released, or an untracked one.
func (t *Table[T]) Get(userData uint64) (*T, bool) {
	slot := t.lookup(userData)
	if slot == nil {
		return nil, false
	}
	return &slot.value, true
}

// Release frees the slot userData names; it returns false if the entry was
// not live (stale or foreign user_data), leaving the table unchanged.
func (t *Table[T]) Release(userData uint64) bool {
	slot := t.lookup(userData)
	if slot == nil {
		return false
	}
	var zero T
	slot.value = zero // drop references for the GC
	slot.live = false
	t.freeList = append(t.freeList, uint32(userData))
	return true
}

// Complete looks up the owner of cqe and releases its slot when cqe is the
// operation's last CQE (no CQEFMore). The returned pointer stays valid until
// the slot is handed out again by a later Add, so use it before adding.
func (t *Table[T]) Complete(cqe *CQE) (value *T, last bool, ok bool) {
	slot := t.lookup(cqe.UserData)
	if slot == nil {
		return nil, false, false
	}
	if cqe.More() {
		return &slot.value, false, true
	}
	slot.live = false
	t.freeList = append(t.freeList, uint32(cqe.UserData))
	return &slot.value, true, true
}

// InUse returns the number of live entries.
func (t *Table[T]) InUse() int { return len(t.slots) - len(t.freeList) }

func (t *Table[T]) lookup(userData uint64) *tableSlot[T] {
	if userData&UserDataUntracked != 0 {
		return nil
	}
	index := uint32(userData)
	if uint64(index) >= uint64(len(t.slots)) {
		return nil
	}
	slot := &t.slots[index]
	if !slot.live || slot.generation != uint32(userData>>32) {
		return nil
	}
	return slot
}
