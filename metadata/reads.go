package metadata

import (
	"unsafe"

	"github.com/iggy-shard/iggy-shard/wire"
)

// Reads: the non-replicated metadata queries, answered from the state on the shard that
// holds it. Each appends the reply body to dst (without allocating, so a caller that
// reuses its buffer pays nothing per request) and returns an error only for a status
// denial: ErrUnauthorized, or the typed not-found errors of GetConsumerGroup(s). "Not
// found" on the single-object reads is an empty body with no error
// (NonReplicatedResponse::Empty in apache/iggy core/server/src/responses.rs). Targets
// are resolved before permission is looked at, so a missing object reads as missing
// even to a user who may not see it.

// PartitionStats are a partition's figures, which live in the partition's shard.
type PartitionStats struct {
	SegmentsCount uint32
	// CurrentOffset is the offset of the newest message, 0 when empty.
	CurrentOffset uint64
	SizeBytes     uint64
	MessagesCount uint64
}

// StatsSource reports a partition's figures for the read replies. A nil source
// reports zeros.
type StatsSource func(stream, topic, partition uint32) PartitionStats

func (f StatsSource) of(stream, topic, partition uint32) PartitionStats {
	if f == nil {
		return PartitionStats{}
	}
	return f(stream, topic, partition)
}

func (f StatsSource) topicTotals(stream uint32, t *Topic) (sizeBytes, messagesCount uint64) {
	if f == nil {
		return 0, 0
	}
	for i := range t.Partitions {
		p := f(stream, t.ID, t.Partitions[i].ID)
		sizeBytes += p.SizeBytes
		messagesCount += p.MessagesCount
	}
	return sizeBytes, messagesCount
}

func (s *State) streamHeader(st *Stream, stats StatsSource) wire.StreamHeader {
	h := wire.StreamHeader{
		ID:              st.ID,
		CreatedAtMicros: st.CreatedAtMicros,
		TopicsCount:     uint32(st.topics.count),
		Name:            bytesOf(st.Name),
	}
	if stats != nil {
		for _, t := range st.topics.items {
			if t != nil {
				size, messages := stats.topicTotals(st.ID, t)
				h.SizeBytes += size
				h.MessagesCount += messages
			}
		}
	}
	return h
}

func topicHeader(st *Stream, t *Topic, stats StatsSource) wire.TopicHeader {
	h := wire.TopicHeader{
		ID:              t.ID,
		CreatedAtMicros: t.CreatedAtMicros,
		PartitionsCount: t.PartitionsCount(),
		Name:            bytesOf(t.Name),
		ExplicitOptions: t.ExplicitOptions,
		DerivedOptions:  t.DerivedOptions,
	}
	t.Options.SetHeaderFields(&h)
	h.SizeBytes, h.MessagesCount = stats.topicTotals(st.ID, t)
	return h
}

// appendTopicDetails writes a TopicHeader and its partitions. A fresh topic (the
// CreateTopic reply) reports zero segments; GetTopic reports at least one, as the
// reference server does.
func (s *State) appendTopicDetails(b []byte, st *Stream, t *Topic, stats StatsSource, fresh bool) []byte {
	h := topicHeader(st, t, stats)
	b = h.Append(b)
	for i := range t.Partitions {
		p := &t.Partitions[i]
		ps := stats.of(st.ID, t.ID, p.ID)
		if !fresh && ps.SegmentsCount == 0 {
			ps.SegmentsCount = 1
		}
		info := wire.PartitionInfo{
			ID:              p.ID,
			CreatedAtMicros: p.CreatedAtMicros,
			SegmentsCount:   ps.SegmentsCount,
			CurrentOffset:   ps.CurrentOffset,
			SizeBytes:       ps.SizeBytes,
			MessagesCount:   ps.MessagesCount,
		}
		b = info.Append(b)
	}
	return b
}

func groupHeader(t *Topic, g *ConsumerGroup) wire.ConsumerGroupHeader {
	return wire.ConsumerGroupHeader{
		ID:              g.ID,
		PartitionsCount: t.PartitionsCount(),
		MembersCount:    uint32(len(g.Members)),
		Name:            bytesOf(g.Name),
	}
}

func appendGroupDetails(b []byte, t *Topic, g *ConsumerGroup) []byte {
	h := groupHeader(t, g)
	b = h.Append(b)
	for i := range g.Members {
		m := wire.ConsumerGroupMember{ID: g.Members[i].ID, PartitionIDs: g.Members[i].Partitions}
		b = m.Append(b)
	}
	return b
}

