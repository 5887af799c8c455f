package sim

import (
	"errors"
	"fmt"
	"slices"
	"unsafe"

	"github.com/iggy-shard/iggy-shard/partition"
	"github.com/iggy-shard/iggy-shard/vsr"
	"github.com/iggy-shard/iggy-shard/wire"
)

type packet struct {
	deliverAt uint64
	seq       uint64
	from, to  int
	frame     []byte
	// damage is a bit flipped on the way: the receiver must refuse the frame, or,
	// where the spec leaves those bytes unchecked at that step, may also drop it
	// unread or take it.
	damage damage
	// foreign: a frame of the other incarnation (foreign.go).
	foreign bool
	// Client traffic is not a replica frame.
	request *clientRequest
	reply   *clientReply
}

func alignedFrame(size int) []byte {
	b := make([]byte, size+wire.HeaderAlignment)
	off := (wire.HeaderAlignment - int(uintptr(unsafe.Pointer(&b[0]))%wire.HeaderAlignment)) % wire.HeaderAlignment
	return b[off : off+size : off+size]
}

func (c *cluster) sendFrame(from int, m *vsr.Message) {
	frame := alignedFrame(wire.HeaderSize + len(m.Body))
	m.Header.Put(frame)
	copy(frame[wire.HeaderSize:], m.Body)
	c.send(packet{from: from, to: int(m.To), frame: frame})
}

func (c *cluster) sendClient(from, to int, p packet) {
	p.from, p.to = from, to
	c.send(p)
}

func (c *cluster) send(p packet) {
	c.result.Messages++
	if len(c.packets) > packetsInFlightMax {
		counts := map[string]int{}
		for _, q := range c.packets {
			if q.frame != nil {
				counts[fmt.Sprintf("%d->%d %v", q.from, q.to, wire.Command(q.frame[wire.CommandFieldOffset]))]++
			}
		}
		c.fail("message storm: %d packets in flight %v (%s)", len(c.packets), counts, c.describe())
		return
	}
	c.cross(p)
	if c.blocked[p.from][p.to] {
		return
	}
	if c.rngNet.IntN(100) < c.lossPercent {
		return
	}
	copies := 1
	if c.rngNet.IntN(100) < c.dupPercent && p.frame != nil {
		// Replica frames only: a client's connection (TCP) delivers a request
		// once or not at all; its retries are its own.
		copies = 2
	}
	if p.frame != nil && c.rngNet.IntN(1000) < c.corruptPerMille {
		p.frame = slices.Clone(p.frame)
		realigned := alignedFrame(len(p.frame))
		copy(realigned, p.frame)
		at := c.rngNet.IntN(len(realigned))
		realigned[at] ^= 1 << c.rngNet.IntN(8)
		// A prepare's identity leaves out the view, which a retransmission
		// restamps: a flipped view is a frame of another view, not a damaged one.
		command := wire.Command(realigned[wire.CommandFieldOffset])
		viewOnly := at >= 52 && at < 56 && (command == wire.CommandPrepare || command == wire.CommandRepairPrepare)
		// State-transfer bodies carry no frame seal: a chunk's artifact is verified
		// whole (and fetched again when it does not match), a manifest by its own
		// trailer when it is used; a stale target is dropped unread.
		chunkBody := at >= wire.HeaderSize && (command == wire.CommandStateChunk || command == wire.CommandStateTransferTarget)
		c.trace("corrupt %d->%d %v at byte %d", p.from, p.to, command, at)
		p.frame, p.damage = realigned, damageMustRefuse
		if viewOnly || chunkBody {
			p.damage = damageMayPass
		}
	}
	for k := 0; k < copies; k++ {
		c.seq++
		p.seq = c.seq
		p.deliverAt = c.now + 1 + uint64(c.rngNet.IntN(c.delayMax))
		c.packets = append(c.packets, p)
	}
}

func (c *cluster) deliver() {
	due := c.packets[:0:0]
	keep := c.packets[:0]
	for _, p := range c.packets {
		if p.deliverAt <= c.now {
			due = append(due, p)
		} else {
			keep = append(keep, p)
		}
	}
	c.packets = keep
	slices.SortFunc(due, func(a, b packet) int {
		if a.deliverAt != b.deliverAt {
			return int(a.deliverAt) - int(b.deliverAt)
		}
		return int(a.seq - b.seq)
	})
	for i := range due {
		p := &due[i]
		if c.blocked[p.from][p.to] {
			continue // a partition cuts what is in flight too
		}
		switch {
		case p.reply != nil:
			c.onReply(p.reply)
		case p.request != nil:
			c.onRequest(c.nodes[p.to], p.request)
		default:
			c.onFrame(c.nodes[p.to], p.from, p.frame, p.damage, p.foreign)
		}
		if c.violation != nil {
			return
		}
	}
}

