package metadata

import (
	"bytes"
	"slices"

	"github.com/iggy-shard/iggy-shard/wire"
)

// Header is what Apply needs from a committed prepare's header.
type Header struct {
	Operation wire.Operation
	// Client is the requesting client's id: consumer group membership is keyed by it.
	Client wire.Uint128
	// UserID is the acting user, stamped at admission; authorization is decided
	// from it and the state as of the previous op, so every replica decides alike.
	UserID uint32
	// TimestampMicros is the prepare timestamp: created_at of new objects and the
	// base of token expiry. Apply reads no clock.
	TimestampMicros uint64
}

// Output is what one Apply produced. Its slices are reused: Apply truncates Reply
// and Effects and appends to them, so a caller that keeps one Output allocates
// nothing for replies once the buffers have grown.
type Output struct {
	// Operation is the reply header's operation byte (64, 65 and 68 for CreateTopic,
	// CreatePartitions and DeleteSegments, else the request's).
	Operation wire.Operation
	// Result is 0 when the operation took effect, or the committed rejection code.
	Result wire.ErrorCode
	// Reply is the complete reply body: for result-framed operations the result
	// section and the payload, for Logout nothing.
	Reply []byte
	// Effects are what the server must carry out, in order, after the reply is
	// cached (partition directories, files, truncations). Empty on rejection.
	Effects []Effect
}

// EffectKind says what an Effect asks the server to do.
type EffectKind uint8

// Effects.
const (
	// EffectCreatePartitions: create partitions First..First+Count-1 of Stream/Topic
	// (directories, logs, consensus groups), with the topic's options.
	EffectCreatePartitions EffectKind = iota + 1
	// EffectDeletePartitions: delete partitions First..First+Count-1 of Stream/Topic
	// and their files.
	EffectDeletePartitions
	// EffectDeleteTopic: delete every partition and file of Stream/Topic (Count is
	// the number of partitions it had).
	EffectDeleteTopic
	// EffectDeleteStream: delete every topic and file of Stream.
	EffectDeleteStream
	// EffectPurgeTopic: drop every message of Stream/Topic up to purge generation
	// Generation, idempotently (a partition already at Generation skips it).
	EffectPurgeTopic
	// EffectDeleteSegments: delete the Count oldest sealed segments of partition
	// First of Stream/Topic (the server resolves them to a truncation offset).
	EffectDeleteSegments
	// EffectDeleteConsumerGroup: drop the stored offsets of group Group of
	// Stream/Topic.
	EffectDeleteConsumerGroup
	// EffectUpdateTopic: the topic's retention options (message expiry, max size)
	// changed; the server reloads them from State.
	EffectUpdateTopic
)

var effectNames = [...]string{
	EffectCreatePartitions:    "CreatePartitions",
	EffectDeletePartitions:    "DeletePartitions",
	EffectDeleteTopic:         "DeleteTopic",
	EffectDeleteStream:        "DeleteStream",
	EffectPurgeTopic:          "PurgeTopic",
	EffectDeleteSegments:      "DeleteSegments",
	EffectDeleteConsumerGroup: "DeleteConsumerGroup",
	EffectUpdateTopic:         "UpdateTopic",
}

func (k EffectKind) String() string {
	if int(k) < len(effectNames) && effectNames[k] != "" {
		return effectNames[k]
	}
	return "EffectKind(?)"
}

// Effect is one instruction to the server; which fields matter depends on Kind.
type Effect struct {
	Kind       EffectKind
	Stream     uint32
	Topic      uint32
	First      uint32 // first partition id
	Count      uint32 // partitions or segments
	Group      uint32
	Generation uint64
}

