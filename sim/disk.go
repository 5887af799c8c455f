package sim

import (
	"math/rand/v2"
	"slices"

	"github.com/iggy-shard/iggy-shard/vsr"
	"github.com/iggy-shard/iggy-shard/wire"
)

// disk is one replica's metadata journal, superblock and checkpoint, with the
// page-cache/platter model
// of segment.SimDisk: a write changes what reads see (the cache) and becomes what a
// crash keeps (durable) only at the next sync. A crash keeps each unsynced write,
// drops it, or tears it (the entry's bytes are damaged, so recovery finds no valid
// prepare there), from the disk's own random stream. Discards and truncations are
// durable at once: they only give up entries the log no longer follows.
//
// The journal is slotted by op, as the reference's journal.wal is indexed by op, so
// that repair can fill an op below the head.
type disk struct {
	rng     *rand.Rand
	entries map[uint64]*diskEntry
	pending []uint64

	superCache     vsr.DurableState
	superDurable   vsr.DurableState
	headersCache   []wire.PrepareHeader
	headersDurable []wire.PrepareHeader
	superPending   bool
	writes, syncs  int

	// snapshot is the last checkpoint (metaplane's snapshot), written whole and
	// synced (temp file, fsync, rename) before it counts; snapshotOp its op.
	snapshot   []byte
	snapshotOp uint64
}

// checkpoint makes a snapshot of op the one a restart resumes from, and cuts the
// journal below op (its entry at op stays: the core anchors the log on it), as
// the server replaces its journal by the entries from the snapshot's op on.
func (d *disk) checkpoint(op uint64, snapshot []byte) {
	d.snapshot, d.snapshotOp = snapshot, op
	for k := range d.entries {
		if k < op {
			delete(d.entries, k)
		}
	}
}

type diskEntry struct {
	cache   []byte
	durable []byte
}

func newDisk(seed uint64) *disk {
	return &disk{rng: rand.New(rand.NewPCG(seed, seed^0xD15C)), entries: make(map[uint64]*diskEntry)}
}

func (d *disk) write(h *wire.PrepareHeader, body []byte) {
	e := d.entries[h.Op]
	if e == nil {
		e = &diskEntry{}
		d.entries[h.Op] = e
	}
	b := make([]byte, wire.HeaderSize+len(body))
	h.Put(b)
	copy(b[wire.HeaderSize:], body)
	e.cache = b
	d.pending = append(d.pending, h.Op)
	d.writes++
}

func (d *disk) discard(op uint64) { delete(d.entries, op) }

func (d *disk) truncateAbove(op uint64) {
	for k := range d.entries {
		if k > op {
			delete(d.entries, k)
		}
	}
}

func (d *disk) setState(s vsr.DurableState, viewHeaders []wire.PrepareHeader) {
	d.superCache = s
	if viewHeaders != nil {
		d.headersCache = slices.Clone(viewHeaders)
	}
	d.superPending = true
}

func (d *disk) sync() {
	for _, op := range d.pending {
		if e := d.entries[op]; e != nil {
			e.durable = e.cache
		}
	}
	d.pending = d.pending[:0]
	if d.superPending {
		d.superDurable = d.superCache
		d.headersDurable = d.headersCache
		d.superPending = false
	}
	d.syncs++
}

// crash loses power: what was not synced is kept, lost or torn.
func (d *disk) crash() {
	for _, op := range d.pending {
		e := d.entries[op]
		if e == nil {
			continue
		}
		switch d.rng.IntN(3) {
		case 0:
			e.durable = e.cache
		case 1:
		case 2:
			torn := append([]byte(nil), e.cache...)
			at := d.rng.IntN(len(torn))
			torn[at] ^= 1 + byte(d.rng.IntN(255))
			e.durable = torn
		}
	}
	d.pending = d.pending[:0]
	// The superblock is written whole or not at all (two slots, newest valid wins).
	if d.superPending && d.rng.IntN(2) == 0 {
		d.superDurable = d.superCache
		d.headersDurable = d.headersCache
	}
	d.superPending = false
	d.headersCache = d.headersDurable
	for op, e := range d.entries {
		if e.durable == nil {
			delete(d.entries, op)
		} else {
			e.cache = e.durable
		}
	}
	d.superCache = d.superDurable
}

