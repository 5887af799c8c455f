package wire

import (
	"errors"
	"math/rand/v2"
	"testing"
)

func randConsumerGroupDetails(r *rand.Rand) *ConsumerGroupDetails {
	g := ConsumerGroupDetails{ConsumerGroupHeader: ConsumerGroupHeader{
		ID: r.Uint32(), PartitionsCount: r.Uint32(), Name: randName(r),
	}}
	for i := range r.IntN(5) {
		m := ConsumerGroupMember{ID: uint32(i)}
		for range r.IntN(5) {
			m.PartitionIDs = append(m.PartitionIDs, r.Uint32())
		}
		g.Members = append(g.Members, m)
	}
	g.MembersCount = uint32(len(g.Members))
	return &g
}

func TestConsumerGroupRepliesRoundTrip(t *testing.T) {
	t.Run("ConsumerGroupHeader", func(t *testing.T) {
		checkRoundTrip(t, 10, func(r *rand.Rand) *ConsumerGroupHeader {
			return &randConsumerGroupDetails(r).ConsumerGroupHeader
		})
	})
	t.Run("ConsumerGroupDetails", func(t *testing.T) {
		checkRoundTrip(t, 11, randConsumerGroupDetails)
	})
	t.Run("Assignment", func(t *testing.T) {
		checkRoundTrip(t, 12, func(r *rand.Rand) *Assignment {
			a := Assignment{Generation: r.Uint64()}
			for range r.IntN(8) {
				a.PartitionIDs = append(a.PartitionIDs, r.Uint32())
			}
			return &a
		})
	})
}

// Members' partition ids share one backing array but are capped, so appending to one
// member's ids cannot overwrite the next member's.
func TestConsumerGroupMembersAreCapped(t *testing.T) {
	var g ConsumerGroupDetails
	if err := g.Decode(readGolden(t, "replies/consumer_group_details.hex")); err != nil {
		t.Fatal(err)
	}
	first := g.Members[0].PartitionIDs
	_ = append(first, 99)
	if g.Members[1].PartitionIDs[0] != 1 {
		t.Fatalf("append to member 0 clobbered member 1: %v", g.Members[1].PartitionIDs)
	}
}

// Decoding again into the same value allocates nothing: members and ids are reused.
func TestConsumerGroupDecodeReuses(t *testing.T) {
	details := readGolden(t, "replies/consumer_group_details.hex")
	assignment := readGolden(t, "replies/assignment.hex")
	var g ConsumerGroupDetails
	var a Assignment
	if g.Decode(details) != nil || a.Decode(assignment) != nil {
		t.Fatal("golden does not decode")
	}
	allocs := testing.AllocsPerRun(100, func() {
		if g.Decode(details) != nil || a.Decode(assignment) != nil {
			t.Fatal("decode failed")
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per decode", allocs)
	}
}

func TestConsumerGroupDetailsMalformed(t *testing.T) {
	valid := readGolden(t, "replies/consumer_group_details.hex")
	tests := []struct {
		name   string
		mutate func(b []byte) []byte
	}{
		{"member claims more partitions than remain", func(b []byte) []byte {
			b[len(b)-8] = 0xff // member 1's partitions_count
			return b
		}},
		{"one member too many", func(b []byte) []byte {
			b[8] = 3
			return b
		}},
		{"one member too few", func(b []byte) []byte {
			b[8] = 1
			return b
		}},
		{"bad UTF-8 name", func(b []byte) []byte {
			b[13] = 0xff
			return b
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := tt.mutate(append([]byte(nil), valid...))
			var g ConsumerGroupDetails
			if err := g.Decode(b); !errors.Is(err, ErrInvalidCommand) {
				t.Fatalf("err = %v", err)
			}
		})
	}
}
