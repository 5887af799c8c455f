package vsr

import (
	"github.com/iggy-shard/iggy-shard/wire"
)

// State transfer: a backup too far behind for repair (a peer answered RangeEvicted)
// pulls a whole committed state from the primary, lockstep, one chunk in flight
// (iggy.apache.org/docs/binary-protocol/server-to-server, "State transfer"):
//
//	RequestStateTransfer{nonce} -> StateTransferTarget{commit_op, manifest}
//	RequestStateChunk{artifact, offset, len} -> StateChunk{bytes}   (repeated)
//
// The core moves the frames and verifies every artifact whole (length and
// XxHash3-64 against the manifest); the caller makes the state (Ready.StateRequests
// -> OfferState) and installs it (Ready.Install -> Advance), since only it knows
// what a snapshot of its state machine is. The target names the identity of the
// prepare at commit_op (our CommitChecksum), and a state that contradicts the
// requester's own log is refused (committed.go).

// StateChunkBytesMax is the most artifact bytes one StateChunk carries.
const StateChunkBytesMax = 256 << 10

// offersMax bounds the offers a primary keeps, one per requesting replica.
const offersMax = ReplicasMax

// StateRequest is a replica asking this one for a state (the reference asks the
// primary; here any replica that applied past the ops the requester lacks serves
// one): answer it with OfferState.
type StateRequest struct {
	From  uint8
	Nonce wire.Uint128
}

// Artifact is one piece of an offered or installed state.
type Artifact struct {
	Kind     wire.ArtifactKind
	Frontier uint64
	Bytes    []byte
	// Source, when set on an offered artifact, serves it instead of Bytes, a chunk
	// at a time as the requester asks, so that an offer holds no copy of a large
	// artifact (a partition's segments).
	Source ArtifactSource
	// Local, on an installed artifact: the caller holds it already (ArtifactHolder
	// said so) and Bytes is nil; SizeBytes and Checksum are the manifest's, for the
	// caller to check that it still holds those bytes.
	Local     bool
	SizeBytes uint64
	Checksum  uint64
}

// ArtifactSource is an offered artifact read on demand.
type ArtifactSource interface {
	SizeBytes() uint64
	// Checksum is the artifact's XxHash3-64 (wire.ArtifactChecksum of its bytes).
	Checksum() uint64
	// ReadAt fills p with the artifact's bytes from off; an error leaves the chunk
	// unanswered (the requester asks again, or another peer).
	ReadAt(p []byte, off uint64) error
}

// ArtifactHolder is a Storage whose caller may hold an offered artifact already,
// byte for byte (a restarted partition replica holds the sealed segments it had):
// such an artifact is not fetched, and is installed as Local.
type ArtifactHolder interface {
	Storage
	HoldsArtifact(a wire.StateArtifact) bool
}

// StateInstall is a verified state for the caller to install: every op up to
// CommitOp is in it. Advance then resumes the replica from CommitOp.
type StateInstall struct {
	CommitOp  uint64
	Artifacts []Artifact
	// Identity is the identity of the prepare at CommitOp: the one the offering
	// peer named (StateTransferTargetHeader.CommitChecksum; zero from a node
	// before it), which the core checked against its own log. The caller sets it
	// before Advance to the one its snapshot records as its checkpoint, when it
	// records one. The core keeps its own header of CommitOp only if it has this
	// identity (a header of an older log view may stand there). A state comes out
	// only from a replica whose view was not newer than this one's log view, so a
	// trusted header the core holds at CommitOp (Header) is the state's op: a
	// caller whose state does not record its identity may name that one.
	Identity wire.Uint128
}

type stateOffer struct {
	to       uint8
	nonce    wire.Uint128
	commitOp uint64
	// identity is the prepare's at commitOp, zero if this replica no longer
	// holds it (appliedIdentity).
	identity  wire.Uint128
	manifest  []byte
	artifacts []Artifact
}

type transferPhase uint8

const (
	transferIdle transferPhase = iota
	transferAwaitingTarget
	transferFetching
	transferInstalling
)

// stateTransfer is the state of state transfer: the state this replica fetches
// (transferIn, reset whole at each start), and the states it offers to peers.
type stateTransfer struct {
	transferIn

	offers []stateOffer
	// stateRequests are the peers' requests for a state, for the caller to
	// answer (Ready.StateRequests -> OfferState).
	stateRequests []StateRequest
}

