// Package sim runs a whole cluster in one goroutine from one seed: on every node the
// server's own metadata plane (package metaplane: admission, the consensus core
// driven by vsr.Driver, apply, checkpoints, state transfer; the very code the
// server runs on shard 0) and the real partition plane (a partition.Store per
// node, one to three partition groups), over one simulated network and simulated
// disks, with seeded clients that log in, write, disconnect and retry as the SDKs
// do. Every run is checked:
//
//   - agreement: no two replicas commit different prepares at one op number
//     (checked at every apply, and as full log equality at the end), and every
//     replica's apply of an op gives the same outcome (reply bytes, partition
//     effects, skipped or not);
//   - durability: every op a client saw acknowledged is in every replica's log at
//     the op its reply named;
//   - exactly once within a session: each (client id, session epoch, request) is
//     executed at most once in the cluster's history (a retry prepared twice is
//     applied once), and every reply a client receives is the reply cached for its
//     request, byte for byte; partition sends are at-least-once, so there only
//     agreement and durability are checked;
//   - equal states: at every checkpoint a replica writes, its metadata and client
//     table (the snapshot's digest) are those of every other replica at that op,
//     and at the end every replica's state is the same bytes;
//   - monotonicity: view and commit point never go back on a replica (the durable
//     view not even across restarts);
//   - liveness: the cluster keeps committing: once the faults heal, every client
//     finishes and every replica of every group catches up within
//     Options.LivenessTicksMax.
//
// # What is modelled
//
// The metadata plane runs at the server's defaults: a header window of 1,024 ops,
// a checkpoint every 960 (vsr's checkpoint rule), a pipeline of 32; its client
// table is smaller (Options.ClientsTableMax), so that it overflows. Its host here
// (metaReplica) is the simulated disk and network: a Ready's journal work lands in
// the page cache and is durable at its sync; a checkpoint writes the snapshot whole
// and cuts the journal below it; password work (new users, the cluster's root,
// which the first primary proposes) is answered at the node's next tick with one
// precomputed hash. Clients log in as the root user, under a fresh client id per
// registration (now and then the previous one again), at the primary or at a
// backup that forwards the login, and write streams, topics, partitions, consumer
// groups and users from small name pools, so that many writes commit as refusals
// (name taken, not found); they log out now and then, and close their connection
// now and then with a request in flight (the node that held it learns of the
// close).
//
// Every node also runs Options.PartitionGroups (zero to three) partition groups, of
// ids wire.PartitionGroup(1, 1, p), on a partition.Store (NewReplicatedStore, this
// node's replica of every group) over segment.SimDisk storage, one disk per
// partition directory, through the store's StorageProvider, all over the same
// links: a frame goes to the group its header names, and any intact frame from a
// node counts, through NoteLiveness, as a sign of life of that node for every
// group there, as the server's replica connections do. A client's send goes
// through Store.Send on the node it reached (a real batch, stamped in place; the
// store answers 58 unless it leads), its consumer-offset store through
// Store.StoreConsumerOffset (AckQuorum); the store's replica-plane frames go out
// through its Outbox, the peers' come in through Store.Step; every tick is a
// Store.Tick and a Store.PollIO, which runs the disks' completions and with them
// the sends' SendDone, the only acknowledgement a client gets. The checkers see
// the groups from outside (partition/simhooks.go: the cores' committed headers,
// view, status and commit points, the applied op) and read the logs back through
// Store.Poll: no two replicas commit different prepares at one op number; every
// acknowledged batch is, byte for byte as the primary stamped it, at its
// acknowledged offset in the log of every replica that applied it; a client's
// acknowledged sends are at increasing offsets; the replicas' logs are prefixes
// of one another and those that applied everything hold the same consumer
// offsets; views and commit points never go back; and after the heal the groups
// catch up. A crash of a node whose topic enforces fsync takes its stores down
// too (storesCrash): they reopen from their crashed disks with Store.Open, rejoin
// their groups, and every replica of every group must catch up (repair from a
// peer's retained ops, or state transfer of the segments) and agree. Without
// fsync enforced an acknowledgement promises no durability, so there a crash
// takes down the metadata plane only. A replica refusing an intact prepare whose
// stamp does not continue its log is counted, not a failure.
//
// The network loses, delays, reorders and duplicates frames, flips bits (the
// receiver must refuse a damaged frame), and partitions nodes (symmetric splits,
// one-way cuts, an isolated node). Nodes crash (all their groups at once) and come
// back, some after a long absence (repair, or state transfer once the cluster's
// journals moved past them).
//
// Disks follow segment.SimDisk's page-cache/platter model: a write is durable only
// at the next sync; a crash keeps, loses or tears each unsynced write; a checkpoint
// is written whole. On a restart, synced metadata journal entries may also rot (a
// flipped bit), on at most QuorumReplication-1 nodes of the cluster (chosen per
// seed) and only in entries of ops that node knows committed (at or below its
// durable commit point or its checkpoint) other than its highest entry. Why that
// much and no more:
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
// # Seed classes
//
// Config (short: 3,000 ticks of faults, tens to hundreds of metadata ops; CI runs
// 1,000) and LongConfig (long: thousands of metadata ops, past at least three
// checkpoints, with one node down while the others take a checkpoint, so that it
// catches up by state transfer; CI runs a handful, -long runs more).
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
// The clock ticks alike everywhere, requests come one at a time per client, and
// the server's shards and views are not in it.
//
// Clients retry an unanswered request after 60 ticks (clientRetryTick) at the next
// node, as an SDK walks its list of nodes, and one answered 58 or 57 sooner; a
// backup answers a write 58 and forwards a login.
//
// A run is a pure function of its seed: a failure prints the seed, and
// `go test ./sim -run TestSim -seed N` replays it exactly (-long for a long
// seed).
package sim

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"slices"
	"unsafe"

	"github.com/iggy-shard/iggy-shard/metaplane"
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
	// ClientsTableMax is the metadata plane's client table size: small, so that
	// the sessions of a run overflow it.
	ClientsTableMax int
	// DownAcrossCheckpoint: one node goes down at a third of the fault period and
	// stays down until the others have committed more than a header window past
	// where it stopped (checkpoints taken meanwhile): it catches up by state
	// transfer.
	DownAcrossCheckpoint bool
	// Mutation breaks a rule of the metadata core, PlaneMutation one of the
	// metadata plane, so that tests show the checkers catch it.
	Mutation      vsr.Mutation
	PlaneMutation metaplane.Mutation
	// CatchUp: the partition plane is expected to catch a partition up: a crash
	// takes the node's stores down too (and they reopen from their crashed
	// disks), and every replica of every partition group must catch up. Without
	// it a crash takes down only the metadata plane, the stores running on, and
	// what a replica that fell behind causes is tolerated (see the package doc).
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
		ClientsTableMax:   clientsTableMax,
		CatchUp:           true,
	}
}

