package server

import (
	"encoding/binary"
	"log/slog"
	"net/netip"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/iggy-shard/iggy-shard/metadata"
	"github.com/iggy-shard/iggy-shard/metahost"
	"github.com/iggy-shard/iggy-shard/metaview"
	"github.com/iggy-shard/iggy-shard/partition"
	"github.com/iggy-shard/iggy-shard/partitionhost"
	"github.com/iggy-shard/iggy-shard/request"
	"github.com/iggy-shard/iggy-shard/shard"
	"github.com/iggy-shard/iggy-shard/wire"
)

// Message kinds between shards (shard.Message.Kind).
const (
	msgToMeta           uint32 = iota + 1 // conn shard -> shard 0: a *job to serve or route
	msgToOwner                            // shard 0 -> owner: a *job for a partition
	msgReply                              // -> conn shard: a *job with its outcome
	msgViewAdvanced                       // shard 0 -> every shard: the commit log grew, catch up
	msgClientGone                         // conn shard -> shard 0: a *clientGone (a connection closed)
	msgEvictStale                         // shard 0 -> conn shard: a silent group member, evict (13)
	msgClientOpened                       // conn shard -> shard 0: a *clientOpened (a connection was accepted)
	msgPollBuffer                         // conn shard -> owner: a poll's read buffer (*byte, its first), reply sent
	msgReplicaFrame                       // peer's owner shard -> shard 0: a *replicaInbound of the metadata group
	msgReplicaRelease                     // -> the shard that retained a frame: a *replicaInbound stepped, to release
	msgReplicaPartition                   // peer's owner shard -> partition's owner: a *replicaInbound of its group
	msgReplyLent                          // -> conn shard: a *job with its outcome, whose frame lent sends still read
	msgLentDone                           // partition's owner -> conn shard: a msgReplyLent *job's lent sends are done
)

// session is a connection's state, kept in shard.Conn.Value from the moment its
// shard adopts it (ConnOpened, which registers it with shard 0) until it closes;
// bound while it is logged in.
type session struct {
	client wire.Uint128
	epoch  uint64
	userID uint32
	bound  bool
	// seen is when the session last sent a request (PINGs too), on the runtime's
	// clock; shard 0 reads it to find silent consumer group members.
	seen *atomic.Int64
	// answered is set once the connection's first request went through shard 0,
	// behind its registration: from then on any reply it got means every client
	// sees it in GetClients.
	answered bool
	// clientID is the connection's id in GetMe and GetClient(s), given by its shard.
	clientID uint32
	// token is the hash of the personal access token the session logged in with,
	// nil for a password login.
	token *metadata.TokenHash
}

// pendingPost is a message the target's queue had no room for, to post again
// (flushOutbox); control ones go on the control lane (postControl).
type pendingPost struct {
	target  int
	msg     shard.Message
	control bool
}

// handler serves one shard (shard.Handler).
type handler struct {
	srv   *Server
	shard *shard.Shard
	index int
	log   *slog.Logger

	free   []*job
	outbox []pendingPost

	// view is the shard's copy of the committed metadata (package metaview); balanced holds
	// its round-robin cursors of Balanced sends, by topic.
	view     *metaview.View
	balanced map[[2]uint32]*partition.RoundRobin
	// bound are the shard's logged-in sessions, ended when their account is revoked.
	bound map[shard.ConnID]*session
	// requests are the shard's figures of the requests it answered (metrics.go).
	requests requestStats
	// connsOpened counts the connections this shard adopted, for their client ids.
	connsOpened uint32
	readReply   []byte // scratch for reads answered here
	address     []byte // scratch for GetMe

	meta           *metaRouter // shard 0 only
	heartbeatDueNs int64       // shard 0: the next look for silent group members

	// owned is the partition plane of the partitions this shard owns
	// (package partitionhost), consensus the clock and replica frames of its consensus
	// groups (ticks.go).
	owned     *partitionhost.Host
	consensus shardConsensus
	// lender lends the store the replica frames it steps (framelend.go); leader
	// lends the replica connections the request frames of its prepares
	// (leaderlend.go).
	lender frameLender
	leader leaderLender

	// stopped is set once the shard has exited: completions that still run while
	// Shutdown closes the store have no shard to post their replies to.
	stopped bool
}

