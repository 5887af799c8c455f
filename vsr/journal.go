package vsr

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/iggy-shard/iggy-shard/wire"
)

// The metadata journal is the prepares of the metadata group, back to back, each
// exactly as it travels: [256-byte PrepareHeader][body]. Nothing else is in the
// file, so a backup could serve repair straight from it. The prepare's identity
// checksum, its parent link and its body seal make every entry self-validating.

// ErrJournalCorrupt refuses a boot: a damaged entry is followed by intact ones, so
// the damage is not a torn tail that a crash could explain, and truncating would
// throw away committed operations.
var ErrJournalCorrupt = errors.New("vsr: journal corrupt before its tail")

// JournalScan is what a recovery scan found.
type JournalScan struct {
	// Entries is the number of valid entries; FirstOp and LastOp their ops.
	Entries        int
	FirstOp        uint64
	LastOp         uint64
	LastIdentity   wire.Uint128
	LastTimestamp  uint64
	LastCommit     uint64
	LastView       uint32
	ValidBytes     int
	TornTailBytes  int
	TornTailReason string
}

// ScanJournal validates a journal's bytes entry by entry and calls visit for each
// valid one in order (the header is a copy, the body aliases b). A damaged tail (a
// torn write at a crash) ends the scan: ValidBytes says where to truncate and
// TornTailReason why. Damage followed by a valid entry is ErrJournalCorrupt. An
// error from visit stops the scan and is returned.
func ScanJournal(b []byte, sizeMaxBytes uint32, visit func(h *wire.PrepareHeader, body []byte) error) (JournalScan, error) {
	return scanJournal(b, sizeMaxBytes, func(h *wire.PrepareHeader, body []byte, _ int) error { return visit(h, body) }, nil)
}

// JournalHole is a run of a journal's ops that it does not hold intact, which an
// intact entry follows (or a marker names): the ops were journaled, or may have
// been (a write beyond a gap), and may have been acknowledged. A replica of a
// group of several reports them as CoreRecovered.Faulty and repairs them from its
// peers. A hole is damage (a corrupt entry: not a torn write at a crash, since
// entries written later were synced after it), or a marker the caller wrote for
// ops it does not hold (AppendJournalMarker).
type JournalHole struct {
	// Start and End delimit its bytes.
	Start, End int
	// FromOp and ToOp are the ops it stands for: for damage, those between the
	// intact entries (or markers) around it.
	FromOp, ToOp uint64
	Marker       bool
}

// JournalMarkerSize is the size of a journal marker.
const JournalMarkerSize = wire.HeaderSize

const journalMarkerMagic = "IGGYHOLE"

// AppendJournalMarker appends a marker standing for the ops from..to, which the
// journal does not hold, in their place: a header-sized record that never parses
// as a prepare (its command is zero), sealed so that no damage reads as one.
func AppendJournalMarker(b []byte, from, to uint64) []byte {
	start := len(b)
	b = append(b, make([]byte, JournalMarkerSize)...)
	m := b[start:]
	area := m[wire.HeaderSize/2:]
	copy(area, journalMarkerMagic)
	binary.LittleEndian.PutUint64(area[8:], from)
	binary.LittleEndian.PutUint64(area[16:], to)
	seal := wire.BodyChecksum(area[:24])
	binary.LittleEndian.PutUint64(area[24:], seal.Lo)
	binary.LittleEndian.PutUint64(area[32:], seal.Hi)
	return b
}

// journalMarker reads a marker at the front of b.
func journalMarker(b []byte) (from, to uint64, ok bool) {
	if len(b) < JournalMarkerSize {
		return 0, 0, false
	}
	m := b[:JournalMarkerSize]
	area := m[wire.HeaderSize/2:]
	if string(area[:8]) != journalMarkerMagic {
		return 0, 0, false
	}
	seal := wire.BodyChecksum(area[:24])
	if binary.LittleEndian.Uint64(area[24:]) != seal.Lo || binary.LittleEndian.Uint64(area[32:]) != seal.Hi {
		return 0, 0, false
	}
	for _, x := range m[:wire.HeaderSize/2] {
		if x != 0 {
			return 0, 0, false
		}
	}
	for _, x := range area[40:] {
		if x != 0 {
			return 0, 0, false
		}
	}
	from, to = binary.LittleEndian.Uint64(area[8:]), binary.LittleEndian.Uint64(area[16:])
	return from, to, from > 0 && from <= to
}

// ScanJournalHoles is ScanJournal for a replica that can repair its journal from
// its peers: markers and damage that an intact entry follows are holes, reported
// to hole in order with the entries (visit also gets each entry's offset), and
// the scan goes on after them. Entries and holes must be in op order, and entries
// with nothing between them chain; anything else is ErrJournalCorrupt. A damaged
// tail is reported as by ScanJournal: the op after the last entry or marker may be
// in it. With a nil hole it is ScanJournal.
func ScanJournalHoles(b []byte, sizeMaxBytes uint32, visit func(h *wire.PrepareHeader, body []byte, offset int) error,
	hole func(JournalHole) error) (JournalScan, error) {
	return scanJournal(b, sizeMaxBytes, visit, hole)
}

