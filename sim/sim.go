package sim

import (
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"slices"

	"github.com/iggy-shard/iggy-shard/vsr"
	"github.com/iggy-shard/iggy-shard/wire"
)

type node struct {
	id          int
	up          bool
	downUntil   uint64
	crashOnSync bool
	// rots: this node's synced journal entries may rot (see the package doc).
	rots             bool
	incarnationCount uint64
	// held: down across a checkpoint (Options.DownAcrossCheckpoint), at op
	// heldAt of the metadata group.
	held   bool
	heldAt uint64
	// untaggedGroups: its partition stores send untagged group ids
	// (Options.UntaggedGroups).
	untaggedGroups bool
	// meta is the node's metadata replica, part its partition plane.
	meta *metaReplica
	part storeNode
}

// groupCheck is what the checkers know of one consensus group.
type groupCheck struct {
	id uint64
	// committed is the prepare committed at each op: of the metadata group, or of
	// a partition group's first life (before any purge of its topic);
	// laterLives holds a partition group's lives after purges, by purge
	// generation (committedIn): each life numbers its ops from 1 again.
	committed  map[uint64]wire.Uint128
	laterLives map[uint64]map[uint64]wire.Uint128
	// committedRequest is the client and request of each committed op.
	committedRequest map[uint64][2]uint64
	// The metadata group's: each op's outcome as first applied; the op each
	// session's request was executed at; the state digest at each checkpoint
	// op (and the size of the checkpointing replica's client table).
	outcomes       map[uint64]applyOutcome
	applied        map[appliedRequest]uint64
	refused58      map[requestKey]uint64
	stateDigests   map[uint64]uint64
	stateTableLens map[uint64]int
}

// committedIn is the prepares committed at each op of a partition group's life
// after life purges of its topic.
func (gc *groupCheck) committedIn(life uint64) map[uint64]wire.Uint128 {
	if life == 0 {
		return gc.committed
	}
	m, ok := gc.laterLives[life]
	if !ok {
		m = make(map[uint64]wire.Uint128)
		gc.laterLives[life] = m
	}
	return m
}

type cluster struct {
	opts    Options
	rngNet  *rand.Rand
	rngWork *rand.Rand
	rngFail *rand.Rand
	// rngRevoke draws the logouts (revocations.go), apart from the other
	// streams.
	rngRevoke *rand.Rand
	revoke    revocations
	now       uint64
	seq       uint64
	nodes     []*node
	clients   []*client
	packets   []packet
	groups    []*groupCheck
	// meta is groups[metadataGroupIndex].
	meta *groupCheck
	// groupIndex maps a wire group id, without its incarnation tag (wire.GroupKey),
	// to its index in groups.
	groupIndex map[uint64]int

	lossPercent, dupPercent, delayMax int
	corruptPerMille                   int
	blocked                           [][]bool

	result    Result
	healed    bool
	healAt    uint64
	violation error
	// storeToken numbers the sends given to the stores.
	storeToken uint64
	// admitted are the batches the stores admitted (purge.go).
	admitted map[admittedBatch]bool
	// requestToken numbers the requests handed to the metadata planes.
	requestToken uint64
	// heldDone: the node down across a checkpoint came back.
	heldDone bool
	// other is the other incarnation of the group ids (Options.ForeignIncarnation):
	// while the faults last, each cluster's replica frames now and then cross to
	// the other's node of the same id (foreign.go).
	other *cluster
	// paired is the other incarnation, kept after they part (for what a final
	// check reports).
	paired *cluster
	// answersCrossUntil: until when each link's frames (from, to) cross to the
	// other incarnation as answers to a frame of it (foreign.go).
	answersCrossUntil map[[2]int]uint64
}

