package metadata

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/zeebo/xxh3"

	"github.com/iggy-shard/iggy-shard/wire"
)

// Snapshot format, version 2: a dependency-free binary layout, little-endian, every
// collection in ascending id (or name) order and nothing taken from a map, so equal
// states encode to equal bytes. Names are [len u8][UTF-8]; blocks [len u32][bytes].
//
//	+-------+-------------+----------+-----------------+-------------------+-------------------+----------------+
//	| magic | version u32 | op u64   | users_count u32 | streams_count u32 | revoked_count u32 | xxh3-64 u64 of |
//	| IMS1  | = 2         | (applied)| user*           | stream*           | revoked*          | all before it  |
//	+-------+-------------+----------+-----------------+-------------------+-------------------+----------------+
//
//	user    id u32, created_at u64, status u8, username Name, password_hash block32,
//	        has_permissions u8, [permissions block32 when 1], tokens_count u32, token*
//	token   name Name, blake3 hash [32], expiry_at u64
//	stream  id u32, created_at u64, name Name, topics_count u32, topic*
//	topic   id u32, created_at u64, name Name,
//	        compression u8, message_expiry u64, max_topic_size u64, segment_size u64,
//	        enforce_fsync u8, messages_required_to_save u32,
//	        size_of_messages_required_to_save u64, preallocate_segments u8,
//	        explicit block32, derived block32, purge_generation u64, next_group_id u32,
//	        partitions_count u32, partition created_at u64 * count (ids are 0..count-1),
//	        groups_count u32, group*
//	group   id u32, name Name, generation u64, members_count u32, member*
//	member  id u32, client u128
//	revoked expiry_us u64, jti Name, in ascending (expiry, jti) order
//
// Version 1 is version 2 without the revoked tokens (written before RevokeTokens,
// op 70, existed); DecodeSnapshot reads both, a version 1 snapshot as a state that
// holds no revoked token.
//
// A member's partitions are not stored: they follow from the members and the
// partition count (ConsumerGroup.rebalance), so a snapshot cannot contradict them.
//
// The reference server's snapshot is MessagePack; a binary layout written with
// plain appends needs no dependency, no reflection and no allocation per field,
// and the decoder checks every count against the bytes left before it sizes
// anything, so a corrupt snapshot costs at most a small multiple of its length.
//
// These constants are part of the on-disk format and must not change.
const (
	snapshotMagic   = "IMS1"
	SnapshotVersion = 2
	// snapshotVersionWithoutRevocations is the version before the revoked tokens.
	snapshotVersionWithoutRevocations = 1

	snapshotTrailerBytes = 8
	// UserIDLimit bounds user ids, so a snapshot (or a long series of creates)
	// cannot size the user table beyond a million entries.
	UserIDLimit = 1 << 20
	// passwordHashBytesMax bounds a stored hash; a PHC string is about 100 bytes.
	passwordHashBytesMax = 1024

	userMinBytes      = 4 + 8 + 1 + 2 + 4 + 1 + 4
	tokenMinBytes     = 2 + 32 + 8
	streamMinBytes    = 4 + 8 + 2 + 4
	topicMinBytes     = 4 + 8 + 2 + 1 + 8*4 + 1 + 4 + 1 + 4 + 4 + 8 + 4 + 4 + 4
	partitionMinBytes = 8
	groupMinBytes     = 4 + 2 + 8 + 4
	memberMinBytes    = 4 + 16
)

// ErrSnapshotCorrupt is wrapped by every snapshot decoding failure.
var ErrSnapshotCorrupt = errors.New("metadata: snapshot corrupt")

func corrupt(reason string) error { return fmt.Errorf("%w: %s", ErrSnapshotCorrupt, reason) }

// AppendSnapshot encodes the whole state, tagged with op (the last op applied to
// it), onto dst.
func (s *State) AppendSnapshot(dst []byte, op uint64) []byte {
	start := len(dst)
	dst = append(dst, snapshotMagic...)
	dst = appendU32(dst, SnapshotVersion)
	dst = appendU64(dst, op)
	dst = appendU32(dst, uint32(s.users.count))
	for _, u := range s.users.items {
		if u != nil {
			dst = appendUser(dst, u)
		}
	}
	dst = appendU32(dst, uint32(s.streams.count))
	for _, st := range s.streams.items {
		if st != nil {
			dst = appendStream(dst, st)
		}
	}
	dst = s.appendRevocations(dst)
	return appendU64(dst, xxh3.Hash(dst[start:]))
}

