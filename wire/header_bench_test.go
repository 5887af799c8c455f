package wire

import (
	"encoding/binary"
	"hash/crc32"
	"testing"
)

// Each benchmark runs the implementation and a baseline in the same run, so the
// numbers compare on one machine under one load:
//
//	go test -run '^$' -bench 'Header|Seal|Identity|Manifest' -benchmem -count 3 ./wire/

// decodeRequestByCopy is the baseline decoder a view replaces: read every field with
// encoding/binary into a header value, then validate it.
func decodeRequestByCopy(b []byte, h *RequestHeader) error {
	if len(b) < HeaderSize {
		return FaultShortHeader
	}
	h.Checksum = GetUint128(b[0:])
	h.ChecksumBody = GetUint128(b[16:])
	h.Cluster = GetUint128(b[32:])
	h.Size = binary.LittleEndian.Uint32(b[48:])
	h.View = binary.LittleEndian.Uint32(b[52:])
	h.Release = binary.LittleEndian.Uint32(b[56:])
	h.Command = Command(b[60])
	h.Replica = b[61]
	copy(h.ReservedFrame[:], b[62:128])
	h.Client = GetUint128(b[128:])
	h.RequestChecksum = GetUint128(b[144:])
	h.Timestamp = binary.LittleEndian.Uint64(b[160:])
	h.Request = binary.LittleEndian.Uint64(b[168:])
	h.Operation = Operation(b[176])
	copy(h.OperationPadding[:], b[177:184])
	h.Session = binary.LittleEndian.Uint64(b[184:])
	h.UserID = binary.LittleEndian.Uint32(b[192:])
	h.NonReplicatedCode = CommandCode(binary.LittleEndian.Uint32(b[196:]))
	copy(h.Reserved[:], b[200:256])
	return h.Validate(DefaultMessageSizeMax)
}

func BenchmarkDecodeRequestHeader(b *testing.B) {
	_, buf := validRequestHeader(OperationCreateStream)
	b.Run("impl=view", func(b *testing.B) {
		b.SetBytes(HeaderSize)
		b.ReportAllocs()
		var sum uint64
		for b.Loop() {
			h, err := DecodeRequestHeader(buf, DefaultMessageSizeMax)
			if err != nil {
				b.Fatal(err)
			}
			sum += h.Request
		}
		_ = sum
	})
	b.Run("impl=copy-baseline", func(b *testing.B) {
		b.SetBytes(HeaderSize)
		b.ReportAllocs()
		var h RequestHeader
		var sum uint64
		for b.Loop() {
			if err := decodeRequestByCopy(buf, &h); err != nil {
				b.Fatal(err)
			}
			sum += h.Request
		}
		_ = sum
	})
}

func BenchmarkDecodeReplicaHeader(b *testing.B) {
	dvc := replicaFrame(CommandDoViewChange)
	sealIfSealed(dvc)
	prepare := replicaFrame(CommandPrepare)
	b.Run("command=DoViewChange-sealed", func(b *testing.B) {
		b.SetBytes(HeaderSize)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := DecodeReplicaHeader(dvc, DefaultMessageSizeMax); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("command=Prepare-unsealed", func(b *testing.B) {
		b.SetBytes(HeaderSize)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := DecodeReplicaHeader(prepare, DefaultMessageSizeMax); err != nil {
				b.Fatal(err)
			}
		}
	})
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// BenchmarkFrameSeal compares the XxHash3 seal of header bytes 16..256 with CRC-32C
// (hardware-assisted on amd64) over the same bytes.
func BenchmarkFrameSeal(b *testing.B) {
	var h [HeaderSize]byte
	for i := range h {
		h[i] = byte(i)
	}
	b.Run("impl=xxh3-seal", func(b *testing.B) {
		b.SetBytes(HeaderSize - 16)
		b.ReportAllocs()
		for b.Loop() {
			SealFrame(&h)
		}
	})
	b.Run("impl=verify", func(b *testing.B) {
		SealFrame(&h)
		b.SetBytes(HeaderSize - 16)
		b.ReportAllocs()
		for b.Loop() {
			if !FrameSealValid(&h) {
				b.Fatal("seal")
			}
		}
	})
	b.Run("impl=crc32c-baseline", func(b *testing.B) {
		b.SetBytes(HeaderSize - 16)
		b.ReportAllocs()
		var sum uint32
		for b.Loop() {
			sum += crc32.Checksum(h[16:], castagnoli)
		}
		_ = sum
	})
}

// BenchmarkPrepareIdentity measures the identity checksum, whose stack copy (to zero
// checksum and view) is the difference from the baseline: a plain XxHash3 of the 256
// bytes.
func BenchmarkPrepareIdentity(b *testing.B) {
	var p PrepareHeader
	p.Size, p.Command, p.Op, p.Operation = 512, CommandPrepare, 77, OperationSendMessages
	b.Run("impl=identity", func(b *testing.B) {
		b.SetBytes(HeaderSize)
		b.ReportAllocs()
		for b.Loop() {
			p.SetIdentity()
		}
	})
	b.Run("impl=xxh3-256B-baseline", func(b *testing.B) {
		b.SetBytes(HeaderSize)
		b.ReportAllocs()
		var sum Uint128
		for b.Loop() {
			sum = BodyChecksum(p.Bytes()[:])
		}
		_ = sum
	})
}

func BenchmarkDecodeManifest(b *testing.B) {
	artifacts := make([]StateArtifact, 64)
	for i := range artifacts {
		artifacts[i] = StateArtifact{Kind: ArtifactSegmentLog, Frontier: uint64(i) << 20, SizeBytes: 1 << 30}
	}
	encoded := AppendManifest(nil, artifacts)
	b.Run("entries=64", func(b *testing.B) {
		b.SetBytes(int64(len(encoded)))
		b.ReportAllocs()
		var sum uint64
		for b.Loop() {
			m, err := DecodeManifest(encoded)
			if err != nil {
				b.Fatal(err)
			}
			for _, a := range m.All() {
				sum += a.SizeBytes
			}
		}
		_ = sum
	})
}

func allZeroByteLoop(b []byte) bool {
	for _, v := range b {
		if v != 0 {
			return false
		}
	}
	return true
}

// BenchmarkAllZero: the reserved-bytes check over a request's 66 + 56 reserved bytes,
// word at a time against the plain byte loop.
func BenchmarkAllZero(b *testing.B) {
	_, buf := validRequestHeader(OperationCreateStream)
	b.Run("impl=word", func(b *testing.B) {
		b.SetBytes(66 + 56)
		ok := true
		for b.Loop() {
			ok = ok && allZero(buf[62:128]) && allZero(buf[200:256])
		}
		if !ok {
			b.Fatal("not zero")
		}
	})
	b.Run("impl=array-compare", func(b *testing.B) {
		h, _ := ViewHeader[RequestHeader](buf)
		b.SetBytes(66 + 56)
		ok := true
		for b.Loop() {
			ok = ok && h.ReservedFrame == [66]byte{} && h.Reserved == [56]byte{}
		}
		if !ok {
			b.Fatal("not zero")
		}
	})
	b.Run("impl=byte-loop-baseline", func(b *testing.B) {
		b.SetBytes(66 + 56)
		ok := true
		for b.Loop() {
			ok = ok && allZeroByteLoop(buf[62:128]) && allZeroByteLoop(buf[200:256])
		}
		if !ok {
			b.Fatal("not zero")
		}
	})
}
