package sim

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"

	"github.com/zeebo/xxh3"

	"github.com/iggy-shard/iggy-shard/metadata"
	"github.com/iggy-shard/iggy-shard/metaplane"
	"github.com/iggy-shard/iggy-shard/wire"
)

type clientRequest struct {
	client int
	// id is the client id of the session (a fresh one per registration, as the
	// SDKs mint them).
	id wire.Uint128
	// group is the index of the consensus group the request is for.
	group     int
	register  bool
	session   uint64
	request   uint64
	operation wire.Operation
	body      []byte
	// close: the connection of the session (id, session) closed at the node.
	close bool
}

type clientReply struct {
	client   int
	group    int
	register bool
	// session is the epoch the request was sent under.
	session uint64
	// evicted: the session is gone (or older than the client's latest
	// registration): register again.
	evicted bool
	// refused: admission denied the request with a status; nothing committed.
	refused bool
	// transient: 58 or 57, status: which; the client retries elsewhere.
	transient bool
	status    wire.ErrorCode
	epoch     uint64
	request   uint64
	op        uint64
	// baseOffset is where the real partition store put an acknowledged send, in
	// the partition's life life (the purge generation it was admitted in).
	baseOffset uint64
	life       uint64
	// frame is the committed reply (metadata: the whole reply frame the client
	// table caches; partition groups: the stand-in's reply body, or the batch as
	// the real store stamped and acknowledged it).
	frame []byte
}

func sameReply(a, b *clientReply) bool {
	return a.group == b.group && a.refused == b.refused && a.op == b.op && bytes.Equal(a.frame, b.frame)
}

type client struct {
	id int
	// generation counts the client's registrations: the id of its session is
	// {id+1, generation}; previous is the id before the current one.
	generation  uint64
	sessionID   wire.Uint128
	previousID  wire.Uint128
	sessionNode int
	// attempts is how many times the outstanding request was sent.
	attempts    int
	request     uint64
	outstanding bool
	sentAt      uint64
	target      int
	finished    int
	// replies holds the first reply of each metadata request.
	replies map[uint64]clientReply
	// partitionReplies holds every reply of partition requests, duplicates of a
	// request prepared twice included (sends are at-least-once).
	partitionReplies []clientReply
	// session is the epoch of the client's registration; zero until registered.
	session uint64
	// plan is the outstanding request (every retry sends the same).
	plan requestPlan
}

// requestPlan is what one request of a client asks: a function of the seed, the
// client and the request number, so every retry carries the same bytes.
type requestPlan struct {
	group     int
	operation wire.Operation
	body      []byte
}

// Name pools are small, so that many writes are refused at apply (a name taken,
// an id not found): committed refusals are replies like any other.
const (
	streamNamesCount = 4
	streamIDMax      = 3
	topicNamesCount  = 3
	topicIDMax       = 2
	groupNamesCount  = 2
	userNamesCount   = 4
	consumersCount   = 4
)

func encoded(b []byte, err error) []byte {
	if err != nil {
		panic(fmt.Sprintf("sim: a workload body does not encode: %v", err))
	}
	return b
}