func appendUser(b []byte, u *User) []byte {
	b = appendU32(b, u.ID)
	b = appendU64(b, u.CreatedAtMicros)
	b = appendU8(b, uint8(u.Status))
	b = appendName(b, u.Username)
	b = appendU32(b, uint32(len(u.PasswordHash)))
	b = append(b, u.PasswordHash...)
	b = appendBool(b, u.Permissions != nil)
	if u.Permissions != nil {
		lenAt := len(b)
		b = appendU32(b, 0)
		b = u.Permissions.Append(b)
		binary.LittleEndian.PutUint32(b[lenAt:], uint32(len(b)-lenAt-4))
	}
	b = appendU32(b, uint32(len(u.Tokens)))
	for i := range u.Tokens {
		t := &u.Tokens[i]
		b = appendName(b, t.Name)
		b = append(b, t.Hash[:]...)
		b = appendU64(b, t.ExpiryAtMicros)
	}
	return b
}

func appendStream(b []byte, st *Stream) []byte {
	b = appendU32(b, st.ID)
	b = appendU64(b, st.CreatedAtMicros)
	b = appendName(b, st.Name)
	b = appendU32(b, uint32(st.topics.count))
	for _, t := range st.topics.items {
		if t != nil {
			b = appendTopic(b, t)
		}
	}
	return b
}

func appendTopic(b []byte, t *Topic) []byte {
	b = appendU32(b, t.ID)
	b = appendU64(b, t.CreatedAtMicros)
	b = appendName(b, t.Name)
	o := &t.Options
	b = appendU8(b, o.CompressionAlgorithm)
	b = appendU64(b, o.MessageExpiryMicros)
	b = appendU64(b, o.MaxTopicSizeBytes)
	b = appendU64(b, o.SegmentSizeBytes)
	b = appendBool(b, o.EnforceFsync)
	b = appendU32(b, o.MessagesRequiredToSave)
	b = appendU64(b, o.SizeOfMessagesRequiredToSaveBytes)
	b = appendBool(b, o.PreallocateSegments)
	b = appendBlock32(b, t.ExplicitOptions)
	b = appendBlock32(b, t.DerivedOptions)
	b = appendU64(b, t.PurgeGeneration)
	b = appendU32(b, t.nextGroupID)
	b = appendU32(b, t.PartitionsCount())
	for i := range t.Partitions {
		b = appendU64(b, t.Partitions[i].CreatedAtMicros)
	}
	b = appendU32(b, uint32(len(t.groups)))
	for _, g := range t.groups {
		b = appendU32(b, g.ID)
		b = appendName(b, g.Name)
		b = appendU64(b, g.Generation)
		b = appendU32(b, uint32(len(g.Members)))
		for i := range g.Members {
			b = appendU32(b, g.Members[i].ID)
			var c [16]byte
			g.Members[i].Client.Put(c[:])
			b = append(b, c[:]...)
		}
	}
	return b
}

// DecodeSnapshot restores a state from AppendSnapshot's bytes and returns it with
// the op it was taken at. Anything that is not exactly a snapshot of a state Apply
// could have produced (bad magic, version or checksum, truncation, trailing bytes,
// ids out of order or out of range, duplicate names or tokens, malformed option or
// permission blocks) is an error wrapping ErrSnapshotCorrupt.
func DecodeSnapshot(b []byte) (*State, uint64, error) {
	if len(b) < len(snapshotMagic)+4+8+snapshotTrailerBytes {
		return nil, 0, corrupt("too short")
	}
	body, trailer := b[:len(b)-snapshotTrailerBytes], b[len(b)-snapshotTrailerBytes:]
	if string(body[:len(snapshotMagic)]) != snapshotMagic {
		return nil, 0, corrupt("bad magic")
	}
	if xxh3.Hash(body) != binary.LittleEndian.Uint64(trailer) {
		return nil, 0, corrupt("checksum mismatch")
	}
	r := newReader(body[len(snapshotMagic):])
	version := r.u32()
	if version != SnapshotVersion && version != snapshotVersionWithoutRevocations {
		return nil, 0, corrupt(fmt.Sprintf("version %d, want %d or %d", version, snapshotVersionWithoutRevocations, SnapshotVersion))
	}
	op := r.u64()
	s := newEmptyState()
	if err := s.decodeUsers(&r); err != nil {
		return nil, 0, err
	}
	if err := s.decodeStreams(&r); err != nil {
		return nil, 0, err
	}
	if version >= 2 {
		if err := s.decodeRevocations(&r); err != nil {
			return nil, 0, err
		}
	}
	if !r.done() {
		return nil, 0, corrupt("truncated or trailing bytes")
	}
	return s, op, nil
}