// LongConfig is a long seed: eight to fifteen clients writing metadata for 60,000
// ticks of faults (thousands of ops: at least three checkpoints at the server's
// defaults), the partition plane in half of them, and one node down while the
// others take a checkpoint (go test ./sim -long).
func LongConfig(seed uint64) Options {
	o := Config(seed)
	o.Replicas = [...]int{3, 5}[seed%2]
	o.Clients = 8 + int(seed>>1)%8
	o.PartitionGroups = int(seed>>1) % 2
	o.FaultTicks = 60_000
	o.LivenessTicksMax = 8000
	o.DownAcrossCheckpoint = true
	return o
}

// HeavyConfig is Config with four to eleven clients and twice the fault period:
// more requests in flight, and a cluster further ahead of a replica that was away,
// while the faults last (go test ./sim -heavy).
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
	// MetadataCommitted is the metadata group's highest committed op;
	// Checkpoints counts the checkpoints its replicas wrote, DuplicatesSkipped the
	// committed prepares its apply skipped (a request applied already, or of a
	// session ended).
	MetadataCommitted              uint64
	Checkpoints, DuplicatesSkipped int
	// Evictions counts the sessions a Register pushed out of a full client table
	// (each counted once, at the op that evicted it).
	Evictions int
	// DownAcrossCheckpoint: the node held down (Options.DownAcrossCheckpoint)
	// came back after another replica checkpointed past where it stopped.
	DownAcrossCheckpoint bool
	// Disconnects counts the connections clients closed, Abandoned the requests
	// they had in flight then; Refused58 the requests given up after a 58 to
	// their only send (they must never be in the log).
	Disconnects, Abandoned, Refused58 int
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
	// Drops are the inputs the metadata group dropped, by reason, over every
	// incarnation.
	Drops vsr.DropCounts
	// PartitionDrops are the inputs the partition stores' groups dropped
	// (partition.Store.Drops), PartitionIngressDrops the frames the stores did
	// not give to a group (Store.IngressDrops), over every store incarnation.
	PartitionDrops        vsr.DropCounts
	PartitionIngressDrops partition.IngressDrops
}

const (
	clusterName     = "sim"
	clientRetryTick = 60
	clientsTableMax = 64
	frameSizeMax    = 1 << 20
	// packetsInFlightMax turns a storm into a failing seed instead of an
	// exhausted machine (vsr.Driver bounds the Readies of one input).
	packetsInFlightMax = 100_000
	// metadataGroupIndex is the metadata group's place in cluster.groups;
	// partition groups follow it.
	metadataGroupIndex = 0
	// stateCreatedAtMicros is the partitions' creation time: every replica's
	// initial state must be the same bytes.
	stateCreatedAtMicros = 1_700_000_000_000_000
)

// brokenRule is a rule of the simulated server (not of the core) broken on purpose.
type brokenRule uint8

const (
	brokenNone brokenRule = iota
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
	// held: down across a checkpoint (Options.DownAcrossCheckpoint), at op
	// heldAt of the metadata group.
	held   bool
	heldAt uint64
	// meta is the node's metadata replica, part its partition plane.
	meta *metaReplica
	part storeNode
}

