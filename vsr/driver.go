package vsr

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/iggy-shard/iggy-shard/wire"
)

// Host carries out a Core's Ready for a Driver: the journal, the network, the state
// machine. Persist, Apply and Install may finish later (an io_uring write, a file
// task on another goroutine, a simulated disk): such a call returns false, and the
// host reports the completion through the matching Driver method (Persisted,
// Applied, Installed), never from inside the call itself. The Driver calls the
// host from one goroutine, the one that calls it.
type Host interface {
	// Persist makes the Ready's durable work durable, in this order (see the
	// package doc for why): the cut (Discards, and every entry above
	// TruncateAbove when Truncate is set), durable no later than the state;
	// State with ViewHeaders, atomically with each other; the Writes; then
	// fsync. It is called only for a Ready that has such work. It returns true
	// when all of it is durable now.
	Persist(rd *Ready) bool
	// Send sends one message; its body is valid until the Ready's Advance.
	Send(m *Message)
	// Apply applies committed ops, in op order; their bodies are in the journal.
	// It returns true when they are applied now.
	Apply(committed []wire.PrepareHeader) bool
	// Install installs a transferred state and makes it durable (a snapshot),
	// setting in.Identity (StateInstall). It returns true when that is done.
	Install(in *StateInstall) bool
	// Forwarded hands over the answers to the logins and logouts this replica
	// forwarded (metadata plane).
	Forwarded(outcomes []ForwardOutcome)
	// OfferState is the state to answer a replica's request with: the applied
	// state as of commitOp (Core.OfferState).
	OfferState(r StateRequest) (commitOp uint64, artifacts []Artifact)
	// Proposal is the request the host queued under token (Driver.Propose), asked
	// for at the moment it is proposed: a host that stamps what it proposes with
	// its prepared position (a partition's batch) stamps it here.
	Proposal(token uint64) (p Proposal, body []byte, nowMicros uint64)
	// Proposed reports what became of the proposal under token: the op it was
	// prepared as, or why it was not (ErrNotPrimary, ErrNotNormal, a refusal of
	// the pipeline's room without DriverConfig.WaitForRoom, the Driver's stop).
	// Called once per proposal Driver.Propose took, now or later.
	Proposed(token uint64, op uint64, err error)
	// Advanced is called after each Ready's Advance and the state offers that
	// follow it: the host rearms the group's timer (Timers.Rearm) and releases
	// what the Ready may have aliased.
	Advanced()
}

// ForwardHost is a Host of the metadata plane, which forwards logins and logouts
// (Driver.ForwardRegister, Driver.ForwardLogout).
type ForwardHost interface {
	Host
	// ForwardSent reports the nonce the forward under token was sent with (its
	// answer comes in Forwarded under that nonce), or why it was not sent.
	ForwardSent(token uint64, nonce wire.Uint128, err error)
}

// ProposalGate is a Host that may hold back the proposal at the head of the line
// although the pipeline has room: it waits, in order, as one that finds the
// pipeline full does with WaitForRoom, and the Driver asks again each time it feeds
// the core. A partition group's primary that lacks the bodies of ops it holds (a
// view it leads before it repaired them) cannot stamp a batch: it does not know the
// offset the batch starts at (partition/group.go).
type ProposalGate interface {
	Host
	// ProposalWaits reports whether the proposal under token waits; asked only
	// when the core would take it now.
	ProposalWaits(token uint64) bool
}

// DriverConfig bounds what a Driver holds while a Ready is out.
type DriverConfig struct {
	// FramesQueuedMax bounds the peer frames held while a Ready is out
	// (default FramesQueuedMaxDefault). Beyond it a frame is dropped and counted
	// (DropFramesQueueFull): peers retransmit what they do not see answered.
	FramesQueuedMax int
	// RequestsQueuedMax bounds the proposals and forwards held while a Ready is
	// out or, with WaitForRoom, while the pipeline is full (default
	// RequestsQueuedMaxDefault). Beyond it Propose and the forwards refuse at
	// once (ErrPipelineFull, ErrForwardsFull): a local request is never dropped
	// silently.
	RequestsQueuedMax int
	// WaitForRoom: a proposal that finds the pipeline full (or a checkpoint due,
	// ErrCheckpointDue) waits in the Driver for room, in order; without it
	// Proposed reports the refusal and the host decides.
	WaitForRoom bool
	// FrameBuffersKeptMaxBytes bounds the buffers of held frames the Driver keeps
	// for reuse once it has fed them (0: up to FramesQueuedMax buffers of at most
	// 64 KiB each). A host that runs many groups, each idle most of the time (a
	// shard's partitions), keeps it small: a group that once took a burst of
	// frames would otherwise hold their buffers for good.
	FrameBuffersKeptMaxBytes int
}