func (s *Server) newHandler(sh *shard.Shard) shard.Handler {
	h := &handler{srv: s, shard: sh, index: sh.Index(), log: sh.Logger()}
	h.lender.init(h)
	h.leader.init(h)
	h.view = metaview.New(s.viewSnapshot, s.viewGenesis)
	h.balanced = make(map[[2]uint32]*partition.RoundRobin)
	h.bound = make(map[shard.ConnID]*session)
	h.requests = make(requestStats)
	h.consensus.grid.originNs = sh.NowNs()
	// A single node's store is a group of one: the zero Replication but for the
	// file budget and [system.partition]'s plans and scrub rate.
	var repl partition.Replication
	if s.cluster != nil {
		repl = s.partitionReplication(h)
		h.consensus.alignIntervalNs = int64(repl.Timing.HeartbeatTimeoutTicks) * consensusTickNs
		h.consensus.heardNs = make([]int64, len(s.cluster.lastHeardNs))
	}
	repl.Plans = s.pollPlanConfig()
	repl.ScrubBytesPerSecond = s.scrubBytesPerSecond()
	h.owned = partitionhost.New(partitionhost.Config{Shard: h, Log: h.log, Index: h.index, OwnerOf: s.ownerOf, SystemPath: s.cfg.SystemPath,
		Disk: sh.Disk(), Replication: repl, FilesMax: s.partitionFilesOfShard(), Stats: &s.stats, PollMemory: s.pollMemories[h.index],
		Lender: &h.lender})
	h.view.Replaced = h.owned.FollowReplacedView
	for _, p := range s.initial[h.index] {
		h.owned.OpenAtStart(p)
	}
	if h.index == 0 {
		h.meta = s.newMetaRouter(h)
		s.transport.metaTasks.attach(sh.Wake)
		h.heartbeatDueNs = sh.NowNs() + int64(s.heartbeatInterval)/5
		sh.WakeAt(h.heartbeatDueNs)
	}
	s.handlers[h.index] = h
	s.transport.calls.inboxes[h.index].attach(sh.Wake)
	return h
}

// ServeRequest implements shard.Handler.
func (h *handler) ServeRequest(c *shard.Conn, req *shard.Request) {
	h.catchUpTicks()
	h.flushOutbox()
	if o := h.serveRequest(c, req); o != outcomeDeferred {
		h.requests.record(commandOf(req.Header), o, 0) // answered within the turn
	}
}