type transferIn struct {
	phase    transferPhase
	nonce    wire.Uint128
	peer     uint8
	commitOp uint64
	// identity is the one the target named for the prepare at commitOp (zero:
	// not named, unchecked).
	identity  wire.Uint128
	manifest  []wire.StateArtifact
	received  [][]byte
	local     []bool
	current   int
	deadline  uint64
	nonceNext uint64
	stalls    int
	// forced: the caller asked for any state at or above floor (RequestTransfer).
	forced bool
	floor  uint64
	// mismatches counts the times the current artifact was fetched whole and
	// did not match its manifest entry.
	mismatches int
}

// Transferring reports whether the replica is fetching a state.
func (c *Core) Transferring() bool { return c.transfer.phase != transferIdle }

// startTransfer pulls a state from peer, which said it no longer holds the ops this
// replica needs: it has applied past them. Any replica's applied state is a
// committed one, so a backup asks whoever answered; a primary elected while far
// behind (with two replicas, the other one may hold all the history) hands the
// view on first.
func (c *Core) startTransfer(peer uint8) {
	if c.transfer.phase != transferIdle || peer == c.cfg.ReplicaID {
		return
	}
	if c.IsPrimary() {
		// A primary this far behind cannot lead: once its state jumps, it would not
		// know the head its next prepare chains to. A caught-up replica takes over.
		c.startViewChange(c.view + 1)
	}
	c.repair.active, c.timeouts.repairAt = false, 0
	c.dropCandidates()
	c.transfer.transferIn = transferIn{phase: transferAwaitingTarget, peer: peer, nonceNext: c.transfer.nonceNext}
	c.requestTarget()
}

// RetainingStorage is a Storage that knows the oldest op whose body it still
// holds. A partition's journal drops each op once applied (its batch is in the
// segment log), long before the core's header window forgets it: without this, a
// peer asking for applied ops would get RepairDone with nothing, over and over,
// where RangeEvicted would send it to state transfer.
type RetainingStorage interface {
	Storage
	// OldestRetained is the lowest op Body may still return.
	OldestRetained() uint64
}

// RequestTransfer starts a state transfer from the primary on a backup in normal
// status whose own state cannot take the primary's next ops: the caller found that
// its applied state, as of op applied, does not continue where the primary's log
// does (a partition whose segment log ends elsewhere than the batches being
// prepared). Such a replica takes any state at or above applied, even one the core
// counts as committed here already: the caller applies its journal's ops above the
// installed one again. It reports whether a transfer is under way.
func (c *Core) RequestTransfer(applied uint64) bool {
	c.checkNoReadyOut("RequestTransfer")
	if c.transfer.phase != transferIdle {
		return true
	}
	if c.status != StatusNormal || c.IsPrimary() || c.n() == 1 {
		return false
	}
	c.startTransfer(c.Primary())
	if c.transfer.phase == transferIdle {
		return false
	}
	c.transfer.forced, c.transfer.floor = true, applied
	return true
}

func (c *Core) requestTarget() {
	t := &c.transfer
	t.nonceNext++
	t.nonce = wire.Uint128{Lo: t.nonceNext, Hi: uint64(c.cfg.ReplicaID) + 1}
	t.deadline = c.now + c.cfg.Timing.RepairRetryIntervalTicks
	h := c.message(t.peer, wire.CommandRequestStateTransfer)
	r := (*wire.RequestStateTransferHeader)(headerPointer(h))
	r.Nonce, r.Group = t.nonce, c.cfg.Group
	c.seal(nil)
}

func (c *Core) requestChunk() {
	t := &c.transfer
	t.deadline = c.now + c.cfg.Timing.RepairRetryIntervalTicks
	a := t.manifest[t.current]
	have := uint64(len(t.received[t.current]))
	h := c.message(t.peer, wire.CommandRequestStateChunk)
	r := (*wire.RequestStateChunkHeader)(headerPointer(h))
	r.Nonce, r.Group, r.Artifact, r.Offset = t.nonce, c.cfg.Group, uint32(t.current), have
	r.Len = uint32(min(a.SizeBytes-have, StateChunkBytesMax))
	c.seal(nil)
}

