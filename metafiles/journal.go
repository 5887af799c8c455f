package metafiles

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/iggy-shard/iggy-shard/metaplane"
	"github.com/iggy-shard/iggy-shard/vsr"
	"github.com/iggy-shard/iggy-shard/wire"
)

// The metadata journal of a cluster's replica may hold holes: runs of ops it does
// not hold intact, in their place in op order (vsr.ScanJournalHoles). The replica
// reports their ops to its core as faulty (vsr.CoreRecovered.Faulty): journaled,
// or maybe journaled, and maybe acknowledged, so never nacked in a view change;
// they are repaired from a peer. A hole is either damage found at a start (a
// corrupt entry, which a single node refuses instead: with no peer to repair
// from, a corrupt synced entry is data loss), or a marker naming its ops
// (vsr.AppendJournalMarker) that the plane writes when a write comes before the
// ops below it (a backup handed a prepare beyond a gap): that entry is then
// durable at its own position, in op order, before the Ready that acknowledges it
// is advanced. A faulty op's mark stays on disk until its entry replaces it or the
// core truncates it: a restart that found it gone would take the op for never
// journaled, and nack it.
//
// The in-memory index (Files.journalEnds) gives every op of a hole a span:
// the last op of a hole's run holds the run's bytes, the others none (where one op
// of a damaged run ends is unknown). A cut inside a run takes its bytes; the
// Ready then rewrites the journal with a marker for the run's ops below the cut.
// A torn tail in a cluster is kept as a hole for one op: it cannot be proven never
// written (a synced entry the disk damaged reads the same).

// journalRecovery is what the journal's scan at a start found: the intact entries
// above the snapshot (and the snapshot's own op), the faulty ops, the index, and
// the size the journal keeps.
type journalRecovery struct {
	entries   []vsr.Write
	faulty    []uint64
	firstOp   uint64
	ends      []int64
	holes     map[uint64]bool
	skipBytes int64 // entries in front below the snapshot's op, dropped
	sizeBytes int64 // the journal's size from skipBytes on, torn tail dropped
	scan      vsr.JournalScan
	// tornKept: the torn tail is kept, a hole for the op after the last one.
	tornKept bool
}

// scanMetaJournal reads the journal's bytes raw against the snapshot head. The
// entries must chain to the snapshot (its op's entry, when there, is the
// snapshot's); entries below its op in front, left by a crash between the
// snapshot and the journal's replacement, are skipped. A single node refuses
// any hole (vsr.ErrJournalCorrupt); a cluster's replica reports them as faulty.
func scanMetaJournal(raw []byte, head metaplane.Applied, clustered bool) (*journalRecovery, error) {
	r := &journalRecovery{firstOp: head.Op + 1, holes: map[uint64]bool{}}
	kept := func() bool { return len(r.ends) > 0 }
	covered := uint64(0) // the last op an entry or a hole stood for
	visit := func(h *wire.PrepareHeader, body []byte, offset int) error {
		covered = h.Op
		end := int64(offset) + int64(h.Size)
		switch {
		case h.Op < head.Op:
			r.skipBytes = end
			return nil
		case h.Op == head.Op:
			if h.Checksum != head.Identity {
				return fmt.Errorf("%w: op %d is not the prepare the snapshot was taken at", vsr.ErrJournalCorrupt, h.Op)
			}
		case h.Op != head.Op+1 && !kept(), h.Op == head.Op+1 && h.Parent != head.Identity:
			return fmt.Errorf("%w: op %d does not follow the snapshot's op %d", vsr.ErrJournalCorrupt, h.Op, head.Op)
		}
		if !kept() {
			r.firstOp = h.Op
		}
		r.entries = append(r.entries, vsr.Write{Header: *h, Body: body})
		r.ends = append(r.ends, end-r.skipBytes)
		return nil
	}
	var hole func(vsr.JournalHole) error
	if clustered {
		hole = func(hl vsr.JournalHole) error {
			covered = hl.ToOp
			from, to := max(hl.FromOp, head.Op+1), hl.ToOp
			if from > to {
				// Damage standing for ops the snapshot holds: dropped with them.
				r.skipBytes = int64(hl.End)
				return nil
			}
			r.addHole(from, to, int64(hl.Start)-r.skipBytes, int64(hl.End)-r.skipBytes)
			return nil
		}
	}
	scan, err := vsr.ScanJournalHoles(raw, FrameMax, visit, hole)
	r.scan = scan
	if err != nil {
		return r, err
	}
	r.sizeBytes = int64(scan.ValidBytes) - r.skipBytes
	if torn := covered + 1; clustered && scan.TornTailBytes > 0 && torn > head.Op && (kept() || torn == head.Op+1) {
		r.addHole(torn, torn, r.sizeBytes, int64(len(raw))-r.skipBytes)
		r.sizeBytes = int64(len(raw)) - r.skipBytes
		r.tornKept = true
	}
	if r.sizeBytes < 0 {
		r.sizeBytes = 0 // everything was below the snapshot's op
	}
	return r, nil
}