// groupCheck is what the checkers know of one consensus group.
type groupCheck struct {
	id        uint64
	committed map[uint64]wire.Uint128
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
	// meta is groups[metadataGroupIndex].
	meta *groupCheck
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
	// requestToken numbers the requests handed to the metadata planes.
	requestToken uint64
	// heldDone: the node down across a checkpoint came back.
	heldDone bool
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
			committedRequest: make(map[uint64][2]uint64), outcomes: make(map[uint64]applyOutcome),
			applied: make(map[appliedRequest]uint64), refused58: make(map[requestKey]uint64), stateDigests: make(map[uint64]uint64), stateTableLens: make(map[uint64]int)})
		c.groupIndex[id] = i
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
		nd := &node{id: k, rots: i < rotting}
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
			c.result.MetadataCommitted = max(c.result.MetadataCommitted, nd.meta.plane.Core().CommitMax())
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
	if c.opts.PartitionGroups > 0 && nd.part.store == nil {
		c.openStore(nd, restart)
		if c.violation != nil {
			return
		}
	}
	c.bootMeta(nd, restart)
}

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
	storeUp := c.storeUp(nd)
	if !nd.up && !storeUp {
		return
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
		index, known := c.groupIndex[group]
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
		default:
			err = nd.meta.plane.Step(h, body)
			c.checkMonotonic(nd.meta)
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
	for c.violation == nil {
		c.now++
		if c.opts.Faults && !c.healed {
			c.faultTick()
		}
		if !c.healed && c.now >= c.opts.FaultTicks {
			c.heal()
		}
		for _, nd := range c.nodes {
			if nd.up {
				nd.meta.tick()
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
			for _, nd := range c.nodes {
				core := nd.meta.plane.Core()
				h, ok := core.Header(core.CommitMin() + 1)
				_, body := nd.meta.plane.Body(h.Op, h.Checksum)
				c.trace("DEBUG r%d status %v view %d op %d commit %d/%d checkpoint %d transferring %v next header %v body %v drops %v",
					nd.id, core.Status(), core.View(), core.Op(), core.CommitMin(), core.CommitMax(), core.CheckpointOp(), core.Transferring(), ok, body, core.Drops())
			}
			c.fail("liveness: not done %d ticks after the heal (%s)", c.now-c.healAt, c.describe())
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
				if g != metadataGroupIndex {
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
	gc := c.meta
	want := c.nodes[0].meta.plane.Snapshot()
	for _, nd := range c.nodes {
		p := nd.meta.plane
		core := p.Core()
		for op := uint64(1); op <= core.CommitMin(); op++ {
			h, ok := core.Header(op)
			if !ok {
				continue // older than the journal window
			}
			if committed := gc.committed[op]; h.Checksum != committed {
				c.fail("log equality: replica %d holds %x at committed op %d, the cluster committed %x", nd.id, h.Checksum.Lo, op, committed.Lo)
				return
			}
		}
		// Every replica applied every committed op (done() saw them all at one
		// commit point), so the states are the same bytes: the snapshot, its
		// metadata and its client table.
		if got := p.Snapshot(); !bytes.Equal(got, want) {
			c.fail("replica %d ends with another state than replica 0: %s", nd.id, snapshotDiff(got, want))
			return
		}
	}
	metadataCommit := c.nodes[0].meta.plane.Core().CommitMin()
	for _, cl := range c.clients {
		for request, reply := range cl.replies {
			if reply.refused {
				continue // denied at admission: nothing committed
			}
			if gc.committedRequest[reply.op][0] != uint64(cl.id)+1 || metadataCommit < reply.op {
				c.fail("acknowledged request %d of client %d (op %d) is not in the committed log", request, cl.id, reply.op)
				return
			}
		}
	}
	c.storeFinalChecks()
}

// snapshotDiff says where two snapshots differ: the applied op's head, the
// metadata or the client table, at which byte.
func snapshotDiff(a, b []byte) string {
	pa, errA := metaplane.SplitSnapshot(a)
	pb, errB := metaplane.SplitSnapshot(b)
	if errA != nil || errB != nil {
		return fmt.Sprintf("snapshots that do not split (%v, %v)", errA, errB)
	}
	first := func(x, y []byte) int {
		for i := range min(len(x), len(y)) {
			if x[i] != y[i] {
				return i
			}
		}
		return min(len(x), len(y))
	}
	switch {
	case pa.At != pb.At:
		return fmt.Sprintf("applied %+v and %+v", pa.At, pb.At)
	case !bytes.Equal(pa.MetadataBytes, pb.MetadataBytes):
		return fmt.Sprintf("metadata of %d and %d bytes, first difference at byte %d", len(pa.MetadataBytes), len(pb.MetadataBytes), first(pa.MetadataBytes, pb.MetadataBytes))
	default:
		return fmt.Sprintf("client tables (ICT2) of %d and %d bytes, first difference at byte %d", len(pa.TableICT2), len(pb.TableICT2), first(pa.TableICT2, pb.TableICT2))
	}
}