// serveRequest answers a request or sends it on its way, and says which.
func (h *handler) serveRequest(c *shard.Conn, req *shard.Request) outcome {
	hdr := req.Header
	sess := c.Value.(*session) // set by ConnOpened, which precedes every request
	bound := sess.bound
	if bound {
		// Before anything, PING included: a session whose account a commit revoked
		// ends here (endRevokedSessions), with this request's reply the eviction.
		h.catchUpView()
		if !c.Open() {
			return outcomeEvicted
		}
		sess.seen.Store(h.shard.NowNs())
	}
	op := hdr.Operation
	if !bound && !sess.answered && op != wire.OperationRegister {
		// The first request: its reply must not overtake the connection's
		// registration with shard 0 (clientOpened), or a client told "pong" could
		// ask GetClients from another connection and not find this one.
		sess.answered = true
		h.forwardFirst(c, req)
		return outcomeDeferred
	}
	sess.answered = true
	switch {
	case op == wire.OperationNonReplicated && hdr.NonReplicatedCode == wire.CodePing:
		h.replyEmpty(c, hdr)
		return outcomeOK
	case op == wire.OperationRegister:
		if h.srv.cluster != nil && !h.view.State.HasRoot() {
			// A cluster's root user comes from an op of its first primary
			// (metaRouter.ensureRootUser): until this node applied it nobody can log
			// in, and the login is refused as not accepted (58), which the SDKs
			// replay for their whole request deadline, as the reference answers
			// while its recovery barrier holds.
			h.catchUpView()
			if !h.view.State.HasRoot() {
				c.ReplyStatus(hdr, wire.ErrTransientNotAccepted)
				return outcomeRefused
			}
		}
		// On a bound connection too: shard 0 checks the credentials and, the
		// connection being logged in already, answers with its session unchanged
		// (metahost/router.go, login).
		h.forward(c, req, request.KindLogin, 0)
		return outcomeDeferred
	case !bound:
		evict, status := anonymousOutcome(hdr)
		switch {
		case evict != 0:
			c.Evict(hdr.Client, evict)
			return outcomeEvicted
		case status != 0:
			c.ReplyStatus(hdr, status)
			return outcomeRefused
		}
		h.replyEmpty(c, hdr)
		return outcomeOK
	}
	if hdr.Client != sess.client {
		c.Evict(hdr.Client, wire.EvictionNoSession)
		return outcomeEvicted
	}
	if hdr.Session != sess.epoch {
		if hdr.Session < sess.epoch {
			c.Evict(hdr.Client, wire.EvictionSessionTooLow)
		} else {
			c.Evict(hdr.Client, wire.EvictionNoSession)
		}
		return outcomeEvicted
	}
	if op == wire.OperationNonReplicated {
		// Header validation leaves unknown codes and replicated codes sent as reads
		// to this point, after the session check (wire.RequestHeader.Validate).
		if fault := wire.NonReplicatedCodeCheck(hdr.NonReplicatedCode); fault != wire.FaultNone {
			c.ReplyStatus(hdr, fault.Status())
			return outcomeRefused
		}
	}
	if op == wire.OperationLogout || (op.ClientAllowed() && op.Replicated() && !isPartitionOperation(op)) {
		h.forward(c, req, request.KindWrite, sess.userID) // fenced by the client table itself
		return outcomeDeferred
	}
	if reason := h.view.Fence(hdr.Client, sess.epoch); reason != 0 {
		// The client id registered again, or its session left the client table.
		c.Evict(hdr.Client, reason)
		return outcomeEvicted
	}
	switch {
	case op == wire.OperationNonReplicated:
		switch hdr.NonReplicatedCode {
		case wire.CodeFlushUnsavedBuffer:
			c.ReplyStatus(hdr, wire.ErrFeatureUnavailable)
			return outcomeRefused
		case wire.CodePollMessages:
			h.routePollHere(c, req, sess.userID)
		case wire.CodeGetConsumerOffset:
			h.routeHere(c, req, request.KindGetOffset, sess.userID)
		case wire.CodeGetStats, wire.CodeGetSnapshot, wire.CodeGetClients, wire.CodeGetClient:
			h.forward(c, req, request.KindRead, sess.userID) // the whole node's: shard 0's
		default:
			return h.readHere(c, hdr, req.Body, sess)
		}
	case op == wire.OperationSendMessages:
		h.routeHere(c, req, request.KindSend, sess.userID)
	case op == wire.OperationStoreConsumerOffset:
		h.routeHere(c, req, request.KindStoreOffset, sess.userID)
	case op == wire.OperationDeleteConsumerOffset:
		h.routeHere(c, req, request.KindDeleteOffset, sess.userID)
	default:
		c.Evict(hdr.Client, wire.EvictionInvalidRequestOperation)
		return outcomeEvicted
	}
	return outcomeDeferred
}

// isPartitionOperation reports whether a replicated operation belongs to the
// partition plane (resolved here and served by the owner shard), not to the
// metadata group on shard 0.
func isPartitionOperation(op wire.Operation) bool {
	return op == wire.OperationSendMessages || op == wire.OperationStoreConsumerOffset ||
		op == wire.OperationDeleteConsumerOffset
}

// routeHere resolves a partition operation on this shard and hands it to the
// partition's owner (routing.go), keeping its request buffer.
func (h *handler) routeHere(c *shard.Conn, req *shard.Request, kind request.Kind, userID uint32) {
	h.route(h.deferToJob(c, req, kind, userID))
}

// route resolves a partition operation's job by its kind.
func (h *handler) route(j *job) {
	switch j.Kind {
	case request.KindSend:
		h.routeSend(j)
	case request.KindPoll:
		h.routePoll(j)
	default:
		h.routeOffset(j)
	}
}

// readHere answers a read of the metadata from this shard's view.
func (h *handler) readHere(c *shard.Conn, hdr *wire.RequestHeader, body []byte, sess *session) outcome {
	ch := wire.ClientHeader{ClientID: sess.clientID, UserID: sess.userID, Transport: wire.ClientTransportTCP}
	reply, err := h.readLocal(hdr, body, sess.userID, ch, c.RemoteAddr())
	if err != nil {
		c.ReplyStatus(hdr, errorCode(err, wire.ErrInvalidCommand))
		return outcomeRefused
	}
	rh := wire.ReplyTo(hdr, 0, len(reply), true)
	if b, err := c.Reserve(wire.HeaderSize + len(reply)); err == nil {
		rh.Put(b)
		copy(b[wire.HeaderSize:], reply)
	}
	return outcomeOK
}

