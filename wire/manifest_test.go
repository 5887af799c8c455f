package wire

import (
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"testing"
)

var goldenArtifacts = []StateArtifact{
	{Kind: ArtifactMetadataSnapshot, Frontier: 0xc0, SizeBytes: 1234, Checksum: 0x0102030405060708},
	{Kind: ArtifactClientTable, Frontier: 0xc3, SizeBytes: 56, Checksum: 0x1112131415161718},
	{Kind: ArtifactSegmentLog, Frontier: 1 << 40, SizeBytes: 1 << 30, Checksum: 0xa1a2a3a4a5a6a7a8},
	{Kind: ArtifactConsumerOffsets, Frontier: 0xc3, SizeBytes: 20, Checksum: 0xfffefdfcfbfaf9f8},
}

func collectArtifacts(m Manifest) []StateArtifact {
	var out []StateArtifact
	for _, a := range m.All() {
		out = append(out, a)
	}
	return out
}

func TestManifestGolden(t *testing.T) {
	tests := []struct {
		file      string
		artifacts []StateArtifact
		encodable bool // this release writes it byte for byte
	}{
		{"manifest/metadata_and_partition.hex", goldenArtifacts, true},
		{"manifest/empty.hex", nil, true},
		{"manifest/long_entries.hex", goldenArtifacts[:2], false},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			golden := readGolden(t, tt.file)
			if tt.encodable {
				checkGolden(t, tt.file, AppendManifest(nil, tt.artifacts))
			}
			m, err := DecodeManifest(golden)
			if err != nil {
				t.Fatal(err)
			}
			if m.Len() != len(tt.artifacts) || !slices.Equal(collectArtifacts(m), tt.artifacts) {
				t.Fatalf("decoded %+v, want %+v", collectArtifacts(m), tt.artifacts)
			}
		})
	}
}

func TestManifestRoundTrip(t *testing.T) {
	const seed = 0x15a1
	rng := rand.New(rand.NewPCG(seed, seed))
	prefix := []byte("caller's bytes")
	for i := range 300 {
		artifacts := make([]StateArtifact, rng.IntN(40))
		for j := range artifacts {
			artifacts[j] = StateArtifact{
				Kind: ArtifactKind(rng.Uint32()), Frontier: rng.Uint64(),
				SizeBytes: rng.Uint64(), Checksum: rng.Uint64(),
			}
		}
		encoded := AppendManifest(slices.Clone(prefix), artifacts)
		if string(encoded[:len(prefix)]) != string(prefix) {
			t.Fatalf("seed=%d case %d: AppendManifest overwrote dst", seed, i)
		}
		m, err := DecodeManifest(encoded[len(prefix):])
		if err != nil {
			t.Fatalf("seed=%d case %d: %v", seed, i, err)
		}
		if !slices.Equal(collectArtifacts(m), artifacts) {
			t.Fatalf("seed=%d case %d: round trip differs", seed, i)
		}
		for k, a := range artifacts {
			if m.Artifact(k) != a {
				t.Fatalf("seed=%d case %d: Artifact(%d)", seed, i, k)
			}
		}
	}
}

// resealed recomputes the trailer of a manifest whose content a test changed, so the
// rule behind the checksum is what gets tested.
func resealed(b []byte) []byte {
	content := b[:len(b)-8]
	return binary.LittleEndian.AppendUint64(slices.Clone(content), ArtifactChecksum(content))
}

func TestDecodeManifestFaults(t *testing.T) {
	valid := AppendManifest(nil, goldenArtifacts)
	tests := []struct {
		name string
		b    []byte
		want ManifestFault
	}{
		{"empty input", nil, ManifestTruncated},
		{"16 bytes", valid[:16], ManifestTruncated},
		{"cut trailer", valid[:len(valid)-1], ManifestChecksumMismatch},
		{"flipped byte", func() []byte { b := slices.Clone(valid); b[20] ^= 1; return b }(), ManifestChecksumMismatch},
		{"bad magic", func() []byte { b := slices.Clone(valid); b[3] = '2'; return resealed(b) }(), ManifestBadMagic},
		{"count above max", func() []byte {
			b := slices.Clone(valid)
			binary.LittleEndian.PutUint32(b[4:], ManifestEntriesMax+1)
			return resealed(b)
		}(), ManifestTooManyEntries},
		{"count claims max", func() []byte {
			b := slices.Clone(valid)
			binary.LittleEndian.PutUint32(b[4:], ManifestEntriesMax)
			return resealed(b)
		}(), ManifestTruncated},
		{"entry_len 24", func() []byte { b := slices.Clone(valid); b[8] = 24; return resealed(b) }(), ManifestEntryTooShort},
		{"entry_len 0", func() []byte { b := slices.Clone(valid); b[8] = 0; return resealed(b) }(), ManifestEntryTooShort},
		{"count too small", func() []byte {
			b := slices.Clone(valid)
			binary.LittleEndian.PutUint32(b[4:], 3)
			return resealed(b)
		}(), ManifestLengthMismatch},
		{"entry_len too long", func() []byte { b := slices.Clone(valid); b[8] = 26; return resealed(b) }(), ManifestTruncated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeManifest(tt.b)
			if err != tt.want {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if err.Error() == "" {
				t.Fatal("empty error text")
			}
		})
	}
}

// TestDecodeManifestDoesNotAllocate: a manifest claiming 65536 entries is refused
// without sizing anything from the claim, and a valid one is a view.
func TestDecodeManifestDoesNotAllocate(t *testing.T) {
	valid := AppendManifest(nil, goldenArtifacts)
	lying := slices.Clone(valid)
	binary.LittleEndian.PutUint32(lying[4:], ManifestEntriesMax)
	lying = resealed(lying)
	var sink StateArtifact
	allocs := testing.AllocsPerRun(100, func() {
		m, _ := DecodeManifest(valid)
		sink = m.Artifact(3)
		_, _ = DecodeManifest(lying)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations", allocs)
	}
	_ = sink
}

func TestManifestPanicsOnCallerBugs(t *testing.T) {
	mustPanic := func(name string, f func()) {
		t.Helper()
		defer func() {
			if recover() == nil {
				t.Errorf("%s did not panic", name)
			}
		}()
		f()
	}
	m, _ := DecodeManifest(AppendManifest(nil, goldenArtifacts[:1]))
	mustPanic("Artifact(1)", func() { m.Artifact(1) })
	mustPanic("Artifact(-1)", func() { m.Artifact(-1) })
	mustPanic("too many artifacts", func() { AppendManifest(nil, make([]StateArtifact, ManifestEntriesMax+1)) })
}

func TestArtifactKind(t *testing.T) {
	planes := map[ArtifactKind]Plane{
		ArtifactMetadataSnapshot: PlaneMetadata, ArtifactClientTable: PlaneMetadata,
		ArtifactSegmentLog: PlanePartition, ArtifactConsumerOffsets: PlanePartition, 4: PlaneNone,
	}
	for kind, plane := range planes {
		if kind.Plane() != plane {
			t.Errorf("%v.Plane() = %v", kind, kind.Plane())
		}
	}
	if ArtifactChecksum(nil) != xxh3Empty {
		t.Fatal("ArtifactChecksum is not XxHash3-64")
	}
}