func scanJournal(b []byte, sizeMaxBytes uint32, visit func(h *wire.PrepareHeader, body []byte, offset int) error,
	hole func(JournalHole) error) (JournalScan, error) {
	var scan JournalScan
	var h wire.PrepareHeader
	offset := 0
	// covered is the last op an entry or a hole stood for; afterHole: a hole
	// came since the last entry, so the next one's parent cannot be checked.
	covered := uint64(0)
	afterHole := false
	for offset < len(b) {
		if hole != nil {
			if from, to, ok := journalMarker(b[offset:]); ok {
				if from != covered+1 && covered > 0 || from <= covered {
					return scan, fmt.Errorf("%w: marker at byte %d for ops %d..%d after op %d", ErrJournalCorrupt, offset, from, to, covered)
				}
				if err := hole(JournalHole{Start: offset, End: offset + JournalMarkerSize, FromOp: from, ToOp: to, Marker: true}); err != nil {
					return scan, err
				}
				offset += JournalMarkerSize
				covered, afterHole = to, true
				scan.ValidBytes = offset
				continue
			}
		}
		size, reason := checkJournalEntry(&h, b[offset:], sizeMaxBytes)
		damaged := reason != ""
		if !damaged && (scan.Entries > 0 || afterHole) {
			switch {
			case afterHole && h.Op != covered+1:
				reason = fmt.Sprintf("op %d after a hole does not follow op %d", h.Op, covered)
			case !afterHole && h.Op != scan.LastOp+1:
				reason = fmt.Sprintf("op %d does not follow op %d", h.Op, scan.LastOp)
			case !afterHole && h.Parent != scan.LastIdentity:
				reason = fmt.Sprintf("op %d does not chain to op %d", h.Op, scan.LastOp)
			case scan.Entries > 0 && h.Timestamp <= scan.LastTimestamp:
				reason = fmt.Sprintf("op %d timestamp goes backwards", h.Op)
			}
		}
		if reason != "" {
			if hole != nil && !damaged {
				// An intact entry out of order is no damage a write or the disk
				// makes: the journal was written wrong.
				return scan, fmt.Errorf("%w: entry at byte %d: %s", ErrJournalCorrupt, offset, reason)
			}
			if later := probeJournalItem(b, offset+1, sizeMaxBytes, hole != nil); later >= 0 {
				if hole == nil {
					return scan, fmt.Errorf("%w: entry at byte %d: %s; a valid entry follows at byte %d",
						ErrJournalCorrupt, offset, reason, later)
				}
				next := uint64(0)
				if from, _, ok := journalMarker(b[later:]); ok {
					next = from
				} else {
					var nh wire.PrepareHeader
					checkJournalEntry(&nh, b[later:], sizeMaxBytes)
					next = nh.Op
				}
				if next <= covered+1 {
					return scan, fmt.Errorf("%w: damage at byte %d stands for no op: op %d follows op %d",
						ErrJournalCorrupt, offset, next, covered)
				}
				if err := hole(JournalHole{Start: offset, End: later, FromOp: covered + 1, ToOp: next - 1}); err != nil {
					return scan, err
				}
				offset, covered, afterHole = later, next-1, true
				continue
			}
			scan.TornTailBytes = len(b) - offset
			scan.TornTailReason = fmt.Sprintf("entry at byte %d: %s", offset, reason)
			break
		}
		if err := visit(&h, b[offset+wire.HeaderSize:offset+size], offset); err != nil {
			return scan, err
		}
		if scan.Entries == 0 {
			scan.FirstOp = h.Op
		}
		scan.Entries++
		scan.LastOp = h.Op
		scan.LastIdentity = h.Checksum
		scan.LastTimestamp = h.Timestamp
		scan.LastCommit = h.Commit
		scan.LastView = h.View
		offset += size
		covered, afterHole = h.Op, false
		scan.ValidBytes = offset
	}
	return scan, nil
}

// checkJournalEntry copies the header at the front of b into *h (journal entries
// are not 16-byte aligned, so no in-place view) and checks that it is a complete,
// intact prepare. It returns the entry size, or a reason.
func checkJournalEntry(h *wire.PrepareHeader, b []byte, sizeMaxBytes uint32) (int, string) {
	if len(b) < wire.HeaderSize {
		return 0, fmt.Sprintf("%d bytes, shorter than a header", len(b))
	}
	copy(wire.HeaderBytes(h)[:], b[:wire.HeaderSize])
	if h.Command != wire.CommandPrepare {
		return 0, fmt.Sprintf("command %v, not a prepare", h.Command)
	}
	if h.Size < wire.HeaderSize || h.Size > sizeMaxBytes {
		return 0, fmt.Sprintf("size %d outside %d..%d", h.Size, wire.HeaderSize, sizeMaxBytes)
	}
	if uint64(h.Size) > uint64(len(b)) {
		return 0, fmt.Sprintf("size %d, only %d bytes left", h.Size, len(b))
	}
	if h.Checksum != h.Identity() {
		return 0, "identity checksum mismatch"
	}
	if h.Op == 0 {
		return 0, "op 0"
	}
	body := b[wire.HeaderSize:h.Size]
	if !h.ChecksumBody.IsZero() && h.ChecksumBody != wire.BodyChecksum(body) {
		return 0, "body checksum mismatch"
	}
	return int(h.Size), ""
}

// probeJournalItem looks for any intact entry (or, with markers, a marker) at or
// after byte from, and returns its offset or -1. Only a tail with none in it can
// be a torn write.
func probeJournalItem(b []byte, from int, sizeMaxBytes uint32, markers bool) int {
	var h wire.PrepareHeader
	for k := from; k+wire.HeaderSize <= len(b); k++ {
		if _, reason := checkJournalEntry(&h, b[k:], sizeMaxBytes); reason == "" {
			return k
		}
		if _, _, ok := journalMarker(b[k:]); ok && markers {
			return k
		}
	}
	return -1
}
