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
