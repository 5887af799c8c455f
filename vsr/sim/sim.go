// Package sim runs a whole cluster in one goroutine from one seed: on every node the
// real vsr.Core of the metadata group and a few partition groups (in half the seeds
// the real partition plane, a partition.Store per node), over one simulated network
// and simulated disks, with seeded clients that retry as the SDKs do. Every run is
// checked, per group (the real partition plane's own checks are below, "What is
// modelled"):
//
//   - agreement: no two replicas commit different prepares at one op number (checked
//     at every apply, and as full log equality at the end), and every replica's
//     apply of an op gives the same reply bytes;
//   - durability: every op a client saw acknowledged is in every replica's log at
//     the op its reply named;
//   - exactly once (metadata group): a retried request gets the byte-identical reply
//     of its one application; partition sends are at-least-once, so there only
//     agreement and durability are checked;
//   - equal states: at the end every replica's state is the same bytes (the
//     metadata snapshot of metadata.State.AppendSnapshot and the client table's
//     ICT2; the partition stand-in's artifacts);
//   - monotonicity: view and commit point never go back on a replica (the durable
//     view not even across restarts);
//   - liveness: once the faults heal, every client finishes and every replica of
//     every group catches up within Options.LivenessTicksMax.
//
// # What is modelled
//
// The metadata group applies the real state machine: metadata.State and the
// replicated vsr.ClientTable, as server/metaplane.go applies them (Register commits
// a session whose epoch is its op, other ops Apply and cache their reply frame,
// Logout removes the session), with admission (ClientTable.Preflight,
// metadata.State.Admit) at the primary. Clients log in as the root user (at the
// primary, or at a backup that forwards the login) and write streams, topics,
// partitions, consumer groups and users (CreateUser proposals carry a precomputed
// argon2id hash, as the server proposes them) from small name pools, so that many
// writes commit as refusals (name taken, not found); they log out now and then.
// State transfer carries the real metadata snapshot and client table as the ISM1
// artifacts, each behind a head naming the op, identity and timestamp it was taken
// at.
//
// Every node also runs Options.PartitionGroups (one to three) partition groups, of
// ids wire.PartitionGroup(1, 1, p), all over the same links: a frame goes to the
// group its header names, and any intact frame from a node counts, through
// NoteLiveness, as a sign of life of that node for every group there, as the
// server's replica connections do. They run one of two ways (Options.RealPartitions;
// PartitionCatchUp decides which seeds run which):
//
//   - the real partition plane: every node hosts a partition.Store
//     (NewReplicatedStore, this node's replica of every group) over segment.SimDisk
//     storage, one disk per partition directory, through the store's
//     StorageProvider. A client's send goes through Store.Send on the node it
//     reached (a real batch, stamped in place; the store answers 58 unless it
//     leads), its consumer-offset store through Store.StoreConsumerOffset
//     (AckQuorum); the store's replica-plane frames go out through its Outbox, the
//     peers' come in through Store.Step; every tick is a Store.Tick and a
//     Store.PollIO, which runs the disks' completions and with them the sends'
//     SendDone, the only acknowledgement a client gets. The checkers see the groups
//     from outside (partition/simhooks.go: the cores' committed headers, view,
//     status and commit points, the applied op) and read the logs back through
//     Store.Poll: no two replicas commit different prepares at one op number; every
//     acknowledged batch is, byte for byte as the primary stamped it, at its
//     acknowledged offset in the log of every replica that applied it; a client's
//     acknowledged sends are at increasing offsets; the replicas' logs are prefixes
//     of one another and those that applied everything hold the same consumer
//     offsets; views and commit points never go back; and after the heal the
//     groups catch up (below, for what the plane cannot do yet).
//   - the stand-in (groupMachine: a log summary and consumer offsets, bodies sealed
//     with a trailing checksum as message batches are), driven like the metadata
//     group: its own journal on the simulated disk, checkpoints, state transfer.
//     It keeps whole-node crashes, rot and state transfer of partition groups
//     covered.
//
// Clients send to partition groups and store consumer offsets at least once: a
// retry may append twice.
//
// With the partition plane's catch-up (PartitionCatchUp, the default), every seed
// runs the real stores. A crash of a node whose topic enforces fsync takes its
// stores down too (storesCrash): they reopen from their crashed disks with
// Store.Open, rejoin their groups, and every replica of every group must catch up
// (repair from a peer's retained ops, or state transfer of the segments) and agree.
// Without fsync enforced an acknowledgement promises no durability (a send is
// acknowledged once written, a PrepareOk promises memory), so there a crash takes
// down the metadata plane only. A replica refusing an intact prepare whose stamp
// does not continue its log is counted, not a failure: it is how a replica that
// cannot place its log finds out, and asks for its primary's state.
//
// The network loses, delays, reorders and duplicates frames, flips bits (the
// receiver must refuse a damaged frame), and partitions nodes (symmetric splits,
// one-way cuts, an isolated node). Nodes crash (all their groups at once) and come
// back, some after a long absence (repair, or state transfer once the cluster's
// journals moved past them).
//
// Disks follow segment.SimDisk's page-cache/platter model: a write is durable only
// at the next sync; a crash keeps, loses or tears each unsynced write; a checkpoint
// (snapshot and client table) is written whole. On a restart, synced journal
// entries may also rot (a flipped bit), on at most QuorumReplication-1 nodes of the
// cluster (chosen per seed) and only in entries of ops that node knows committed
// (at or below its durable commit point or its checkpoint) other than its highest
// entry. Why that much and no more:
//
//   - an op commits once QuorumReplication replicas made it durable, so with at most
//     QuorumReplication-1 rotting nodes one of those copies never rots: repair (or a
//     state transfer, once that replica's journal moved past the op) always finds
//     an intact one;
//   - the core cannot be told that an op it once held is now unreadable
//     (vsr.CoreRecovered lists intact entries only), so it would nack an op above
//     its commit point that rotted, and a view change could then truncate a
//     committed op; ops at or below the recovered commit point are never nacked;
//   - sparing the highest entry keeps the recovered head, and with it the commit
//     point the core recovers (it is capped by the head);
//   - groups of one and two replicas commit on one replica (QuorumReplication is 1),
//     so nothing could repair them: they get no rot.
//
// Recovery must notice every rotten entry by its checksums (checked), and the
// replica must repair it from its peers before it applies past it.
//
// # What is not
//
// The superblock (view, log view, commit point, view headers) and checkpoints never
// rot (they are written in redundant copies); an entry rotting above a node's
// commit point, which the core cannot report, is not modelled; nor are failed
// writes or syncs and full disks (segment.SimDisk can inject them: the server stops
// on them, which the crash model covers). The partition groups are fixed: the
// effects of metadata writes (partitions created or deleted) are not carried out;
// polls run only in the final read-back, and offsets are stored only at AckQuorum.
// The metadata plane's disk I/O is synchronous (a
// Ready's writes are all durable at its sync), the clock ticks alike everywhere,
// requests come one at a time per client, and the server's sessions, shards and
// connections are not in it: the simulator drives the cores and state machines
// directly.
//
// Clients retry an unanswered request after 60 ticks (clientRetryTick) at the next
// node, as an SDK walks its list of nodes; a backup drops a request it cannot
// serve (it does not redirect), except a login, which it forwards.
//
// A run is a pure function of its seed: a failure prints the seed, and
// `go test ./vsr/sim -run TestSim -seed N` replays it exactly.
package sim

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"unsafe"

	"github.com/iggy-shard/iggy-shard/partition"
	"github.com/iggy-shard/iggy-shard/vsr"
	"github.com/iggy-shard/iggy-shard/wire"
)