const (
	FramesQueuedMaxDefault   = 64
	RequestsQueuedMaxDefault = 4096
)

// ErrDriverStopped ends the requests a stopped Driver held (Driver.Stop).
var ErrDriverStopped = errors.New("vsr: the replica's driver stopped")

// driverRoundsMax bounds the Readies one call carries out: a group of one needs two
// per batch of proposals (its journal write, then its commits); a core that never
// runs out of work is a bug.
const driverRoundsMax = 1 << 16

// frameBufferKeptMaxBytes: a frame buffer larger than this is not kept for reuse
// (a partition's batch): the pool holds the small frames of the steady state.
const frameBufferKeptMaxBytes = 64 << 10

type drivePhase uint8

const (
	phaseIdle drivePhase = iota
	phasePersisting
	phaseApplying
	phaseInstalling
)

type inputKind uint8

const (
	inputStep inputKind = iota + 1
	inputTicks
	inputPropose
	inputForwardRegister
	inputForwardLogout
	inputTakeOver
	inputHeartbeat
	inputRequestTransfer
)

// queuedInput is an input that arrived while a Ready was out.
type queuedInput struct {
	kind   inputKind
	header wire.GenericHeader
	// buffer holds a step's body (its first len bytes): the Driver's copy.
	buffer []byte
	len    int
	// token: a proposal's or a forward's; count: ticks; value: a forward's
	// user id, a transfer's applied op.
	token  uint64
	count  uint64
	value  uint64
	client wire.Uint128
	// session and request of a forwarded logout.
	session, request uint64
}

// Driver carries out a Core's Readies through a Host, in the one order the package
// doc gives with its reasons, and holds the inputs that arrive while a Ready is out
// (a Core takes none then), feeding them in arrival order after its Advance. It is
// the one loop that drives a Core: the metadata plane (metaplane, in the server
// and the simulator alike), the partition groups (partition/group.go, which gates
// its proposals, ProposalGate, and keeps few frame buffers,
// DriverConfig.FrameBuffersKeptMaxBytes) and the core's tests all use it.
//
// Every input goes through the Driver: Step, Tick, Propose, the forwards,
// TakeOver, Heartbeat, RequestTransfer. A host that feeds the core itself (Recover,
// Timers.Catch) does so only while ReadyOut is false, then calls Run.
type Driver struct {
	core *Core
	host Host
	fh   ForwardHost
	gate ProposalGate
	cfg  DriverConfig

	phase     drivePhase
	rd        Ready
	sentEarly bool
	running   bool
	stopped   bool
	err       error

	// queue holds the inputs that came while a Ready was out, in arrival order.
	queue        []queuedInput
	framesQueued int
	// waiting holds the tokens of proposals waiting for pipeline room, oldest
	// first, from waitingHead.
	waiting         []uint64
	waitingHead     int
	requestsQueued  int
	free            [][]byte
	freeBytes       int // the capacity of the buffers in free
	inCore          [][]byte
	requests        []StateRequest
	readiesTotal    uint64
	inputsHeldTotal uint64
	// checkpointWaits counts the proposals that waited for a checkpoint
	// (ErrCheckpointDue).
	checkpointWaits uint64
}

// NewDriver drives core through host. A recovered core may hold a Ready already:
// call Run.
func NewDriver(core *Core, host Host, cfg DriverConfig) *Driver {
	if cfg.FramesQueuedMax <= 0 {
		cfg.FramesQueuedMax = FramesQueuedMaxDefault
	}
	if cfg.RequestsQueuedMax <= 0 {
		cfg.RequestsQueuedMax = RequestsQueuedMaxDefault
	}
	if cfg.FrameBuffersKeptMaxBytes <= 0 {
		cfg.FrameBuffersKeptMaxBytes = cfg.FramesQueuedMax * frameBufferKeptMaxBytes
	}
	d := &Driver{core: core, host: host, cfg: cfg}
	d.fh, _ = host.(ForwardHost)
	d.gate, _ = host.(ProposalGate)
	return d
}

