package vsr

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

const testJournalSizeMax = 1 << 20

// buildJournal prepares n operations on a one-replica metadata group and returns the
// journal bytes and each entry's end offset.
func buildJournal(t testing.TB, n int) ([]byte, []int) {
	c, err := NewCore(CoreConfig{Config: Config{ReplicaCount: 1, Group: wire.MetadataGroup, PipelineDepth: 1}, Storage: newMemStorage(8)})
	if err != nil {
		t.Fatal(err)
	}
	var journal []byte
	var ends []int
	for i := 1; i <= n; i++ {
		body := []byte(fmt.Sprintf("operation body %d", i))
		if _, err := c.Propose(Proposal{Request: uint64(i), Operation: wire.OperationCreateStream}, body, uint64(i*10)); err != nil {
			t.Fatal(err)
		}
		rd := c.Ready()
		h := rd.Writes[0].Header
		c.Advance()
		c.Ready()
		c.Advance()
		entry := make([]byte, wire.HeaderSize)
		h.Put(entry)
		journal = append(journal, append(entry, body...)...)
		ends = append(ends, len(journal))
	}
	return journal, ends
}

func TestScanJournalIntact(t *testing.T) {
	journal, _ := buildJournal(t, 20)
	var bodies []string
	scan, err := ScanJournal(journal, testJournalSizeMax, func(h *wire.PrepareHeader, body []byte) error {
		bodies = append(bodies, string(body))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if scan.Entries != 20 || scan.FirstOp != 1 || scan.LastOp != 20 || scan.ValidBytes != len(journal) || scan.TornTailBytes != 0 {
		t.Fatalf("scan %+v", scan)
	}
	if bodies[6] != "operation body 7" {
		t.Fatalf("body 7 = %q", bodies[6])
	}
}

func TestScanJournalTruncatesTornTail(t *testing.T) {
	journal, ends := buildJournal(t, 5)
	// Every cut inside the last entry is a torn write: keep four entries.
	for cut := ends[3] + 1; cut < ends[4]; cut++ {
		scan, err := ScanJournal(journal[:cut], testJournalSizeMax, func(*wire.PrepareHeader, []byte) error { return nil })
		if err != nil {
			t.Fatalf("cut at %d: %v", cut, err)
		}
		if scan.Entries != 4 || scan.ValidBytes != ends[3] || scan.TornTailBytes != cut-ends[3] {
			t.Fatalf("cut at %d: %+v", cut, scan)
		}
	}
	// Garbage in the last entry is a torn tail too.
	bad := bytes.Clone(journal)
	bad[len(bad)-1] ^= 1
	scan, err := ScanJournal(bad, testJournalSizeMax, func(*wire.PrepareHeader, []byte) error { return nil })
	if err != nil || scan.Entries != 4 || scan.TornTailReason == "" {
		t.Fatalf("corrupt last body: %+v, %v", scan, err)
	}
}

func TestScanJournalRefusesInteriorCorruption(t *testing.T) {
	journal, ends := buildJournal(t, 5)
	for _, at := range []int{10, ends[0] + 100, ends[2] + wire.HeaderSize + 2} {
		bad := bytes.Clone(journal)
		bad[at] ^= 0x80
		_, err := ScanJournal(bad, testJournalSizeMax, func(*wire.PrepareHeader, []byte) error { return nil })
		if !errors.Is(err, ErrJournalCorrupt) {
			t.Fatalf("flip at %d: %v", at, err)
		}
	}
	// An entry dropped from the middle breaks the chain before intact entries.
	spliced := append(bytes.Clone(journal[:ends[1]]), journal[ends[2]:]...)
	if _, err := ScanJournal(spliced, testJournalSizeMax, func(*wire.PrepareHeader, []byte) error { return nil }); !errors.Is(err, ErrJournalCorrupt) {
		t.Fatalf("missing entry: %v", err)
	}
}

func TestScanJournalVisitError(t *testing.T) {
	journal, _ := buildJournal(t, 3)
	stop := errors.New("stop")
	seen := 0
	_, err := ScanJournal(journal, testJournalSizeMax, func(*wire.PrepareHeader, []byte) error {
		seen++
		if seen == 2 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || seen != 2 {
		t.Fatalf("visit error: %v after %d", err, seen)
	}
}

func FuzzScanJournal(f *testing.F) {
	journal, _ := buildJournal(f, 3)
	f.Add(journal)
	f.Add(journal[:300])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		total := 0
		scan, err := ScanJournal(b, testJournalSizeMax, func(h *wire.PrepareHeader, body []byte) error {
			total += wire.HeaderSize + len(body)
			return nil
		})
		if err != nil {
			return
		}
		if total != scan.ValidBytes || scan.ValidBytes+scan.TornTailBytes != len(b) {
			t.Fatalf("scan accounts %d valid + %d torn of %d bytes (visited %d)", scan.ValidBytes, scan.TornTailBytes, len(b), total)
		}
	})
}

// scanHoles runs ScanJournalHoles and returns the ops visited and the holes.
func scanHoles(b []byte) ([]uint64, []JournalHole, JournalScan, error) {
	var ops []uint64
	var holes []JournalHole
	scan, err := ScanJournalHoles(b, testJournalSizeMax, func(h *wire.PrepareHeader, body []byte, offset int) error {
		if !bytes.Equal(b[offset+wire.HeaderSize:offset+int(h.Size)], body) {
			return fmt.Errorf("op %d: offset %d does not hold its body", h.Op, offset)
		}
		ops = append(ops, h.Op)
		return nil
	}, func(h JournalHole) error {
		holes = append(holes, h)
		return nil
	})
	return ops, holes, scan, err
}

func TestScanJournalHoles(t *testing.T) {
	journal, ends := buildJournal(t, 5)
	flip := func(at ...int) []byte {
		bad := bytes.Clone(journal)
		for _, k := range at {
			bad[k] ^= 0x80
		}
		return bad
	}
	zeroed := bytes.Clone(journal)
	clear(zeroed[ends[0]:ends[1]])
	for _, tc := range []struct {
		name  string
		b     []byte
		ops   []uint64
		holes []JournalHole
		torn  int
	}{
		{name: "a flipped header", b: flip(ends[0] + 10), ops: []uint64{1, 3, 4, 5},
			holes: []JournalHole{{Start: ends[0], End: ends[1], FromOp: 2, ToOp: 2}}},
		{name: "a flipped body", b: flip(ends[2] + wire.HeaderSize + 2), ops: []uint64{1, 2, 3, 5},
			holes: []JournalHole{{Start: ends[2], End: ends[3], FromOp: 4, ToOp: 4}}},
		{name: "two entries in one hole", b: flip(ends[0]+10, ends[1]+10), ops: []uint64{1, 4, 5},
			holes: []JournalHole{{Start: ends[0], End: ends[2], FromOp: 2, ToOp: 3}}},
		{name: "two holes", b: flip(ends[0]+10, ends[2]+10), ops: []uint64{1, 3, 5},
			holes: []JournalHole{{Start: ends[0], End: ends[1], FromOp: 2, ToOp: 2}, {Start: ends[2], End: ends[3], FromOp: 4, ToOp: 4}}},
		{name: "the first entry", b: flip(10), ops: []uint64{2, 3, 4, 5},
			holes: []JournalHole{{Start: 0, End: ends[0], FromOp: 1, ToOp: 1}}},
		{name: "zeroed bytes in place of an entry", b: zeroed, ops: []uint64{1, 3, 4, 5},
			holes: []JournalHole{{Start: ends[0], End: ends[1], FromOp: 2, ToOp: 2}}},
		{name: "a hole and a torn tail", b: flip(ends[0]+10, len(journal)-1), ops: []uint64{1, 3, 4},
			holes: []JournalHole{{Start: ends[0], End: ends[1], FromOp: 2, ToOp: 2}}, torn: ends[4] - ends[3]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ops, holes, scan, err := scanHoles(tc.b)
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(ops) != fmt.Sprint(tc.ops) || fmt.Sprint(holes) != fmt.Sprint(tc.holes) || scan.TornTailBytes != tc.torn {
				t.Fatalf("ops %v holes %+v torn %d, want %v %+v %d", ops, holes, scan.TornTailBytes, tc.ops, tc.holes, tc.torn)
			}
		})
	}
	// Intact entries out of order are no damage: refused.
	spliced := append(bytes.Clone(journal[:ends[1]]), journal[ends[2]:]...)
	if _, _, _, err := scanHoles(spliced); !errors.Is(err, ErrJournalCorrupt) {
		t.Fatalf("missing entry: %v", err)
	}
	// Markers stand for the ops they name, in the middle or at the end.
	marked := append(AppendJournalMarker(bytes.Clone(journal[:ends[0]]), 2, 3), journal[ends[2]:]...)
	marked = AppendJournalMarker(marked, 6, 7)
	ops, holes, scan, err := scanHoles(marked)
	want := []JournalHole{{Start: ends[0], End: ends[0] + JournalMarkerSize, FromOp: 2, ToOp: 3, Marker: true},
		{Start: len(marked) - JournalMarkerSize, End: len(marked), FromOp: 6, ToOp: 7, Marker: true}}
	if err != nil || fmt.Sprint(ops) != "[1 4 5]" || fmt.Sprint(holes) != fmt.Sprint(want) || scan.ValidBytes != len(marked) {
		t.Fatalf("markers: ops %v holes %+v scan %+v: %v", ops, holes, scan, err)
	}
	// Damage next to a marker stands for the ops between them.
	flipped := bytes.Clone(marked)
	flipped[ends[0]+JournalMarkerSize+10] ^= 1 // op 4's header
	if ops, holes, _, err := scanHoles(flipped); err != nil || fmt.Sprint(ops) != "[1 5]" || holes[1].FromOp != 4 || holes[1].ToOp != 4 {
		t.Fatalf("damage after a marker: ops %v holes %+v: %v", ops, holes, err)
	}
	// A damaged marker is damage; ScanJournal knows no markers.
	broken := bytes.Clone(marked)
	broken[ends[0]+200] ^= 1
	if ops, holes, _, err := scanHoles(broken); err != nil || fmt.Sprint(ops) != "[1 4 5]" || holes[0].Marker || holes[0].FromOp != 2 || holes[0].ToOp != 3 {
		t.Fatalf("damaged marker: ops %v holes %+v: %v", ops, holes, err)
	}
	if _, err := ScanJournal(marked, testJournalSizeMax, func(*wire.PrepareHeader, []byte) error { return nil }); !errors.Is(err, ErrJournalCorrupt) {
		t.Fatalf("ScanJournal over a marker: %v", err)
	}
	// A marker out of order is refused.
	if _, _, _, err := scanHoles(AppendJournalMarker(bytes.Clone(journal), 7, 8)); !errors.Is(err, ErrJournalCorrupt) {
		t.Fatalf("a marker leaving ops out: %v", err)
	}
	// A hole must stand for an op.
	padded := append(append(bytes.Clone(journal[:ends[0]]), make([]byte, 300)...), journal[ends[0]:]...)
	if _, _, _, err := scanHoles(padded); !errors.Is(err, ErrJournalCorrupt) {
		t.Fatalf("a hole between consecutive ops: %v", err)
	}
}

func FuzzScanJournalHoles(f *testing.F) {
	journal, ends := buildJournal(f, 4)
	f.Add(journal)
	bad := bytes.Clone(journal)
	bad[ends[0]+7] ^= 1
	f.Add(bad)
	f.Add(AppendJournalMarker(bytes.Clone(journal), 5, 6))
	f.Fuzz(func(t *testing.T, b []byte) {
		total := 0
		scan, err := ScanJournalHoles(b, testJournalSizeMax, func(h *wire.PrepareHeader, body []byte, _ int) error {
			total += wire.HeaderSize + len(body)
			return nil
		}, func(h JournalHole) error {
			if h.End <= h.Start || h.ToOp < h.FromOp {
				t.Fatalf("hole %+v", h)
			}
			total += h.End - h.Start
			return nil
		})
		if err != nil {
			return
		}
		if total+scan.TornTailBytes != len(b) {
			t.Fatalf("scan accounts %d + %d torn of %d bytes", total, scan.TornTailBytes, len(b))
		}
	})
}