// Options shape one run. Config derives them from a seed.
type Options struct {
	Seed     uint64
	Replicas int
	Clients  int
	// PartitionGroups is how many partition groups every node runs besides the
	// metadata group.
	PartitionGroups int
	// FaultTicks is how long faults are injected; then they heal.
	FaultTicks uint64
	// LivenessTicksMax bounds the ticks from the heal until every client has
	// finished RequestsAfterHeal more requests and every replica caught up.
	LivenessTicksMax  uint64
	RequestsAfterHeal int
	Faults            bool
	// JournalSlots is each replica's journal window: a small one makes replicas
	// that were away long catch up by state transfer.
	JournalSlots int
	Mutation     vsr.Mutation
	// RealPartitions: every node hosts a real partition.Store (the partition plane:
	// Send, StoreConsumerOffset, Step, Tick, PollIO and Poll, over segment.SimDisk
	// storage) for the partition groups, instead of the stand-in groupMachine.
	RealPartitions bool
	// CatchUp: with RealPartitions, the partition plane is expected to catch a
	// partition up (PartitionCatchUp): a crash takes the node's stores down too (and
	// they reopen from their crashed disks), and every replica of every partition
	// group must catch up. Without it a crash takes down only the metadata plane,
	// the stores running on, and what a replica that fell behind causes is
	// tolerated (see the package doc).
	CatchUp bool
	// broken breaks a rule of the simulated server instead of the core's, so that
	// tests can show the checkers catch it.
	broken brokenRule
	// Trace, when set, receives one line per event.
	Trace func(string)
}