// transferTick retries a stalled step: the target request (of whoever is primary
// now) or the chunk in flight.
func (c *Core) transferTick() {
	switch c.transfer.phase {
	case transferAwaitingTarget, transferFetching:
		t := &c.transfer
		t.stalls++
		if t.stalls%3 != 0 && t.phase == transferFetching {
			c.requestChunk()
			return
		}
		if t.stalls%3 == 0 {
			// That peer does not answer (it restarted, or replaced its offer):
			// start over with the next one.
			c.nextTransferPeer()
		}
		t.phase = transferAwaitingTarget
		c.requestTarget()
	}
}

// restartTransfer drops the state being fetched and asks the next peer for one;
// a forced transfer stays forced.
func (c *Core) restartTransfer() {
	t := &c.transfer
	c.transfer.transferIn = transferIn{phase: transferAwaitingTarget, peer: t.peer, nonceNext: t.nonceNext, forced: t.forced, floor: t.floor}
	c.nextTransferPeer()
	c.requestTarget()
}

// nextTransferPeer moves the transfer on to the peer after the one asked.
func (c *Core) nextTransferPeer() {
	t := &c.transfer
	t.peer = uint8((int(t.peer) + 1) % c.n())
	if t.peer == c.cfg.ReplicaID {
		t.peer = uint8((int(t.peer) + 1) % c.n())
	}
}

func (c *Core) transferDeadline() uint64 {
	if c.transfer.phase == transferAwaitingTarget || c.transfer.phase == transferFetching {
		return c.transfer.deadline
	}
	return 0
}

func (c *Core) onRequestStateTransfer(m *wire.RequestStateTransferHeader) error {
	if err := c.checkGroup(m.Group); err != nil {
		return err
	}
	if m.Replica == c.cfg.ReplicaID {
		return c.drop(DropNotForRole)
	}
	for i := range c.transfer.offers {
		if o := &c.transfer.offers[i]; o.to == m.Replica && o.nonce == m.Nonce {
			c.sendTarget(m.Replica, m.Nonce, o)
			return nil
		}
	}
	for _, r := range c.transfer.stateRequests {
		if r.From == m.Replica && r.Nonce == m.Nonce {
			return c.drop(DropDuplicate) // the caller is making that state
		}
	}
	c.transfer.stateRequests = append(c.transfer.stateRequests, StateRequest{From: m.Replica, Nonce: m.Nonce})
	c.rd.StateRequests = append(c.rd.StateRequests, StateRequest{From: m.Replica, Nonce: m.Nonce})
	return nil
}

// OfferState answers a StateRequest with the caller's state as of commitOp (at most
// the applied op): the artifacts stay referenced until the requester is done or
// another offer replaces them.
func (c *Core) OfferState(r StateRequest, commitOp uint64, artifacts []Artifact) {
	kept := c.transfer.stateRequests[:0]
	for _, q := range c.transfer.stateRequests {
		if q != r {
			kept = append(kept, q)
		}
	}
	c.transfer.stateRequests = kept
	if commitOp > c.commitMin || commitOp == 0 || int(r.From) >= c.n() {
		c.sendTarget(r.From, r.Nonce, nil)
		return
	}
	entries := make([]wire.StateArtifact, len(artifacts))
	for i, a := range artifacts {
		if a.Source != nil {
			entries[i] = wire.StateArtifact{Kind: a.Kind, Frontier: a.Frontier, SizeBytes: a.Source.SizeBytes(), Checksum: a.Source.Checksum()}
			continue
		}
		entries[i] = wire.StateArtifact{Kind: a.Kind, Frontier: a.Frontier, SizeBytes: uint64(len(a.Bytes)), Checksum: wire.ArtifactChecksum(a.Bytes)}
	}
	o := stateOffer{to: r.From, nonce: r.Nonce, commitOp: commitOp, identity: c.appliedIdentity(commitOp),
		manifest: wire.AppendManifest(nil, entries), artifacts: artifacts}
	replaced := false
	for i := range c.transfer.offers {
		if c.transfer.offers[i].to == r.From {
			c.transfer.offers[i], replaced = o, true
		}
	}
	if !replaced {
		if len(c.transfer.offers) == offersMax {
			c.transfer.offers = c.transfer.offers[1:]
		}
		c.transfer.offers = append(c.transfer.offers, o)
	}
	c.sendTarget(r.From, r.Nonce, &c.transfer.offers[len(c.transfer.offers)-1])
}