// Core is the driven core, for reading its state.
func (d *Driver) Core() *Core { return d.core }

// ReadyOut reports whether a Ready is out: its work is under way and inputs are
// held. A host that feeds the core directly must not do so now.
func (d *Driver) ReadyOut() bool { return d.phase != phaseIdle }

// Err is why the Driver stopped (Stop, or a failed Persist or Install), nil while
// it runs.
func (d *Driver) Err() error { return d.err }

// Readies is how many Readies the Driver carried out (Advanced).
func (d *Driver) Readies() uint64 { return d.readiesTotal }

// InputsHeld is how many inputs arrived while a Ready was out and were held.
func (d *Driver) InputsHeld() uint64 { return d.inputsHeldTotal }

// CheckpointWaits is how many times a proposal found a checkpoint due
// (ErrCheckpointDue) and waited for it (WaitForRoom).
func (d *Driver) CheckpointWaits() uint64 { return d.checkpointWaits }

// Run carries out the Readies the core holds (after Recover, or after the host fed
// the core directly) and what they lead to, until the core is quiet or a Ready
// waits for the host.
func (d *Driver) Run() {
	if d.running || d.stopped {
		return // the Run below in the stack goes on
	}
	d.running = true
	defer func() { d.running = false }()
	for rounds := 0; d.phase == phaseIdle && !d.stopped; {
		if !d.core.HasReady() {
			if !d.feed() {
				d.releaseFrames()
				return
			}
			continue
		}
		if rounds++; rounds > driverRoundsMax {
			panic(fmt.Sprintf("vsr: replica %d of group %#x: still Ready after %d rounds", d.core.cfg.ReplicaID, d.core.cfg.Group, driverRoundsMax))
		}
		d.start()
	}
}

// start takes the core's Ready and carries it out as far as the host lets it now.
func (d *Driver) start() {
	d.rd = d.core.Ready()
	d.phase = phasePersisting // from here, inputs are held
	rd := &d.rd
	d.sentEarly = false
	if rd.State != nil || rd.ViewHeaders != nil || len(rd.Writes) > 0 || rd.Truncate || len(rd.Discards) > 0 {
		// The prepares that promise nothing go now: the next replica of the chain
		// journals while this one does.
		for i := range rd.Messages {
			if rd.SendableEarly(i) {
				d.host.Send(&rd.Messages[i])
				d.sentEarly = true
			}
		}
		if d.stopped {
			return
		}
		if !d.host.Persist(rd) || d.stopped {
			return
		}
	}
	d.persisted()
}

// Persisted completes the Persist of the Ready out: nil when its work is durable.
// An error stops the Driver (its messages never leave: they would promise what is
// not durable); the host restarts the replica from its disk.
func (d *Driver) Persisted(err error) {
	if d.stopped {
		return // a completion that came after a crash or stop
	}
	if d.phase != phasePersisting {
		panic("vsr: Persisted without a Ready persisting")
	}
	if err != nil {
		d.Stop(fmt.Errorf("vsr: durable write: %w", err))
		return
	}
	// Inputs the host feeds from the callbacks that follow are taken in order:
	// Run does not nest.
	d.running = true
	d.persisted()
	d.running = false
	d.Run()
}

// persisted: the Ready's durable work is done; its messages go, its commits apply.
func (d *Driver) persisted() {
	rd := &d.rd
	for i := range rd.Messages {
		if !d.sentEarly || !rd.SendableEarly(i) {
			d.host.Send(&rd.Messages[i])
		}
	}
	if d.stopped {
		return
	}
	d.phase = phaseApplying
	if len(rd.Committed) > 0 && (!d.host.Apply(rd.Committed) || d.stopped) {
		return
	}
	d.applied()
}

// Applied completes the Apply of the Ready out.
func (d *Driver) Applied() {
	if d.stopped {
		return
	}
	if d.phase != phaseApplying {
		panic("vsr: Applied without a Ready applying")
	}
	d.running = true
	d.applied()
	d.running = false
	d.Run()
}

func (d *Driver) applied() {
	if in := d.rd.Install; in != nil {
		d.phase = phaseInstalling
		if !d.host.Install(in) || d.stopped {
			return
		}
	}
	d.finish()
}