type damage uint8

const (
	damageNone damage = iota
	damageMustRefuse
	damageMayPass
)

func (c *cluster) onFrame(nd *node, from int, frame []byte, dmg damage, foreign bool) {
	storeUp := c.storeUp(nd)
	if !nd.up && !storeUp {
		return
	}
	if foreign {
		c.result.ForeignDelivered++
	}
	h, err := wire.DecodeReplicaHeader(frame, frameSizeMax)
	if err == nil && int(h.Size) != len(frame) {
		err = fmt.Errorf("size %d of a %d-byte frame", h.Size, len(frame))
	}
	stepped := false
	if err == nil {
		// Any frame from a node is a sign of life of that node for every group of
		// this one: an idle group's primary needs no heartbeats of its own.
		if nd.up {
			nd.meta.plane.NoteLiveness(uint8(from))
		}
		if storeUp {
			nd.part.store.NoteLiveness(uint8(from))
		}
		group, ok := wire.FrameGroup(h)
		index, known := c.groupIndex[wire.GroupKey(group)]
		body := frame[wire.HeaderSize:]
		switch {
		case !ok || !known:
			err = fmt.Errorf("a %v frame of unknown group %#x", h.Command, group)
		case index != metadataGroupIndex:
			if !storeUp {
				return
			}
			// The store checks a prepare's body against its header (the batch
			// binding) before its core sees it.
			k := partitionKey(index)
			core := nd.part.store.SimCore(k)
			otherLives := nd.part.store.IngressDrops()[partition.IngressOtherIncarnation]
			err = nd.part.store.Step(k, h, body)
			stepped = true
			if err != nil && dmg == damageNone && !foreign && c.ofOtherLife(nd, index, group) &&
				nd.part.store.IngressDrops()[partition.IngressOtherIncarnation] == otherLives+1 {
				// A frame of a life of the group that a purge ended here, or that
				// this replica has not reached yet (purge.go): dropped by its tag.
				c.result.Partitions.OtherLifeDropped++
				err = nil
			}
			if c.opts.Trace != nil && (h.Command == wire.CommandPrepare || h.Command == wire.CommandRepairPrepare) {
				c.trace("r%d g%d <- r%d %v op %d: %v (op %d commit %d applied %d)", nd.id, index, from, h.Command, h.Prepare().Op, err, core.Op(), core.CommitMin(), nd.part.store.SimApplied(k))
			}
			switch {
			case dmg == damageMustRefuse && err == nil:
				// While the group waits for its journal file (enforce_fsync) the
				// store queues a frame its checks passed and feeds it to the core
				// later, which refuses it then, out of sight: what a damaged frame
				// could do once taken, the agreement and read-back checks see.
				dmg = damageMayPass
			case dmg == damageNone && errors.Is(err, partition.ErrStampMismatch):
				// A replica refuses a prepare whose stamp does not continue its own
				// position: one that restarted with a log it cannot place, or whose
				// log parted from the primary's. The refusal is the defence (and,
				// with catch-up, the replica then asks for the primary's state);
				// what it defends, the agreement and read-back checks.
				c.result.Partitions.StampRefusals++
				c.trace("r%d g%d refuses an intact %v: %v", nd.id, index, h.Command, err)
				err = nil
			}
		case !nd.up:
			return
		default:
			err = nd.meta.plane.Step(h, body)
			c.checkMonotonic(nd.meta)
		}
	}
	if stepped {
		c.observeStore(nd)
	}
	switch {
	case foreign && err != nil:
		c.foreignRefused(nd, err)
		return
	case dmg == damageMustRefuse && err == nil:
		c.fail("replica %d took a corrupted %v frame", nd.id, h.Command)
		return
	case dmg != damageNone && err != nil:
		c.result.CorruptRefused++
		return
	case err != nil:
		// Only a bug of ours makes a replica refuse an intact frame.
		c.fail("replica %d refused an intact frame: %v", nd.id, err)
		return
	}
}