// Run simulates one cluster.
func Run(opts Options) Result {
	c := newCluster(opts)
	if opts.ForeignIncarnation {
		c.pairForeign()
	}
	func() {
		// An invariant of the core that breaks panics; the run reports it as its
		// violation, with the seed, instead of taking every other seed down.
		defer func() {
			if p := recover(); p != nil {
				c.fail("panic: %v", p)
				if opts.Trace != nil {
					opts.Trace(string(debug.Stack()))
				}
			}
		}()
		c.run()
	}()
	c.result.Violation = c.violation
	c.result.Ticks = c.now
	for _, nd := range c.nodes {
		c.addStoreDrops(nd.part.store)
		if nd.meta.plane != nil {
			c.addDrops(nd.meta.plane.Core())
			c.result.Metadata.Committed = max(c.result.Metadata.Committed, nd.meta.plane.Core().CommitMax())
		}
	}
	for _, gc := range c.groups {
		c.result.Committed += uint64(len(gc.committed))
		for _, committed := range gc.laterLives {
			c.result.Committed += uint64(len(committed))
		}
	}
	for _, nd := range c.nodes {
		for g := range c.groups {
			if core := c.groupCore(nd, g); core != nil && (nd.up || g != metadataGroupIndex) && core.View() > c.result.ViewChanges {
				c.result.ViewChanges = core.View()
			}
		}
	}
	return c.result
}

// newCluster builds the cluster of opts, its nodes booted and its clients made.
func newCluster(opts Options) *cluster {
	c := &cluster{
		opts:       opts,
		rngNet:     rand.New(rand.NewPCG(opts.Seed, 0x5A1AF0E5FACE0001)),
		rngWork:    rand.New(rand.NewPCG(opts.Seed, 0x5A1AF0E5FACE0002)),
		rngFail:    rand.New(rand.NewPCG(opts.Seed, 0x5A1AF0E5FACE0003)),
		rngRevoke:  rand.New(rand.NewPCG(opts.Seed, 0x5A1AF0E5FACE0004)),
		revoke:     revocations{acked: make(map[string]uint64)},
		groupIndex: make(map[uint64]int),
		admitted:   make(map[admittedBatch]bool),
	}
	c.result.Seed = opts.Seed
	ids := []uint64{wire.MetadataGroup}
	for p := 0; p < opts.PartitionGroups; p++ {
		id, ok := wire.PartitionGroup(1, 1, uint32(p))
		if !ok {
			panic("sim: partition group id out of range")
		}
		// Every replica's partition is of the one incarnation (sim/store.go).
		ids = append(ids, wire.IncarnationGroup(id, stateCreatedAtMicros))
	}
	for i, id := range ids {
		c.groups = append(c.groups, &groupCheck{id: id, committed: make(map[uint64]wire.Uint128), laterLives: make(map[uint64]map[uint64]wire.Uint128),
			committedRequest: make(map[uint64][2]uint64), outcomes: make(map[uint64]applyOutcome),
			applied: make(map[appliedRequest]uint64), refused58: make(map[requestKey]uint64), stateDigests: make(map[uint64]uint64), stateTableLens: make(map[uint64]int)})
		c.groupIndex[wire.GroupKey(id)] = i
	}
	c.meta = c.groups[metadataGroupIndex]
	n := opts.Replicas
	total := n + opts.Clients
	c.blocked = make([][]bool, total)
	for i := range c.blocked {
		c.blocked[i] = make([]bool, total)
	}
	if opts.Faults {
		c.lossPercent = c.rngFail.IntN(8)
		c.dupPercent = c.rngFail.IntN(5)
		c.delayMax = 1 + c.rngFail.IntN(8)
		c.corruptPerMille = c.rngFail.IntN(10)
	} else {
		c.delayMax = 1
	}
	rotting := 0
	if opts.Faults {
		rotting = vsr.QuorumReplication(n) - 1
		if opts.broken == brokenRotEverywhere {
			rotting = n
		}
	}
	for i, k := range c.rngFail.Perm(n) {
		nd := &node{id: k, rots: i < rotting, untaggedGroups: opts.UntaggedGroups && k%2 == 1}
		nd.meta = &metaReplica{c: c, node: nd, disk: newDisk(opts.Seed ^ uint64(k+1)*0x9E3779B97F4A7C15),
			rng: rand.New(rand.NewPCG(opts.Seed, uint64(k)^0xE7E0))}
		c.nodes = append(c.nodes, nd)
	}
	slices.SortFunc(c.nodes, func(a, b *node) int { return a.id - b.id })
	for _, nd := range c.nodes {
		c.boot(nd, false)
	}
	for i := 0; i < opts.Clients; i++ {
		c.clients = append(c.clients, &client{id: i, replies: make(map[uint64]clientReply), target: c.rngWork.IntN(n)})
	}
	return c
}