// planRequest draws a request: half of them metadata writes with real bodies, half
// sends and consumer-offset stores to a partition group.
func (c *cluster) planRequest(cl *client) requestPlan {
	seed := xxh3.HashSeed([]byte{byte(cl.id)}, cl.request^c.opts.Seed*0x9E3779B97F4A7C15)
	r := rand.New(rand.NewPCG(seed, uint64(cl.id)))
	if partitions := len(c.groups) - 1; partitions > 0 && r.IntN(2) == 0 {
		p := requestPlan{group: 1 + r.IntN(partitions)}
		// A real batch, or an offset store as [consumer u32][offset u64] (an
		// offset above the partition's current one is refused with 4100).
		if r.IntN(3) == 0 {
			p.operation = wire.OperationStoreConsumerOffset
			p.body = binary.LittleEndian.AppendUint32(nil, uint32(r.IntN(consumersCount)))
			p.body = binary.LittleEndian.AppendUint64(p.body, r.Uint64N(16))
		} else {
			p.operation = wire.OperationSendMessages
			p.body = storeBatch(r)
		}
		return p
	}
	stream := func() wire.Identifier {
		if r.IntN(4) == 0 {
			return wire.StringIdentifier(fmt.Appendf(nil, "s%d", r.IntN(streamNamesCount)))
		}
		return wire.NumericIdentifier(1 + uint32(r.IntN(streamIDMax)))
	}
	topic := func() wire.Identifier { return wire.NumericIdentifier(1 + uint32(r.IntN(topicIDMax))) }
	group := func() wire.GroupTarget {
		return wire.GroupTarget{StreamID: stream(), TopicID: topic(), GroupID: wire.NumericIdentifier(1 + uint32(r.IntN(groupNamesCount)))}
	}
	// The partition groups are the partitions of stream 1 topic 1 (purge.go): no
	// op may delete them (a stream or topic deleted only by an id other than
	// theirs), and they are purged by ops of their own, often, unless some node
	// sends untagged group ids (a purge there mixes the lives, as before the tag:
	// partition/incarnation.go), with Options.PurgeGroups.
	guarded := len(c.groups) > 1
	otherStream := func() wire.Identifier {
		if !guarded {
			return stream()
		}
		return wire.NumericIdentifier(simStreamID + 1 + uint32(r.IntN(streamIDMax-1)))
	}
	kinds := 40
	if guarded && c.opts.PurgeGroups && !c.opts.UntaggedGroups {
		kinds += simTopicPurgeKinds
	}
	p := requestPlan{group: metadataGroupIndex}
	switch k := r.IntN(kinds); {
	case k < 6:
		p.operation = wire.OperationCreateStream
		p.body = encoded((&wire.CreateStream{Name: fmt.Appendf(nil, "s%d", r.IntN(streamNamesCount))}).Append(nil))
	case k < 8:
		p.operation = wire.OperationUpdateStream
		p.body = encoded((&wire.UpdateStream{StreamID: stream(), Name: fmt.Appendf(nil, "s%d", r.IntN(streamNamesCount+2))}).Append(nil))
	case k < 9:
		p.operation = wire.OperationDeleteStream
		p.body = encoded((&wire.DeleteStream{StreamID: otherStream()}).Append(nil))
	case k < 16:
		// Create topics most: partitions and consumer groups need them.
		p.operation = wire.OperationCreateTopic
		p.body = encoded((&wire.CreateTopic{StreamID: stream(), PartitionsCount: 1 + uint32(r.IntN(3)), Name: fmt.Appendf(nil, "t%d", r.IntN(topicNamesCount))}).Append(nil))
	case k < 18:
		p.operation = wire.OperationDeleteTopic
		del := wire.DeleteTopic{StreamID: stream(), TopicID: topic()}
		if guarded && r.IntN(2) == 0 {
			del.TopicID = wire.NumericIdentifier(simTopicID + 1)
		} else if guarded {
			del.StreamID = otherStream()
		}
		p.body = encoded(del.Append(nil))
	case k < 19:
		p.operation = wire.OperationPurgeTopic
		p.body = encoded((&wire.PurgeTopic{StreamID: otherStream(), TopicID: topic()}).Append(nil))
	case k < 21:
		// A count of zero is denied at admission (ErrTooManyPartitions), before
		// consensus: the client gets a status, nothing commits.
		p.operation = wire.OperationCreatePartitions
		p.body = encoded((&wire.CreatePartitions{StreamID: stream(), TopicID: topic(), PartitionsCount: uint32(r.IntN(3))}).Append(nil))
	case k < 22:
		p.operation = wire.OperationDeletePartitions
		p.body = encoded((&wire.DeletePartitions{StreamID: stream(), TopicID: topic(), PartitionsCount: 1}).Append(nil))
	case k < 25:
		p.operation = wire.OperationCreateConsumerGroup
		p.body = encoded((&wire.CreateConsumerGroup{StreamID: stream(), TopicID: topic(), Name: fmt.Appendf(nil, "g%d", r.IntN(groupNamesCount))}).Append(nil))
	case k < 28:
		p.operation = wire.OperationJoinConsumerGroup
		p.body = encoded((&wire.JoinConsumerGroup{GroupTarget: group()}).Append(nil))
	case k < 30:
		p.operation = wire.OperationLeaveConsumerGroup
		p.body = encoded((&wire.LeaveConsumerGroup{GroupTarget: group()}).Append(nil))
	case k < 31:
		p.operation = wire.OperationDeleteConsumerGroup
		p.body = encoded((&wire.DeleteConsumerGroup{GroupTarget: group()}).Append(nil))
	case k < 35:
		// The plane has the host hash the password (metaReplica.HashPassword: the
		// one hash stands in for every password, so no argon2id runs per request).
		p.operation = wire.OperationCreateUser
		p.body = encoded((&wire.CreateUser{Username: fmt.Appendf(nil, "user%d", r.IntN(userNamesCount)), Password: []byte("secret"), Status: wire.UserActive}).Append(nil))
	case k < 38:
		p.operation = wire.OperationDeleteUser
		p.body = encoded((&wire.DeleteUser{UserID: wire.NumericIdentifier(uint32(r.IntN(userNamesCount + 1)))}).Append(nil))
	case k < 40:
		// A logout ends the session: the client logs in again for its next request.
		p.operation = wire.OperationLogout
		p.body = []byte{}
	case k < 41:
		// The groups' stream and topic, early (refusals once they are there; the
		// first stream created is stream 1).
		p.operation = wire.OperationCreateStream
		p.body = encoded((&wire.CreateStream{Name: fmt.Appendf(nil, "s%d", r.IntN(streamNamesCount))}).Append(nil))
	case k < 43:
		p.operation = wire.OperationCreateTopic
		p.body = encoded((&wire.CreateTopic{StreamID: wire.NumericIdentifier(simStreamID), PartitionsCount: uint32(len(c.groups) - 1), Name: []byte("t0")}).Append(nil))
	case k < 40+simTopicPurgeKinds-1:
		p.operation = wire.OperationPurgeTopic
		p.body = encoded((&wire.PurgeTopic{StreamID: wire.NumericIdentifier(simStreamID), TopicID: wire.NumericIdentifier(simTopicID)}).Append(nil))
	default:
		p.operation = wire.OperationPurgeStream
		p.body = encoded((&wire.PurgeStream{StreamID: wire.NumericIdentifier(simStreamID)}).Append(nil))
	}
	return p
}

