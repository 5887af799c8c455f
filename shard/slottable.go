package shard

// slotTable holds one plane's connections of a shard by slot, the slot a ConnID
// names: a freed slot, and its struct (with what it keeps for reuse, such as a
// framer), goes to the next connection, under a new generation.
type slotTable[T any] struct {
	items []*T // by slot; a free slot's struct waits for reuse
	free  []uint32
	live  int // slots taken and not put back
}

// take returns a free slot and its struct, making the struct with fresh when no
// freed one is left.
func (t *slotTable[T]) take(fresh func() *T) (uint32, *T) {
	t.live++
	if n := len(t.free); n > 0 {
		slot := t.free[n-1]
		t.free = t.free[:n-1]
		return slot, t.items[slot]
	}
	t.items = append(t.items, fresh())
	slot := len(t.items) - 1
	return uint32(slot), t.items[slot]
}

// put frees a slot taken.
func (t *slotTable[T]) put(slot uint32) {
	t.free = append(t.free, slot)
	t.live--
}

// at returns the struct of slot, or nil beyond the table.
func (t *slotTable[T]) at(slot uint32) *T {
	if int(slot) >= len(t.items) {
		return nil
	}
	return t.items[slot]
}