// readLocal answers a read of the metadata from this shard's view into its
// scratch (valid until the next read): for userID, whose client (GET_ME) is me,
// at peer.
func (h *handler) readLocal(hdr *wire.RequestHeader, body []byte, userID uint32, me wire.ClientHeader, peer netip.AddrPort) ([]byte, error) {
	state := h.view.State
	var err error
	switch hdr.NonReplicatedCode {
	case wire.CodeGetClusterMetadata:
		if h.srv.cluster != nil {
			h.readReply = h.clusterMetadataFor(h.readReply[:0], peer)
		} else {
			h.readReply = h.srv.appendClusterMetadata(h.readReply[:0])
		}
	case wire.CodeGetMe:
		if peer.IsValid() {
			h.address = peer.AppendTo(h.address[:0])
			me.Address = h.address
		}
		h.readReply = state.AppendClientDetails(h.readReply[:0], me, hdr.Client)
	default:
		var handled bool
		h.readReply, handled, err = state.Read(h.readReply[:0], hdr.NonReplicatedCode, userID, hdr.Client, body, h.srv.stats.Of)
		if !handled {
			err = wire.ErrInvalidCommand
		}
	}
	return h.readReply, err
}

// anonymousOutcome answers a request other than Ping and Register from a
// connection that is not logged in: an eviction, a status, or (both zero) an
// empty reply.
func anonymousOutcome(hdr *wire.RequestHeader) (wire.EvictionReason, wire.ErrorCode) {
	switch hdr.Operation {
	case wire.OperationNonReplicated:
		return 0, wire.ErrUnauthenticated
	case wire.OperationLogout:
		// The reference server answers a logout without a session with an empty reply.
		return 0, 0
	default:
		return wire.EvictionNoSession, 0
	}
}

// forward hands a request to shard 0 in a job, keeping its buffer.
func (h *handler) forward(c *shard.Conn, req *shard.Request, kind request.Kind, userID uint32) {
	h.toMeta(h.deferToJob(c, req, kind, userID))
}

// toMeta posts a job to shard 0.
func (h *handler) toMeta(j *job) {
	h.post(0, shard.Message{Conn: j.Conn, Kind: msgToMeta, Payload: j})
}

// deferToJob puts a request in a job: its buffer retained, its reply deferred until
// the job comes back (deliver).
func (h *handler) deferToJob(c *shard.Conn, req *shard.Request, kind request.Kind, userID uint32) *job {
	j := h.take()
	j.Conn = c.ID()
	j.Kind = kind
	j.UserID = userID
	j.StartNs = h.shard.NowNs()
	j.Frame = req.Retain()
	req.Defer()
	return j
}

// DropMessage implements shard.Dropper: a job posted to a shard that had exited
// already (a reply racing the shutdown) still holds its request frame, which goes
// back to its arena here, once every shard has exited.
func (h *handler) DropMessage(m shard.Message) {
	switch m.Kind {
	case msgReplyLent, msgLentDone:
		// Lent sends may read the job's frame still, and their end reaches no
		// shard now: the frame stays out of the arena, which goes with the
		// runtime.
	case msgToMeta, msgToOwner, msgReply:
		switch j := m.Payload.(*job); {
		case j.Call != nil:
			j.Call.Finish(nil, ErrStopped)
		case h.leader.holds(j):
			// Lent sends read its frame still: the last one to be released, as
			// the closing runtime releases them, recycles it.
		case j.Frame.Header != nil:
			j.Frame.Release()
		}
	case msgReplicaFrame, msgReplicaRelease, msgReplicaPartition:
		m.Payload.(*replicaInbound).frame.Release()
	}
}

// forwardFirst sends an anonymous connection's first request through shard 0 with
// its outcome decided here: a PING answered, anything else refused as the
// unauthenticated are (request.KindOpen).
func (h *handler) forwardFirst(c *shard.Conn, req *shard.Request) {
	hdr := req.Header
	j := h.deferToJob(c, req, request.KindOpen, 0)
	if !(hdr.Operation == wire.OperationNonReplicated && hdr.NonReplicatedCode == wire.CodePing) {
		j.Out.Evict, j.Out.Status = anonymousOutcome(hdr)
	}
	h.post(0, shard.Message{Conn: j.Conn, Kind: msgToMeta, Payload: j})
}

