package wire

import (
	"encoding/binary"
	"math/bits"
)

// Where a MessagesKey batch goes. Producers (the Go SDK resolves keys client-side)
// and the server (for SDKs that send the key) must agree to the bit, so that a key
// lands on one partition whoever routes it; the one definition lives here.

// PartitionForKey returns the partition a MessagesKey batch goes to: XXH32 of the key
// with seed 0, modulo the topic's partition count, as apache/iggy's
// calculate_partition_id_by_messages_key_hash and the Go SDK compute it. Partition ids
// are 0-based. partitionsCount must be at least 1.
func PartitionForKey(key []byte, partitionsCount uint32) uint32 {
	return XXH32(key, 0) % partitionsCount
}

// XXH32, the 32-bit xxHash (github.com/Cyan4973/xxHash, doc/xxhash_spec.md). It is
// written out here because the module has only the 64-bit XXH3, and a key hash runs
// once per batch on keys of at most 255 bytes, where a table-free loop is enough.
const (
	xxh32Prime1 uint32 = 2654435761
	xxh32Prime2 uint32 = 2246822519
	xxh32Prime3 uint32 = 3266489917
	xxh32Prime4 uint32 = 668265263
	xxh32Prime5 uint32 = 374761393
)

func xxh32Round(acc, lane uint32) uint32 {
	return bits.RotateLeft32(acc+lane*xxh32Prime2, 13) * xxh32Prime1
}

// XXH32 returns the 32-bit xxHash of b.
func XXH32(b []byte, seed uint32) uint32 {
	n := uint32(len(b))
	var h uint32
	if len(b) >= 16 {
		v1 := seed + xxh32Prime1 + xxh32Prime2
		v2 := seed + xxh32Prime2
		v3 := seed
		v4 := seed - xxh32Prime1
		for len(b) >= 16 {
			v1 = xxh32Round(v1, binary.LittleEndian.Uint32(b[0:]))
			v2 = xxh32Round(v2, binary.LittleEndian.Uint32(b[4:]))
			v3 = xxh32Round(v3, binary.LittleEndian.Uint32(b[8:]))
			v4 = xxh32Round(v4, binary.LittleEndian.Uint32(b[12:]))
			b = b[16:]
		}
		h = bits.RotateLeft32(v1, 1) + bits.RotateLeft32(v2, 7) + bits.RotateLeft32(v3, 12) + bits.RotateLeft32(v4, 18)
	} else {
		h = seed + xxh32Prime5
	}
	h += n
	for len(b) >= 4 {
		h += binary.LittleEndian.Uint32(b) * xxh32Prime3
		h = bits.RotateLeft32(h, 17) * xxh32Prime4
		b = b[4:]
	}
	for _, c := range b {
		h += uint32(c) * xxh32Prime5
		h = bits.RotateLeft32(h, 11) * xxh32Prime1
	}
	h ^= h >> 15
	h *= xxh32Prime2
	h ^= h >> 13
	h *= xxh32Prime3
	h ^= h >> 16
	return h
}
