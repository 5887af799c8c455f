package wire

import "encoding/binary"

// ConsumerGroupHeader is one group in GetConsumerGroups and the head of
// ConsumerGroupDetails (apache/iggy
// core/binary_protocol/src/responses/consumer_groups/), 13 + N bytes:
//
//	+----+------------------+---------------+-----+------+
//	| id | partitions_count | members_count | N   | name |
//	| u32| u32 (topic's)    | u32           | u8  | N    |
//	+----+------------------+---------------+-----+------+
type ConsumerGroupHeader struct {
	ID              uint32
	PartitionsCount uint32
	MembersCount    uint32
	Name            []byte
}

// consumerGroupMemberMinBytes is a member that owns no partition.
const consumerGroupMemberMinBytes = 8

// EncodedLen is the exact number of bytes Append writes.
func (h *ConsumerGroupHeader) EncodedLen() int { return 13 + len(h.Name) }

// Append encodes h onto b.
func (h *ConsumerGroupHeader) Append(b []byte) []byte {
	b = appendU32(b, h.ID)
	b = appendU32(b, h.PartitionsCount)
	b = appendU32(b, h.MembersCount)
	return appendReplyName(b, h.Name)
}

func (h *ConsumerGroupHeader) decodeFrom(d *decoder) {
	h.ID = d.u32()
	h.PartitionsCount = d.u32()
	h.MembersCount = d.u32()
	h.Name = d.name()
}

// Decode reads a body that holds exactly one ConsumerGroupHeader.
func (h *ConsumerGroupHeader) Decode(body []byte) error { return decodeExact(h, body) }

// IterConsumerGroups walks a GetConsumerGroups body: headers back to back, no count.
func IterConsumerGroups(body []byte) ListIter[ConsumerGroupHeader, *ConsumerGroupHeader] {
	return newUncountedIter[ConsumerGroupHeader](body)
}

// AppendConsumerGroups decodes a GetConsumerGroups body onto dst.
func AppendConsumerGroups(dst []ConsumerGroupHeader, body []byte) ([]ConsumerGroupHeader, error) {
	return collect(dst, IterConsumerGroups(body))
}

// AppendConsumerGroupsReply encodes a GetConsumerGroups body.
func AppendConsumerGroupsReply(b []byte, groups []ConsumerGroupHeader) []byte {
	for i := range groups {
		b = groups[i].Append(b)
	}
	return b
}

// ConsumerGroupMember is one member of a group (apache/iggy
// core/binary_protocol/src/responses/consumer_groups/), 8 + 4·P bytes:
// [member id u32][partitions_count u32][partition_id u32]·P. The member id is the
// member's 0-based slot inside the group, not its client id.
type ConsumerGroupMember struct {
	ID           uint32
	PartitionIDs []uint32
}

// EncodedLen is the exact number of bytes Append writes.
func (m *ConsumerGroupMember) EncodedLen() int { return 8 + 4*len(m.PartitionIDs) }

// Append encodes m onto b.
func (m *ConsumerGroupMember) Append(b []byte) []byte {
	b = appendU32(b, m.ID)
	return appendPartitionIDs(b, m.PartitionIDs)
}

// ConsumerGroupDetails is the GetConsumerGroup reply and the CreateConsumerGroup
// success payload: a ConsumerGroupHeader followed by exactly MembersCount members,
// and nothing after them (the Go SDK reads members to the end of the body).
type ConsumerGroupDetails struct {
	ConsumerGroupHeader
	Members []ConsumerGroupMember
	// partitionStore backs every member's PartitionIDs after Decode, so decoding
	// again into the same value reuses it.
	partitionStore []uint32
}

// EncodedLen is the exact number of bytes Append writes.
func (g *ConsumerGroupDetails) EncodedLen() int {
	n := g.ConsumerGroupHeader.EncodedLen()
	for i := range g.Members {
		n += g.Members[i].EncodedLen()
	}
	return n
}