// ServeMessage implements shard.Handler.
func (h *handler) ServeMessage(_ *shard.Shard, m shard.Message) {
	h.catchUpTicks()
	switch m.Kind {
	case msgToMeta:
		h.meta.Serve(m.Payload.(*job))
	case msgToOwner:
		h.catchUpView() // the partition may be newer than this shard's last look
		h.owned.Serve(m.Payload.(*job))
	case msgReply:
		h.deliver(m.Payload.(*job))
	case msgReplyLent:
		j := m.Payload.(*job)
		h.leader.awaitLoan(j)
		h.deliver(j)
	case msgLentDone:
		h.leader.loanDone(m.Payload.(*job))
	case msgViewAdvanced:
		h.catchUpView()
	case msgClientOpened:
		h.meta.ClientOpened(m.Payload.(*metahost.ClientOpened))
	case msgClientGone:
		g := m.Payload.(*metahost.ClientGone)
		// In its turn after the connection's metadata writes: a login of this
		// connection still journaling must not record its session after the
		// connection's cleanup, nor a group join escape its leave.
		h.meta.InTurn(g.Conn, func() { h.meta.ClientGone(g) })
	case msgEvictStale:
		h.evictStale(m.Conn, int64(m.Value))
	case msgPollBuffer:
		h.owned.PollBufferReturned(m.Payload.(*byte))
	case msgReplicaFrame:
		h.metaFrameIn(m.Payload.(*replicaInbound))
	case msgReplicaRelease:
		h.releaseInbound(m.Payload.(*replicaInbound))
	case msgReplicaPartition:
		h.stepPartitionFrame(m.Payload.(*replicaInbound))
	}
	h.flushOutbox()
}

// ConnOpened implements shard.Opener: the connection gets its session state and
// shard 0 lists it (GetClients, GetClient) before it sends anything. The
// registration and the connection's later jobs travel the same ordered queue to
// shard 0, so shard 0 knows a connection before it serves any of its requests.
//
// Client ids interleave over the shards (shard k gives k+1, k+1+n, ...), so that
// each shard names its connections without asking; they are not reused while the
// server runs (2^32 accepts would wrap them), so a GetClient of a closed
// connection's id finds nothing rather than a newer connection.
func (h *handler) ConnOpened(c *shard.Conn) {
	id := h.connsOpened*uint32(h.srv.shardCount) + uint32(h.index) + 1
	h.connsOpened++
	c.Value = &session{clientID: id}
	h.post(0, shard.Message{Conn: c.ID(), Kind: msgClientOpened, Payload: &metahost.ClientOpened{Conn: c.ID(), ID: id, Peer: c.RemoteAddr()}})
}

// ConnClosed implements shard.Handler: the connection leaves shard 0's list, and
// a logged-in client its consumer groups.
func (h *handler) ConnClosed(c *shard.Conn) {
	sess := c.Value.(*session)
	delete(h.bound, c.ID())
	h.post(0, shard.Message{Conn: c.ID(), Kind: msgClientGone, Payload: &metahost.ClientGone{Client: sess.client, Conn: c.ID(), LoggedIn: sess.bound, Epoch: sess.epoch}})
}

// post sends m to target, or keeps it for later when the queue is full (a reply
// must not be lost: the client waits for it), in order behind the others kept.
func (h *handler) post(target int, m shard.Message) {
	if h.stopped {
		return
	}
	if len(h.outbox) == 0 && h.shard.Post(target, m) {
		return
	}
	h.keep(pendingPost{target: target, msg: m})
}

// postControl is post on the control lane between the shards
// (shard.PostControl), which the target serves before its other messages: for the
// metadata group's replica frames, handed to shard 0, and their releases, which
// must not wait behind a flood of partition groups' frames. It keeps no order with
// post's messages.
func (h *handler) postControl(target int, m shard.Message) {
	if h.stopped {
		return
	}
	if h.shard.PostControl(target, m) {
		return
	}
	h.keep(pendingPost{target: target, msg: m, control: true})
}

// outboxRetryNs is how soon a shard tries again to post what found a full queue.
const outboxRetryNs = int64(time.Millisecond)

// keep puts a message that found its queue full in the outbox, and asks for a turn
// to post it again: the target drains its queue meanwhile. (Posting a message to
// itself to retry at once made a shard spin while the target stayed full.)
func (h *handler) keep(p pendingPost) {
	h.outbox = append(h.outbox, p)
	h.shard.WakeAt(h.shard.NowNs() + outboxRetryNs)
}