// simTopicPurgeKinds is the share of metadata writes (in 40 + it) for the
// partition groups' topic: one creates a stream, two the topic, one purges its
// stream, the others purge it. With half the requests metadata writes, most short seeds commit
// several purges, sends in flight.
const simTopicPurgeKinds = 12

func (c *cluster) onRequest(nd *node, r *clientRequest) {
	if r.group != metadataGroupIndex {
		c.onStoreRequest(nd, r)
		return
	}
	mr := nd.meta
	if !nd.up || mr.plane == nil {
		return
	}
	p := mr.plane
	if r.close {
		c.onClose(nd, r)
		return
	}
	hdr := &wire.RequestHeader{Client: r.id, Session: r.session, Request: r.request, Operation: r.operation}
	hdr.Cluster = wire.ClusterID(clusterName)
	hdr.RequestChecksum = wire.RequestChecksum(r.body)
	c.requestToken++
	token := c.requestToken
	mr.pending[token] = &pendingRequest{client: r.client, request: r.request, register: r.register, session: r.session}
	now := c.now * 1000
	if r.register {
		hdr.Operation, hdr.Request, hdr.Session = wire.OperationRegister, 0, 0
		hdr.RequestChecksum = wire.RequestChecksum(r.body)
		if !p.IsPrimary() {
			mr.forwarded[token] = true
		}
		p.Register(token, hdr, metadata.RootUserID, now)
		return
	}
	p.Write(token, metaplane.Request{Header: hdr, UserID: metadata.RootUserID, Body: r.body, NowMicros: now})
}

