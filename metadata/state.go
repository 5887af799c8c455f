package metadata

import (
	"cmp"
	"iter"
	"slices"

	"github.com/iggy-shard/iggy-shard/wire"
)

// Id spaces, and the user rules of the reference's metadata state machine (apache/iggy
// core/metadata/src/stm/). A partition's consensus group packs stream, topic and
// partition ids into 20, 12 and 20 bits, as IggyNamespace does in apache/iggy
// core/server_common/src/sharding/mod.rs.
const (
	// StreamIDLimit bounds stream ids: every id is below it.
	StreamIDLimit = 1 << 20
	// TopicIDLimit bounds topic ids within a stream (and the topics of one stream).
	TopicIDLimit = 4096
	// PartitionIDLimit bounds partition ids within a topic.
	PartitionIDLimit = 1_000_000
	// RootUserID is the user that holds every permission and cannot be deleted.
	RootUserID uint32 = 0
	// UsernameLengthMin and UsernameLengthMax bound a username in bytes.
	UsernameLengthMin = 3
	UsernameLengthMax = 50
	// PersonalAccessTokensPerUserMax is the reference server's max_tokens_per_user.
	PersonalAccessTokensPerUserMax = 100
)

// State is the metadata plane's replicated state: users with their permissions and
// personal access tokens, and streams, topics, partitions and consumer groups. It is
// changed only by Apply (and the session hooks, which are Apply too), so every
// replica that applies the same committed operations in the same order holds the
// same State, byte for byte in its snapshot.
//
// The exported types below (User, Stream, Topic, ...) are views for the server and
// its tests: read them, never change them, or the name indexes go stale.
//
// Objects live in slices indexed by id (nil = a free id), which gives the
// reference server's "lowest free slab key" allocation and ordered iteration
// without sorting; the name maps are lookups only and never iterated.
type State struct {
	users      slab[User]
	userByName map[string]uint32
	// tokenOwner finds a token's owner from the token's hash, for PAT logins.
	tokenOwner map[TokenHash]uint32

	streams      slab[Stream]
	streamByName map[string]uint32

	// revoked are the access tokens logged out over HTTP, until they expire
	// (revocations.go).
	revoked RevocationTable

	// scratch is reused by Apply to build values before they are copied into the
	// state at their exact size. Not part of the state.
	scratch []byte
}

// User is one account. PasswordHash is an argon2id PHC string computed outside
// Apply (hashing is salted, so not deterministic).
type User struct {
	ID              uint32
	CreatedAtMicros uint64
	// Status is wire.UserActive or wire.UserInactive.
	Status       wire.UserStatus
	Username     string
	PasswordHash string
	// Permissions is nil for a user without any; its stream and topic entries are
	// kept in ascending id order with no duplicates.
	Permissions *wire.Permissions
	// Tokens are the user's personal access tokens in ascending name order.
	Tokens []Token
}

// TokenHash is the BLAKE3-256 digest of a personal access token. Only the digest is
// kept: the token itself is shown to its creator once.
type TokenHash [32]byte

// Token is a personal access token. ExpiryAtMicros 0 means it never expires.
type Token struct {
	Name           string
	Hash           TokenHash
	ExpiryAtMicros uint64
}

// Stream is a named set of topics.
type Stream struct {
	ID              uint32
	CreatedAtMicros uint64
	Name            string

	topics      slab[Topic]
	topicByName map[string]uint32
}

// Topic is a set of partitions with shared options and consumer groups.
type Topic struct {
	ID              uint32
	CreatedAtMicros uint64
	Name            string
	// Options are the effective values. The three updatable ones are authoritative
	// here (an update that sends a server-default sentinel stores the sentinel in
	// ExplicitOptions but leaves the value).
	Options wire.TopicOptions
	// ExplicitOptions and DerivedOptions are the options TLV blocks that replies carry
	// (iggy.apache.org/docs/server/topic-options).
	ExplicitOptions []byte
	DerivedOptions  []byte
	// PurgeGeneration counts PurgeTopic and PurgeStream operations; the partition
	// shards apply a purge idempotently by generation.
	PurgeGeneration uint64
	// Partitions always hold ids 0..len-1: new partitions take the next ids and
	// DeletePartitions removes the highest.
	Partitions []Partition

	groups      []*ConsumerGroup // ascending id
	groupByName map[string]uint32
	nextGroupID uint32
}

// Partition is one partition's metadata; its messages live in its shard.
type Partition struct {
	ID              uint32
	CreatedAtMicros uint64
}

// ConsumerGroup is a named set of members (client ids) that share a topic's
// partitions. Ids only grow within a topic, so a new group never inherits a deleted
// group's stored offsets.
type ConsumerGroup struct {
	ID   uint32
	Name string
	// Generation bumps on every membership change and on every partition-set change
	// that moves an assignment; a member's cached assignment of an older generation
	// is stale.
	Generation uint64
	// Members are in ascending member id (slot) order.
	Members []Member
}