// addHole indexes the ops from..to of a hole of bytes [start, end).
func (r *journalRecovery) addHole(from, to uint64, start, end int64) {
	if len(r.ends) == 0 {
		r.firstOp = from
	}
	for op := from; op <= to; op++ {
		r.faulty = append(r.faulty, op)
		r.holes[op] = true
		if op < to {
			r.ends = append(r.ends, start)
		} else {
			r.ends = append(r.ends, end)
		}
	}
}

// Hole reports whether the journal's span of op is a hole.
func (m *Files) Hole(op uint64) bool {
	return m.holes[op] && op >= m.journalFirstOp && op < m.journalFirstOp+uint64(len(m.journalEnds))
}

// journalKept is the op after the last one the journal keeps through a truncation
// at truncateAt (-1: none). The ops of a hole run below the cut are kept, though
// the cut may take the run's bytes: placeWrites then rewrites its marker.
func (m *Files) journalKept(truncateAt int64) uint64 {
	first := m.journalFirstOp
	next := first + uint64(len(m.journalEnds))
	if truncateAt < 0 {
		return next
	}
	next = first
	for next < first+uint64(len(m.journalEnds)) && m.journalEnds[next-first] <= truncateAt {
		next++
	}
	return next
}

// journalCut decides what a Ready's truncation and discards remove: a truncation
// cuts the journal at its op, and so do discards that take every entry above them
// along (the journal is in op order). A discarded entry below entries that stay
// is dropped by a rewrite instead, its op a hole until its new entry comes: the
// entries above it, which the core counts durable, must stay on disk.
func (m *Files) journalCut(a *appendWork, rd *vsr.Ready) {
	a.truncateAt = -1
	if rd.Truncate {
		if off, ok := m.JournalOffset(rd.TruncateAbove + 1); ok {
			a.truncateAt = off
		}
	}
	rw := &a.rewrite
	rw.dropped = rw.dropped[:0]
	if len(rd.Discards) == 0 {
		return
	}
	first, top := m.journalFirstOp, m.journalKept(a.truncateAt)
	for top > first && slices.Contains(rd.Discards, top-1) {
		top--
	}
	if off, ok := m.JournalOffset(top); ok && top < m.journalKept(a.truncateAt) {
		a.truncateAt = off
	}
	for _, op := range rd.Discards {
		if op >= first && op < top && !m.Hole(op) {
			rw.dropped = append(rw.dropped, op)
		}
	}
}

// journalPiece is a run of the bytes of a rewritten journal.
type journalPiece struct {
	// old: bytes of the journal as it is (after the Ready's truncation); else
	// of appendWork.entries, or a marker for the ops start..end.
	old, marker bool
	start, end  int64
}

// journalRewrite is a Ready's journal work when its writes are not one append at
// the journal's end (a write beyond a gap, or into a hole): the journal is
// written anew, atomically (Storage.ReplaceFile), its entries in op order with
// a marker for each run of ops it does not hold.
type journalRewrite struct {
	active  bool
	pieces  []journalPiece
	firstOp uint64
	ends    []int64
	holes   []uint64
	// order is scratch: the indexes of the Ready's writes to place, by op.
	order []int
	// dropped are the entries the Ready discards below entries that stay
	// (journalCut).
	dropped  []uint64
	reopened Journal
}