// onClose is a client's connection closing at the node that held it: the node
// ends its session through the log (metaplane's EndSession), as the server does.
func (c *cluster) onClose(nd *node, r *clientRequest) {
	if r.session != 0 {
		nd.meta.plane.EndSession(r.id, r.session, c.now*1000)
	}
}

func (c *cluster) onReply(r *clientReply) {
	cl := c.clients[r.client]
	c.trace("c%d <- request %d session %d register %v: op %d evicted %v refused %v transient %v %v epoch %d", r.client, r.request, r.session, r.register, r.op, r.evicted, r.refused, r.transient, r.status, r.epoch)
	switch {
	case r.register:
		if cl.session == 0 && cl.outstanding && r.frame != nil && r.request == 0 {
			cl.session = r.epoch
			cl.sentAt = 0 // send the request now
		}
		if r.transient || r.refused || r.evicted {
			// Registered again soon, at the next node (clientTick).
			cl.sentAt = min(cl.sentAt, c.now-clientRetryTick+transientRetryTicks)
		}
		return
	case r.group == metadataGroupIndex && (r.session != cl.session || r.session == 0):
		return // a reply to a session the client left
	case r.evicted:
		if cl.outstanding && r.request == cl.request {
			if cl.plan.operation == wire.OperationLogout {
				// A retried logout that was applied: the session is gone, as asked.
				c.finish(cl)
				cl.session = 0
				return
			}
			cl.session = 0
			cl.sentAt = 0 // re-register at the next tick
		}
		return
	case r.transient:
		if cl.outstanding && r.request == cl.request && r.group == metadataGroupIndex && r.status == wire.ErrTransientNotAccepted &&
			cl.attempts == 1 && c.rngWork.IntN(2) == 0 {
			// 58 to the request's only send says it was not admitted there, never
			// prepared: given up now, it must never be in the log.
			c.meta.refused58[requestKey{client: cl.sessionID, request: r.request}] = c.now
			cl.outstanding = false
			c.result.Clients.Refused58++
			return
		}
		if cl.outstanding && r.request == cl.request {
			// Not accepted here (a backup, a view changing) or its fate unknown:
			// the same request again, a little later, at the next node
			// (clientTick).
			cl.sentAt = min(cl.sentAt, c.now-clientRetryTick+transientRetryTicks)
		}
		return
	}
	if r.request > cl.request {
		c.fail("client %d got a reply to request %d it never sent", r.client, r.request)
		return
	}
	if r.group != metadataGroupIndex {
		if !r.refused {
			cl.partitionReplies = append(cl.partitionReplies, *r)
		}
		if r.request == cl.request && cl.outstanding {
			c.result.Partitions.Acks++
			c.finish(cl)
		}
		return
	}
	if !r.refused && replyOperation(r.frame) != wire.OperationLogout {
		// Every reply is the one cached for the request: the frame of the op
		// that executed it, on every replica. (A Logout's is not checked here: its
		// session's entry goes with it, and its reply is kept apart, in the
		// client table's record of logouts, vsr/logouts.go.)
		if first, ok := c.meta.outcomes[r.op]; !ok || first.skipped || first.replyDigest != xxh3.Hash(r.frame) {
			c.fail("client %d request %d answered with a reply of op %d that is not the reply cached for it (applied %v)", r.client, r.request, r.op, ok)
			return
		}
	}
	if previous, ok := cl.replies[r.request]; ok {
		if !previous.refused && !r.refused && !sameReply(&previous, r) {
			c.fail("client %d request %d answered twice differently: op %d reply %x, then op %d reply %x",
				r.client, r.request, previous.op, xxh3.Hash(previous.frame), r.op, xxh3.Hash(r.frame))
		}
		return
	}
	if r.request != cl.request || !cl.outstanding {
		return
	}
	cl.replies[r.request] = *r
	if cl.plan.operation == wire.OperationLogout && !r.refused {
		cl.session = 0
	}
	c.finish(cl)
}

