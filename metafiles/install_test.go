package metafiles

import (
	"fmt"
	"slices"
	"testing"

	"github.com/iggy-shard/iggy-shard/metaplane"
	"github.com/iggy-shard/iggy-shard/segment"
	"github.com/iggy-shard/iggy-shard/vsr"
	"github.com/iggy-shard/iggy-shard/wire"
)

// primary is the primary of a three-replica metadata group whose prepares no
// backup answers: it numbers ops and keeps their bodies, for journals made of
// real prepares.
type primary struct {
	core   *vsr.Core
	bodies map[uint64][]byte
}

func (p *primary) Body(op uint64, _ wire.Uint128) ([]byte, bool) {
	b, ok := p.bodies[op]
	return b, ok
}

func newPrimary(t *testing.T) *primary {
	t.Helper()
	p := &primary{bodies: map[uint64][]byte{}}
	core, err := vsr.NewCore(vsr.CoreConfig{
		Config: vsr.Config{Cluster: wire.ClusterID("iggy-cluster"), ReplicaID: 0, ReplicaCount: 3, Group: wire.MetadataGroup},
		Timing: vsr.TimingDefault, Storage: p,
	})
	if err != nil {
		t.Fatal(err)
	}
	p.core = core
	return p
}

// drain does the primary's Ready work: bodies kept, frames dropped.
func (p *primary) drain() {
	for p.core.HasReady() {
		rd := p.core.Ready()
		for _, w := range rd.Writes {
			p.bodies[w.Header.Op] = append([]byte(nil), w.Body...)
		}
		p.core.Advance()
	}
}

