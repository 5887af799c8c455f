package wire

import "testing"

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
		if got := XXH32([]byte(tc.in), 0); got != tc.want {
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
