package vsr

import (
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

// JournalHole is damage in a journal that an intact entry follows: not a torn
// write at a crash (the entries after it were written later, and synced), so the
// ops between the intact entries around it were journaled, and may have been
// acknowledged. A replica of a group of several reports them as
// CoreRecovered.Faulty and repairs them from its peers.
type JournalHole struct {
	// Start and End delimit the damaged bytes.
	Start, End int
	// AfterOp is the op of the intact entry before the hole (0 when the hole
	// opens the journal), BeforeOp the op of the one after it: the hole stands
	// for the ops in between.
	AfterOp, BeforeOp uint64
}

// ScanJournalHoles is ScanJournal for a replica that can repair its journal from
// its peers: damage that an intact entry follows is a hole, reported to hole in
// order with the entries (visit also gets each entry's offset), and the scan goes
// on at that entry. Intact entries must still be in op order, and those with no
// hole between them chain; anything else is ErrJournalCorrupt. A damaged tail is
// reported as by ScanJournal.
func ScanJournalHoles(b []byte, sizeMaxBytes uint32, visit func(h *wire.PrepareHeader, body []byte, offset int) error,
	hole func(JournalHole) error) (JournalScan, error) {
	return scanJournal(b, sizeMaxBytes, visit, hole)
}

func scanJournal(b []byte, sizeMaxBytes uint32, visit func(h *wire.PrepareHeader, body []byte, offset int) error,
	hole func(JournalHole) error) (JournalScan, error) {
	var scan JournalScan
	var h wire.PrepareHeader
	offset := 0
	afterHole := false
	for offset < len(b) {
		size, reason := checkJournalEntry(&h, b[offset:], sizeMaxBytes)
		damaged := reason != ""
		if !damaged && scan.Entries > 0 {
			switch {
			case afterHole && h.Op <= scan.LastOp+1:
				reason = fmt.Sprintf("op %d after a hole does not follow op %d", h.Op, scan.LastOp)
			case !afterHole && h.Op != scan.LastOp+1:
				reason = fmt.Sprintf("op %d does not follow op %d", h.Op, scan.LastOp)
			case !afterHole && h.Parent != scan.LastIdentity:
				reason = fmt.Sprintf("op %d does not chain to op %d", h.Op, scan.LastOp)
			case h.Timestamp <= scan.LastTimestamp:
				reason = fmt.Sprintf("op %d timestamp goes backwards", h.Op)
			}
		}
		if reason != "" {
			if hole != nil && !damaged {
				// An intact entry out of order is no damage a write or the disk
				// makes: the journal was written wrong.
				return scan, fmt.Errorf("%w: entry at byte %d: %s", ErrJournalCorrupt, offset, reason)
			}
			if later := probeJournalEntry(b, offset+1, sizeMaxBytes); later >= 0 {
				if hole == nil {
					return scan, fmt.Errorf("%w: entry at byte %d: %s; a valid entry follows at byte %d",
						ErrJournalCorrupt, offset, reason, later)
				}
				var next wire.PrepareHeader
				checkJournalEntry(&next, b[later:], sizeMaxBytes)
				if next.Op <= scan.LastOp+1 {
					return scan, fmt.Errorf("%w: damage at byte %d stands for no op: op %d follows op %d",
						ErrJournalCorrupt, offset, next.Op, scan.LastOp)
				}
				if err := hole(JournalHole{Start: offset, End: later, AfterOp: scan.LastOp, BeforeOp: next.Op}); err != nil {
					return scan, err
				}
				offset, afterHole = later, true
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
		afterHole = false
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

// probeJournalEntry looks for any intact entry at or after byte from, and returns
// its offset or -1. Only a tail with no intact entry in it can be a torn write.
func probeJournalEntry(b []byte, from int, sizeMaxBytes uint32) int {
	var h wire.PrepareHeader
	for k := from; k+wire.HeaderSize <= len(b); k++ {
		if _, reason := checkJournalEntry(&h, b[k:], sizeMaxBytes); reason == "" {
			return k
		}
	}
	return -1
}