// Installed completes the Install of the Ready out: nil when the state is
// installed and durable. An error stops the Driver: the core would resume from a
// state the host does not have.
func (d *Driver) Installed(err error) {
	if d.stopped {
		return
	}
	if d.phase != phaseInstalling {
		panic("vsr: Installed without a Ready installing")
	}
	if err != nil {
		d.Stop(fmt.Errorf("vsr: state install: %w", err))
		return
	}
	d.running = true
	d.finish()
	d.running = false
	d.Run()
}

// finish answers the forwards, advances the core and offers the states asked for.
func (d *Driver) finish() {
	rd := &d.rd
	if len(rd.Forwards) > 0 {
		d.host.Forwarded(rd.Forwards)
		if d.stopped {
			return
		}
	}
	d.requests = append(d.requests[:0], rd.StateRequests...)
	d.core.Advance()
	d.rd = Ready{}
	d.phase = phaseIdle
	d.readiesTotal++
	d.releaseFrames()
	for _, r := range d.requests {
		commitOp, artifacts := d.host.OfferState(r)
		if d.stopped {
			return
		}
		d.core.OfferState(r, commitOp, artifacts)
	}
	d.host.Advanced()
}

// releaseFrames returns the buffers of the frames fed since the last Advance to the
// pool: no Ready aliases them any more.
func (d *Driver) releaseFrames() {
	for i, b := range d.inCore {
		if cap(b) <= frameBufferKeptMaxBytes && d.freeBytes+cap(b) <= d.cfg.FrameBuffersKeptMaxBytes {
			d.free = append(d.free, b)
			d.freeBytes += cap(b)
		}
		d.inCore[i] = nil
	}
	d.inCore = d.inCore[:0]
}

// feed gives the core the proposals waiting for room, then the inputs held while
// the last Ready was out, and reports whether it gave anything.
func (d *Driver) feed() bool {
	fed := false
	for d.waitingHead < len(d.waiting) && !d.stopped {
		if !d.propose(d.waiting[d.waitingHead]) {
			break
		}
		d.waitingHead++
		d.requestsQueued--
		fed = true
	}
	if d.waitingHead == len(d.waiting) {
		d.waiting, d.waitingHead = d.waiting[:0], 0
	}
	if len(d.queue) == 0 {
		return fed
	}
	// No input is queued while the core is idle: the queue does not grow here.
	for i := range d.queue {
		if d.stopped {
			return true
		}
		d.feedOne(&d.queue[i])
	}
	clear(d.queue)
	d.queue = d.queue[:0]
	d.framesQueued = 0
	return true
}

func (d *Driver) feedOne(in *queuedInput) {
	c := d.core
	switch in.kind {
	case inputStep:
		_ = c.Step(&in.header, in.buffer[:in.len]) // a refusal is counted (DropMalformed)
		d.inCore = append(d.inCore, in.buffer)
	case inputTicks:
		for range in.count {
			c.Tick()
		}
	case inputPropose:
		d.requestsQueued--
		d.proposeOrWait(in.token)
	case inputForwardRegister, inputForwardLogout:
		d.requestsQueued--
		d.forwardNow(in)
	case inputTakeOver:
		c.TakeOver()
	case inputHeartbeat:
		c.Heartbeat()
	case inputRequestTransfer:
		c.RequestTransfer(in.value)
	}
}

// hold queues an input that arrived while a Ready was out.
func (d *Driver) hold() *queuedInput {
	d.inputsHeldTotal++
	d.queue = append(d.queue, queuedInput{})
	return &d.queue[len(d.queue)-1]
}

// Step takes a frame from a peer (h validated by wire.DecodeReplicaHeader, body the
// bytes after it). Fed at once, body must stay valid until the Advance of the Ready
// it leads to (Host.Advanced); held while a Ready is out, it is copied. A bad frame
// is an error when it is fed at once; a held one is checked for its cluster, sender
// and size now, and counted (DropMalformed) if the core refuses it when fed.
func (d *Driver) Step(h *wire.GenericHeader, body []byte) error {
	if d.stopped {
		return d.err
	}
	if d.phase == phaseIdle {
		err := d.core.Step(h, body)
		d.Run()
		return err
	}
	if err := d.core.checkFrame(h, body); err != nil {
		d.core.drops[DropMalformed]++
		return err
	}
	if d.framesQueued >= d.cfg.FramesQueuedMax {
		d.core.drops[DropFramesQueueFull]++
		return nil
	}
	d.framesQueued++
	in := d.hold()
	in.kind, in.header = inputStep, *h
	in.buffer = d.frameBuffer(len(body))
	in.len = copy(in.buffer[:len(body)], body)
	return nil
}