// Append encodes g onto b. It panics when MembersCount disagrees with Members.
func (g *ConsumerGroupDetails) Append(b []byte) []byte {
	if int(g.MembersCount) != len(g.Members) {
		panic("wire: ConsumerGroupDetails.MembersCount != len(Members)")
	}
	b = g.ConsumerGroupHeader.Append(b)
	for i := range g.Members {
		b = g.Members[i].Append(b)
	}
	return b
}

// Decode reads a GetConsumerGroup body (or a CreateConsumerGroup payload). An empty
// body is the server's "group not found" and decodes as ErrConsumerGroupIdNotFound.
// The members and all their partition ids land in two slices whose capacity later
// Decodes into g reuse; each member's PartitionIDs is a capped sub-slice.
func (g *ConsumerGroupDetails) Decode(body []byte) error {
	if len(body) == 0 {
		return ErrConsumerGroupIdNotFound
	}
	d := newDecoder(body)
	var h ConsumerGroupHeader
	h.decodeFrom(&d)
	if !d.countFits(h.MembersCount, consumerGroupMemberMinBytes) {
		return d.err
	}
	// First pass: validate the member list and count its partition ids, so both
	// slices are sized once.
	probe := d
	partitions := 0
	for range h.MembersCount {
		probe.u32()
		p := probe.u32()
		if !probe.countFits(p, 4) {
			return probe.err
		}
		probe.take(4 * int(p))
		partitions += int(p)
	}
	if err := probe.end(); err != nil {
		return err
	}
	members := growLen(g.Members[:0], int(h.MembersCount))
	store := growLen(g.partitionStore[:0], partitions)
	at := 0
	for i := range members {
		members[i].ID = d.u32()
		p := int(d.u32())
		ids := store[at : at+p : at+p]
		raw := d.take(4 * p)
		for j := range ids {
			ids[j] = binary.LittleEndian.Uint32(raw[4*j:])
		}
		members[i].PartitionIDs = ids
		at += p
	}
	if err := d.end(); err != nil {
		panic("wire: consumer group members changed between two passes: " + err.Error())
	}
	g.ConsumerGroupHeader = h
	g.Members = members
	g.partitionStore = store
	return nil
}

// Assignment is the SyncConsumerGroup reply (apache/iggy
// core/binary_protocol/src/responses/consumer_groups/), 12 + 4·P bytes:
// [generation u64][partitions_count u32][partition_id u32]·P. A member that owns
// nothing gets P = 0, not an empty body; an empty body means the caller is not a
// member.
type Assignment struct {
	Generation   uint64
	PartitionIDs []uint32
}

// EncodedLen is the exact number of bytes Append writes.
func (a *Assignment) EncodedLen() int { return 12 + 4*len(a.PartitionIDs) }

// Append encodes a onto b.
func (a *Assignment) Append(b []byte) []byte {
	b = appendU64(b, a.Generation)
	return appendPartitionIDs(b, a.PartitionIDs)
}

// Decode reads a SyncConsumerGroup body, reusing the capacity of a.PartitionIDs. An
// empty body decodes as ErrConsumerGroupMemberNotFound, as the Go SDK maps it.
func (a *Assignment) Decode(body []byte) error {
	if len(body) == 0 {
		return ErrConsumerGroupMemberNotFound
	}
	d := newDecoder(body)
	generation := d.u64()
	p := d.u32()
	if !d.countFits(p, 4) {
		return d.err
	}
	raw := d.take(4 * int(p))
	if err := d.end(); err != nil {
		return err
	}
	ids := growLen(a.PartitionIDs[:0], int(p))
	for i := range ids {
		ids[i] = binary.LittleEndian.Uint32(raw[4*i:])
	}
	a.Generation = generation
	a.PartitionIDs = ids
	return nil
}

func appendPartitionIDs(b []byte, ids []uint32) []byte {
	b = appendU32(b, uint32(len(ids)))
	for _, id := range ids {
		b = appendU32(b, id)
	}
	return b
}

// growLen returns s resized to n elements, reusing its backing array when it is
// large enough. Callers bound n by the input's length first.
func growLen[T any](s []T, n int) []T {
	if cap(s) >= n {
		return s[:n]
	}
	return make([]T, n)
}