func userHeader(u *User) wire.UserHeader {
	return wire.UserHeader{
		ID:              u.ID,
		CreatedAtMicros: u.CreatedAtMicros,
		Status:          uint8(u.Status),
		Username:        bytesOf(u.Username),
	}
}

// AppendStream answers GetStream (200): StreamDetails, or an empty body.
func (s *State) AppendStream(dst []byte, userID uint32, streamID wire.Identifier, stats StatsSource) ([]byte, error) {
	st := s.resolveStream(streamID)
	if st == nil {
		return dst, nil
	}
	if !s.access(userID).readStream(st.ID) {
		return dst, wire.ErrUnauthorized
	}
	h := s.streamHeader(st, stats)
	dst = h.Append(dst)
	for _, t := range st.topics.items {
		if t != nil {
			th := topicHeader(st, t, stats)
			dst = th.Append(dst)
		}
	}
	return dst, nil
}

// AppendStreams answers GetStreams (201): every stream's header, ascending id.
func (s *State) AppendStreams(dst []byte, userID uint32, stats StatsSource) ([]byte, error) {
	if !s.access(userID).readStreams() {
		return dst, wire.ErrUnauthorized
	}
	for _, st := range s.streams.items {
		if st != nil {
			h := s.streamHeader(st, stats)
			dst = h.Append(dst)
		}
	}
	return dst, nil
}

// AppendTopic answers GetTopic (300): TopicDetails, or an empty body.
func (s *State) AppendTopic(dst []byte, userID uint32, streamID, topicID wire.Identifier, stats StatsSource) ([]byte, error) {
	st, t, code := s.resolveTopic(streamID, topicID)
	if code != 0 {
		return dst, nil
	}
	if !s.access(userID).readTopic(st.ID, t.ID) {
		return dst, wire.ErrUnauthorized
	}
	return s.appendTopicDetails(dst, st, t, stats, false), nil
}

// AppendTopics answers GetTopics (301): [count u32] and the headers; an unknown
// stream has zero topics.
func (s *State) AppendTopics(dst []byte, userID uint32, streamID wire.Identifier, stats StatsSource) ([]byte, error) {
	st := s.resolveStream(streamID)
	if st == nil {
		return appendU32(dst, 0), nil
	}
	if !s.access(userID).readTopics(st.ID) {
		return dst, wire.ErrUnauthorized
	}
	dst = appendU32(dst, uint32(st.topics.count))
	for _, t := range st.topics.items {
		if t != nil {
			h := topicHeader(st, t, stats)
			dst = h.Append(dst)
		}
	}
	return dst, nil
}

// AppendUser answers GetUser (31): UserDetails, or an empty body. A user may always
// read itself.
func (s *State) AppendUser(dst []byte, userID uint32, target wire.Identifier) ([]byte, error) {
	u := s.resolveUser(target)
	if u == nil {
		return dst, nil
	}
	if u.ID != userID && !s.access(userID).readUsers() {
		return dst, wire.ErrUnauthorized
	}
	return appendUserDetails(dst, u), nil
}

func appendUserDetails(dst []byte, u *User) []byte {
	d := wire.UserDetails{UserHeader: userHeader(u)}
	if u.Permissions != nil {
		d.HasPermissions = true
		d.Permissions = *u.Permissions
	}
	return d.Append(dst)
}

// AppendUsers answers GetUsers (32): every user's header, ascending id.
func (s *State) AppendUsers(dst []byte, userID uint32) ([]byte, error) {
	if !s.access(userID).readUsers() {
		return dst, wire.ErrUnauthorized
	}
	for _, u := range s.users.items {
		if u != nil {
			h := userHeader(u)
			dst = h.Append(dst)
		}
	}
	return dst, nil
}

// AppendPersonalAccessTokens answers GetPersonalAccessTokens (41): the caller's own
// tokens by name, never their secrets.
func (s *State) AppendPersonalAccessTokens(dst []byte, userID uint32) []byte {
	u := s.User(userID)
	if u == nil {
		return dst
	}
	for i := range u.Tokens {
		e := wire.PatEntry{Name: bytesOf(u.Tokens[i].Name), ExpiryAtMicros: u.Tokens[i].ExpiryAtMicros}
		dst = e.Append(dst)
	}
	return dst
}

