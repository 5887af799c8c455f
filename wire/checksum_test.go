package wire

import (
	"encoding/binary"
	"testing"
)

// Known answers from the XXH3 and BLAKE3 reference test vectors: XXH3_64bits of the
// empty input (seed 0) and BLAKE3 of the empty input.
const (
	xxh3Empty   = 0x2d06800538d394c2
	blake3Empty = "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262"
)

func TestChecksumWidening(t *testing.T) {
	// The u128 fields carry the 64-bit hash in the low half: on the wire, eight
	// little-endian hash bytes then eight zero bytes.
	got := BodyChecksum(nil)
	if got != (Uint128{Lo: xxh3Empty}) {
		t.Fatalf("BodyChecksum(empty) = %#x/%#x, want %#x/0", got.Lo, got.Hi, uint64(xxh3Empty))
	}
	if RequestChecksum([]byte{}) != got {
		t.Fatal("RequestChecksum and BodyChecksum differ")
	}
	var wire [16]byte
	got.Put(wire[:])
	if binary.LittleEndian.Uint64(wire[:8]) != xxh3Empty || !allZero(wire[8:]) {
		t.Fatalf("widened bytes % x", wire)
	}
}

func TestFrameChecksumCoversBytes16To256(t *testing.T) {
	var h [HeaderSize]byte
	for i := range h {
		h[i] = byte(i * 7)
	}
	sum := FrameChecksum(&h)
	if sum.Hi != 0 {
		t.Fatal("seal high half not zero")
	}
	// The checksum field itself is outside the seal.
	h[0] ^= 0xff
	h[15] ^= 0xff
	if FrameChecksum(&h) != sum {
		t.Fatal("seal depends on bytes 0..16")
	}
	for _, off := range []int{16, 31, 52, 60, 128, 255} {
		h[off] ^= 1
		if FrameChecksum(&h) == sum {
			t.Fatalf("byte %d not covered", off)
		}
		h[off] ^= 1
	}
	SealFrame(&h)
	if !FrameSealValid(&h) || GetUint128(h[:16]) != sum {
		t.Fatal("SealFrame")
	}
}

func TestPrepareIdentity(t *testing.T) {
	var p PrepareHeader
	p.Size = 512
	p.Command = CommandPrepare
	p.View = 3
	p.Op, p.Commit, p.Operation = 10, 9, OperationCreateUser
	p.ChecksumBody = BodyChecksum([]byte("body"))
	p.SetIdentity()
	identity := p.Checksum
	before := *p.Bytes()

	// A retransmit in a later view keeps its identity, and computing the identity
	// leaves the header untouched.
	p.View = 99
	if p.Identity() != identity || !p.IdentityValid() {
		t.Fatal("identity depends on the view")
	}
	p.Op++
	if p.IdentityValid() {
		t.Fatal("identity survives a changed op")
	}
	p.Op--
	p.View = 3
	if *p.Bytes() != before {
		t.Fatal("PrepareIdentity modified the header")
	}
	// Every other byte is covered, checksum_body (and so the body) included.
	for off := 16; off < HeaderSize; off++ {
		if off >= 52 && off < 56 {
			continue
		}
		p.Bytes()[off] ^= 0x80
		if p.Identity() == identity {
			t.Fatalf("byte %d not covered by the identity", off)
		}
		p.Bytes()[off] ^= 0x80
	}
	// The identity is the hash of the header with checksum and view zeroed.
	covered := before
	clear(covered[:16])
	clear(covered[52:56])
	if identity != (Uint128{Lo: xxhash64(covered[:])}) {
		t.Fatal("identity is not XxHash3 of the zeroed header")
	}
}

// xxhash64 goes through BodyChecksum so the test restates the definition rather than
// the implementation.
func xxhash64(b []byte) uint64 { return BodyChecksum(b).Lo }

func TestVerifyRequestChecksum(t *testing.T) {
	body := []byte{1, 2, 3}
	if err := VerifyRequestChecksum(Uint128{}, body); err != nil {
		t.Fatal("unstamped request refused")
	}
	if err := VerifyRequestChecksum(RequestChecksum(body), body); err != nil {
		t.Fatal("matching stamp refused")
	}
	if err := VerifyRequestChecksum(RequestChecksum(body), body[:2]); err != ErrInvalidFormat {
		t.Fatalf("mismatch: %v", err)
	}
	// A stamp with a non-zero high half can never match a widened hash.
	stamp := RequestChecksum(body)
	stamp.Hi = 1
	if err := VerifyRequestChecksum(stamp, body); err != ErrInvalidFormat {
		t.Fatalf("high half: %v", err)
	}
}

func TestClusterID(t *testing.T) {
	// First 16 bytes of BLAKE3("") as a little-endian u128.
	want := Uint128{Lo: 0xa6a1f9f5b94913af, Hi: 0x49c9dc36ea4d40a0}
	if got := ClusterID(""); got != want {
		t.Fatalf("ClusterID(\"\") = %#x/%#x, want %#x/%#x (BLAKE3 %s)", got.Lo, got.Hi, want.Lo, want.Hi, blake3Empty)
	}
	if ClusterID("iggy-cluster") == ClusterID("other") || ClusterID("a") != ClusterID("a") {
		t.Fatal("cluster ids not distinct or not stable")
	}
}

func TestChecksumsDoNotAllocate(t *testing.T) {
	var h [HeaderSize]byte
	body := make([]byte, 4096)
	var sink Uint128
	allocs := testing.AllocsPerRun(100, func() {
		sink = FrameChecksum(&h)
		sink = PrepareIdentity(&h)
		sink = BodyChecksum(body)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations", allocs)
	}
	_ = sink
}