// Apply applies one committed metadata operation. It is deterministic: the result
// depends only on the state, h and body, never on a clock or randomness, so
// replaying the journal rebuilds the state exactly. Every outcome is a value:
// a malformed body (which admission should have refused) commits as a rejection
// with ErrInvalidCommand and no change, and nothing the body holds can make it panic.
//
// Bodies are the client's request bodies except where the server rewrites them
// before proposing (ProposeCreateUser, ProposeChangePassword,
// ProposeCreatePersonalAccessToken, AppendClientGoneProposal, ProposeRootUser:
// a CreateUser under client id 0; AppendEndSessions; AppendRevokeTokens). Register is the
// client table's (package vsr) and not applied here; Logout (operation 3),
// RemoveConsumerGroupMember (66) and EndSessions (69) remove clients from every
// consumer group. A
// primary may prepare CreateTopic, CreatePartitions and DeleteSegments under the
// internal operation their reply carries (64, 65, 68), as the reference server
// does; the body is the client's either way.
func (s *State) Apply(h Header, body []byte, out *Output) {
	out.Reply = out.Reply[:0]
	out.Effects = out.Effects[:0]
	out.Result = 0
	out.Operation = wire.ReplyOperation(h.Operation, true)
	// Revoked tokens leave at the first op applied after they expire, by the
	// prepare's clock: on every replica at the same op.
	s.revoked.Prune(h.TimestampMicros)
	a := s.access(h.UserID)
	var code wire.ErrorCode
	switch h.Operation {
	case wire.OperationLogout:
		// Not result-framed: the reply is an empty body.
		s.clientGone(h.Client)
		return
	case wire.OperationRemoveConsumerGroupMember:
		client, ok := decodeClientGone(body)
		if !ok {
			code = wire.ErrInvalidCommand
			break
		}
		s.clientGone(client)
		out.Reply = wire.AppendResultSuccess(out.Reply)
	case wire.OperationEndSessions:
		// The sessions whose connections closed: each client leaves every
		// consumer group (its client table entry goes with the session, package
		// metaplane). Not result-framed: it answers no one.
		ends, ok := DecodeEndSessions(body)
		if !ok {
			code = wire.ErrInvalidCommand
			break
		}
		for _, e := range ends {
			s.clientGone(e.Client)
		}
		return
	case wire.OperationRevokeTokens:
		// Result-framed: the node that proposed it answers its logout from it.
		code = s.applyRevokeTokens(&h, body, out)
	case wire.OperationCreateStream:
		code = s.applyCreateStream(a, &h, body, out)
	case wire.OperationUpdateStream:
		code = s.applyUpdateStream(a, body, out)
	case wire.OperationDeleteStream:
		code = s.applyDeleteStream(a, body, out)
	case wire.OperationPurgeStream:
		code = s.applyPurgeStream(a, body, out)
	case wire.OperationCreateTopic, wire.OperationCreateTopicWithAssignments:
		code = s.applyCreateTopic(a, &h, body, out)
	case wire.OperationUpdateTopic:
		code = s.applyUpdateTopic(a, body, out)
	case wire.OperationDeleteTopic:
		code = s.applyDeleteTopic(a, body, out)
	case wire.OperationPurgeTopic:
		code = s.applyPurgeTopic(a, body, out)
	case wire.OperationCreatePartitions, wire.OperationCreatePartitionsWithAssignments:
		code = s.applyCreatePartitions(a, &h, body, out)
	case wire.OperationDeletePartitions:
		code = s.applyDeletePartitions(a, body, out)
	case wire.OperationDeleteSegments, wire.OperationTruncatePartition:
		code = s.applyDeleteSegments(a, body, out)
	case wire.OperationCreateConsumerGroup:
		code = s.applyCreateConsumerGroup(a, body, out)
	case wire.OperationDeleteConsumerGroup:
		code = s.applyDeleteConsumerGroup(a, body, out)
	case wire.OperationJoinConsumerGroup:
		code = s.applyJoinConsumerGroup(a, &h, body, out)
	case wire.OperationLeaveConsumerGroup:
		code = s.applyLeaveConsumerGroup(a, &h, body, out)
	case wire.OperationCreateUser:
		code = s.applyCreateUser(a, &h, body, out)
	case wire.OperationUpdateUser:
		code = s.applyUpdateUser(a, body, out)
	case wire.OperationDeleteUser:
		code = s.applyDeleteUser(a, body, out)
	case wire.OperationChangePassword:
		code = s.applyChangePassword(a, &h, body, out)
	case wire.OperationUpdatePermissions:
		code = s.applyUpdatePermissions(a, body, out)
	case wire.OperationCreatePersonalAccessToken:
		code = s.applyCreateToken(&h, body, out)
	case wire.OperationDeletePersonalAccessToken:
		code = s.applyDeleteToken(&h, body, out)
	default:
		code = wire.ErrInvalidCommand
	}
	if code != 0 {
		out.Result = code
		out.Reply = wire.AppendResultRejection(out.Reply[:0], code)
		out.Effects = out.Effects[:0]
	}
}

