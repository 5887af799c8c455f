package client

import (
	"encoding/binary"
	"math/bits"
)

// xxh32 is XXH32 with seed 0, the hash the Go SDK and the server place a messages key
// with (partition = xxh32(key) % partitions_count), so a key lands on the same
// partition from every SDK. It is the reference algorithm (xxHash spec, XXH32).
func xxh32(b []byte) uint32 {
	const (
		prime1 uint32 = 0x9E3779B1
		prime2 uint32 = 0x85EBCA77
		prime3 uint32 = 0xC2B2AE3D
		prime4 uint32 = 0x27D4EB2F
		prime5 uint32 = 0x165667B1
	)
	round := func(acc, lane uint32) uint32 {
		return bits.RotateLeft32(acc+lane*prime2, 13) * prime1
	}
	n := uint32(len(b))
	var h uint32
	if len(b) >= 16 {
		var seed uint32 // the SDKs hash keys with seed 0
		v1, v2, v3, v4 := seed+prime1+prime2, seed+prime2, seed, seed-prime1
		for ; len(b) >= 16; b = b[16:] {
			v1 = round(v1, binary.LittleEndian.Uint32(b[0:]))
			v2 = round(v2, binary.LittleEndian.Uint32(b[4:]))
			v3 = round(v3, binary.LittleEndian.Uint32(b[8:]))
			v4 = round(v4, binary.LittleEndian.Uint32(b[12:]))
		}
		h = bits.RotateLeft32(v1, 1) + bits.RotateLeft32(v2, 7) +
			bits.RotateLeft32(v3, 12) + bits.RotateLeft32(v4, 18)
	} else {
		h = prime5
	}
	h += n
	for ; len(b) >= 4; b = b[4:] {
		h += binary.LittleEndian.Uint32(b) * prime3
		h = bits.RotateLeft32(h, 17) * prime4
	}
	for _, c := range b {
		h += uint32(c) * prime5
		h = bits.RotateLeft32(h, 11) * prime1
	}
	h ^= h >> 15
	h *= prime2
	h ^= h >> 13
	h *= prime3
	h ^= h >> 16
	return h
}
