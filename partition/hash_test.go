package partition

import (
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

// Vectors of the reference XXH32 (seed 0): the empty input, the short-input path, and
// a 39-byte input that runs the 16-byte stripes, one 4-byte lane and three tail bytes.
func TestXXH32Vectors(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want uint32
	}{
		{"", 0x02CC5D05},
		{"a", 0x550D7456},
		{"abc", 0x32D153FF},
		{"Nobody inspects the spammish repetition", 0xE2293B2F},
	} {
		if got := xxh32([]byte(tc.in), 0); got != tc.want {
			t.Errorf("xxh32(%q) = %#08x, want %#08x", tc.in, got, tc.want)
		}
	}
}

func TestPartitionForKey(t *testing.T) {
	// 0x32D153FF = 852579327: mod 3 = 0, mod 7 = 5, mod 10 = 7.
	for _, tc := range []struct {
		key   string
		count uint32
		want  uint32
	}{
		{"abc", 1, 0},
		{"abc", 3, 852579327 % 3},
		{"abc", 7, 852579327 % 7},
		{"abc", 10, 7},
		{"a", 4, 0x550D7456 % 4},
	} {
		if got := PartitionForKey([]byte(tc.key), tc.count); got != tc.want {
			t.Errorf("PartitionForKey(%q, %d) = %d, want %d", tc.key, tc.count, got, tc.want)
		}
	}
}

func TestRoundRobin(t *testing.T) {
	// go-sdk-behaviour.md §6: 1 partition -> 0; after growing to 3 the next goes to 1;
	// after shrinking back to 1 the next goes to 0.
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

func FuzzPartitionForKey(f *testing.F) {
	f.Add([]byte("abc"), uint32(3))
	f.Add([]byte("Nobody inspects the spammish repetition"), uint32(1000))
	f.Fuzz(func(t *testing.T, key []byte, count uint32) {
		if count == 0 {
			return
		}
		p := PartitionForKey(key, count)
		if p >= count {
			t.Fatalf("partition %d >= count %d", p, count)
		}
		if p != PartitionForKey(key, count) {
			t.Fatal("not deterministic")
		}
	})
}
