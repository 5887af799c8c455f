package wire

import (
	"encoding/binary"
	"iter"
	"strconv"

	"github.com/zeebo/xxh3"
)

// The state manifest is the body of an available StateTransferTarget: the artifacts a
// serving peer offers. (manifest index, byte offset) addresses every chunk the
// RequestStateChunk/StateChunk frames pull; each artifact is verified whole against
// its entry's length and checksum, since chunks carry no integrity of their own.
//
//	+--------+-----------+--------------+------------------------------+-----------+
//	| "ISM1" | count u32 | entry_len u8 | count x entry (entry_len B)  | xxh3 u64  |
//	+--------+-----------+--------------+------------------------------+-----------+
//	entry (25 bytes in 0.11.0): kind u8 | frontier u64 | len u64 | checksum u64
//
// All integers little-endian. The trailer is XxHash3-64 over everything before it.
// entry_len lets a later release append per-entry fields: longer entries decode with
// their tail skipped; shorter ones are refused.

const (
	ManifestMagic = "ISM1"
	// ManifestEntrySize is the entry length this release writes and the shortest
	// one it reads.
	ManifestEntrySize = 25
	// ManifestEntriesMax guards against corruption: a rejoin lists its retained
	// segments plus a few trailers, never this many.
	ManifestEntriesMax = 1 << 16

	manifestPrefixSize  = 4 + 4 + 1
	manifestTrailerSize = 8
)

// ArtifactKind names what a manifest entry holds. Unknown kinds decode (forward
// compatibility); the receiving plane decides whether it can install them.
type ArtifactKind uint8

const (
	ArtifactMetadataSnapshot ArtifactKind = 0 // snapshot.bin verbatim; frontier = sequence number
	ArtifactClientTable      ArtifactKind = 1 // client table (ICT2); frontier = mutation frontier
	ArtifactSegmentLog       ArtifactKind = 2 // one segment .log; frontier = base offset
	ArtifactConsumerOffsets  ArtifactKind = 3 // offset tables; frontier = the offer's commit_op
)

var artifactKindNames = [...]string{"MetadataSnapshot", "ClientTable", "SegmentLog", "ConsumerOffsets"}

func (k ArtifactKind) String() string {
	if int(k) < len(artifactKindNames) {
		return artifactKindNames[k]
	}
	return "ArtifactKind(" + strconv.Itoa(int(k)) + ")"
}

// Plane is where an artifact of this kind is installed; PlaneNone for unknown kinds.
func (k ArtifactKind) Plane() Plane {
	switch k {
	case ArtifactMetadataSnapshot, ArtifactClientTable:
		return PlaneMetadata
	case ArtifactSegmentLog, ArtifactConsumerOffsets:
		return PlanePartition
	}
	return PlaneNone
}

// StateArtifact is one manifest entry.
type StateArtifact struct {
	Kind     ArtifactKind
	Frontier uint64
	// SizeBytes is the artifact's length (the entry's len field).
	SizeBytes uint64
	// Checksum is ArtifactChecksum of the assembled artifact.
	Checksum uint64
}

// ArtifactChecksum is an artifact's integrity stamp: XxHash3-64 of its bytes.
func ArtifactChecksum(artifact []byte) uint64 { return xxh3.Hash(artifact) }

// AppendManifest appends the encoding of artifacts to dst. More than
// ManifestEntriesMax artifacts is a caller bug and panics.
func AppendManifest(dst []byte, artifacts []StateArtifact) []byte {
	if len(artifacts) > ManifestEntriesMax {
		panic("wire: manifest of " + strconv.Itoa(len(artifacts)) + " artifacts exceeds the maximum")
	}
	start := len(dst)
	dst = append(dst, ManifestMagic...)
	dst = appendU32(dst, uint32(len(artifacts)))
	dst = appendU8(dst, ManifestEntrySize)
	for _, a := range artifacts {
		dst = appendU8(dst, uint8(a.Kind))
		dst = appendU64(dst, a.Frontier)
		dst = appendU64(dst, a.SizeBytes)
		dst = appendU64(dst, a.Checksum)
	}
	return appendU64(dst, xxh3.Hash(dst[start:]))
}