// frameBuffer is a buffer of at least size bytes, 16-byte aligned as frame bodies
// are (wire.HeaderAlignment), from the pool when one is large enough.
func (d *Driver) frameBuffer(size int) []byte {
	for i := len(d.free) - 1; i >= 0; i-- {
		if b := d.free[i]; cap(b) >= size {
			d.freeBytes -= cap(b)
			d.free[i] = d.free[len(d.free)-1]
			d.free[len(d.free)-1] = nil
			d.free = d.free[:len(d.free)-1]
			return b[:cap(b)]
		}
	}
	size = max(size, 512)
	raw := make([]byte, size+wire.HeaderAlignment)
	off := (wire.HeaderAlignment - int(uintptr(unsafe.Pointer(&raw[0]))%wire.HeaderAlignment)) % wire.HeaderAlignment
	return raw[off : off+size : off+size]
}

// Tick advances the core's clock by one tick (held while a Ready is out: the ticks
// fire once it is done).
func (d *Driver) Tick() {
	if d.stopped {
		return
	}
	if d.phase == phaseIdle {
		d.core.Tick()
		d.Run()
		return
	}
	if n := len(d.queue); n > 0 && d.queue[n-1].kind == inputTicks {
		d.queue[n-1].count++
		return
	}
	in := d.hold()
	in.kind, in.count = inputTicks, 1
}

// Propose asks for a proposal of the request the host holds under token: the
// Driver asks the host for it (Host.Proposal) when it is proposed, at once or
// after the Ready out (and, with WaitForRoom, once the pipeline has room), and
// reports its op through Host.Proposed. An error means the request was not taken
// (too many held: ErrPipelineFull; or the Driver stopped) and Proposed is not
// called for it.
func (d *Driver) Propose(token uint64) error {
	if d.stopped {
		return d.err
	}
	if d.phase != phaseIdle || d.waitingHead < len(d.waiting) {
		if d.requestsQueued >= d.cfg.RequestsQueuedMax {
			return ErrPipelineFull
		}
		d.requestsQueued++
		if d.phase != phaseIdle {
			in := d.hold()
			in.kind, in.token = inputPropose, token
			return nil
		}
		d.waiting = append(d.waiting, token) // behind the ones waiting for room
		return nil
	}
	if !d.propose(token) {
		d.requestsQueued++
		d.waiting = append(d.waiting, token)
		return nil
	}
	d.Run()
	return nil
}

// proposeOrWait proposes a held proposal, or has it wait for room behind those
// waiting already.
func (d *Driver) proposeOrWait(token uint64) {
	if d.waitingHead < len(d.waiting) || !d.propose(token) {
		d.requestsQueued++
		d.waiting = append(d.waiting, token)
	}
}

// propose proposes now and reports the outcome, or reports false: the pipeline has
// no room (WaitForRoom) or the host's gate holds the proposal, and it waits.
func (d *Driver) propose(token uint64) bool {
	c := d.core
	if err := c.proposable(); err != nil {
		if d.cfg.WaitForRoom && errors.Is(err, ErrPipelineFull) {
			if errors.Is(err, ErrCheckpointDue) {
				d.checkpointWaits++
			}
			return false
		}
		d.host.Proposed(token, 0, err)
		return true
	}
	if d.gate != nil && d.gate.ProposalWaits(token) {
		return false
	}
	p, body, now := d.host.Proposal(token)
	op, err := c.Propose(p, body, now)
	d.host.Proposed(token, op, err)
	return true
}

// ForwardRegister forwards a login verified here to the primary (Core.
// ForwardRegister); the nonce comes through ForwardHost.ForwardSent.
func (d *Driver) ForwardRegister(client wire.Uint128, userID uint32, token uint64) error {
	return d.forward(queuedInput{kind: inputForwardRegister, client: client, value: uint64(userID), token: token})
}