func (out *Output) effect(e Effect) { out.Effects = append(out.Effects, e) }

func (out *Output) success() { out.Reply = wire.AppendResultSuccess(out.Reply) }

// optionsRefused is the apply-time answer to a non-empty options block of a scope
// whose catalog is empty (streams, users). Admission refuses such a block with
// status 4041 first; a block that reaches apply is a bad value (4042).
func optionsRefused(block []byte) wire.ErrorCode {
	if len(block) != 0 {
		return wire.ErrInvalidOptionValue
	}
	return 0
}

// Streams.

func (s *State) applyCreateStream(a access, h *Header, body []byte, out *Output) wire.ErrorCode {
	var r wire.CreateStream
	if r.Decode(body) != nil {
		return wire.ErrInvalidCommand
	}
	if !a.createStream() {
		return wire.ErrUnauthorized
	}
	if code := optionsRefused(r.Options); code != 0 {
		return code
	}
	if _, taken := s.streamByName[string(r.Name)]; taken {
		return wire.ErrStreamNameAlreadyExists
	}
	id := s.streams.lowestFree()
	if id >= StreamIDLimit {
		return wire.ErrTooManyStreams
	}
	st := &Stream{ID: uint32(id), CreatedAtMicros: h.TimestampMicros, Name: string(r.Name), topicByName: make(map[string]uint32)}
	s.insertStream(st)
	out.success()
	hdr := s.streamHeader(st, nil)
	out.Reply = hdr.Append(out.Reply)
	return 0
}

func (s *State) applyUpdateStream(a access, body []byte, out *Output) wire.ErrorCode {
	var r wire.UpdateStream
	if r.Decode(body) != nil {
		return wire.ErrInvalidCommand
	}
	st := s.resolveStream(r.StreamID)
	if st == nil {
		return wire.ErrStreamIdNotFound
	}
	if !a.manageStream(st.ID) {
		return wire.ErrUnauthorized
	}
	if code := optionsRefused(r.Options); code != 0 {
		return code
	}
	if id, taken := s.streamByName[string(r.Name)]; taken && id != st.ID {
		return wire.ErrStreamNameAlreadyExists
	}
	delete(s.streamByName, st.Name)
	st.Name = string(r.Name)
	s.streamByName[st.Name] = st.ID
	out.success()
	return 0
}

func (s *State) applyDeleteStream(a access, body []byte, out *Output) wire.ErrorCode {
	var r wire.DeleteStream
	if r.Decode(body) != nil {
		return wire.ErrInvalidCommand
	}
	st := s.resolveStream(r.StreamID)
	if st == nil {
		return wire.ErrStreamIdNotFound
	}
	if !a.manageStream(st.ID) {
		return wire.ErrUnauthorized
	}
	s.removeStream(st)
	s.forgetPermissions(st.ID, 0, false)
	out.success()
	out.effect(Effect{Kind: EffectDeleteStream, Stream: st.ID})
	return 0
}

func (s *State) applyPurgeStream(a access, body []byte, out *Output) wire.ErrorCode {
	var r wire.PurgeStream
	if r.Decode(body) != nil {
		return wire.ErrInvalidCommand
	}
	st := s.resolveStream(r.StreamID)
	if st == nil {
		return wire.ErrStreamIdNotFound
	}
	if !a.manageStream(st.ID) {
		return wire.ErrUnauthorized
	}
	out.success()
	for _, t := range st.topics.items {
		if t != nil {
			purgeTopic(st, t, out)
		}
	}
	return 0
}

func purgeTopic(st *Stream, t *Topic, out *Output) {
	t.PurgeGeneration++
	out.effect(Effect{Kind: EffectPurgeTopic, Stream: st.ID, Topic: t.ID, Generation: t.PurgeGeneration})
}

// Topics.