func (c *cluster) trace(format string, args ...any) {
	if c.opts.Trace != nil {
		c.opts.Trace(fmt.Sprintf("%6d ", c.now) + fmt.Sprintf(format, args...))
	}
}

func (c *cluster) fail(format string, args ...any) {
	if c.violation == nil {
		c.violation = fmt.Errorf("seed=%d tick=%d: %s", c.opts.Seed, c.now, fmt.Sprintf(format, args...))
		c.trace("VIOLATION %v", c.violation)
	}
}

// boot starts (or restarts, from its disks) every group of a node.
func (c *cluster) boot(nd *node, restart bool) {
	nd.incarnationCount++
	nd.up = true
	if c.opts.PartitionGroups > 0 && nd.part.store == nil {
		c.openStore(nd, restart)
		if c.violation != nil {
			return
		}
	}
	c.bootMeta(nd, restart)
}

func (c *cluster) done() bool {
	for _, cl := range c.clients {
		if cl.finished < c.opts.RequestsAfterHeal {
			return false
		}
	}
	return c.metadataDone() && c.storesDone()
}

// metadataDone reports whether every replica of the metadata group committed
// everything the cluster committed.
func (c *cluster) metadataDone() bool {
	top := uint64(0)
	for _, nd := range c.nodes {
		top = max(top, nd.meta.plane.Core().CommitMax())
	}
	for _, nd := range c.nodes {
		// The log's every op committed too: an acknowledged op a view change left
		// above the commit point is not done until it is recommitted.
		if core := nd.meta.plane.Core(); core.CommitMin() != top || core.Op() != top || core.Status() != vsr.StatusNormal {
			return false
		}
	}
	return true
}

func (c *cluster) run() {
	for c.violation == nil && !c.advance() {
	}
}

// advance runs one tick of the cluster; it reports whether the run is over.
func (c *cluster) advance() (over bool) {
	c.now++
	if c.opts.Faults && !c.healed {
		c.faultTick()
	}
	if !c.healed && c.now >= c.opts.FaultTicks {
		c.heal()
	}
	c.foreignTick()
	if c.violation != nil {
		return true
	}
	for _, nd := range c.nodes {
		if nd.up {
			nd.meta.tick()
			c.revokeTick(nd)
		}
		if c.storeUp(nd) {
			nd.part.store.Tick()
			nd.part.store.PollIO()
			c.observeStore(nd)
		}
	}
	c.deliver()
	for _, cl := range c.clients {
		c.clientTick(cl)
	}
	if c.healed && c.done() {
		c.result.LivenessTicks = c.now - c.healAt
		c.finalChecks()
		return true
	}
	if c.healed && c.now-c.healAt > c.opts.LivenessTicksMax/2 && c.partitionsStalled() {
		// Half the bound is over twice the longest catch-up seen in runs that
		// finish (1249 ticks in seeds 1..5000): a stall is not waited out.
		c.result.Partitions.Stalled = true
		c.trace("partition groups stalled behind replicas that cannot catch up (%s)", c.describe())
		c.finalChecks()
		return true
	}
	if c.healed && c.now-c.healAt > c.opts.LivenessTicksMax {
		if c.foreignWedged() {
			return true
		}
		if c.partitionsStalled() {
			c.result.Partitions.Stalled = true
			c.trace("partition groups stalled behind replicas that cannot catch up (%s)", c.describe())
			c.finalChecks()
			return true
		}
		for _, nd := range c.nodes {
			core := nd.meta.plane.Core()
			h, ok := core.Header(core.CommitMin() + 1)
			_, body := nd.meta.plane.Body(h.Op, h.Checksum)
			c.trace("DEBUG r%d status %v view %d op %d commit %d/%d checkpoint %d transferring %v next header %v body %v drops %v",
				nd.id, core.Status(), core.View(), core.Op(), core.CommitMin(), core.CommitMax(), core.CheckpointOp(), core.Transferring(), ok, body, core.Drops())
		}
		c.fail("liveness: not done %d ticks after the heal (%s)", c.now-c.healAt, c.describe())
		return true
	}
	return false
}