// placeWrites puts a Ready's writes into the journal work: entries the journal
// holds already (a body retransmitted) or at or below the snapshot are skipped;
// the others are one append when they continue the journal at next, in op order,
// and a rewrite when they do not. A write for an op written twice in the Ready
// counts once, as the last.
func (m *Files) placeWrites(a *appendWork, rd *vsr.Ready, next uint64) {
	rw := &a.rewrite
	rw.active, rw.order = false, rw.order[:0]
	for i := range rd.Writes {
		w := &rd.Writes[i]
		if w.Header.Op < next && !m.Hole(w.Header.Op) && !slices.Contains(rw.dropped, w.Header.Op) {
			continue
		}
		rw.order = append(rw.order, i)
	}
	slices.SortStableFunc(rw.order, func(x, y int) int { return cmp.Compare(rd.Writes[x].Header.Op, rd.Writes[y].Header.Op) })
	// Keep the last write of each op.
	n := 0
	for k, i := range rw.order {
		if k+1 < len(rw.order) && rd.Writes[rw.order[k+1]].Header.Op == rd.Writes[i].Header.Op {
			continue
		}
		rw.order[n] = i
		n++
	}
	rw.order = rw.order[:n]
	// A cut that ends the journal in a hole may have taken its bytes (a run's
	// are all in its last op's span), or left damage standing for several ops
	// at the end, where it would read as a torn write of one: the rewrite marks
	// the run anew.
	inOrder := len(rw.dropped) == 0 && !(a.truncateAt >= 0 && next > m.journalFirstOp && m.Hole(next-1))
	for k, i := range rw.order {
		if rd.Writes[i].Header.Op != next+uint64(k) {
			inOrder = false
			break
		}
	}
	a.firstOp = next
	if inOrder {
		for _, i := range rw.order {
			a.put(&rd.Writes[i].Header, rd.Writes[i].Body)
		}
		return
	}
	if !m.clustered {
		panic(fmt.Sprintf("metafiles: a one-replica metadata group wrote or discarded out of its journal's order (next op %d)", next))
	}
	m.planRewrite(a, rd, next)
}

// put adds one entry to the Ready's append.
func (a *appendWork) put(h *wire.PrepareHeader, body []byte) {
	start := len(a.entries)
	a.entries = append(a.entries, make([]byte, wire.HeaderSize)...)
	h.Put(a.entries[start:])
	a.entries = append(a.entries, body...)
	a.sizes = append(a.sizes, h.Size)
}

// planRewrite lays the journal out anew: from its first op to the highest op it
// holds or the Ready writes, each op the Ready's entry, the journal's entry, or a
// marker closing a run of ops held by neither.
func (m *Files) planRewrite(a *appendWork, rd *vsr.Ready, next uint64) {
	rw := &a.rewrite
	rw.active = true
	rw.pieces, rw.ends, rw.holes = rw.pieces[:0], rw.ends[:0], rw.holes[:0]
	rw.firstOp = m.journalFirstOp
	opOf := func(k int) uint64 { return rd.Writes[rw.order[k]].Header.Op }
	last := next - 1
	if len(rw.order) > 0 {
		last = max(last, opOf(len(rw.order)-1))
	}
	pos := int64(0)
	run := false
	runFrom := uint64(0)
	closeRun := func(op uint64) {
		if run {
			rw.pieces = append(rw.pieces, journalPiece{marker: true, start: int64(runFrom), end: int64(op - 1)})
			pos += vsr.JournalMarkerSize
			rw.ends[len(rw.ends)-1] = pos
			run = false
		}
	}
	k := 0
	for op := rw.firstOp; op <= last; op++ {
		for k < len(rw.order) && opOf(k) < op {
			k++
		}
		switch {
		case k < len(rw.order) && opOf(k) == op:
			closeRun(op)
			w := &rd.Writes[rw.order[k]]
			start := int64(len(a.entries))
			a.put(&w.Header, w.Body)
			rw.pieces = append(rw.pieces, journalPiece{start: start, end: int64(len(a.entries))})
			pos += int64(w.Header.Size)
			rw.ends = append(rw.ends, pos)
		case op < next && !m.Hole(op) && !slices.Contains(rw.dropped, op):
			closeRun(op)
			start, _ := m.JournalOffset(op)
			end := m.journalEnds[op-m.journalFirstOp]
			rw.pieces = append(rw.pieces, journalPiece{old: true, start: start, end: end})
			pos += end - start
			rw.ends = append(rw.ends, pos)
		default:
			if !run {
				run, runFrom = true, op
			}
			rw.holes = append(rw.holes, op)
			rw.ends = append(rw.ends, pos)
		}
	}
	// A run at the end holds faulty ops: its marker names them.
	closeRun(last + 1)
	a.sizes = a.sizes[:0] // the index comes from the rewrite
}