func (s *State) decodeUsers(r *reader) error {
	n := r.count(userMinBytes)
	prev := int64(-1)
	for range n {
		u := &User{ID: r.u32(), CreatedAtMicros: r.u64(), Status: wire.UserStatus(r.u8())}
		name := r.name()
		hash := r.block32()
		hasPermissions := r.u8()
		var perms []byte
		if hasPermissions == 1 {
			perms = r.block32()
		}
		if !r.ok {
			return corrupt("truncated user")
		}
		switch {
		case int64(u.ID) <= prev || u.ID >= UserIDLimit:
			return corrupt("user ids out of order or range")
		case u.Status != wire.UserActive && u.Status != wire.UserInactive:
			return corrupt("bad user status")
		case len(hash) > passwordHashBytesMax:
			return corrupt("password hash too long")
		case hasPermissions > 1:
			return corrupt("bad permissions flag")
		}
		prev = int64(u.ID)
		u.Username, u.PasswordHash = string(name), string(hash)
		if _, dup := s.userByName[u.Username]; dup {
			return corrupt("duplicate username")
		}
		if hasPermissions == 1 {
			p := new(wire.Permissions)
			// Canonical means ordered ids and flag bytes of exactly 0 or 1: what
			// Permissions.Append writes back.
			if p.Decode(perms) != nil || !permissionsCanonical(p) || !bytes.Equal(p.Append(nil), perms) {
				return corrupt("bad permissions")
			}
			u.Permissions = p
		}
		tokens := r.count(tokenMinBytes)
		if tokens > 0 {
			u.Tokens = make([]Token, tokens)
		}
		for i := range u.Tokens {
			t := &u.Tokens[i]
			t.Name = string(r.name())
			copy(t.Hash[:], r.take(len(t.Hash)))
			t.ExpiryAtMicros = r.u64()
			if !r.ok {
				return corrupt("truncated token")
			}
			if i > 0 && u.Tokens[i-1].Name >= t.Name {
				return corrupt("token names out of order")
			}
			if _, dup := s.tokenOwner[t.Hash]; dup {
				return corrupt("duplicate token")
			}
			s.tokenOwner[t.Hash] = u.ID
		}
		s.insertUser(u)
	}
	if !r.ok {
		return corrupt("truncated users")
	}
	if s.users.count > 0 && s.User(RootUserID) == nil {
		// No user at all is a cluster's state before its root user's creation
		// committed (NewStateWithoutRoot); users without the root never are.
		return corrupt("no root user")
	}
	return nil
}

// permissionsCanonical reports whether p is as normalizePermissions leaves it.
func permissionsCanonical(p *wire.Permissions) bool {
	for i := range p.Streams {
		if i > 0 && p.Streams[i-1].StreamID >= p.Streams[i].StreamID {
			return false
		}
		topics := p.Streams[i].Topics
		for j := 1; j < len(topics); j++ {
			if topics[j-1].TopicID >= topics[j].TopicID {
				return false
			}
		}
	}
	return true
}

func (s *State) decodeStreams(r *reader) error {
	n := r.count(streamMinBytes)
	prev := int64(-1)
	for range n {
		st := &Stream{ID: r.u32(), CreatedAtMicros: r.u64(), topicByName: make(map[string]uint32)}
		st.Name = string(r.name())
		if !r.ok {
			return corrupt("truncated stream")
		}
		if int64(st.ID) <= prev || st.ID >= StreamIDLimit {
			return corrupt("stream ids out of order or range")
		}
		prev = int64(st.ID)
		if _, dup := s.streamByName[st.Name]; dup {
			return corrupt("duplicate stream name")
		}
		if err := st.decodeTopics(r); err != nil {
			return err
		}
		s.insertStream(st)
	}
	if !r.ok {
		return corrupt("truncated streams")
	}
	return nil
}