// Member is one client in a consumer group with the partitions assigned to it.
type Member struct {
	// ID is the member's slot in the group, the lowest free one when it joined.
	ID         uint32
	Client     wire.Uint128
	Partitions []uint32
}

// NewState returns the state of a fresh server: no streams and one user, the root
// (id 0, active, every permission), named rootUsername with rootPasswordHash (see
// HashPassword), created at createdAtMicros.
func NewState(rootUsername string, rootPasswordHash string, createdAtMicros uint64) *State {
	s := newEmptyState()
	s.insertUser(&User{
		ID:              RootUserID,
		CreatedAtMicros: createdAtMicros,
		Status:          wire.UserActive,
		Username:        rootUsername,
		PasswordHash:    rootPasswordHash,
	})
	return s
}

// NewStateWithoutRoot returns the state a replica of a cluster starts from: no
// streams and no user at all. Its root user comes from a replicated operation
// (ProposeRootUser), so that every replica holds the same root, hash and
// creation time included; until that commits nobody can log in.
func NewStateWithoutRoot() *State { return newEmptyState() }

// HasRoot reports whether the root user exists: always on a single node, in a
// cluster once the root user's creation (ProposeRootUser) committed.
func (s *State) HasRoot() bool { return s.User(RootUserID) != nil }

func newEmptyState() *State {
	return &State{
		userByName:   make(map[string]uint32),
		tokenOwner:   make(map[TokenHash]uint32),
		streamByName: make(map[string]uint32),
	}
}

// slab holds objects by id, nil marking a free id, and hands out the lowest free id
// (the reference server's slab key) in amortized constant time: every id below
// firstFree is taken, so the search for a free id starts there.
type slab[T any] struct {
	items     []*T
	firstFree int
	count     int
}

func (s *slab[T]) get(id uint32) *T {
	if uint64(id) >= uint64(len(s.items)) {
		return nil
	}
	return s.items[id]
}

// all yields the objects in ascending id order.
func (s *slab[T]) all(yield func(*T) bool) {
	for _, v := range s.items {
		if v != nil && !yield(v) {
			return
		}
	}
}

// lowestFree returns the lowest free id, which may be len(items).
func (s *slab[T]) lowestFree() int {
	for s.firstFree < len(s.items) && s.items[s.firstFree] != nil {
		s.firstFree++
	}
	return s.firstFree
}

// put stores v at a free id, growing the table as needed.
func (s *slab[T]) put(id uint32, v *T) {
	if n := int(id) + 1 - len(s.items); n > 0 {
		s.items = append(s.items, make([]*T, n)...)
	}
	s.items[id] = v
	s.count++
}

// remove frees id and drops trailing free ids, so that an emptied table is
// indistinguishable from a fresh one.
func (s *slab[T]) remove(id uint32) {
	s.items[id] = nil
	s.count--
	s.firstFree = min(s.firstFree, int(id))
	n := len(s.items)
	for n > 0 && s.items[n-1] == nil {
		n--
	}
	s.items = s.items[:n]
	s.firstFree = min(s.firstFree, n)
}

func (s *State) insertUser(u *User) {
	s.users.put(u.ID, u)
	s.userByName[u.Username] = u.ID
	for i := range u.Tokens {
		s.tokenOwner[u.Tokens[i].Hash] = u.ID
	}
}

func (s *State) removeUser(u *User) {
	for i := range u.Tokens {
		delete(s.tokenOwner, u.Tokens[i].Hash)
	}
	delete(s.userByName, u.Username)
	s.users.remove(u.ID)
}

func (s *State) insertStream(st *Stream) {
	s.streams.put(st.ID, st)
	s.streamByName[st.Name] = st.ID
}

func (s *State) removeStream(st *Stream) {
	delete(s.streamByName, st.Name)
	s.streams.remove(st.ID)
}

func (st *Stream) insertTopic(t *Topic) {
	st.topics.put(t.ID, t)
	st.topicByName[t.Name] = t.ID
}

func (st *Stream) removeTopic(t *Topic) {
	delete(st.topicByName, t.Name)
	st.topics.remove(t.ID)
}

// Users yields every user in ascending id order.
func (s *State) Users() iter.Seq[*User] { return s.users.all }

// Streams yields every stream in ascending id order.
func (s *State) Streams() iter.Seq[*Stream] { return s.streams.all }

// Topics yields the stream's topics in ascending id order.
func (st *Stream) Topics() iter.Seq[*Topic] { return st.topics.all }