// rewriteJournal does a planned rewrite on the journal writer's goroutine: the
// journal read back (after the Ready's truncation), laid out anew, replaced
// atomically and reopened.
func (a *appendWork) rewriteJournal() error {
	rw := &a.rewrite
	raw, err := a.store.ReadFile(JournalFileName)
	if err != nil {
		return fmt.Errorf("metadata journal read: %w", err)
	}
	j, err := replaceJournal(a.store, a.journal, raw, a.entries, rw.pieces)
	if err != nil {
		return err
	}
	a.journal, rw.reopened = nil, j
	return nil
}

// replaceJournal writes the journal anew from pieces (of raw, the journal as it
// is, of entries, or markers), replaces it atomically, and reopens it in place of
// old, which it closes once the new journal is in place (on an error before, old
// stays open and whole). On the journal writer's goroutine.
func replaceJournal(store Storage, old Journal, raw, entries []byte, pieces []journalPiece) (Journal, error) {
	b, err := layJournal(raw, entries, pieces)
	if err != nil {
		return nil, err
	}
	if err := store.ReplaceFile(JournalFileName, b); err != nil {
		return nil, fmt.Errorf("metadata journal rewrite: %w", err)
	}
	old.Close()
	return store.OpenJournal(JournalFileName, int64(len(b)))
}

// layJournal is the journal's bytes from pieces of raw, of entries, and markers.
func layJournal(raw, entries []byte, pieces []journalPiece) ([]byte, error) {
	size := int64(0)
	for _, p := range pieces {
		switch {
		case p.marker:
			size += vsr.JournalMarkerSize
		default:
			if p.old && p.end > int64(len(raw)) {
				return nil, fmt.Errorf("metadata journal read: %d bytes, an entry ends at %d", len(raw), p.end)
			}
			size += p.end - p.start
		}
	}
	b := make([]byte, 0, size)
	for _, p := range pieces {
		switch {
		case p.marker:
			b = vsr.AppendJournalMarker(b, uint64(p.start), uint64(p.end))
		case p.old:
			b = append(b, raw[p.start:p.end]...)
		default:
			b = append(b, entries[p.start:p.end]...)
		}
	}
	return b, nil
}

// journalWritten updates the journal's index once a Ready's journal work is done:
// the truncation, then the rewrite's layout or the appended entries.
func (m *Files) journalWritten() {
	a := &m.appending
	m.journalEnds = m.journalEnds[:m.journalKept(a.truncateAt)-m.journalFirstOp]
	rw := &a.rewrite
	if rw.active {
		if rw.reopened != nil {
			m.journal, rw.reopened = rw.reopened, nil
		}
		m.setJournalIndex(rw.firstOp, rw.ends, rw.holes)
		return
	}
	for i, size := range a.sizes {
		if len(m.journalEnds) == 0 {
			m.journalFirstOp = a.firstOp + uint64(i)
		}
		delete(m.holes, a.firstOp+uint64(i))
		m.journalEnds = append(m.journalEnds, m.JournalSizeBytes()+int64(size))
	}
}

// installedJournal is the journal a replica keeps when it installs a transferred
// state (installTask): the ops above the state's op as the journal holds them,
// entries and holes, since the core keeps them as journaled (Core.installed):
// they may have been acknowledged. The state's own op keeps its entry when it is
// the state's (it anchors the log, as a snapshot's journal keeps it); an entry
// that does not chain to the state (of an older log) stands as a hole in its
// place instead, which the restart reports as faulty, since a recovery refuses an
// entry after the snapshot that is not its child (scanMetaJournal).
type installedJournal struct {
	pieces  []journalPiece // of the journal as it is, or markers
	firstOp uint64
	ends    []int64
	holes   []uint64
}

// journalEntryAt reads back op's entry from raw by the journal's index: its
// header and bytes, or false for a hole.
func journalEntryAt(raw []byte, firstOp uint64, ends []int64, holes map[uint64]bool, op uint64) (wire.PrepareHeader, int64, int64, bool, error) {
	var h wire.PrepareHeader
	if holes[op] {
		return h, 0, 0, false, nil
	}
	start := int64(0)
	if op > firstOp {
		start = ends[op-firstOp-1]
	}
	end := ends[op-firstOp]
	if end > int64(len(raw)) || end-start < wire.HeaderSize {
		return h, 0, 0, false, fmt.Errorf("metadata journal read: %d bytes, op %d indexed at [%d, %d)", len(raw), op, start, end)
	}
	copy(wire.HeaderBytes(&h)[:], raw[start:])
	if h.Op != op {
		return h, 0, 0, false, fmt.Errorf("metadata journal: op %d found where op %d is indexed", h.Op, op)
	}
	return h, start, end, true, nil
}

