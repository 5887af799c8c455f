package metadata

import (
	"cmp"
	"slices"

	"github.com/iggy-shard/iggy-shard/wire"
)

// Authorization, exactly as the reference decides it (apache/iggy
// core/metadata/src/permissioner/). The root user holds every grant; any other user
// passes on a global grant, or on a grant of the per-stream entry for the target
// stream, or of the per-topic entry under it. A user id that does not resolve (deleted
// while logged in) holds nothing.
//
// Every check takes resolved ids: a target that does not exist is reported as not found
// before permission is looked at, as the reference resolves targets first.

// access is what one user may do, looked up once per check.
type access struct {
	root bool
	p    *wire.Permissions // nil: no permissions
}

func (s *State) access(userID uint32) access {
	if userID == RootUserID && s.User(RootUserID) != nil {
		return access{root: true}
	}
	u := s.User(userID)
	if u == nil {
		return access{}
	}
	return access{p: u.Permissions}
}

func (a access) global() *wire.GlobalPermissions {
	if a.p == nil {
		return &wire.GlobalPermissions{}
	}
	return &a.p.Global
}

func (a access) stream(streamID uint32) *wire.StreamPermissions {
	if a.p == nil {
		return nil
	}
	i, ok := slices.BinarySearchFunc(a.p.Streams, streamID, func(sp wire.StreamPermissions, id uint32) int {
		return cmp.Compare(sp.StreamID, id)
	})
	if !ok {
		return nil
	}
	return &a.p.Streams[i]
}

func (a access) topic(streamID, topicID uint32) *wire.TopicPermissions {
	sp := a.stream(streamID)
	if sp == nil {
		return nil
	}
	i, ok := slices.BinarySearchFunc(sp.Topics, topicID, func(tp wire.TopicPermissions, id uint32) int {
		return cmp.Compare(tp.TopicID, id)
	})
	if !ok {
		return nil
	}
	return &sp.Topics[i]
}

// Servers: GetStats, GetClients, GetClient, GetSnapshot.
func (a access) readServers() bool {
	g := a.global()
	return a.root || g.ManageServers || g.ReadServers
}

// GetUsers, GetUser of another user.
func (a access) readUsers() bool {
	g := a.global()
	return a.root || g.ManageUsers || g.ReadUsers
}

// CreateUser, DeleteUser, UpdateUser, UpdatePermissions, ChangePassword of another.
func (a access) manageUsers() bool { return a.root || a.global().ManageUsers }

// GetStreams.
func (a access) readStreams() bool {
	g := a.global()
	return a.root || g.ManageStreams || g.ReadStreams
}

// CreateStream.
func (a access) createStream() bool { return a.root || a.global().ManageStreams }

// GetStream.
func (a access) readStream(streamID uint32) bool {
	if a.readStreams() {
		return true
	}
	sp := a.stream(streamID)
	return sp != nil && (sp.ManageStream || sp.ReadStream)
}

// UpdateStream, DeleteStream, PurgeStream.
func (a access) manageStream(streamID uint32) bool {
	if a.createStream() {
		return true
	}
	sp := a.stream(streamID)
	return sp != nil && sp.ManageStream
}

// GetTopics.
func (a access) readTopics(streamID uint32) bool {
	g := a.global()
	if a.root || g.ReadStreams || g.ManageStreams || g.ManageTopics || g.ReadTopics {
		return true
	}
	sp := a.stream(streamID)
	return sp != nil && (sp.ManageStream || sp.ReadStream || sp.ManageTopics || sp.ReadTopics)
}

// GetTopic, GetConsumerGroup(s), Create/Delete/Join/LeaveConsumerGroup.
func (a access) readTopic(streamID, topicID uint32) bool {
	if a.readTopics(streamID) {
		return true
	}
	tp := a.topic(streamID, topicID)
	return tp != nil && (tp.ManageTopic || tp.ReadTopic)
}

// CreateTopic.
func (a access) createTopic(streamID uint32) bool {
	g := a.global()
	if a.root || g.ManageStreams || g.ManageTopics {
		return true
	}
	sp := a.stream(streamID)
	return sp != nil && (sp.ManageStream || sp.ManageTopics)
}

// UpdateTopic, DeleteTopic, PurgeTopic, Create/DeletePartitions, DeleteSegments.
func (a access) manageTopic(streamID, topicID uint32) bool {
	if a.createTopic(streamID) {
		return true
	}
	tp := a.topic(streamID, topicID)
	return tp != nil && tp.ManageTopic
}

// PollMessages, Get/Store/DeleteConsumerOffset.
func (a access) poll(streamID, topicID uint32) bool {
	g := a.global()
	if a.root || g.PollMessages || g.ReadTopics || g.ManageTopics || g.ReadStreams || g.ManageStreams {
		return true
	}
	if sp := a.stream(streamID); sp != nil &&
		(sp.PollMessages || sp.ManageStream || sp.ReadStream || sp.ManageTopics || sp.ReadTopics) {
		return true
	}
	tp := a.topic(streamID, topicID)
	return tp != nil && (tp.ManageTopic || tp.ReadTopic || tp.PollMessages)
}

// SendMessages.
func (a access) send(streamID, topicID uint32) bool {
	g := a.global()
	if a.root || g.SendMessages || g.ManageStreams || g.ManageTopics {
		return true
	}
	if sp := a.stream(streamID); sp != nil && (sp.SendMessages || sp.ManageStream || sp.ManageTopics) {
		return true
	}
	tp := a.topic(streamID, topicID)
	return tp != nil && (tp.ManageTopic || tp.SendMessages)
}

// CanReadServers reports whether userID may run GetStats, GetClients, GetClient and
// GetSnapshot.
func (s *State) CanReadServers(userID uint32) bool { return s.access(userID).readServers() }

// CanPoll reports whether userID may poll, or read, store or delete consumer
// offsets, in the topic streamID/topicID.
func (s *State) CanPoll(userID, streamID, topicID uint32) bool {
	return s.access(userID).poll(streamID, topicID)
}

// CanSend reports whether userID may send messages to the topic streamID/topicID.
func (s *State) CanSend(userID, streamID, topicID uint32) bool {
	return s.access(userID).send(streamID, topicID)
}

// normalizePermissions orders stream entries and topic entries by id and keeps the
// last of any duplicates (a later entry overrides an earlier one, as decoding into a
// map does), so that lookups can binary search and snapshots are canonical.
func normalizePermissions(p *wire.Permissions) {
	p.Streams = sortDedupe(p.Streams, func(v wire.StreamPermissions) uint32 { return v.StreamID })
	for i := range p.Streams {
		if len(p.Streams[i].Topics) == 0 {
			p.Streams[i].Topics = nil
			continue
		}
		p.Streams[i].Topics = sortDedupe(p.Streams[i].Topics, func(v wire.TopicPermissions) uint32 { return v.TopicID })
	}
	if len(p.Streams) == 0 {
		p.Streams = nil
	}
}

func sortDedupe[T any](v []T, id func(T) uint32) []T {
	slices.SortStableFunc(v, func(a, b T) int { return cmp.Compare(id(a), id(b)) })
	out := v[:0]
	for i := range v {
		if len(out) > 0 && id(out[len(out)-1]) == id(v[i]) {
			out[len(out)-1] = v[i]
			continue
		}
		out = append(out, v[i])
	}
	clear(v[len(out):])
	return out
}