// flushOutbox posts what the outbox holds, in order, until a queue is full again;
// what is left waits for the next turn (Tick asks for one).
func (h *handler) flushOutbox() {
	n := 0
	for ; n < len(h.outbox); n++ {
		p := &h.outbox[n]
		posted := false
		if p.control {
			posted = h.shard.PostControl(p.target, p.msg)
		} else {
			posted = h.shard.Post(p.target, p.msg)
		}
		if !posted {
			break
		}
	}
	if n > 0 {
		rest := copy(h.outbox, h.outbox[n:])
		clear(h.outbox[rest:])
		h.outbox = h.outbox[:rest]
	}
	if len(h.outbox) > 0 {
		h.shard.WakeAt(h.shard.NowNs() + outboxRetryNs)
	}
}

// reply sends a finished job back to its connection's shard.
func (h *handler) reply(j *job) {
	kind := msgReply
	if h.leader.replyingLent(j) {
		kind = msgReplyLent
	}
	h.post(j.Conn.Shard(), shard.Message{Conn: j.Conn, Kind: kind, Payload: j})
}

func (h *handler) take() *job {
	if n := len(h.free); n > 0 {
		j := h.free[n-1]
		h.free = h.free[:n-1]
		return j
	}
	return &job{Home: h}
}

// recycle releases a job's request buffer and returns it to the free list, or
// leaves that to the last prepare sent from the buffer (leaderlend.go); it runs
// on the job's home shard.
func (h *handler) recycle(j *job) {
	if h.leader.holds(j) || h.leader.awaitsLoan(j) {
		return
	}
	h.recycleNow(j)
}

// recycleNow is recycle once nothing else reads the job's request buffer.
func (h *handler) recycleNow(j *job) {
	if j.Call == nil {
		if poisonReleasedFrames && j.Kind == request.KindSend {
			poison(j.Frame.Body)
		}
		j.Frame.Release() // a call's request is the caller's, in no arena
	}
	h.returnPollBuffer(j)
	if err := j.Poll.Plan.Release(); err != nil {
		h.log.Warn("poll plan release", "err", err)
	}
	reply, parts := j.Out.Reply[:0], j.Poll.Parts[:0]
	res, plan := j.Poll.Res, j.Poll.Plan
	*j = job{Home: h, Out: request.Outcome{Reply: reply}, Poll: request.Poll{Parts: parts, Res: res, Plan: plan}}
	h.free = append(h.free, j)
}

// deliver writes a job's outcome to its connection (on the connection's shard).
func (h *handler) deliver(j *job) {
	if j.Call != nil {
		if h.resumeBound(j) {
			return
		}
		h.requests.record(commandOf(j.Frame.Header), outcomeOf(j), h.shard.NowNs()-j.StartNs)
		h.finishCall(j)
		return
	}
	c := h.shard.Conn(j.Conn)
	if c == nil {
		h.recycle(j)
		return
	}
	c.Answer(j.Frame.Ticket)
	h.requests.record(commandOf(j.Frame.Header), outcomeOf(j), h.shard.NowNs()-j.StartNs)
	h.answer(c, j)
	c.Answered()
}

// answer writes a job's outcome as the reply to its request.
func (h *handler) answer(c *shard.Conn, j *job) {
	hdr := j.Frame.Header
	switch {
	case j.Out.Evict != 0:
		evict(c, hdr.Client, j.Out.Evict)
	case j.Out.Status != 0:
		c.ReplyStatus(hdr, j.Out.Status)
	case j.Kind == request.KindPoll && j.Poll.Read:
		h.deliverPoll(c, j)
		return
	case j.Out.RawFrame:
		if j.Kind == request.KindLogin && j.Login.LoggedIn {
			sess := &session{client: hdr.Client, epoch: j.Login.Epoch, userID: j.UserID, bound: true, seen: j.Login.Seen, answered: true,
				clientID: c.Value.(*session).clientID, token: j.Login.Token}
			c.Value = sess
			h.bound[c.ID()] = sess
		}
		if j.Kind == request.KindWrite && hdr.Operation == wire.OperationLogout {
			// The connection stays registered with shard 0, anonymous again.
			c.Value = &session{answered: true, clientID: c.Value.(*session).clientID}
			delete(h.bound, c.ID())
		}
		if b, err := c.Reserve(len(j.Out.Reply)); err == nil {
			copy(b, j.Out.Reply)
			// A committed or cached frame carries its prepare's time; the reply
			// echoes this request's, as every reply does.
			binary.LittleEndian.PutUint64(b[unsafe.Offsetof(wire.ReplyHeader{}.Timestamp):], hdr.Timestamp)
		}
	default:
		rh := wire.ReplyTo(hdr, 0, len(j.Out.Reply), true)
		if b, err := c.Reserve(wire.HeaderSize + len(j.Out.Reply)); err == nil {
			rh.Put(b)
			copy(b[wire.HeaderSize:], j.Out.Reply)
		}
	}
	h.recycle(j)
}