// sendTarget sends an offer, or a refusal when o is nil (transient: ask again).
func (c *Core) sendTarget(to uint8, nonce wire.Uint128, o *stateOffer) {
	h := c.message(to, wire.CommandStateTransferTarget)
	t := (*wire.StateTransferTargetHeader)(headerPointer(h))
	t.Nonce, t.Group, t.CommitMax = nonce, c.cfg.Group, c.commitMax
	if o == nil {
		t.UnavailableTransient = 1
		c.seal(nil)
		return
	}
	for i := range c.transfer.offers {
		if c.transfer.offers[i].to == to {
			o = &c.transfer.offers[i]
		}
	}
	t.Available, t.CommitOp, t.CommitChecksum = 1, o.commitOp, o.identity
	c.seal(o.manifest)
}

func (c *Core) onStateTransferTarget(m *wire.StateTransferTargetHeader, body []byte) error {
	if err := c.checkGroup(m.Group); err != nil {
		return err
	}
	t := &c.transfer
	if t.phase != transferAwaitingTarget || m.Nonce != t.nonce || m.Replica != t.peer {
		return c.drop(DropStale)
	}
	if m.Available == 0 {
		return c.drop(DropNothingNew) // the retry asks again
	}
	manifest, err := wire.DecodeManifest(body)
	if err != nil {
		return badMessage("state transfer target: %v", err)
	}
	if m.View > c.logView {
		// A state of a view whose log this replica does not hold yet: ops it
		// holds above its commit point may be of a log that view cut (a primary
		// of an older view, cut off, prepared them), and one of them may stand at
		// the offered op, where the caller names the state's identity from the
		// header held there (StateInstall.Identity). It joins that view first
		// (its StartView replaces what the view's log does not have) and asks
		// for a state again from there.
		t.phase = transferIdle
		c.onNewerView(m.View)
		return c.drop(DropNewerView)
	}
	if m.CommitOp <= c.commitMin && !(t.forced && m.CommitOp >= t.floor) {
		// Nothing newer than what this replica has: repair the rest instead.
		t.phase = transferIdle
		c.maybeRepair()
		return c.drop(DropNothingNew)
	}
	if c.stateContradicts(m.CommitOp, m.CommitChecksum) {
		// A state no view of this replica's log holds: the peer runs another
		// incarnation of the group's ids (or a bug, or corruption). Ask the
		// next one.
		c.nextTransferPeer()
		c.requestTarget()
		return c.drop(DropContradictsCommitted)
	}
	t.commitOp, t.identity = m.CommitOp, m.CommitChecksum
	t.manifest = t.manifest[:0]
	for _, a := range manifest.All() {
		t.manifest = append(t.manifest, a)
	}
	t.received = make([][]byte, len(t.manifest))
	t.local = make([]bool, len(t.manifest))
	t.current = 0
	t.phase = transferFetching
	c.nextChunkOrInstall()
	return nil
}

// nextChunkOrInstall asks for the first incomplete artifact's next chunk, or hands
// the whole state out once every artifact is in and verified.
func (c *Core) nextChunkOrInstall() {
	t := &c.transfer
	holder, _ := c.cfg.Storage.(ArtifactHolder)
	for t.current < len(t.manifest) {
		if len(t.received[t.current]) == 0 && holder != nil && holder.HoldsArtifact(t.manifest[t.current]) {
			t.local[t.current] = true
			t.current++
			continue
		}
		if uint64(len(t.received[t.current])) != t.manifest[t.current].SizeBytes {
			break
		}
		if wire.ArtifactChecksum(t.received[t.current]) != t.manifest[t.current].Checksum {
			// Verified whole: a bad artifact is fetched again from its start,
			// once (a chunk damaged on its way). A peer whose bytes miss the
			// manifest again serves another state than the one it named: its
			// source changed, or the offer was another's under the same nonce
			// (another incarnation of the group's ids). The next peer is asked.
			t.received[t.current] = t.received[t.current][:0]
			if t.mismatches++; t.mismatches > 1 {
				c.restartTransfer()
				return
			}
			break
		}
		t.current++
		t.mismatches = 0
	}
	if t.current < len(t.manifest) {
		c.requestChunk()
		return
	}
	install := &StateInstall{CommitOp: t.commitOp, Identity: t.identity, Artifacts: make([]Artifact, len(t.manifest))}
	for i, a := range t.manifest {
		install.Artifacts[i] = Artifact{Kind: a.Kind, Frontier: a.Frontier, Bytes: t.received[i], Local: t.local[i], SizeBytes: a.SizeBytes, Checksum: a.Checksum}
	}
	t.phase = transferInstalling
	c.rd.Install = install
}

