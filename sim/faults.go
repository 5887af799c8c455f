package sim

import (
	"github.com/iggy-shard/iggy-shard/metaplane"
	"github.com/iggy-shard/iggy-shard/vsr"
)

func (c *cluster) crash(nd *node) {
	nd.up = false
	mr := nd.meta
	// Mid-Ready too: what the Ready had not done never happens, and nothing the
	// node would still answer leaves it.
	mr.plane.Stop()
	mr.disk.crash()
	mr.lastDurableView = mr.disk.superDurable.View
	if c.opts.PartitionGroups > 0 && c.opts.CatchUp && c.storesCrash() {
		c.crashStore(nd)
	}
	nd.crashOnSync = false
	nd.downUntil = c.now + 20 + uint64(c.rngFail.IntN(400))
	if c.rngFail.IntN(6) == 0 {
		// A long absence: the cluster moves on without it, and it catches up by
		// repair or state transfer when it returns.
		nd.downUntil += 1000 + uint64(c.rngFail.IntN(1500))
	}
	c.result.Crashes++
	c.trace("r%d crash", nd.id)
}

func (c *cluster) faultTick() {
	n := c.opts.Replicas
	r := c.rngFail
	for _, nd := range c.nodes {
		if !nd.up && !nd.held && c.now >= nd.downUntil && r.IntN(10) == 0 {
			c.boot(nd, true)
		}
	}
	c.holdAcrossCheckpoint()
	if r.IntN(600) == 0 {
		nd := c.nodes[r.IntN(n)]
		if c.mayCrash(nd) {
			if r.IntN(2) == 0 {
				nd.crashOnSync = true // at its next sync, losing that Ready's writes
			} else {
				c.crash(nd)
			}
		}
	}
	if r.IntN(400) == 0 {
		c.setPartition(r.IntN(5))
	}
}

// setPartition: 0 heals, 1 a symmetric split, 2 one-way cuts, 3 one node isolated,
// 4 one node isolated from everyone but clients.
func (c *cluster) setPartition(kind int) {
	n := c.opts.Replicas
	total := len(c.blocked)
	for i := range c.blocked {
		clear(c.blocked[i])
	}
	r := c.rngFail
	switch kind {
	case 1:
		side := make([]bool, n)
		for i := range side {
			side[i] = r.IntN(2) == 0
		}
		for a := 0; a < n; a++ {
			for b := 0; b < n; b++ {
				if side[a] != side[b] {
					c.blocked[a][b] = true
				}
			}
		}
	case 2:
		for k := 0; k < n; k++ {
			a, b := r.IntN(n), r.IntN(n)
			c.blocked[a][b] = true
		}
	case 3, 4:
		x := r.IntN(n)
		limit := n
		if kind == 3 {
			limit = total
		}
		for b := 0; b < limit; b++ {
			if b != x {
				c.blocked[x][b], c.blocked[b][x] = true, true
			}
		}
	}
	c.trace("partition kind %d", kind)
}

func (c *cluster) heal() {
	c.healed = true
	c.healAt = c.now
	c.lossPercent, c.dupPercent = 0, 0
	for i := range c.blocked {
		clear(c.blocked[i])
	}
	for _, nd := range c.nodes {
		nd.crashOnSync = false
		nd.held = false
		if !nd.up {
			c.boot(nd, true)
		}
	}
	c.trace("heal")
}

// holdAcrossCheckpoint takes one node down at a third of the fault period
// (Options.DownAcrossCheckpoint), and brings it back once the others committed
// more than a header window and a checkpoint interval past where it stopped: they
// took a checkpoint and cut their journals meanwhile, so it catches up by state
// transfer. Every long seed does this, not by luck of its faults:
//   - the node held is a rotting one: every op committed has a copy on a node that
//     never rots and is not held (QuorumReplication copies, at most
//     QuorumReplication-1 of them on rotting nodes), so the others never need the
//     held node to get past an op, and it is held until they are past it;
//   - while it is down no fault takes the others below a quorum (mayCrash), so
//     they keep committing; only the heal ends the hold early.
func (c *cluster) holdAcrossCheckpoint() {
	if !c.opts.DownAcrossCheckpoint || c.heldDone || c.opts.Replicas < 3 {
		return
	}
	if nd := c.heldNode(); nd != nil {
		top := uint64(0)
		for _, other := range c.nodes {
			if other.up {
				top = max(top, other.meta.plane.Core().CommitMax())
			}
		}
		if top <= nd.heldAt+uint64(metaplane.JournalSlotsMin)+uint64(metaplane.CheckpointIntervalOpsMax(metaplane.JournalSlotsMin)) {
			return
		}
		nd.held, c.heldDone = false, true
		for _, other := range c.nodes {
			if other.up && other.meta.plane.SnapshotOp() > nd.heldAt {
				c.result.DownAcrossCheckpoint = true
			}
		}
		c.trace("r%d back after the cluster went from op %d to %d", nd.id, nd.heldAt, top)
		c.boot(nd, true)
		return
	}
	if c.now < c.opts.FaultTicks/3 {
		return
	}
	nd := c.nodes[c.rngFail.IntN(len(c.nodes))]
	for _, r := range c.nodes {
		if r.rots {
			nd = r
			break
		}
	}
	if !nd.up {
		return // it reboots on its own
	}
	nd.heldAt = nd.meta.plane.Core().CommitMax()
	c.crash(nd)
	nd.held = true
	for _, other := range c.nodes {
		other.crashOnSync = false // a crash to come would take the others below a quorum
	}
	c.trace("r%d down across a checkpoint from op %d", nd.id, nd.heldAt)
}

// heldNode is the node held down across a checkpoint, nil if none is.
func (c *cluster) heldNode() *node {
	for _, nd := range c.nodes {
		if nd.held {
			return nd
		}
	}
	return nil
}

// mayCrash reports whether a fault may take node nd down now: any time, but
// while a node is held down across a checkpoint, only if a quorum stays up.
func (c *cluster) mayCrash(nd *node) bool {
	if !nd.up {
		return false
	}
	if c.heldNode() == nil {
		return true
	}
	up := 0
	for _, other := range c.nodes {
		if other.up && !other.crashOnSync {
			up++
		}
	}
	return up-1 >= vsr.QuorumViewChange(c.opts.Replicas)
}