// vectoredPartsMax is the most parts a poll reply lends to the connection's send
// queue. The runtime's queue holds 64 pieces per connection (shard's
// sendSegmentsMax) and aborts the connection beyond that, so a reply of more
// records is copied into one contiguous buffer instead.
const vectoredPartsMax = 32

// deliverPoll sends a poll reply without copying a message: the header, then the
// stored batches as they lie in the poll's read buffer.
func (h *handler) deliverPoll(c *shard.Conn, j *job) {
	if j.Poll.Plan.Held() {
		h.deliverPlanned(c, j)
		return
	}
	bodySize := j.Poll.Res.ReplySizeBytes()
	rh := wire.ReplyTo(j.Frame.Header, 0, bodySize, true)
	j.Poll.Parts = coalesceContiguous(j.Poll.Res.AppendPollBuffers(j.Poll.Parts[:0]))
	if len(j.Poll.Parts) > vectoredPartsMax {
		b, err := c.Reserve(wire.HeaderSize + bodySize)
		if err == nil {
			rh.Put(b)
			at := wire.HeaderSize
			for _, p := range j.Poll.Parts {
				at += copy(b[at:], p)
			}
		}
		h.recycle(j)
		return
	}
	b, err := c.Reserve(wire.HeaderSize)
	if err != nil {
		h.recycle(j)
		return
	}
	rh.Put(b)
	if err := c.SendVectored(j.Poll.Parts, j); err != nil {
		h.recycle(j)
	}
}

// coalesceContiguous merges neighbouring parts that lie back to back in one
// array (whole stored batches read in one go: header, frames, next header...), so
// a poll of many records usually needs a few pieces of the send queue, not two per
// record.
func coalesceContiguous(parts [][]byte) [][]byte {
	if len(parts) < 2 {
		return parts
	}
	out := parts[:1]
	for _, p := range parts[1:] {
		last := &out[len(out)-1]
		if len(p) > 0 && len(*last) > 0 && cap(*last)-len(*last) >= len(p) &&
			unsafe.Add(unsafe.Pointer(unsafe.SliceData(*last)), len(*last)) == unsafe.Pointer(unsafe.SliceData(p)) {
			*last = (*last)[:len(*last)+len(p)]
			continue
		}
		out = append(out, p)
	}
	return out
}

func (h *handler) replyEmpty(c *shard.Conn, hdr *wire.RequestHeader) {
	rh := wire.ReplyTo(hdr, 0, 0, true)
	if b, err := c.Reserve(wire.HeaderSize); err == nil {
		rh.Put(b)
	}
}

// evict ends a session with an Eviction frame; reason 14 carries the accepted
// protocol window.
func evict(c *shard.Conn, client wire.Uint128, reason wire.EvictionReason) {
	if reason == wire.EvictionIncompatibleProtocol {
		c.EvictIncompatibleProtocol(client, wire.AcceptedProtocolWindow)
		return
	}
	c.Evict(client, reason)
}

// now is the server's wall clock: time.Now, or the clock a test moves
// (testHooks.clock). Every reading of time in the server goes through it or through
// the shard's clock (Shard.NowNs), which follows the same clock in tests.
func (s *Server) now() time.Time {
	if s.cfg.clock != nil {
		return s.cfg.clock()
	}
	return time.Now()
}

func (s *Server) nowMicros() uint64 { return uint64(s.now().UnixMicro()) }

// errorCode turns an error from a package below into the code to answer with.
func errorCode(err error, fallback wire.ErrorCode) wire.ErrorCode {
	if code, ok := err.(wire.ErrorCode); ok && code != 0 {
		return code
	}
	return fallback
}