// Timing is the replicas' timers in the simulation: the reference's ratios, fewer
// ticks, so that a run covers many view changes.
var Timing = vsr.Timing{
	HeartbeatTimeoutTicks:           40,
	CommitBroadcastIntervalTicks:    8,
	PrepareRetransmitIntervalTicks:  5,
	ViewChangeRetransmitTicks:       10,
	ViewChangeStatusTimeoutTicks:    60,
	RequestStartViewRetransmitTicks: 10,
	ViewProbeAttemptsMax:            5,
	RepairRetryIntervalTicks:        10,
	RepairChunkMax:                  16,
}

// Config is the run a seed stands for: mostly 3 and 5 replicas, some 1 and 2.
func Config(seed uint64) Options {
	sizes := [...]int{3, 5, 3, 5, 1, 3, 5, 2}
	return Options{
		Seed:              seed,
		Replicas:          sizes[seed%uint64(len(sizes))],
		Clients:           1 + int(seed>>3)%4,
		PartitionGroups:   1 + int(seed>>6)%3,
		FaultTicks:        3000,
		LivenessTicksMax:  4000,
		RequestsAfterHeal: 3,
		Faults:            true,
		JournalSlots:      [...]int{2048, 128}[(seed>>5)%2],
		// See PartitionCatchUp.
		RealPartitions: PartitionCatchUp || seed%2 == 0,
		CatchUp:        PartitionCatchUp,
	}
}

// HeavyConfig is Config with four to eleven clients and twice the fault period:
// more requests in flight, and a cluster further ahead of a replica that was away,
// while the faults last (go test ./vsr/sim -heavy).
func HeavyConfig(seed uint64) Options {
	o := Config(seed)
	o.Clients = 4 + int(seed>>3)%8
	o.FaultTicks = 2 * o.FaultTicks
	return o
}

// Result is what a run saw.
type Result struct {
	Seed uint64
	// Violation is the first broken property, nil on a clean run.
	Violation error
	Ticks     uint64
	// LivenessTicks is how long the cluster took to finish after the heal.
	LivenessTicks uint64
	// Committed counts committed ops over every group.
	Committed    uint64
	Acknowledged int
	// PartitionAcks is how many partition requests were answered.
	PartitionAcks int
	// CommittedRefusals is how many metadata ops committed as a rejection; AdmitRefused
	// how many requests admission denied before consensus.
	CommittedRefusals, AdmitRefused int
	Crashes                         int
	ViewChanges                     uint32
	// KeepAlives counts the Commit broadcasts nodes sent only to keep their quiet
	// groups' backups hearing from them.
	KeepAlives int
	// ForwardedLogins is how many logins at a backup the primary answered Ok.
	ForwardedLogins int
	// StateOffers and StateInstalls count state transfers served and installed.
	StateOffers, StateInstalls int
	// CorruptRefused is how many corrupted frames the receivers refused.
	CorruptRefused int
	// RottenEntries is how many synced journal entries rotted at a restart,
	// RottenToRepair how many of them their replica had not checkpointed (it must
	// repair them before it applies past them); DamagedEntriesDropped how many
	// entries recovery found damaged (rotten or torn).
	RottenEntries, RottenToRepair, DamagedEntriesDropped int
	Messages                                             int
	// StoreSendsFailed is how many sends the real partition stores admitted and
	// then failed (their ops truncated by a view change: the clients retried);
	// OffsetStores how many consumer-offset stores they acknowledged.
	StoreSendsFailed, OffsetStores int
	// CommitsUnobserved is how many partition ops a store's core committed past its
	// journal window between two looks of the agreement check.
	CommitsUnobserved int
	// StoreStampRefusals is how many intact prepares a lagging store refused for
	// their stamp (without Options.CatchUp); LaggingStoreReplicas how many partition
	// replicas had not caught up at the end.
	StoreStampRefusals, LaggingStoreReplicas int
	// StoreDivergedRefusals is how many requests a store refused because its
	// partition took itself for diverged (see cluster.diverged).
	StoreDivergedRefusals int
	// PartitionStalled: the run ended at the liveness bound with a partition group
	// stalled behind a replica that cannot catch up (cluster.partitionsStalled).
	PartitionStalled bool
	// Drops are the inputs the simulator's own groups (the metadata group, the
	// stand-in partition groups) dropped, by reason, over every incarnation.
	Drops vsr.DropCounts
}