// Body is the core's read side (vsr.Storage): the cache, as a journal read sees it.
func (d *disk) Body(op uint64, identity wire.Uint128) ([]byte, bool) {
	e := d.entries[op]
	if e == nil || len(e.cache) < wire.HeaderSize {
		return nil, false
	}
	var h wire.PrepareHeader
	copy(wire.HeaderBytes(&h)[:], e.cache)
	if h.Checksum != identity || h.Op != op {
		return nil, false
	}
	return e.cache[wire.HeaderSize:], true
}

// rot flips a bit in up to count intact synced entries at or below opMax, sparing
// the highest intact entry (so that the recovered head stays where it was), as
// sectors rot at rest or a misdirected write lands: the damage a restart must
// notice by checksum and repair from peers. It returns the ops it damaged. The flip
// spares a prepare's view field: the identity leaves the view out (a
// retransmission restamps it), so no checksum can see it, and nothing trusts a
// journaled view.
func (d *disk) rot(opMax uint64, count int) []uint64 {
	ops := make([]uint64, 0, len(d.entries))
	head := uint64(0)
	for op, e := range d.entries {
		if _, ok := intactEntry(op, e.durable); ok {
			head = max(head, op)
			if op <= opMax {
				ops = append(ops, op)
			}
		}
	}
	ops = slices.DeleteFunc(ops, func(op uint64) bool { return op == head })
	slices.Sort(ops)
	var damaged []uint64
	for len(damaged) < count && len(ops) > 0 {
		i := d.rng.IntN(len(ops))
		e := d.entries[ops[i]]
		rotten := slices.Clone(e.durable)
		at := d.rng.IntN(len(rotten))
		for at >= viewFieldOffset && at < viewFieldOffset+4 {
			at = d.rng.IntN(len(rotten))
		}
		rotten[at] ^= 1 << d.rng.IntN(8)
		e.durable, e.cache = rotten, rotten
		damaged = append(damaged, ops[i])
		ops = slices.Delete(ops, i, i+1)
	}
	return damaged
}

// intactEntry reports whether a journal entry holds the prepare of op, its identity
// and body seal intact.
func intactEntry(op uint64, entry []byte) (wire.PrepareHeader, bool) {
	var h wire.PrepareHeader
	if len(entry) < wire.HeaderSize {
		return h, false
	}
	copy(wire.HeaderBytes(&h)[:], entry)
	sealed := h.ChecksumBody == wire.BodyChecksum(entry[wire.HeaderSize:])
	return h, h.Op == op && h.IdentityValid() && int(h.Size) == len(entry) && sealed
}

// viewFieldOffset is where a prepare header's u32 view lies.
const viewFieldOffset = 52

// recover scans the durable image as a restart would: the superblock, and every
// entry whose identity and body seal hold, in op order. It returns the ops whose
// entries it found damaged and dropped.
func (d *disk) recover() (state vsr.DurableState, viewHeaders []wire.PrepareHeader, entries []vsr.Write, dropped []uint64) {
	ops := make([]uint64, 0, len(d.entries))
	for op := range d.entries {
		ops = append(ops, op)
	}
	slices.Sort(ops)
	for _, op := range ops {
		entry := d.entries[op].durable
		h, ok := intactEntry(op, entry)
		if !ok {
			// Torn or rotten: recovery finds no prepare here.
			delete(d.entries, op)
			dropped = append(dropped, op)
			continue
		}
		entries = append(entries, vsr.Write{Header: h, Body: entry[wire.HeaderSize:]})
	}
	return d.superDurable, slices.Clone(d.headersDurable), entries, dropped
}