func (c *Core) onRequestStateChunk(m *wire.RequestStateChunkHeader) error {
	if err := c.checkGroup(m.Group); err != nil {
		return err
	}
	for i := range c.transfer.offers {
		o := &c.transfer.offers[i]
		if o.to != m.Replica || o.nonce != m.Nonce {
			continue
		}
		// A request beyond the offer made under its nonce comes from a requester
		// that took another offer under the same nonce: one of another
		// incarnation of the group's ids, whose replica of this id made it
		// (nonces are counters). The requester is not at fault, nor is this
		// offer: unanswered, it asks another peer in time.
		if int(m.Artifact) >= len(o.artifacts) {
			return c.drop(DropStale)
		}
		art := &o.artifacts[m.Artifact]
		var a []byte
		if src := art.Source; src != nil {
			if m.Offset > src.SizeBytes() {
				return c.drop(DropStale)
			}
			a = c.bodyBuffer(int(min(src.SizeBytes()-m.Offset, uint64(m.Len), StateChunkBytesMax)))
			if err := src.ReadAt(a, m.Offset); err != nil {
				return c.drop(DropReadFailed) // unanswered: the requester asks again
			}
		} else {
			if m.Offset > uint64(len(art.Bytes)) {
				return c.drop(DropStale)
			}
			a = art.Bytes[m.Offset:]
			a = a[:min(uint64(len(a)), uint64(m.Len), StateChunkBytesMax)]
		}
		h := c.message(m.Replica, wire.CommandStateChunk)
		r := (*wire.StateChunkHeader)(headerPointer(h))
		r.Nonce, r.Offset, r.Group, r.Artifact = m.Nonce, m.Offset, c.cfg.Group, m.Artifact
		c.seal(a)
		return nil
	}
	return c.drop(DropStale) // no such offer (replaced or never made): the requester retries
}

func (c *Core) onStateChunk(m *wire.StateChunkHeader, body []byte) error {
	if err := c.checkGroup(m.Group); err != nil {
		return err
	}
	t := &c.transfer
	if t.phase != transferFetching || m.Nonce != t.nonce || int(m.Artifact) != t.current {
		return c.drop(DropStale)
	}
	have := uint64(len(t.received[t.current]))
	if m.Offset != have || len(body) == 0 {
		return c.drop(DropDuplicate) // a chunk received already, or one that came out of turn
	}
	if have+uint64(len(body)) > t.manifest[t.current].SizeBytes {
		return badMessage("state chunk overruns artifact %d of %d bytes", t.current, t.manifest[t.current].SizeBytes)
	}
	t.received[t.current] = append(t.received[t.current], body...)
	t.stalls = 0
	c.nextChunkOrInstall()
	return nil
}

// installed resumes the replica from the state the caller installed: everything up
// to the transfer's op is applied; the journal above it is repaired as usual.
func (c *Core) installed(identity wire.Uint128) {
	op := c.transfer.commitOp
	c.transfer.phase = transferIdle
	if op <= c.commitMin {
		return
	}
	// What the journal holds at or below the installed op is not of the log this
	// replica follows now, or not known to be.
	// (The op itself stays when it is the installed state's: it anchors the log.)
	for k := op; k > 0 && k+uint64(len(c.log.slots)) > op && k > c.commitMin; k-- {
		if s := c.slotAt(k); s != nil && !(k == op && s.trusted && !identity.IsZero() && s.header.Checksum == identity) {
			*s = slot{}
		}
	}
	if c.op <= op && !identity.IsZero() {
		c.log.lastPrepareChecksum = identity
	}
	c.commitMin = op
	c.log.retainedLow = max(c.log.retainedLow, op+1)
	c.log.checkpointOp = max(c.log.checkpointOp, op)
	c.commitMax = max(c.commitMax, op)
	if c.op < op {
		c.op = op
	}
	if c.log.trustLow <= op {
		c.log.trustLow = op + 1
	}
	c.dropCandidates()
	c.verifyDown()
	c.maybeRepair()
}
