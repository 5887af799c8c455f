package sim

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"

	"github.com/zeebo/xxh3"

	"github.com/iggy-shard/iggy-shard/metadata"
	"github.com/iggy-shard/iggy-shard/vsr"
	"github.com/iggy-shard/iggy-shard/wire"
)

type clientRequest struct {
	client int
	// group is the index of the consensus group the request is for.
	group     int
	register  bool
	session   uint64
	request   uint64
	operation wire.Operation
	body      []byte
}

type clientReply struct {
	client   int
	group    int
	register bool
	// evicted: the session is gone (or older than the client's latest
	// registration): register again.
	evicted bool
	// refused: admission denied the request with a status; nothing committed.
	refused bool
	epoch   uint64
	request uint64
	op      uint64
	// baseOffset is where the real partition store put an acknowledged send.
	baseOffset uint64
	// frame is the committed reply (metadata: the whole reply frame the client
	// table caches; partition groups: the stand-in's reply body, or the batch as
	// the real store stamped and acknowledged it).
	frame []byte
}

func sameReply(a, b *clientReply) bool {
	return a.group == b.group && a.refused == b.refused && a.op == b.op && bytes.Equal(a.frame, b.frame)
}

type client struct {
	id          int
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
		if c.opts.RealPartitions {
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
		var payload []byte
		if r.IntN(3) == 0 {
			p.operation = wire.OperationStoreConsumerOffset
			payload = binary.LittleEndian.AppendUint32(nil, uint32(r.IntN(consumersCount)))
			payload = binary.LittleEndian.AppendUint64(payload, r.Uint64N(1000))
		} else {
			p.operation = wire.OperationSendMessages
			payload = make([]byte, 16+r.IntN(48))
			for i := range payload {
				payload[i] = byte(r.Uint32())
			}
		}
		p.body = sealPartitionBody(payload)
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
	p := requestPlan{group: metadataGroupIndex}
	switch k := r.IntN(40); {
	case k < 6:
		p.operation = wire.OperationCreateStream
		p.body = encoded((&wire.CreateStream{Name: fmt.Appendf(nil, "s%d", r.IntN(streamNamesCount))}).Append(nil))
	case k < 8:
		p.operation = wire.OperationUpdateStream
		p.body = encoded((&wire.UpdateStream{StreamID: stream(), Name: fmt.Appendf(nil, "s%d", r.IntN(streamNamesCount+2))}).Append(nil))
	case k < 9:
		p.operation = wire.OperationDeleteStream
		p.body = encoded((&wire.DeleteStream{StreamID: stream()}).Append(nil))
	case k < 16:
		// Create topics most: partitions and consumer groups need them.
		p.operation = wire.OperationCreateTopic
		p.body = encoded((&wire.CreateTopic{StreamID: stream(), PartitionsCount: 1 + uint32(r.IntN(3)), Name: fmt.Appendf(nil, "t%d", r.IntN(topicNamesCount))}).Append(nil))
	case k < 18:
		p.operation = wire.OperationDeleteTopic
		p.body = encoded((&wire.DeleteTopic{StreamID: stream(), TopicID: topic()}).Append(nil))
	case k < 19:
		p.operation = wire.OperationPurgeTopic
		p.body = encoded((&wire.PurgeTopic{StreamID: stream(), TopicID: topic()}).Append(nil))
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
		// The proposal of a CreateUser carries the password's hash, as the server
		// proposes it (metadata.ProposeCreateUser); the one hash stands in for
		// every password, so no argon2id runs per request.
		p.operation = wire.OperationCreateUser
		p.body = encoded((&wire.CreateUser{Username: fmt.Appendf(nil, "user%d", r.IntN(userNamesCount)), Password: []byte(rootPasswordHash()), Status: wire.UserActive}).Append(nil))
	case k < 38:
		p.operation = wire.OperationDeleteUser
		p.body = encoded((&wire.DeleteUser{UserID: wire.NumericIdentifier(uint32(r.IntN(userNamesCount + 1)))}).Append(nil))
	default:
		// A logout ends the session: the client logs in again for its next request.
		p.operation = wire.OperationLogout
		p.body = []byte{}
	}
	return p
}

func (c *cluster) onRequest(nd *node, r *clientRequest) {
	if r.group != metadataGroupIndex && c.opts.RealPartitions {
		c.onStoreRequest(nd, r)
		return
	}
	id := wire.Uint128{Lo: uint64(r.client) + 1}
	gr := nd.groups[r.group]
	if nd.up && r.register && gr.core.Status() == vsr.StatusNormal && !gr.core.IsPrimary() {
		// A login at a backup: authenticated here, forwarded to the primary.
		if err := gr.driver.ForwardRegister(id, metadata.RootUserID, uint64(r.client)); err == nil {
			c.drainGroup(gr)
		}
		return
	}
	if !nd.up || !gr.core.IsPrimary() {
		return
	}
	checksum := wire.RequestChecksum(r.body)
	p := vsr.Proposal{Client: id, Request: r.request, Operation: r.operation, RequestChecksum: checksum}
	switch {
	case r.register:
		p.Operation, p.Request, p.UserID = wire.OperationRegister, 0, metadata.RootUserID
	case gr.meta != nil:
		verdict, cached := gr.meta.table.Preflight(id, r.session, r.request, checksum)
		switch verdict {
		case vsr.PreflightExecute:
		case vsr.PreflightReplay:
			reply := clientReply{client: r.client, group: r.group, request: r.request, frame: bytes.Clone(cached)}
			var rh wire.ReplyHeader
			copy(wire.HeaderBytes(&rh)[:], cached)
			reply.op = rh.Op
			c.sendClient(nd.id, c.opts.Replicas+r.client, packet{reply: &reply})
			return
		case vsr.PreflightNoSession, vsr.PreflightSessionTooLow:
			c.sendClient(nd.id, c.opts.Replicas+r.client, packet{reply: &clientReply{client: r.client, group: r.group, evicted: true, request: r.request}})
			return
		case vsr.PreflightSessionTooHigh:
			return // a session this replica has not applied yet
		case vsr.PreflightAlreadyApplied:
			// A late copy of a request the client has given up on (it was denied
			// at admission, and a newer one committed since): the server answers a
			// status it no longer waits for. Its outstanding request never gets
			// here: committed, it is the latest one, whose reply is cached.
			if cl := c.clients[r.client]; cl.outstanding && cl.request == r.request {
				c.fail("replica %d: the outstanding request %d of client %d is already applied but not cached", nd.id, r.request, r.client)
			}
			return
		default:
			c.fail("replica %d: request %d of client %d: preflight %v", nd.id, r.request, r.client, verdict)
			return
		}
		_, userID, _ := gr.meta.table.Session(id)
		p.UserID = userID
		if r.operation != wire.OperationLogout {
			if err := gr.meta.state.Admit(r.operation, userID, r.body); err != nil {
				c.result.AdmitRefused++
				c.sendClient(nd.id, c.opts.Replicas+r.client, packet{reply: &clientReply{client: r.client, group: r.group, refused: true, request: r.request}})
				return
			}
		}
	}
	if gr.core.InPipeline(id) {
		return
	}
	c.proposalToken++
	gr.proposals[c.proposalToken] = pendingProposal{proposal: p, body: r.body, nowMicros: c.now * 1000}
	if err := gr.driver.Propose(c.proposalToken); err != nil {
		delete(gr.proposals, c.proposalToken)
		return
	}
	c.drainGroup(gr)
}

func (c *cluster) onReply(r *clientReply) {
	cl := c.clients[r.client]
	switch {
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
	case r.register:
		if cl.session == 0 && cl.outstanding {
			cl.session = r.epoch
			cl.sentAt = 0 // send the request now
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
			c.result.PartitionAcks++
			c.finish(cl)
		}
		return
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
	if cl.plan.operation == wire.OperationLogout {
		cl.session = 0
	}
	c.finish(cl)
}

func (c *cluster) finish(cl *client) {
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
		cl.plan = c.planRequest(cl)
	} else if cl.sentAt != 0 {
		// No answer: retry at the next replica, as an SDK walks its list of nodes
		// (so it reaches any group's primary within Replicas retries; a random jump
		// could miss it for thousands of ticks).
		cl.target = (cl.target + 1) % c.opts.Replicas
	}
	cl.sentAt = c.now
	req := &clientRequest{client: cl.id, group: cl.plan.group, request: cl.request, operation: cl.plan.operation, body: cl.plan.body, session: cl.session}
	if cl.session == 0 {
		// Every request, partition ones included, goes out from a logged-in session.
		req = &clientRequest{client: cl.id, group: metadataGroupIndex, register: true, body: []byte{'r', byte(cl.id)}}
	}
	c.sendClient(c.opts.Replicas+cl.id, cl.target, packet{request: req})
}