// replyOperation is the operation a reply frame answers.
func replyOperation(frame []byte) wire.Operation {
	var rh wire.ReplyHeader
	copy(wire.HeaderBytes(&rh)[:], frame)
	return rh.Operation
}

// transientRetryTicks is how soon a client retries a request answered 58 or 57.
const transientRetryTicks = 10

func (c *cluster) finish(cl *client) {
	cl.outstanding = false
	c.result.Acknowledged++
	if c.healed {
		cl.finished++
	}
}

// register starts a new session: a fresh client id, as the SDKs mint one per
// connection, or, now and then, the previous one again (a robustness case: the
// table binds it anew, its requests numbered on).
func (c *cluster) register(cl *client) *clientRequest {
	if cl.sentAt == 0 || c.now-cl.sentAt >= clientRetryTick {
		if !cl.sessionID.IsZero() && c.rngWork.IntN(8) == 0 {
			cl.sessionID, cl.previousID = cl.previousID, cl.sessionID
		} else {
			cl.generation++
			cl.previousID, cl.sessionID = cl.sessionID, wire.Uint128{Lo: uint64(cl.id) + 1, Hi: cl.generation}
		}
		if cl.sessionID.IsZero() {
			cl.generation++
			cl.sessionID = wire.Uint128{Lo: uint64(cl.id) + 1, Hi: cl.generation}
		}
	}
	cl.sessionNode = cl.target
	return &clientRequest{client: cl.id, id: cl.sessionID, group: metadataGroupIndex, register: true, body: []byte{'r', byte(cl.id), byte(cl.generation)}}
}

// disconnect closes the client's connection: the node that held it learns of the
// close (the packet may be lost with the node), and the client's outstanding
// request, if any, is given up; the next one goes out under a new session.
func (c *cluster) disconnect(cl *client) {
	c.sendClient(c.opts.Replicas+cl.id, cl.sessionNode, packet{request: &clientRequest{client: cl.id, id: cl.sessionID, group: metadataGroupIndex,
		session: cl.session, close: true}})
	c.result.Clients.Disconnects++
	if cl.outstanding {
		cl.outstanding = false
		c.result.Clients.Abandoned++
	}
	cl.session, cl.sentAt = 0, 0
	c.trace("c%d disconnects from r%d", cl.id, cl.sessionNode)
}

func (c *cluster) clientTick(cl *client) {
	if cl.session != 0 && !c.healed && c.rngWork.IntN(disconnectOneIn) == 0 {
		c.disconnect(cl)
	}
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
		cl.plan = c.planRequest(cl)
		cl.attempts = 0
	} else if cl.sentAt != 0 {
		// No answer: retry at the next replica, as an SDK walks its list of nodes
		// (so it reaches any group's primary within Replicas retries; a random jump
		// could miss it for thousands of ticks).
		cl.target = (cl.target + 1) % c.opts.Replicas
	}
	var req *clientRequest
	if cl.session == 0 {
		// Every request, partition ones included, goes out from a logged-in session.
		req = c.register(cl)
	} else {
		req = &clientRequest{client: cl.id, id: cl.sessionID, group: cl.plan.group, request: cl.request, operation: cl.plan.operation, body: cl.plan.body, session: cl.session}
		cl.attempts++
	}
	cl.sentAt = c.now
	c.trace("c%d -> r%d %v request %d session %d register %v", cl.id, cl.target, req.operation, req.request, req.session, req.register)
	c.sendClient(c.opts.Replicas+cl.id, cl.target, packet{request: req})
}

// disconnectOneIn: a logged-in client closes its connection with a chance of one
// in this many per tick while the faults last.
const disconnectOneIn = 400