func createStreamBody(t *testing.T, name string) []byte {
	b, err := wire.AppendName(nil, []byte(name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestInstalledJournalLayout lays out the journal kept by an install at several
// ops of one journal (entries 1, 2, 3, a marker for 4 and 5, entry 6) and checks
// that a restart's scan against the installed state reads back what the index
// says: the state's own entry kept when it is the state's, a hole run cut at the
// state's op marked anew, an entry that does not chain to the state kept as a
// hole; and that where the old journal would be refused with the new snapshot
// (a crash between the two replacements), the bridge written first is read with
// the old snapshot and the new.
func TestInstalledJournalLayout(t *testing.T) {
	primary := newPrimary(t)
	headers := map[uint64]wire.PrepareHeader{}
	for r := range 6 {
		op, err := primary.core.Propose(vsr.Proposal{Client: wire.Uint128{Lo: 7}, Request: uint64(r + 1), Operation: wire.OperationCreateStream},
			createStreamBody(t, fmt.Sprintf("layout-%d", r)), 1_000_000+uint64(r))
		if err != nil {
			t.Fatal(err)
		}
		headers[op], _ = primary.core.Header(op)
		primary.drain()
	}
	var a appendWork
	var ends []int64
	for _, op := range []uint64{1, 2, 3} {
		h := headers[op]
		a.put(&h, primary.bodies[op])
		ends = append(ends, int64(len(a.entries)))
	}
	ends = append(ends, int64(len(a.entries)))
	a.entries = vsr.AppendJournalMarker(a.entries, 4, 5)
	ends = append(ends, int64(len(a.entries)))
	h6 := headers[6]
	a.put(&h6, primary.bodies[6])
	ends = append(ends, int64(len(a.entries)))
	raw := a.entries
	holes := map[uint64]bool{4: true, 5: true}

	stranger := wire.Uint128{Lo: 0xdead, Hi: 0xbeef} // a state of another log at op 2
	for i, c := range []struct {
		head      metaplane.Applied
		firstOp   uint64
		entries   []uint64
		faulty    []uint64
		sizeBytes int64
		// bridge: the old journal has an entry of another log at the state's op
		// or the one after; marked as holes first.
		bridge bool
	}{
		{head: metaplane.Applied{Op: 2, Identity: headers[2].Checksum}, firstOp: 2, entries: []uint64{2, 3, 6}, faulty: []uint64{4, 5},
			sizeBytes: int64(headers[2].Size+headers[3].Size+headers[6].Size) + vsr.JournalMarkerSize},
		{head: metaplane.Applied{Op: 2, Identity: stranger}, firstOp: 3, entries: []uint64{6}, faulty: []uint64{3, 4, 5},
			sizeBytes: int64(headers[6].Size) + vsr.JournalMarkerSize, bridge: true},
		{head: metaplane.Applied{Op: 3, Identity: stranger}, firstOp: 4, entries: []uint64{6}, faulty: []uint64{4, 5},
			sizeBytes: int64(headers[6].Size) + vsr.JournalMarkerSize, bridge: true},
		{head: metaplane.Applied{Op: 3, Identity: headers[3].Checksum}, firstOp: 3, entries: []uint64{3, 6}, faulty: []uint64{4, 5},
			sizeBytes: int64(headers[3].Size+headers[6].Size) + vsr.JournalMarkerSize},
		{head: metaplane.Applied{Op: 4, Identity: headers[4].Checksum}, firstOp: 5, entries: []uint64{6}, faulty: []uint64{5},
			sizeBytes: int64(headers[6].Size) + vsr.JournalMarkerSize},
		{head: metaplane.Applied{Op: 6, Identity: headers[6].Checksum}, firstOp: 6, entries: []uint64{6}, sizeBytes: int64(headers[6].Size)},
		{head: metaplane.Applied{Op: 9, Identity: stranger}, firstOp: 10},
	} {
		ij, bridge, err := planInstalledJournal(raw, 1, ends, holes, c.head)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if (bridge != nil) != c.bridge {
			t.Fatalf("case %d: bridge %v, want %v", i, bridge != nil, c.bridge)
		}
		if bridge != nil {
			// A crash between the snapshot's replacement and the journal's: the
			// old journal would be refused with the new snapshot; the bridge is
			// read with either.
			if _, err := scanMetaJournal(raw, c.head, true); err == nil {
				t.Fatalf("case %d: the old journal is read with the new snapshot: no bridge needed", i)
			}
			b, err := layJournal(raw, nil, bridge.pieces)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := scanMetaJournal(b, metaplane.Applied{}, true); err != nil {
				t.Fatalf("case %d: the bridge with the old snapshot: %v", i, err)
			}
			rec, err := scanMetaJournal(b, c.head, true)
			if err != nil {
				t.Fatalf("case %d: the bridge with the new snapshot: %v", i, err)
			}
			var entries []uint64
			for _, e := range rec.entries {
				entries = append(entries, e.Header.Op)
			}
			if !slices.Equal(entries, c.entries) || !slices.Equal(rec.faulty, c.faulty) {
				t.Fatalf("case %d: the bridge with the new snapshot reads entries %v faulty %v, want %v and %v", i, entries, rec.faulty, c.entries, c.faulty)
			}
		}
		store := NewSimStorage(segment.NewSimDisk(uint64(20 + i)))
		old, err := store.OpenJournal(JournalFileName, 0)
		if err != nil {
			t.Fatal(err)
		}
		store.Disk.WriteFile(JournalFileName, raw)
		j, err := replaceJournal(store, old, raw, nil, ij.pieces)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		j.Close()
		kept := store.AfterCrash(uint64(30 + i)).ReadFile(JournalFileName)
		rec, err := scanMetaJournal(kept, c.head, true)
		if err != nil {
			t.Fatalf("case %d (state of op %d): the restart refuses the journal: %v", i, c.head.Op, err)
		}
		var entries []uint64
		for _, e := range rec.entries {
			entries = append(entries, e.Header.Op)
		}
		if int64(len(kept)) != c.sizeBytes || rec.firstOp != c.firstOp || ij.firstOp != c.firstOp ||
			!slices.Equal(entries, c.entries) || !slices.Equal(rec.faulty, c.faulty) || !slices.Equal(ij.holes, c.faulty) ||
			!slices.Equal(rec.ends, ij.ends) || len(ij.ends) > 0 && ij.ends[len(ij.ends)-1] != c.sizeBytes {
			t.Fatalf("case %d (state of op %d): %d bytes, want %d; read from op %d entries %v faulty %v ends %v; indexed from op %d holes %v ends %v; want from op %d, %v, %v",
				i, c.head.Op, len(kept), c.sizeBytes, rec.firstOp, entries, rec.faulty, rec.ends, ij.firstOp, ij.holes, ij.ends, c.firstOp, c.entries, c.faulty)
		}
	}
}