func (st *Stream) decodeTopics(r *reader) error {
	n := r.count(topicMinBytes)
	prev := int64(-1)
	for range n {
		t := &Topic{ID: r.u32(), CreatedAtMicros: r.u64(), groupByName: make(map[string]uint32)}
		t.Name = string(r.name())
		o := &t.Options
		o.CompressionAlgorithm = r.u8()
		o.MessageExpiryMicros = r.u64()
		o.MaxTopicSizeBytes = r.u64()
		o.SegmentSizeBytes = r.u64()
		fsync := r.u8()
		o.MessagesRequiredToSave = r.u32()
		o.SizeOfMessagesRequiredToSaveBytes = r.u64()
		prealloc := r.u8()
		explicit, derived := r.block32(), r.block32()
		t.PurgeGeneration = r.u64()
		t.nextGroupID = r.u32()
		if !r.ok {
			return corrupt("truncated topic")
		}
		switch {
		case int64(t.ID) <= prev || t.ID >= TopicIDLimit:
			return corrupt("topic ids out of order or range")
		case o.CompressionAlgorithm != wire.TopicCompressionNone && o.CompressionAlgorithm != wire.TopicCompressionGzip:
			return corrupt("bad compression")
		case fsync > 1 || prealloc > 1:
			return corrupt("bad topic flag")
		}
		prev = int64(t.ID)
		o.EnforceFsync, o.PreallocateSegments = fsync == 1, prealloc == 1
		if _, err := wire.ValidateOptions(explicit); err != nil {
			return corrupt("bad explicit options")
		}
		if _, err := wire.ValidateOptions(derived); err != nil {
			return corrupt("bad derived options")
		}
		t.ExplicitOptions, t.DerivedOptions = bytes.Clone(explicit), bytes.Clone(derived)
		if _, dup := st.topicByName[t.Name]; dup {
			return corrupt("duplicate topic name")
		}
		partitions := r.count(partitionMinBytes)
		if partitions > PartitionIDLimit {
			return corrupt("too many partitions")
		}
		if partitions > 0 {
			t.Partitions = make([]Partition, partitions)
		}
		for i := range t.Partitions {
			t.Partitions[i] = Partition{ID: uint32(i), CreatedAtMicros: r.u64()}
		}
		if err := t.decodeGroups(r); err != nil {
			return err
		}
		st.insertTopic(t)
	}
	if !r.ok {
		return corrupt("truncated topics")
	}
	return nil
}

func (t *Topic) decodeGroups(r *reader) error {
	n := r.count(groupMinBytes)
	if n > 0 {
		t.groups = make([]*ConsumerGroup, 0, n)
	}
	for range n {
		g := &ConsumerGroup{ID: r.u32()}
		g.Name = string(r.name())
		g.Generation = r.u64()
		members := r.count(memberMinBytes)
		if members > 0 {
			g.Members = make([]Member, members)
		}
		clients := make(map[wire.Uint128]struct{}, members)
		for i := range g.Members {
			g.Members[i] = Member{ID: r.u32(), Client: r.u128()}
			if i > 0 && g.Members[i-1].ID >= g.Members[i].ID {
				return corrupt("member ids out of order")
			}
			if _, dup := clients[g.Members[i].Client]; dup {
				return corrupt("duplicate member")
			}
			clients[g.Members[i].Client] = struct{}{}
		}
		if !r.ok {
			return corrupt("truncated group")
		}
		if len(t.groups) > 0 && t.groups[len(t.groups)-1].ID >= g.ID || g.ID >= t.nextGroupID {
			return corrupt("group ids out of order or range")
		}
		if _, dup := t.groupByName[g.Name]; dup {
			return corrupt("duplicate group name")
		}
		g.rebalance(t.PartitionsCount())
		t.groups = append(t.groups, g)
		t.groupByName[g.Name] = g.ID
	}
	return nil
}