// AppendConsumerGroup answers GetConsumerGroup (600): ConsumerGroupDetails, an empty
// body for an unknown group, status 1009 / 2010 for an unknown stream / topic.
func (s *State) AppendConsumerGroup(dst []byte, userID uint32, target *wire.GroupTarget) ([]byte, error) {
	st, t, g, code := s.resolveGroup(target)
	if code != 0 {
		return dst, code
	}
	if g == nil {
		return dst, nil
	}
	if !s.access(userID).readTopic(st.ID, t.ID) {
		return dst, wire.ErrUnauthorized
	}
	return appendGroupDetails(dst, t, g), nil
}

// AppendConsumerGroups answers GetConsumerGroups (601): the topic's group headers by
// id; status 1009 / 2010 for an unknown stream / topic.
func (s *State) AppendConsumerGroups(dst []byte, userID uint32, streamID, topicID wire.Identifier) ([]byte, error) {
	st, t, code := s.resolveTopic(streamID, topicID)
	if code != 0 {
		return dst, code
	}
	if !s.access(userID).readTopic(st.ID, t.ID) {
		return dst, wire.ErrUnauthorized
	}
	for _, g := range t.groups {
		h := groupHeader(t, g)
		dst = h.Append(dst)
	}
	return dst, nil
}

// AppendSyncConsumerGroup answers SyncConsumerGroup (606) for client: its Assignment
// (generation and partitions), or an empty body when it is not a member (or the
// group, topic or stream does not exist). It needs no grant.
func (s *State) AppendSyncConsumerGroup(dst []byte, client wire.Uint128, target *wire.GroupTarget) []byte {
	generation, partitions, ok := s.Assignment(client, target)
	if !ok {
		return dst
	}
	a := wire.Assignment{Generation: generation, PartitionIDs: partitions}
	return a.Append(dst)
}

// Assignment is client's membership in a group: the group's generation and the
// partitions assigned to the client (owned by the state: do not modify, and do not
// keep past the next Apply, which may rewrite them in place), or false
// when it is not a member. The partition shards fence group polls and offset
// writes with it.
func (s *State) Assignment(client wire.Uint128, target *wire.GroupTarget) (generation uint64, partitions []uint32, ok bool) {
	_, _, g, code := s.resolveGroup(target)
	if code != 0 || g == nil {
		return 0, nil, false
	}
	i := g.member(client)
	if i < 0 {
		return 0, nil, false
	}
	return g.Generation, g.Members[i].Partitions, true
}

// ClientGroupsCount is how many consumer groups client is a member of: the
// consumer_groups_count of its GetClients entry.
func (s *State) ClientGroupsCount(client wire.Uint128) uint32 {
	var n uint32
	s.eachClientGroup(client, func(wire.ClientGroup) { n++ })
	return n
}

// AppendClientDetails answers GetMe (20) and GetClient (21): h (the connection, which
// the server knows) followed by the groups client is a member of, in stream, topic,
// group id order. h.ConsumerGroupsCount is filled in.
func (s *State) AppendClientDetails(dst []byte, h wire.ClientHeader, client wire.Uint128) []byte {
	h.ConsumerGroupsCount = s.ClientGroupsCount(client)
	dst = h.Append(dst)
	s.eachClientGroup(client, func(g wire.ClientGroup) {
		dst = appendU32(dst, g.StreamID)
		dst = appendU32(dst, g.TopicID)
		dst = appendU32(dst, g.GroupID)
	})
	return dst
}

func (s *State) eachClientGroup(client wire.Uint128, f func(wire.ClientGroup)) {
	for _, st := range s.streams.items {
		if st == nil {
			continue
		}
		for _, t := range st.topics.items {
			if t == nil {
				continue
			}
			for _, g := range t.groups {
				if g.member(client) >= 0 {
					f(wire.ClientGroup{StreamID: st.ID, TopicID: t.ID, GroupID: g.ID})
				}
			}
		}
	}
}

// Counts are the metadata inputs of GetStats.
type Counts struct {
	Streams        uint32
	Topics         uint32
	Partitions     uint32
	ConsumerGroups uint32
}

// Counts totals the streams, topics, partitions and consumer groups.
func (s *State) Counts() Counts {
	c := Counts{Streams: uint32(s.streams.count)}
	for _, st := range s.streams.items {
		if st == nil {
			continue
		}
		c.Topics += uint32(st.topics.count)
		for _, t := range st.topics.items {
			if t != nil {
				c.Partitions += t.PartitionsCount()
				c.ConsumerGroups += uint32(len(t.groups))
			}
		}
	}
	return c
}