// relayJournal lays out the journal's ops from `from` to its last one anew: an
// op's entry where keep says so, a marker for each run of the others (its holes
// among them).
func relayJournal(raw []byte, firstOp uint64, ends []int64, holes map[uint64]bool, from uint64,
	keep func(h *wire.PrepareHeader) bool) (*installedJournal, error) {
	ij := &installedJournal{firstOp: from}
	last := firstOp + uint64(len(ends)) - 1
	pos := int64(0)
	run, runFrom := false, uint64(0)
	closeRun := func(to uint64) {
		if run {
			ij.pieces = append(ij.pieces, journalPiece{marker: true, start: int64(runFrom), end: int64(to)})
			pos += vsr.JournalMarkerSize
			ij.ends[len(ij.ends)-1] = pos
			run = false
		}
	}
	for op := from; len(ends) > 0 && op <= last; op++ {
		h, start, end, ok, err := journalEntryAt(raw, firstOp, ends, holes, op)
		if err != nil {
			return nil, err
		}
		if !ok || !keep(&h) {
			if !run {
				run, runFrom = true, op
			}
			ij.holes = append(ij.holes, op)
			ij.ends = append(ij.ends, pos)
			continue
		}
		closeRun(op - 1)
		ij.pieces = append(ij.pieces, journalPiece{old: true, start: start, end: end})
		pos += end - start
		ij.ends = append(ij.ends, pos)
	}
	closeRun(last)
	return ij, nil
}

// planInstalledJournal lays out the installedJournal of a state at head from raw,
// the journal's bytes, and its index (firstOp, ends, holes) as shard 0 left it
// before the install; it runs on the journal writer's goroutine, where raw is
// read.
//
// bridge, when not nil, is the journal to write before the state's snapshot: the
// journal as it is, with the entries at the state's op and the one after that
// the installed journal does not keep marked as holes instead. A crash between
// the snapshot's replacement and the journal's then leaves a journal that the
// restart takes with either snapshot, the old or the new.
func planInstalledJournal(raw []byte, firstOp uint64, ends []int64, holes map[uint64]bool, head metaplane.Applied) (ij, bridge *installedJournal, err error) {
	last := firstOp + uint64(len(ends)) - 1 // the journal's last op, when it holds one
	if len(ends) == 0 || last < head.Op {
		return &installedJournal{firstOp: head.Op + 1}, nil, nil
	}
	if firstOp > head.Op+1 {
		return nil, nil, fmt.Errorf("metadata journal from op %d does not reach back to the installed op %d", firstOp, head.Op)
	}
	// foreign: op's entry is of another log than the state's.
	foreign := func(h *wire.PrepareHeader) bool {
		return h.Op == head.Op && h.Checksum != head.Identity || h.Op == head.Op+1 && h.Parent != head.Identity
	}
	kept := func(h *wire.PrepareHeader) bool { return !foreign(h) }
	if ij, err = relayJournal(raw, firstOp, ends, holes, head.Op+1, kept); err != nil {
		return nil, nil, err
	}
	bridged := false
	for op := max(head.Op, firstOp); op <= min(head.Op+1, last); op++ {
		h, start, end, ok, err := journalEntryAt(raw, firstOp, ends, holes, op)
		switch {
		case err != nil:
			return nil, nil, err
		case ok && foreign(&h):
			bridged = true
		case ok && op == head.Op:
			// The state's own entry, in front.
			size := end - start
			ij.firstOp = head.Op
			ij.pieces = append([]journalPiece{{old: true, start: start, end: end}}, ij.pieces...)
			for i := range ij.ends {
				ij.ends[i] += size
			}
			ij.ends = append([]int64{size}, ij.ends...)
		}
	}
	if bridged {
		if bridge, err = relayJournal(raw, firstOp, ends, holes, firstOp, kept); err != nil {
			return nil, nil, err
		}
	}
	return ij, bridge, nil
}

// setJournalIndex makes the journal's index firstOp, ends and holes.
func (m *Files) setJournalIndex(firstOp uint64, ends []int64, holes []uint64) {
	m.journalFirstOp = firstOp
	m.journalEnds = append(m.journalEnds[:0], ends...)
	clear(m.holes)
	for _, op := range holes {
		m.holes[op] = true
	}
}