// Manifest is a decoded state manifest: a view over the encoded bytes, read entry by
// entry without building a slice.
type Manifest struct {
	entries  []byte
	count    int
	entryLen int
}

// ManifestFault is why a manifest was refused; a receiver drops the offer.
type ManifestFault uint8

const (
	ManifestTruncated ManifestFault = iota + 1
	ManifestChecksumMismatch
	ManifestBadMagic
	ManifestTooManyEntries
	ManifestEntryTooShort
	ManifestLengthMismatch
)

var manifestFaultTexts = [...]string{
	ManifestTruncated:        "truncated",
	ManifestChecksumMismatch: "trailer checksum mismatch",
	ManifestBadMagic:         "magic is not ISM1",
	ManifestTooManyEntries:   "more than 65536 entries",
	ManifestEntryTooShort:    "entry_len below 25",
	ManifestLengthMismatch:   "entries do not fill the manifest exactly",
}

func (f ManifestFault) Error() string {
	if f > 0 && int(f) < len(manifestFaultTexts) {
		return "wire: state manifest: " + manifestFaultTexts[f]
	}
	return "wire: state manifest fault " + strconv.Itoa(int(f))
}

// DecodeManifest checks a manifest and returns a view of it, in this order: long
// enough for the prefix and trailer; trailer checksum; magic; count at most
// ManifestEntriesMax; entry_len at least ManifestEntrySize; entries filling the rest
// exactly. It allocates nothing, however large the count claims to be.
func DecodeManifest(b []byte) (Manifest, error) {
	if len(b) < manifestPrefixSize+manifestTrailerSize {
		return Manifest{}, ManifestTruncated
	}
	content := b[:len(b)-manifestTrailerSize]
	if xxh3.Hash(content) != binary.LittleEndian.Uint64(b[len(content):]) {
		return Manifest{}, ManifestChecksumMismatch
	}
	if string(content[:4]) != ManifestMagic {
		return Manifest{}, ManifestBadMagic
	}
	count := binary.LittleEndian.Uint32(content[4:8])
	if count > ManifestEntriesMax {
		return Manifest{}, ManifestTooManyEntries
	}
	entryLen := int(content[8])
	if entryLen < ManifestEntrySize {
		return Manifest{}, ManifestEntryTooShort
	}
	entries := content[manifestPrefixSize:]
	if len(entries) != int(count)*entryLen {
		if len(entries) < int(count)*entryLen {
			return Manifest{}, ManifestTruncated
		}
		return Manifest{}, ManifestLengthMismatch
	}
	return Manifest{entries: entries, count: int(count), entryLen: entryLen}, nil
}

// Len is the number of artifacts.
func (m Manifest) Len() int { return m.count }

// Artifact returns entry i; i out of [0, Len()) is a caller bug and panics.
func (m Manifest) Artifact(i int) StateArtifact {
	if i < 0 || i >= m.count {
		panic("wire: manifest index " + strconv.Itoa(i) + " out of range")
	}
	e := m.entries[i*m.entryLen:]
	return StateArtifact{
		Kind:      ArtifactKind(e[0]),
		Frontier:  binary.LittleEndian.Uint64(e[1:9]),
		SizeBytes: binary.LittleEndian.Uint64(e[9:17]),
		Checksum:  binary.LittleEndian.Uint64(e[17:25]),
	}
}

// All iterates over the artifacts with their manifest index.
func (m Manifest) All() iter.Seq2[int, StateArtifact] {
	return func(yield func(int, StateArtifact) bool) {
		for i := range m.count {
			if !yield(i, m.Artifact(i)) {
				return
			}
		}
	}
}