const (
	clusterName     = "sim"
	clientRetryTick = 60
	clientsTableMax = 64
	// checkpointEvery: a replica snapshots its state machine every so many applied
	// ops, so that its journal only needs the ops since.
	checkpointEvery = 32
	frameSizeMax    = 1 << 20
	// packetsInFlightMax turns a storm into a failing seed instead of an
	// exhausted machine (vsr.Driver bounds the Readies of one input).
	packetsInFlightMax = 100_000
	// metadataGroupIndex is the metadata group's place in cluster.groups and
	// node.groups; partition groups follow it.
	metadataGroupIndex = 0
)

// brokenRule is a rule of the simulated server (not of the core) broken on purpose.
type brokenRule uint8

const (
	brokenNone brokenRule = iota
	// brokenApplyRetries applies a retry prepared twice twice: exactly once is lost.
	brokenApplyRetries
	// brokenApplyDiverges gives replica 0's metadata apply another clock.
	brokenApplyDiverges
	// brokenRotEverywhere lets every node's journal rot, beyond the fault model.
	brokenRotEverywhere
	// brokenRotAboveCommit rots up to fifty entries of the rotting nodes at every
	// restart, any but the highest, above the commit point too: beyond the model.
	brokenRotAboveCommit
	// brokenStoreAckAtPrepare acknowledges a send once the real store admitted it,
	// at the offset it was stamped with, before it commits.
	brokenStoreAckAtPrepare
	// brokenStoreAckFlipsBit acknowledges sends with a bit of their batch flipped.
	brokenStoreAckFlipsBit
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
	// Client traffic is not a replica frame.
	request *clientRequest
	reply   *clientReply
}

type node struct {
	id          int
	up          bool
	downUntil   uint64
	crashOnSync bool
	// rots: this node's synced journal entries may rot (see the package doc).
	rots             bool
	incarnationCount uint64
	groups           []*groupReplica
	// keptAliveAt is the tick of the node's last keep-alive, keepAliveNext the
	// group whose turn is next (keepAlive).
	keptAliveAt   uint64
	keepAliveNext int
	// part is the node's real partition plane (Options.RealPartitions).
	part storeNode
}

// groupCheck is what the checkers know of one consensus group.
type groupCheck struct {
	id        uint64
	committed map[uint64]wire.Uint128
	// committedRequest is the client and request of each committed op.
	committedRequest map[uint64][2]uint64
	outcomes         map[uint64]applyOutcome
}

type cluster struct {
	opts    Options
	rngNet  *rand.Rand
	rngWork *rand.Rand
	rngFail *rand.Rand
	now     uint64
	seq     uint64
	nodes   []*node
	clients []*client
	packets []packet
	groups  []*groupCheck
	// groupIndex maps a wire group id to its index in groups.
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
	// proposalToken numbers the proposals handed to the groups' drivers.
	proposalToken uint64
}

