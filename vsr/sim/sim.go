// Package sim runs a whole VSR cluster in one goroutine from one seed: the real
// vsr.Core of every replica over a simulated network (loss, delay, reordering,
// duplication, symmetric and one-way partitions, an isolated node) and simulated
// disks (unsynced writes lost or torn at a crash), with seeded clients that retry
// as the SDKs do. Every run is checked:
//
//   - agreement: no two replicas commit different prepares at one op number (checked
//     at every apply, and as full log equality at the end);
//   - durability: every op a client saw acknowledged is in every replica's log at
//     the op its reply named;
//   - exactly once: a retried request gets the reply of its one application, and
//     every replica ends in the same state;
//   - monotonicity: view and commit point never go back on a replica (the durable
//     view not even across restarts);
//   - liveness: once the faults heal, every client finishes and every replica
//     catches up within Options.LivenessTicksMax.
//
// A run is a pure function of its seed: a failure prints the seed, and
// `go test ./vsr/sim -run TestSim -seed N` replays it exactly.
package sim

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"unsafe"

	"github.com/zeebo/xxh3"

	"github.com/iggy-shard/iggy-shard/vsr"
	"github.com/iggy-shard/iggy-shard/wire"
)

// Options shape one run. Config derives them from a seed.
type Options struct {
	Seed     uint64
	Replicas int
	Clients  int
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
		FaultTicks:        3000,
		LivenessTicksMax:  4000,
		RequestsAfterHeal: 3,
		Faults:            true,
		JournalSlots:      [...]int{2048, 128}[(seed>>5)%2],
	}
}

// Result is what a run saw.
type Result struct {
	Seed uint64
	// Violation is the first broken property, nil on a clean run.
	Violation error
	Ticks     uint64
	// LivenessTicks is how long the cluster took to finish after the heal.
	LivenessTicks uint64
	Committed     uint64
	Acknowledged  int
	Crashes       int
	ViewChanges   uint32
	// ForwardedLogins is how many logins at a backup the primary answered Ok.
	ForwardedLogins int
	// StateOffers and StateInstalls count state transfers served and installed.
	StateOffers, StateInstalls int
	// CorruptRefused is how many corrupted frames the receivers refused.
	CorruptRefused int
	Messages       int
}