func (s *State) applyCreateTopic(a access, h *Header, body []byte, out *Output) wire.ErrorCode {
	var r wire.CreateTopic
	if r.Decode(body) != nil {
		return wire.ErrInvalidCommand
	}
	st := s.resolveStream(r.StreamID)
	if st == nil {
		return wire.ErrStreamIdNotFound
	}
	if !a.createTopic(st.ID) {
		return wire.ErrUnauthorized
	}
	opts, err := wire.ResolveCreateTopicOptions(r.Options, r.PartitionsCount)
	if err != nil {
		// Admission refuses these with a status; a block that still reaches apply
		// is committed as a bad value.
		return wire.ErrInvalidOptionValue
	}
	if _, taken := st.topicByName[string(r.Name)]; taken {
		return wire.ErrTopicNameAlreadyExists
	}
	id := st.topics.lowestFree()
	if id >= TopicIDLimit {
		return wire.ErrTooManyTopics
	}
	t := &Topic{
		ID:              uint32(id),
		CreatedAtMicros: h.TimestampMicros,
		Name:            string(r.Name),
		Options:         opts.Effective,
	}
	// Both blocks share one allocation, sized exactly: they are built in the
	// state's scratch buffer first.
	s.scratch = opts.AppendExplicitBlock(s.scratch[:0])
	explicitLen := len(s.scratch)
	s.scratch = opts.AppendDerivedBlock(s.scratch)
	blocks := bytes.Clone(s.scratch)
	t.ExplicitOptions, t.DerivedOptions = blocks[:explicitLen:explicitLen], blocks[explicitLen:]
	if r.PartitionsCount > 0 {
		t.Partitions = make([]Partition, r.PartitionsCount)
		for i := range t.Partitions {
			t.Partitions[i] = Partition{ID: uint32(i), CreatedAtMicros: h.TimestampMicros}
		}
	}
	st.insertTopic(t)
	out.success()
	// The CreateTopic reply reports fresh partitions with zero segments.
	out.Reply = s.appendTopicDetails(out.Reply, st, t, nil, true)
	if r.PartitionsCount > 0 {
		out.effect(Effect{Kind: EffectCreatePartitions, Stream: st.ID, Topic: t.ID, First: 0, Count: r.PartitionsCount})
	}
	return 0
}

func (s *State) applyUpdateTopic(a access, body []byte, out *Output) wire.ErrorCode {
	var r wire.UpdateTopic
	if r.Decode(body) != nil {
		return wire.ErrInvalidCommand
	}
	st, t, code := s.resolveTopic(r.StreamID, r.TopicID)
	if code != 0 {
		return code
	}
	if !a.manageTopic(st.ID, t.ID) {
		return wire.ErrUnauthorized
	}
	u, err := wire.CheckTopicUpdate(r.Options, t.Options.SegmentSizeBytes)
	if err != nil {
		return wire.ErrInvalidOptionValue
	}
	if id, taken := st.topicByName[string(r.Name)]; taken && id != t.ID {
		return wire.ErrTopicNameAlreadyExists
	}
	delete(st.topicByName, t.Name)
	t.Name = string(r.Name)
	st.topicByName[t.Name] = t.ID
	u.ApplyTo(&t.Options)
	t.ExplicitOptions, t.DerivedOptions = u.AppendBlocks(nil, nil, t.ExplicitOptions, t.DerivedOptions)
	out.success()
	out.effect(Effect{Kind: EffectUpdateTopic, Stream: st.ID, Topic: t.ID})
	return 0
}

func (s *State) applyDeleteTopic(a access, body []byte, out *Output) wire.ErrorCode {
	var r wire.DeleteTopic
	if r.Decode(body) != nil {
		return wire.ErrInvalidCommand
	}
	st, t, code := s.resolveTopic(r.StreamID, r.TopicID)
	if code != 0 {
		return code
	}
	if !a.manageTopic(st.ID, t.ID) {
		return wire.ErrUnauthorized
	}
	st.removeTopic(t)
	s.forgetPermissions(st.ID, t.ID, true)
	out.success()
	out.effect(Effect{Kind: EffectDeleteTopic, Stream: st.ID, Topic: t.ID, Count: t.PartitionsCount()})
	return 0
}

func (s *State) applyPurgeTopic(a access, body []byte, out *Output) wire.ErrorCode {
	var r wire.PurgeTopic
	if r.Decode(body) != nil {
		return wire.ErrInvalidCommand
	}
	st, t, code := s.resolveTopic(r.StreamID, r.TopicID)
	if code != 0 {
		return code
	}
	if !a.manageTopic(st.ID, t.ID) {
		return wire.ErrUnauthorized
	}
	out.success()
	purgeTopic(st, t, out)
	return 0
}

