package partition

import (
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

func TestRoundRobin(t *testing.T) {
	// What the Go SDK's e2e suite expects (apache/iggy foreign/go/tests/e2e_test.go): 1
	// partition -> 0; after growing to 3 the next goes to 1; after shrinking back to 1
	// the next goes to 0.
	var rr RoundRobin
	steps := []struct{ count, want uint32 }{{1, 0}, {3, 1}, {3, 2}, {3, 0}, {3, 1}, {1, 0}, {2, 1}, {2, 0}}
	for i, s := range steps {
		if got := rr.Next(s.count); got != s.want {
			t.Fatalf("step %d: Next(%d) = %d, want %d", i, s.count, got, s.want)
		}
	}
}

func TestResolvePartition(t *testing.T) {
	var rr RoundRobin
	for _, tc := range []struct {
		name  string
		p     wire.Partitioning
		count uint32
		want  uint32
		err   error
	}{
		{"explicit", wire.Partitioning{Kind: wire.PartitioningPartitionID, PartitionID: 2}, 3, 2, nil},
		{"explicit out of range", wire.Partitioning{Kind: wire.PartitioningPartitionID, PartitionID: 3}, 3, 0, wire.ErrResourceNotFound},
		{"balanced", wire.Partitioning{Kind: wire.PartitioningBalanced}, 3, 0, nil},
		{"key", wire.Partitioning{Kind: wire.PartitioningMessagesKey, Key: []byte("abc")}, 10, 7, nil},
		{"empty key", wire.Partitioning{Kind: wire.PartitioningMessagesKey}, 10, 0, wire.ErrResourceNotFound},
		{"no partitions", wire.Partitioning{Kind: wire.PartitioningBalanced}, 0, 0, wire.ErrResourceNotFound},
		{"unknown kind", wire.Partitioning{Kind: 9}, 3, 0, wire.ErrResourceNotFound},
	} {
		got, err := ResolvePartition(tc.p, tc.count, &rr)
		if err != tc.err || got != tc.want {
			t.Errorf("%s: got (%d, %v), want (%d, %v)", tc.name, got, err, tc.want, tc.err)
		}
	}
}