// Groups yields the topic's consumer groups in ascending id order.
func (t *Topic) Groups() iter.Seq[*ConsumerGroup] {
	return func(yield func(*ConsumerGroup) bool) {
		for _, g := range t.groups {
			if !yield(g) {
				return
			}
		}
	}
}

// User returns the user with id, or nil.
func (s *State) User(id uint32) *User { return s.users.get(id) }

// Stream returns the stream with id, or nil.
func (s *State) Stream(id uint32) *Stream { return s.streams.get(id) }

// Topic returns the topic with id, or nil.
func (st *Stream) Topic(id uint32) *Topic { return st.topics.get(id) }

// TopicsCount is the number of topics in the stream.
func (st *Stream) TopicsCount() int { return st.topics.count }

// Group returns the consumer group with id, or nil.
func (t *Topic) Group(id uint32) *ConsumerGroup {
	i, ok := slices.BinarySearchFunc(t.groups, id, func(g *ConsumerGroup, id uint32) int {
		return cmp.Compare(g.ID, id)
	})
	if !ok {
		return nil
	}
	return t.groups[i]
}

// GroupsCount is the number of consumer groups of the topic.
func (t *Topic) GroupsCount() int { return len(t.groups) }

// PartitionsCount is the number of partitions of the topic.
func (t *Topic) PartitionsCount() uint32 { return uint32(len(t.Partitions)) }

// resolveUser finds a user by Identifier.
func (s *State) resolveUser(id wire.Identifier) *User {
	if id.Kind == wire.IdentifierNumeric {
		return s.User(id.Numeric)
	}
	if uid, ok := s.userByName[string(id.String)]; ok {
		return s.users.items[uid]
	}
	return nil
}

// resolveStream finds a stream by Identifier. Names are compared byte for byte,
// as the reference server's name index does.
func (s *State) resolveStream(id wire.Identifier) *Stream {
	if id.Kind == wire.IdentifierNumeric {
		return s.Stream(id.Numeric)
	}
	if sid, ok := s.streamByName[string(id.String)]; ok {
		return s.streams.items[sid]
	}
	return nil
}

func (st *Stream) resolveTopic(id wire.Identifier) *Topic {
	if id.Kind == wire.IdentifierNumeric {
		return st.Topic(id.Numeric)
	}
	if tid, ok := st.topicByName[string(id.String)]; ok {
		return st.topics.items[tid]
	}
	return nil
}

func (t *Topic) resolveGroup(id wire.Identifier) *ConsumerGroup {
	if id.Kind == wire.IdentifierNumeric {
		return t.Group(id.Numeric)
	}
	if gid, ok := t.groupByName[string(id.String)]; ok {
		return t.Group(gid)
	}
	return nil
}

// resolveTopic resolves a stream and a topic; the error is the not-found code of
// the first that does not resolve (1009, then 2010).
func (s *State) resolveTopic(streamID, topicID wire.Identifier) (*Stream, *Topic, wire.ErrorCode) {
	st := s.resolveStream(streamID)
	if st == nil {
		return nil, nil, wire.ErrStreamIdNotFound
	}
	t := st.resolveTopic(topicID)
	if t == nil {
		return st, nil, wire.ErrTopicIdNotFound
	}
	return st, t, 0
}

// member returns the index of client's membership in g, or -1.
func (g *ConsumerGroup) member(client wire.Uint128) int {
	for i := range g.Members {
		if g.Members[i].Client == client {
			return i
		}
	}
	return -1
}

// lowestFreeMemberID returns the lowest member id not in use (Members is sorted).
func (g *ConsumerGroup) lowestFreeMemberID() uint32 {
	for i := range g.Members {
		if g.Members[i].ID != uint32(i) {
			return uint32(i)
		}
	}
	return uint32(len(g.Members))
}

// rebalance spreads the partitions 0..partitionsCount-1 round-robin over the members
// in member id order (partition p goes to the member at position p mod n), as the
// reference server does. Member id order is join order with slots reused, so the
// assignment depends only on replicated state, never on a map's iteration order.
// It reports whether any member's assignment changed.
func (g *ConsumerGroup) rebalance(partitionsCount uint32) bool {
	n := uint32(len(g.Members))
	changed := false
	for i := range g.Members {
		m := &g.Members[i]
		want := 0
		if n > 0 && partitionsCount > uint32(i) {
			want = int((partitionsCount - uint32(i) + n - 1) / n)
		}
		same := len(m.Partitions) == want
		if same {
			for k := range want {
				if m.Partitions[k] != uint32(i)+uint32(k)*n {
					same = false
					break
				}
			}
		}
		if same {
			continue
		}
		changed = true
		m.Partitions = m.Partitions[:0]
		for p := uint32(i); p < partitionsCount; p += n {
			m.Partitions = append(m.Partitions, p)
		}
	}
	return changed
}