// Partitions.

func (s *State) applyCreatePartitions(a access, h *Header, body []byte, out *Output) wire.ErrorCode {
	var r wire.CreatePartitions
	if r.Decode(body) != nil || r.CheckPartitionsCount() != nil {
		return wire.ErrInvalidCommand
	}
	st, t, code := s.resolveTopic(r.StreamID, r.TopicID)
	if code != 0 {
		return code
	}
	if !a.manageTopic(st.ID, t.ID) {
		return wire.ErrUnauthorized
	}
	first := t.PartitionsCount()
	if uint64(first)+uint64(r.PartitionsCount) > PartitionIDLimit {
		return wire.ErrPartitionIdSpaceExhausted
	}
	for i := range r.PartitionsCount {
		t.Partitions = append(t.Partitions, Partition{ID: first + i, CreatedAtMicros: h.TimestampMicros})
	}
	t.rebalanceGroups()
	out.success()
	out.effect(Effect{Kind: EffectCreatePartitions, Stream: st.ID, Topic: t.ID, First: first, Count: r.PartitionsCount})
	return 0
}

func (s *State) applyDeletePartitions(a access, body []byte, out *Output) wire.ErrorCode {
	var r wire.DeletePartitions
	if r.Decode(body) != nil || r.CheckPartitionsCount() != nil {
		return wire.ErrInvalidCommand
	}
	st, t, code := s.resolveTopic(r.StreamID, r.TopicID)
	if code != 0 {
		return code
	}
	if !a.manageTopic(st.ID, t.ID) {
		return wire.ErrUnauthorized
	}
	if r.PartitionsCount > t.PartitionsCount() {
		return wire.ErrInvalidPartitionsCount
	}
	keep := t.PartitionsCount() - r.PartitionsCount
	t.Partitions = slices.Clip(t.Partitions[:keep])
	if keep == 0 {
		t.Partitions = nil
	}
	t.rebalanceGroups()
	out.success()
	out.effect(Effect{Kind: EffectDeletePartitions, Stream: st.ID, Topic: t.ID, First: keep, Count: r.PartitionsCount})
	return 0
}

// rebalanceGroups reassigns every group after the partition set changed; a group
// whose assignment moved enters a new generation.
func (t *Topic) rebalanceGroups() {
	for _, g := range t.groups {
		if g.rebalance(t.PartitionsCount()) {
			g.Generation++
		}
	}
}

func (s *State) applyDeleteSegments(a access, body []byte, out *Output) wire.ErrorCode {
	var r wire.DeleteSegments
	if r.Decode(body) != nil {
		return wire.ErrInvalidCommand
	}
	st, t, code := s.resolveTopic(r.StreamID, r.TopicID)
	if code != 0 {
		return code
	}
	if !a.manageTopic(st.ID, t.ID) {
		return wire.ErrUnauthorized
	}
	if r.PartitionID >= t.PartitionsCount() {
		return wire.ErrPartitionNotFound
	}
	out.success()
	out.effect(Effect{Kind: EffectDeleteSegments, Stream: st.ID, Topic: t.ID, First: r.PartitionID, Count: r.SegmentsCount})
	return 0
}

// Consumer groups.

func (s *State) applyCreateConsumerGroup(a access, body []byte, out *Output) wire.ErrorCode {
	var r wire.CreateConsumerGroup
	if r.Decode(body) != nil {
		return wire.ErrInvalidCommand
	}
	st, t, code := s.resolveTopic(r.StreamID, r.TopicID)
	if code != 0 {
		return code
	}
	if !a.readTopic(st.ID, t.ID) {
		return wire.ErrUnauthorized
	}
	if _, taken := t.groupByName[string(r.Name)]; taken {
		return wire.ErrConsumerGroupNameAlreadyExists
	}
	if t.nextGroupID == ^uint32(0) {
		// The id space of a topic is spent (ids are never reused); reachable only
		// after four billion creates.
		return wire.ErrConsumerGroupNameAlreadyExists
	}
	g := &ConsumerGroup{ID: t.nextGroupID, Name: string(r.Name)}
	t.nextGroupID++
	t.groups = append(t.groups, g)
	if t.groupByName == nil {
		// Most topics never get a group; their index stays unallocated.
		t.groupByName = make(map[string]uint32)
	}
	t.groupByName[g.Name] = g.ID
	out.success()
	out.Reply = appendGroupDetails(out.Reply, t, g)
	return 0
}