// Run simulates one cluster.
func Run(opts Options) Result {
	c := &cluster{
		opts:       opts,
		rngNet:     rand.New(rand.NewPCG(opts.Seed, 0x5A1AF0E5FACE0001)),
		rngWork:    rand.New(rand.NewPCG(opts.Seed, 0x5A1AF0E5FACE0002)),
		rngFail:    rand.New(rand.NewPCG(opts.Seed, 0x5A1AF0E5FACE0003)),
		groupIndex: make(map[uint64]int),
	}
	c.result.Seed = opts.Seed
	ids := []uint64{wire.MetadataGroup}
	for p := 0; p < opts.PartitionGroups; p++ {
		id, ok := wire.PartitionGroup(1, 1, uint32(p))
		if !ok {
			panic("sim: partition group id out of range")
		}
		ids = append(ids, id)
	}
	for i, id := range ids {
		c.groups = append(c.groups, &groupCheck{id: id, committed: make(map[uint64]wire.Uint128),
			committedRequest: make(map[uint64][2]uint64), outcomes: make(map[uint64]applyOutcome)})
		c.groupIndex[id] = i
	}
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
		nd := &node{id: k, rots: i < rotting}
		for g := range c.groups {
			if g != metadataGroupIndex && opts.RealPartitions {
				break // the node's partition.Store runs them
			}
			nd.groups = append(nd.groups, &groupReplica{node: nd, group: g,
				disk: newDisk(opts.Seed ^ uint64(k+1)*0x9E3779B97F4A7C15 ^ uint64(g)*0xC2B2AE3D27D4EB4F)})
		}
		c.nodes = append(c.nodes, nd)
	}
	slices.SortFunc(c.nodes, func(a, b *node) int { return a.id - b.id })
	for _, nd := range c.nodes {
		c.boot(nd, false)
	}
	for i := 0; i < opts.Clients; i++ {
		c.clients = append(c.clients, &client{id: i, replies: make(map[uint64]clientReply), target: c.rngWork.IntN(n)})
	}
	func() {
		// An invariant of the core that breaks panics; the run reports it as its
		// violation, with the seed, instead of taking every other seed down.
		defer func() {
			if p := recover(); p != nil {
				c.fail("panic: %v", p)
			}
		}()
		c.run()
	}()
	c.result.Violation = c.violation
	c.result.Ticks = c.now
	for _, nd := range c.nodes {
		for _, gr := range nd.groups {
			c.addDrops(gr.core)
		}
	}
	for _, gc := range c.groups {
		c.result.Committed += uint64(len(gc.committed))
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
	if c.opts.RealPartitions && nd.part.store == nil {
		c.openStore(nd, restart)
		if c.violation != nil {
			return
		}
	}
	for _, gr := range nd.groups {
		c.bootGroup(gr, restart)
		if c.violation != nil {
			return
		}
	}
	for _, gr := range nd.groups {
		c.drainGroup(gr)
	}
}

