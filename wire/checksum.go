package wire

import (
	"encoding/binary"

	"github.com/zeebo/xxh3"
	"lukechampine.com/blake3"
)

// Checksums and identities. Every u128 checksum field is an XxHash3-64 (seed 0,
// default secret) widened to u128 the way the reference's u128::from(u64) does: the
// hash is the low half and the high half is zero, so on the wire the eight hash bytes
// come first, little-endian, followed by eight zero bytes. These are unkeyed integrity
// checks, not authentication: that is the handshake's job.

// widenHash turns a 64-bit hash into the u128 the checksum fields carry.
func widenHash(h uint64) Uint128 { return Uint128{Lo: h} }

// FrameChecksum is the frame seal of a replica header: XxHash3-64 over header bytes
// 16..256 (everything past the checksum field itself, checksum_body included, so the
// seal also pins the body seal).
func FrameChecksum(header *[HeaderSize]byte) Uint128 {
	return widenHash(xxh3.Hash(header[16:]))
}

// SealFrame stamps FrameChecksum into bytes 0..16. Call it last, once every other
// field is final.
func SealFrame(header *[HeaderSize]byte) {
	FrameChecksum(header).Put(header[:16])
}

// FrameSealValid reports whether bytes 0..16 hold the header's frame seal.
func FrameSealValid(header *[HeaderSize]byte) bool {
	return GetUint128(header[:16]) == FrameChecksum(header)
}

// PrepareIdentity is the identity checksum of a Prepare or RepairPrepare header:
// XxHash3-64 over all 256 header bytes with checksum (0..16) and view (52..56) read as
// zero, so a retransmission that re-stamps the view keeps its identity. The header is
// copied to a 256-byte stack array to zero the two fields, leaving the caller's bytes
// untouched and allocating nothing.
func PrepareIdentity(header *[HeaderSize]byte) Uint128 {
	covered := *header
	clear(covered[:16])
	clear(covered[52:56])
	return widenHash(xxh3.Hash(covered[:]))
}

// BodyChecksum is the body seal (checksum_body) of a metadata prepare and of the
// DoViewChange and StartView suffixes: XxHash3-64 of the body, widened.
func BodyChecksum(body []byte) Uint128 { return widenHash(xxh3.Hash(body)) }

// RequestChecksum is the request_checksum stamp the Rust SDK puts on metadata-plane
// requests: XxHash3-64 of the request body, widened to u128 (low half = hash).
func RequestChecksum(body []byte) Uint128 { return widenHash(xxh3.Hash(body)) }

// VerifyRequestChecksum checks a request header's request_checksum against its body:
// nil when the stamp is zero (unstamped, the Go SDK's choice) or matches, otherwise
// ErrInvalidFormat, the status the reference server answers with before anything else.
func VerifyRequestChecksum(stamp Uint128, body []byte) error {
	if stamp.IsZero() || stamp == RequestChecksum(body) {
		return nil
	}
	return ErrInvalidFormat
}

// ClusterID is the cluster field of every replica frame: the first 16 bytes of
// BLAKE3(cluster name) read as a little-endian u128.
func ClusterID(name string) Uint128 {
	digest := blake3.Sum256([]byte(name))
	return Uint128{
		Lo: binary.LittleEndian.Uint64(digest[0:8]),
		Hi: binary.LittleEndian.Uint64(digest[8:16]),
	}
}