// resolveGroup resolves a group's stream and topic (1009, 2010) and then the group,
// which may be nil. Writes check permission between the two, as the reference
// server's authorization gate resolves only the stream and topic.
func (s *State) resolveGroup(target *wire.GroupTarget) (*Stream, *Topic, *ConsumerGroup, wire.ErrorCode) {
	st, t, code := s.resolveTopic(target.StreamID, target.TopicID)
	if code != 0 {
		return nil, nil, nil, code
	}
	return st, t, t.resolveGroup(target.GroupID), 0
}

func (s *State) applyDeleteConsumerGroup(a access, body []byte, out *Output) wire.ErrorCode {
	var r wire.DeleteConsumerGroup
	if r.Decode(body) != nil {
		return wire.ErrInvalidCommand
	}
	st, t, g, code := s.resolveGroup(&r.GroupTarget)
	if code != 0 {
		return code
	}
	if !a.readTopic(st.ID, t.ID) {
		return wire.ErrUnauthorized
	}
	if g == nil {
		return wire.ErrConsumerGroupIdNotFound
	}
	i := slices.Index(t.groups, g)
	t.groups = slices.Delete(t.groups, i, i+1)
	delete(t.groupByName, g.Name)
	out.success()
	out.effect(Effect{Kind: EffectDeleteConsumerGroup, Stream: st.ID, Topic: t.ID, Group: g.ID})
	return 0
}

func (s *State) applyJoinConsumerGroup(a access, h *Header, body []byte, out *Output) wire.ErrorCode {
	var r wire.JoinConsumerGroup
	if r.Decode(body) != nil {
		return wire.ErrInvalidCommand
	}
	st, t, g, code := s.resolveGroup(&r.GroupTarget)
	if code != 0 {
		return code
	}
	if !a.readTopic(st.ID, t.ID) {
		return wire.ErrUnauthorized
	}
	if g == nil {
		return wire.ErrConsumerGroupIdNotFound
	}
	out.success()
	if g.member(h.Client) >= 0 {
		// Idempotent, and without a new generation: the Go SDK re-joins after
		// every empty sync, and a bump would make every other member re-sync.
		return 0
	}
	id := g.lowestFreeMemberID()
	g.Members = slices.Insert(g.Members, int(id), Member{ID: id, Client: h.Client})
	g.rebalance(t.PartitionsCount())
	g.Generation++
	return 0
}

func (s *State) applyLeaveConsumerGroup(a access, h *Header, body []byte, out *Output) wire.ErrorCode {
	var r wire.LeaveConsumerGroup
	if r.Decode(body) != nil {
		return wire.ErrInvalidCommand
	}
	st, t, g, code := s.resolveGroup(&r.GroupTarget)
	if code != 0 {
		return code
	}
	if !a.readTopic(st.ID, t.ID) {
		return wire.ErrUnauthorized
	}
	if g == nil {
		return wire.ErrConsumerGroupIdNotFound
	}
	i := g.member(h.Client)
	if i < 0 {
		return wire.ErrConsumerGroupMemberNotFound
	}
	g.leave(i, t.PartitionsCount())
	out.success()
	return 0
}

func (g *ConsumerGroup) leave(i int, partitionsCount uint32) {
	g.Members = slices.Delete(g.Members, i, i+1)
	g.rebalance(partitionsCount)
	g.Generation++
}

// clientGone removes client from every consumer group: its Logout committed, or its
// connection closed (RemoveConsumerGroupMember). Groups are visited in id order.
func (s *State) clientGone(client wire.Uint128) {
	for _, st := range s.streams.items {
		if st == nil {
			continue
		}
		for _, t := range st.topics.items {
			if t == nil {
				continue
			}
			for _, g := range t.groups {
				if i := g.member(client); i >= 0 {
					g.leave(i, t.PartitionsCount())
				}
			}
		}
	}
}