// ForwardLogout forwards a logout of a session to the primary (Core.ForwardLogout).
func (d *Driver) ForwardLogout(client wire.Uint128, session, request uint64, token uint64) error {
	return d.forward(queuedInput{kind: inputForwardLogout, client: client, session: session, request: request, token: token})
}

func (d *Driver) forward(in queuedInput) error {
	switch {
	case d.stopped:
		return d.err
	case d.fh == nil:
		return errors.New("vsr: a forward through a driver whose host is not a ForwardHost")
	case d.phase == phaseIdle:
		d.forwardNow(&in)
		d.Run()
		return nil
	case d.requestsQueued >= d.cfg.RequestsQueuedMax:
		return ErrForwardsFull
	}
	d.requestsQueued++
	held := d.hold()
	*held = in
	return nil
}

func (d *Driver) forwardNow(in *queuedInput) {
	var nonce wire.Uint128
	var err error
	if in.kind == inputForwardRegister {
		nonce, err = d.core.ForwardRegister(in.client, uint32(in.value))
	} else {
		nonce, err = d.core.ForwardLogout(in.client, in.session, in.request)
	}
	d.fh.ForwardSent(in.token, nonce, err)
}

// TakeOver starts a view change to the next view this replica leads (Core.
// TakeOver) and reports whether it did; held while a Ready is out, it reports
// whether it will, as the core stands now.
func (d *Driver) TakeOver() bool {
	c := d.core
	if d.stopped {
		return false
	}
	if d.phase == phaseIdle {
		ok := c.TakeOver()
		d.Run()
		return ok
	}
	d.hold().kind = inputTakeOver
	return c.status == StatusNormal && !c.IsPrimary() && c.n() > 1 && c.transfer.phase == transferIdle
}

// Heartbeat broadcasts a Commit on a primary (Core.Heartbeat) and reports whether
// it did (or, held, will).
func (d *Driver) Heartbeat() bool {
	c := d.core
	if d.stopped {
		return false
	}
	if d.phase == phaseIdle {
		ok := c.Heartbeat()
		d.Run()
		return ok
	}
	d.hold().kind = inputHeartbeat
	return c.IsPrimary() && c.n() > 1
}

// RequestTransfer asks the primary for its state (Core.RequestTransfer) and reports
// whether a transfer is under way (or, held, will be).
func (d *Driver) RequestTransfer(applied uint64) bool {
	c := d.core
	if d.stopped {
		return false
	}
	if d.phase == phaseIdle {
		ok := c.RequestTransfer(applied)
		d.Run()
		return ok
	}
	in := d.hold()
	in.kind, in.value = inputRequestTransfer, applied
	return c.Transferring() || c.status == StatusNormal && !c.IsPrimary() && c.n() > 1
}

// NoteLiveness tells the core that replica's node sent something (Core.
// NoteLiveness); it records nothing a Ready carries, so it is taken at once.
func (d *Driver) NoteLiveness(replica uint8) { d.core.NoteLiveness(replica) }

// Checkpointed reports a durable checkpoint (Core.Checkpointed), taken at once:
// proposals waiting for it (ErrCheckpointDue) go once no Ready is out.
func (d *Driver) Checkpointed(op uint64) {
	d.core.Checkpointed(op)
	if d.phase == phaseIdle && d.waitingHead < len(d.waiting) {
		d.Run()
	}
}

// Stop ends the Driver: the host crashed or stopped, or a durable write failed
// (err, or ErrDriverStopped when nil). The Ready out is abandoned (its messages not
// yet sent never go), held frames are dropped, and every held proposal and forward
// is answered with the error. Late completions are ignored. The host restarts the
// replica from its disk with a new Core and Driver.
func (d *Driver) Stop(err error) {
	if d.stopped {
		return
	}
	if err == nil {
		err = ErrDriverStopped
	}
	d.stopped, d.err = true, err
	d.rd = Ready{}
	queue, waiting := d.queue, d.waiting[d.waitingHead:]
	d.queue, d.waiting, d.waitingHead, d.requestsQueued = nil, nil, 0, 0
	for _, token := range waiting {
		d.host.Proposed(token, 0, err)
	}
	for i := range queue {
		switch in := &queue[i]; in.kind {
		case inputPropose:
			d.host.Proposed(in.token, 0, err)
		case inputForwardRegister, inputForwardLogout:
			d.fh.ForwardSent(in.token, wire.Uint128{}, err)
		}
	}
}