const (
	clusterName     = "sim"
	clientRetryTick = 60
	clientsTableMax = 64
	// checkpointEvery: a replica snapshots its state machine every so many applied
	// ops, so that its journal only needs the ops since.
	checkpointEvery = 32
	frameSizeMax    = 1 << 20
	// packetsInFlightMax and readyRoundsMax turn a storm or a loop into a failing
	// seed instead of an exhausted machine.
	packetsInFlightMax = 100_000
	readyRoundsMax     = 1000
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

type clientRequest struct {
	client   int
	register bool
	session  uint64
	request  uint64
	body     []byte
}

type clientReply struct {
	client   int
	register bool
	// evicted: the session is gone (or older than the client's latest
	// registration): register again.
	evicted bool
	epoch   uint64
	request uint64
	op      uint64
	state   uint64
}

type node struct {
	id          int
	core        *vsr.Core
	disk        *disk
	up          bool
	downUntil   uint64
	crashOnSync bool
	// The state machine: a running hash of applied bodies, deduplicated by the
	// replicated client table (vsr.ClientTable), as the metadata plane is.
	state uint64
	table *vsr.ClientTable
	// applied is the last applied op, the state's checkpoint.
	applied vsr.Checkpoint
	// forwarded maps the nonce of a login forwarded to the primary to its client.
	forwarded map[wire.Uint128]int
	// Monotonicity, per incarnation.
	lastView         uint32
	lastStatus       vsr.Status
	lastDurableView  uint32
	lastCommitMax    uint64
	lastCommitMin    uint64
	incarnationCount uint64
}

type client struct {
	id          int
	request     uint64
	outstanding bool
	sentAt      uint64
	target      int
	finished    int
	replies     map[uint64]clientReply
	// session is the epoch of the client's registration; zero until registered.
	session uint64
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

	lossPercent, dupPercent, delayMax int
	corruptPerMille                   int
	blocked                           [][]bool

	committed map[uint64]wire.Uint128
	// committedRequest is the client and request of each committed op.
	committedRequest map[uint64][2]uint64
	result           Result
	healed           bool
	healAt           uint64
	violation        error
}

// Run simulates one cluster.
func Run(opts Options) Result {
	c := &cluster{
		opts:      opts,
		rngNet:    rand.New(rand.NewPCG(opts.Seed, 0x5A1AF0E5FACE0001)),
		rngWork:   rand.New(rand.NewPCG(opts.Seed, 0x5A1AF0E5FACE0002)),
		rngFail:   rand.New(rand.NewPCG(opts.Seed, 0x5A1AF0E5FACE0003)),
		committed: make(map[uint64]wire.Uint128),

		committedRequest: make(map[uint64][2]uint64),
	}
	c.result.Seed = opts.Seed
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
	for i := 0; i < n; i++ {
		nd := &node{id: i, disk: newDisk(opts.Seed ^ uint64(i+1)*0x9E3779B97F4A7C15)}
		c.nodes = append(c.nodes, nd)
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
	c.result.Committed = uint64(len(c.committed))
	for _, nd := range c.nodes {
		if nd.up && nd.core.View() > c.result.ViewChanges {
			c.result.ViewChanges = nd.core.View()
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

func (c *cluster) boot(nd *node, restart bool) {
	nd.incarnationCount++
	nd.table = vsr.NewClientTable(clientsTableMax)
	nd.forwarded = make(map[wire.Uint128]int)
	cfg := vsr.CoreConfig{
		Config: vsr.Config{
			Cluster:      wire.ClusterID(clusterName),
			ReplicaID:    uint8(nd.id),
			ReplicaCount: uint8(c.opts.Replicas),
			Group:        wire.MetadataGroup,
		},
		Timing:       Timing,
		JournalSlots: c.opts.JournalSlots,
		Storage:      nd.disk,
		Incarnation:  wire.Uint128{Lo: nd.incarnationCount, Hi: uint64(nd.id) + 1},
		Sessions:     nd.table,
		Mutation:     c.opts.Mutation,
	}
	core, err := vsr.NewCore(cfg)
	if err != nil {
		panic(err)
	}
	nd.core = core
	nd.up = true
	nd.state = 0
	nd.applied = vsr.Checkpoint{}
	nd.lastCommitMax, nd.lastCommitMin = 0, 0
	if restart {
		rec := nd.disk.recover()
		if snapshot, ict2 := nd.disk.snapshot, nd.disk.clientTable; snapshot != nil {
			cp, state, ok := decodeSnapshot(snapshot)
			table, err := vsr.DecodeICT2(ict2, clientsTableMax)
			if !ok || err != nil {
				c.fail("replica %d: its checkpoint does not decode: %v", nd.id, err)
				return
			}
			nd.state, nd.table, nd.applied = state, table, cp
			rec.Checkpoint = cp
		}
		if rec.State.View < nd.lastDurableView {
			c.fail("replica %d restarted in durable view %d after durable view %d", nd.id, rec.State.View, nd.lastDurableView)
		}
		if err := core.Recover(rec); err != nil {
			c.fail("replica %d recover: %v", nd.id, err)
			return
		}
		c.trace("r%d restart view %d log_view %d op %d commit %d", nd.id, core.View(), core.LogView(), core.Op(), core.CommitMax())
	}
	nd.lastView = core.View()
	c.drain(nd)
}

func (c *cluster) crash(nd *node) {
	nd.up = false
	nd.disk.crash()
	nd.lastDurableView = nd.disk.superDurable.View
	nd.crashOnSync = false
	nd.downUntil = c.now + 20 + uint64(c.rngFail.IntN(400))
	if c.rngFail.IntN(6) == 0 {
		// A long absence: the cluster moves on without it, and it catches up by
		// repair when it returns.
		nd.downUntil += 1000 + uint64(c.rngFail.IntN(1500))
	}
	c.result.Crashes++
	c.trace("r%d crash", nd.id)
}

// drain does a node's Ready work in the order the Ready contract names.
func (c *cluster) drain(nd *node) {
	for rounds := 0; nd.up && nd.core.HasReady(); rounds++ {
		if rounds == readyRoundsMax {
			c.fail("replica %d: Ready still not empty after %d rounds", nd.id, rounds)
			return
		}
		rd := nd.core.Ready()
		for _, op := range rd.Discards {
			nd.disk.discard(op)
		}
		if rd.Truncate {
			nd.disk.truncateAbove(rd.TruncateAbove)
		}
		for i := range rd.Writes {
			nd.disk.write(&rd.Writes[i].Header, rd.Writes[i].Body)
		}
		if rd.State != nil {
			nd.disk.setState(*rd.State, rd.ViewHeaders)
		}
		if nd.crashOnSync && (len(rd.Writes) > 0 || rd.State != nil) {
			c.crash(nd)
			return
		}
		nd.disk.sync()
		if rd.State != nil {
			nd.lastDurableView = rd.State.View
		}
		for i := range rd.Messages {
			c.sendFrame(nd.id, &rd.Messages[i])
		}
		for i := range rd.Committed {
			c.apply(nd, &rd.Committed[i])
		}
		if rd.Install != nil {
			c.install(nd, rd.Install)
		}
		requests := append([]vsr.StateRequest(nil), rd.StateRequests...)
		for _, f := range rd.Forwards {
			clientID, ok := nd.forwarded[f.Nonce]
			delete(nd.forwarded, f.Nonce)
			if ok && f.Register && !f.TimedOut && f.Outcome == uint8(wire.ForwardRegisterOk) {
				c.result.ForwardedLogins++
				c.sendClient(nd.id, c.opts.Replicas+clientID, packet{reply: &clientReply{client: clientID, register: true, epoch: f.Epoch}})
			}
		}
		nd.core.Advance()
		for _, r := range requests {
			c.offerState(nd, r)
		}
	}
	c.checkMonotonic(nd)
}

// snapshot is the state machine's transfer and checkpoint form: the last applied
// op, its identity and timestamp, and the state.
func (nd *node) snapshot() []byte {
	b := make([]byte, 8+16+8+8)
	binary.LittleEndian.PutUint64(b, nd.applied.Op)
	nd.applied.Identity.Put(b[8:])
	binary.LittleEndian.PutUint64(b[24:], nd.applied.Timestamp)
	binary.LittleEndian.PutUint64(b[32:], nd.state)
	return b
}

func decodeSnapshot(b []byte) (vsr.Checkpoint, uint64, bool) {
	if len(b) != 40 {
		return vsr.Checkpoint{}, 0, false
	}
	cp := vsr.Checkpoint{Op: binary.LittleEndian.Uint64(b), Identity: wire.GetUint128(b[8:]), Timestamp: binary.LittleEndian.Uint64(b[24:])}
	return cp, binary.LittleEndian.Uint64(b[32:]), true
}

func (c *cluster) offerState(nd *node, r vsr.StateRequest) {
	if !nd.up {
		return
	}
	nd.core.OfferState(r, nd.applied.Op, []vsr.Artifact{
		{Kind: wire.ArtifactMetadataSnapshot, Frontier: nd.applied.Op, Bytes: nd.snapshot()},
		{Kind: wire.ArtifactClientTable, Frontier: nd.applied.Op, Bytes: nd.table.AppendICT2(nil)},
	})
	c.result.StateOffers++
	c.drain(nd)
}

func (c *cluster) install(nd *node, in *vsr.StateInstall) {
	if len(in.Artifacts) != 2 {
		c.fail("replica %d: a transferred state of %d artifacts", nd.id, len(in.Artifacts))
		return
	}
	cp, state, ok := decodeSnapshot(in.Artifacts[0].Bytes)
	table, err := vsr.DecodeICT2(in.Artifacts[1].Bytes, clientsTableMax)
	if !ok || err != nil || cp.Op != in.CommitOp {
		c.fail("replica %d: transferred state does not decode (op %d, %v)", nd.id, cp.Op, err)
		return
	}
	if want, ok := c.committed[cp.Op]; !ok || want != cp.Identity {
		c.fail("replica %d: transferred state at op %d is not of the committed log", nd.id, cp.Op)
		return
	}
	nd.state, nd.table, nd.applied = state, table, cp
	in.Identity = cp.Identity
	nd.disk.checkpoint(nd.snapshot(), in.Artifacts[1].Bytes)
	c.result.StateInstalls++
	c.trace("r%d installs a transferred state at op %d", nd.id, cp.Op)
}

func (c *cluster) checkMonotonic(nd *node) {
	if !nd.up {
		return
	}
	core := nd.core
	if core.View() != nd.lastView || core.Status() != nd.lastStatus {
		c.trace("r%d %v view %d log_view %d op %d commit %d/%d", nd.id, core.Status(), core.View(), core.LogView(), core.Op(), core.CommitMin(), core.CommitMax())
		nd.lastStatus = core.Status()
	}
	if core.View() < nd.lastView {
		c.fail("replica %d view went back from %d to %d", nd.id, nd.lastView, core.View())
	}
	if core.CommitMax() < nd.lastCommitMax {
		c.fail("replica %d commit_max went back from %d to %d", nd.id, nd.lastCommitMax, core.CommitMax())
	}
	if core.CommitMin() < nd.lastCommitMin {
		c.fail("replica %d commit_min went back from %d to %d", nd.id, nd.lastCommitMin, core.CommitMin())
	}
	nd.lastView, nd.lastCommitMax, nd.lastCommitMin = core.View(), core.CommitMax(), core.CommitMin()
}

func (c *cluster) apply(nd *node, h *wire.PrepareHeader) {
	if want, ok := c.committed[h.Op]; ok && want != h.Checksum {
		c.fail("replica %d committed op %d as %x, another replica as %x", nd.id, h.Op, h.Checksum.Lo, want.Lo)
		return
	} else if !ok {
		c.committed[h.Op] = h.Checksum
		c.committedRequest[h.Op] = [2]uint64{h.Client.Lo, h.Request}
	}
	body, ok := nd.disk.Body(h.Op, h.Checksum)
	if !ok {
		c.fail("replica %d applies op %d without its body in the journal", nd.id, h.Op)
		return
	}
	if h.Op != nd.applied.Op+1 {
		c.fail("replica %d applies op %d after op %d", nd.id, h.Op, nd.applied.Op)
		return
	}
	nd.applied = vsr.Checkpoint{Op: h.Op, Identity: h.Checksum, Timestamp: h.Timestamp}
	defer func() {
		if h.Op%checkpointEvery == 0 {
			nd.disk.checkpoint(nd.snapshot(), nd.table.AppendICT2(nil))
		}
	}()
	clientID := int(h.Client.Lo) - 1
	if clientID < 0 || clientID >= len(c.clients) {
		c.fail("replica %d applies op %d of unknown client %v", nd.id, h.Op, h.Client)
		return
	}
	reply := clientReply{client: clientID, request: h.Request, op: h.Op}
	if h.Operation == wire.OperationRegister {
		reply.register = true
		reply.epoch = nd.table.CommitRegister(h.Client, 0, h.Op, encodeReply(h, 0))
	} else {
		epoch, _, registered := nd.table.Session(h.Client)
		if !registered {
			return // logged out or evicted since it was admitted: nothing to dedupe against
		}
		if verdict, _ := nd.table.Preflight(h.Client, epoch, h.Request, h.RequestChecksum); verdict != vsr.PreflightExecute {
			return // a retry prepared twice: applied once, its reply stands
		}
		nd.state = xxh3.HashSeed(body, nd.state)
		reply.state = nd.state
		nd.table.CommitRequest(h.Client, h.Request, h.RequestChecksum, h.Op, encodeReply(h, nd.state))
	}
	if nd.core.IsPrimary() {
		c.sendClient(nd.id, c.opts.Replicas+clientID, packet{reply: &reply})
	}
}

// encodeReply is the committed reply the client table caches: a reply header built
// from the prepare alone, and the state after the apply, so every replica caches the
// same bytes.
func encodeReply(h *wire.PrepareHeader, state uint64) []byte {
	var r wire.ReplyHeader
	r.Size = wire.HeaderSize + 8
	r.Command = wire.CommandReply
	r.Client = h.Client
	r.RequestChecksum = h.RequestChecksum
	r.Op, r.Commit, r.Timestamp = h.Op, h.Op, h.Timestamp
	r.Request = h.Request
	r.Operation = h.Operation
	b := make([]byte, wire.HeaderSize+8)
	wire.PutHeader(b, &r)
	binary.LittleEndian.PutUint64(b[wire.HeaderSize:], state)
	return b
}

func decodeReply(clientID int, b []byte) clientReply {
	var r wire.ReplyHeader
	copy(wire.HeaderBytes(&r)[:], b)
	return clientReply{client: clientID, request: r.Request, op: r.Op, state: binary.LittleEndian.Uint64(b[wire.HeaderSize:])}
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
			c.onFrame(c.nodes[p.to], p.frame, p.damage)
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

func (c *cluster) onFrame(nd *node, frame []byte, dmg damage) {
	if !nd.up {
		return
	}
	h, err := wire.DecodeReplicaHeader(frame, frameSizeMax)
	if err == nil && int(h.Size) != len(frame) {
		err = fmt.Errorf("size %d of a %d-byte frame", h.Size, len(frame))
	}
	if err == nil {
		err = nd.core.Step(h, frame[wire.HeaderSize:])
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
	c.drain(nd)
}

func (c *cluster) onRequest(nd *node, r *clientRequest) {
	id := wire.Uint128{Lo: uint64(r.client) + 1}
	if nd.up && r.register && nd.core.Status() == vsr.StatusNormal && !nd.core.IsPrimary() {
		// A login at a backup: authenticated here, forwarded to the primary.
		if nonce, err := nd.core.ForwardRegister(id, 0); err == nil {
			nd.forwarded[nonce] = r.client
			c.drain(nd)
		}
		return
	}
	if !nd.up || !nd.core.IsPrimary() {
		return
	}
	checksum := wire.RequestChecksum(r.body)
	p := vsr.Proposal{Client: id, Request: r.request, Operation: wire.OperationCreateStream, RequestChecksum: checksum}
	if r.register {
		p.Operation, p.Request = wire.OperationRegister, 0
	} else {
		verdict, cached := nd.table.Preflight(id, r.session, r.request, checksum)
		switch verdict {
		case vsr.PreflightExecute:
		case vsr.PreflightReplay:
			reply := decodeReply(r.client, cached)
			c.sendClient(nd.id, c.opts.Replicas+r.client, packet{reply: &reply})
			return
		case vsr.PreflightNoSession, vsr.PreflightSessionTooLow:
			c.sendClient(nd.id, c.opts.Replicas+r.client, packet{reply: &clientReply{client: r.client, evicted: true, request: r.request}})
			return
		case vsr.PreflightSessionTooHigh:
			return // a session this replica has not applied yet
		default:
			c.fail("replica %d: request %d of client %d: preflight %v", nd.id, r.request, r.client, verdict)
			return
		}
	}
	if nd.core.InPipeline(id) {
		return
	}
	if _, err := nd.core.Propose(p, r.body, c.now*1000); err != nil {
		return
	}
	c.drain(nd)
}

func (c *cluster) onReply(r *clientReply) {
	cl := c.clients[r.client]
	switch {
	case r.evicted:
		if cl.outstanding && r.request == cl.request {
			cl.session = 0
			cl.sentAt = 0 // re-register at the next tick
		}
		return
	case r.register:
		if cl.session == 0 && cl.outstanding {
			cl.session = r.epoch
			cl.sentAt = 0 // send the request now
		}
		return
	}
	if previous, ok := cl.replies[r.request]; ok {
		if previous != *r {
			c.fail("client %d request %d answered twice differently: op %d state %x, then op %d state %x",
				r.client, r.request, previous.op, previous.state, r.op, r.state)
		}
		return
	}
	if r.request != cl.request || !cl.outstanding {
		if r.request > cl.request {
			c.fail("client %d got a reply to request %d it never sent", r.client, r.request)
		}
		return
	}
	cl.replies[r.request] = *r
	cl.outstanding = false
	c.result.Acknowledged++
	if c.healed {
		cl.finished++
	}
}

func (c *cluster) clientTick(cl *client) {
	if cl.outstanding && cl.sentAt != 0 && c.now-cl.sentAt < clientRetryTick {
		return
	}
	if !cl.outstanding {
		if c.healed && cl.finished >= c.opts.RequestsAfterHeal {
			return
		}
		if c.rngWork.IntN(4) != 0 {
			return // think time
		}
		cl.request++
		cl.outstanding = true
	} else if cl.sentAt != 0 {
		// No answer: retry at another replica, as the SDKs redirect.
		cl.target = (cl.target + 1 + c.rngWork.IntN(c.opts.Replicas)) % c.opts.Replicas
	}
	cl.sentAt = c.now
	// The body is a function of the request, so every retry carries the same one.
	seed := xxh3.HashSeed([]byte{byte(cl.id)}, cl.request)
	r := rand.New(rand.NewPCG(seed, uint64(cl.id)))
	body := make([]byte, 16+int(seed%48))
	for i := range body {
		body[i] = byte(r.Uint32())
	}
	req := &clientRequest{client: cl.id, request: cl.request, body: body, session: cl.session, register: cl.session == 0}
	if req.register {
		req.body = []byte{'r', byte(cl.id)}
	}
	c.sendClient(c.opts.Replicas+cl.id, cl.target, packet{request: req})
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
	top := uint64(0)
	for _, nd := range c.nodes {
		top = max(top, nd.core.CommitMax())
	}
	for _, nd := range c.nodes {
		if nd.core.CommitMin() != top || nd.core.Status() != vsr.StatusNormal {
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
				nd.core.Tick()
				c.drain(nd)
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
		if c.healed && c.now-c.healAt > c.opts.LivenessTicksMax {
			c.fail("liveness: not done %d ticks after the heal (%s)", c.now-c.healAt, c.describe())
			return
		}
	}
}

func (c *cluster) describe() string {
	s := ""
	for _, nd := range c.nodes {
		s += fmt.Sprintf("r%d %v view %d op %d commit %d/%d; ", nd.id, nd.core.Status(), nd.core.View(), nd.core.Op(), nd.core.CommitMin(), nd.core.CommitMax())
	}
	for _, cl := range c.clients {
		s += fmt.Sprintf("c%d req %d finished %d; ", cl.id, cl.request, cl.finished)
	}
	return s
}

func (c *cluster) finalChecks() {
	first := c.nodes[0]
	for _, nd := range c.nodes {
		for op := uint64(1); op <= nd.core.CommitMin(); op++ {
			h, ok := nd.core.Header(op)
			if !ok {
				continue // older than the journal window
			}
			if want := c.committed[op]; h.Checksum != want {
				c.fail("log equality: replica %d holds %x at committed op %d, the cluster committed %x", nd.id, h.Checksum.Lo, op, want.Lo)
				return
			}
		}
		if nd.state != first.state {
			c.fail("replica %d ends in state %x, replica 0 in %x", nd.id, nd.state, first.state)
			return
		}
		if a, b := nd.table.AppendICT2(nil), first.table.AppendICT2(nil); !bytes.Equal(a, b) {
			c.fail("replica %d ends with another client table than replica 0 (ICT2 %d vs %d bytes)", nd.id, len(a), len(b))
			return
		}
	}
	// Every replica applied every committed op (done() saw them all at one commit
	// point) and each apply matched the identity the cluster committed.
	for _, cl := range c.clients {
		for request, reply := range cl.replies {
			if c.committedRequest[reply.op] != [2]uint64{uint64(cl.id) + 1, request} || first.core.CommitMin() < reply.op {
				c.fail("acknowledged request %d of client %d (op %d) is not in the committed log", request, cl.id, reply.op)
				return
			}
		}
	}
}