func (c *cluster) crash(nd *node) {
	nd.up = false
	for _, gr := range nd.groups {
		gr.driver.Stop(nil) // mid-Ready too: what the Ready had not done never happens
		gr.disk.crash()
		gr.lastDurableView = gr.disk.superDurable.View
	}
	if c.opts.RealPartitions && c.opts.CatchUp && c.storesCrash() {
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
	if c.blocked[p.from][p.to] {
		return
	}
	if c.rngNet.IntN(100) < c.lossPercent {
		return
	}
	copies := 1
	if c.rngNet.IntN(100) < c.dupPercent {
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
			c.onFrame(c.nodes[p.to], p.from, p.frame, p.damage)
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

func (c *cluster) onFrame(nd *node, from int, frame []byte, dmg damage) {
	storeUp := c.opts.RealPartitions && c.storeUp(nd)
	if !nd.up && !storeUp {
		return
	}
	h, err := wire.DecodeReplicaHeader(frame, frameSizeMax)
	if err == nil && int(h.Size) != len(frame) {
		err = fmt.Errorf("size %d of a %d-byte frame", h.Size, len(frame))
	}
	var gr *groupReplica
	stepped := false
	if err == nil {
		// Any frame from a node is a sign of life of that node for every group of
		// this one: an idle group's primary needs no heartbeats of its own.
		if nd.up {
			for _, g := range nd.groups {
				g.driver.NoteLiveness(uint8(from))
			}
		}
		if storeUp {
			nd.part.store.NoteLiveness(uint8(from))
		}
		group, ok := wire.FrameGroup(h)
		index, known := c.groupIndex[group]
		body := frame[wire.HeaderSize:]
		switch {
		case !ok || !known:
			err = fmt.Errorf("a %v frame of unknown group %#x", h.Command, group)
		case index != metadataGroupIndex && c.opts.RealPartitions:
			if !storeUp {
				return
			}
			// The store checks a prepare's body against its header (the batch
			// binding) before its core sees it.
			k := partitionKey(index)
			core := nd.part.store.SimCore(k)
			err = nd.part.store.Step(k, h, body)
			stepped = true
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
				c.result.StoreStampRefusals++
				c.trace("r%d g%d refuses an intact %v: %v", nd.id, index, h.Command, err)
				err = nil
			}
		case !nd.up:
			return
		case (h.Command == wire.CommandPrepare || h.Command == wire.CommandRepairPrepare) && !nd.groups[index].machine.bodyIntact(body):
			err = fmt.Errorf("a %v frame whose body's seal does not hold", h.Command)
		default:
			gr = nd.groups[index]
			err = gr.driver.Step(h, body)
		}
	}
	if stepped {
		c.observeStore(nd)
	}
	switch {
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
	if gr != nil {
		c.drainGroup(gr)
	}
}

func (c *cluster) faultTick() {
	n := c.opts.Replicas
	r := c.rngFail
	for _, nd := range c.nodes {
		if !nd.up && c.now >= nd.downUntil && r.IntN(10) == 0 {
			c.boot(nd, true)
		}
	}
	if r.IntN(600) == 0 {
		nd := c.nodes[r.IntN(n)]
		if nd.up {
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
		if !nd.up {
			c.boot(nd, true)
		}
	}
	c.trace("heal")
}

func (c *cluster) done() bool {
	for _, cl := range c.clients {
		if cl.finished < c.opts.RequestsAfterHeal {
			return false
		}
	}
	return c.metadataDone() && (!c.opts.RealPartitions || c.storesDone())
}

// metadataDone reports whether every replica of every group the simulator drives
// itself (the metadata group, and the stand-in's partition groups) committed
// everything the cluster committed.
func (c *cluster) metadataDone() bool {
	for g := range c.groups {
		if g != metadataGroupIndex && c.opts.RealPartitions {
			continue // storesDone
		}
		top := uint64(0)
		for _, nd := range c.nodes {
			top = max(top, nd.groups[g].core.CommitMax())
		}
		for _, nd := range c.nodes {
			// The log's every op committed too: an acknowledged op a view change
			// left above the commit point is not done until it is recommitted.
			if core := nd.groups[g].core; core.CommitMin() != top || core.Op() != top || core.Status() != vsr.StatusNormal {
				return false
			}
		}
	}
	return true
}

func (c *cluster) run() {
	for c.violation == nil {
		c.now++
		if c.opts.Faults && !c.healed {
			c.faultTick()
		}
		if !c.healed && c.now >= c.opts.FaultTicks {
			c.heal()
		}
		for _, nd := range c.nodes {
			for _, gr := range nd.groups {
				if nd.up {
					gr.driver.Tick()
					c.drainGroup(gr)
				}
			}
			if nd.up {
				c.keepAlive(nd)
			}
			if c.opts.RealPartitions && c.storeUp(nd) {
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
			return
		}
		if c.healed && c.now-c.healAt > c.opts.LivenessTicksMax/2 && c.partitionsStalled() {
			// Half the bound is over twice the longest catch-up seen in runs that
			// finish (1249 ticks in seeds 1..5000): a stall is not waited out.
			c.result.PartitionStalled = true
			c.trace("partition groups stalled behind replicas that cannot catch up (%s)", c.describe())
			c.finalChecks()
			return
		}
		if c.healed && c.now-c.healAt > c.opts.LivenessTicksMax {
			if c.partitionsStalled() {
				c.result.PartitionStalled = true
				c.trace("partition groups stalled behind replicas that cannot catch up (%s)", c.describe())
				c.finalChecks()
				return
			}
			c.fail("liveness: not done %d ticks after the heal (%s)", c.now-c.healAt, c.describe())
			return
		}
	}
}

// keepAlive is what the server does for its quiet partition groups
// (vsr.CoreConfig.QuietWhenIdle): once per commit broadcast interval a node
// broadcasts a Commit of the next group it leads, in turn. Every peer hears from
// it, so the backups of every group it leads stay alive (NoteLiveness) without
// heartbeats of their own; and a primary that went quiet in a view the others
// have left is told of the newer view (the stale-view answer) within as many
// intervals as the node leads quiet groups.
func (c *cluster) keepAlive(nd *node) {
	if c.now-nd.keptAliveAt < Timing.CommitBroadcastIntervalTicks {
		return
	}
	nd.keptAliveAt = c.now
	for range nd.groups {
		gr := nd.groups[nd.keepAliveNext%len(nd.groups)]
		nd.keepAliveNext++
		if gr.quiet && gr.driver.Heartbeat() {
			c.result.KeepAlives++
			c.drainGroup(gr)
			return
		}
	}
}

func (c *cluster) describe() string {
	s := ""
	for _, nd := range c.nodes {
		for g := range c.groups {
			if core := c.groupCore(nd, g); core != nil {
				s += fmt.Sprintf("r%d g%d %v view %d op %d commit %d/%d; ", nd.id, g, core.Status(), core.View(), core.Op(), core.CommitMin(), core.CommitMax())
				if g != metadataGroupIndex && c.opts.RealPartitions {
					s += fmt.Sprintf("applied %d; ", nd.part.store.SimApplied(partitionKey(g)))
				}
			}
		}
	}
	for _, cl := range c.clients {
		s += fmt.Sprintf("c%d req %d finished %d; ", cl.id, cl.request, cl.finished)
	}
	return s
}

func (c *cluster) finalChecks() {
	for g, gc := range c.groups {
		if g != metadataGroupIndex && c.opts.RealPartitions {
			continue // storeFinalChecks
		}
		first := c.nodes[0].groups[g]
		want := first.state()
		for _, nd := range c.nodes {
			gr := nd.groups[g]
			for op := uint64(1); op <= gr.core.CommitMin(); op++ {
				h, ok := gr.core.Header(op)
				if !ok {
					continue // older than the journal window
				}
				if committed := gc.committed[op]; h.Checksum != committed {
					c.fail("log equality: replica %d group %d holds %x at committed op %d, the cluster committed %x", nd.id, g, h.Checksum.Lo, op, committed.Lo)
					return
				}
			}
			// Every replica applied every committed op (done() saw them all at one
			// commit point), so the states are the same bytes: for the metadata
			// group its snapshot (AppendSnapshot) and client table (ICT2).
			got := gr.state()
			for i := range want {
				if got[i].Kind != want[i].Kind || !bytes.Equal(got[i].Bytes, want[i].Bytes) {
					c.fail("replica %d group %d ends with another %v than replica 0 (%d vs %d bytes)", nd.id, g, want[i].Kind, len(got[i].Bytes), len(want[i].Bytes))
					return
				}
			}
		}
	}
	metadataCommit := c.nodes[0].groups[metadataGroupIndex].core.CommitMin()
	for _, cl := range c.clients {
		gc := c.groups[metadataGroupIndex]
		for request, reply := range cl.replies {
			if reply.refused {
				continue // denied at admission: nothing committed
			}
			if gc.committedRequest[reply.op] != [2]uint64{uint64(cl.id) + 1, request} || metadataCommit < reply.op {
				c.fail("acknowledged request %d of client %d (op %d) is not in the committed log", request, cl.id, reply.op)
				return
			}
		}
		for _, reply := range cl.partitionReplies {
			if c.opts.RealPartitions {
				break // storeFinalChecks reads them back
			}
			gc := c.groups[reply.group]
			if gc.committedRequest[reply.op] != [2]uint64{uint64(cl.id) + 1, reply.request} || c.nodes[0].groups[reply.group].core.CommitMin() < reply.op {
				c.fail("acknowledged send %d of client %d (group %d op %d) is not in the committed log", reply.request, cl.id, reply.group, reply.op)
				return
			}
		}
	}
	if c.opts.RealPartitions {
		c.storeFinalChecks()
	}
}