// ResolveTopic resolves a stream and a topic as the partition operations name them:
// their ids and the topic's partition count, or 1009 / 2010.
func (s *State) ResolveTopic(streamID, topicID wire.Identifier) (stream, topic, partitionsCount uint32, err error) {
	st, t, code := s.resolveTopic(streamID, topicID)
	if code != 0 {
		return 0, 0, 0, code
	}
	return st.ID, t.ID, t.PartitionsCount(), nil
}

// TopicOptions returns a topic's effective options (segment size, fsync, flush
// thresholds, retention), which the partition shards run with.
func (s *State) TopicOptions(stream, topic uint32) (wire.TopicOptions, bool) {
	st := s.Stream(stream)
	if st == nil {
		return wire.TopicOptions{}, false
	}
	t := st.Topic(topic)
	if t == nil {
		return wire.TopicOptions{}, false
	}
	return t.Options, true
}

// Read answers the non-replicated metadata read with code from its request body.
// handled is false for codes that are not metadata reads here (GetMe, GetClient(s)
// and GetStats need the connection table and are served with AppendClientDetails,
// ClientGroupsCount and Counts). An undecodable body is status 3, except for
// SyncConsumerGroup, which answers it like a non-member (an empty body).
func (s *State) Read(dst []byte, code wire.CommandCode, userID uint32, client wire.Uint128, body []byte, stats StatsSource) (out []byte, handled bool, err error) {
	switch code {
	case wire.CodeGetStream:
		var r wire.GetStream
		if err := r.Decode(body); err != nil {
			return dst, true, err
		}
		out, err = s.AppendStream(dst, userID, r.StreamID, stats)
	case wire.CodeGetStreams:
		if err := wire.DecodeEmptyBody(body); err != nil {
			return dst, true, err
		}
		out, err = s.AppendStreams(dst, userID, stats)
	case wire.CodeGetTopic:
		var r wire.GetTopic
		if err := r.Decode(body); err != nil {
			return dst, true, err
		}
		out, err = s.AppendTopic(dst, userID, r.StreamID, r.TopicID, stats)
	case wire.CodeGetTopics:
		var r wire.GetTopics
		if err := r.Decode(body); err != nil {
			return dst, true, err
		}
		out, err = s.AppendTopics(dst, userID, r.StreamID, stats)
	case wire.CodeGetUser:
		var r wire.GetUser
		if err := r.Decode(body); err != nil {
			return dst, true, err
		}
		out, err = s.AppendUser(dst, userID, r.UserID)
	case wire.CodeGetUsers:
		if err := wire.DecodeEmptyBody(body); err != nil {
			return dst, true, err
		}
		out, err = s.AppendUsers(dst, userID)
	case wire.CodeGetPersonalAccessTokens:
		if err := wire.DecodeEmptyBody(body); err != nil {
			return dst, true, err
		}
		out = s.AppendPersonalAccessTokens(dst, userID)
	case wire.CodeGetConsumerGroup:
		var r wire.GetConsumerGroup
		if err := r.Decode(body); err != nil {
			return dst, true, err
		}
		out, err = s.AppendConsumerGroup(dst, userID, &r.GroupTarget)
	case wire.CodeGetConsumerGroups:
		var r wire.GetConsumerGroups
		if err := r.Decode(body); err != nil {
			return dst, true, err
		}
		out, err = s.AppendConsumerGroups(dst, userID, r.StreamID, r.TopicID)
	case wire.CodeSyncConsumerGroup:
		var r wire.SyncConsumerGroup
		if r.Decode(body) != nil {
			return dst, true, nil
		}
		out = s.AppendSyncConsumerGroup(dst, client, &r.GroupTarget)
	case wire.CodeDescribeOptions:
		var r wire.DescribeOptions
		if err := r.Decode(body); err != nil {
			return dst, true, err
		}
		out, err = wire.AppendOptionsCatalogReply(dst, r.Scope)
	default:
		return dst, false, nil
	}
	if err != nil {
		return dst, true, err
	}
	return out, true, nil
}

// bytesOf views a stored name as bytes for a reply encoder without copying it. The
// encoders only read it, and names are immutable strings, so nothing can write
// through the view.
func bytesOf(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }
