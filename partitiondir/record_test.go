package partitiondir

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
)

// The record round-trips, a 16-byte one (from before revisions) reads with its
// revision at its creation, an empty one as none, and a record of another size is
// refused.
func TestPartitionRecordFormat(t *testing.T) {
	dir := t.TempDir()
	if _, present, err := ReadRecord(dir); present || err != nil {
		t.Fatalf("no record: present %v, %v", present, err)
	}
	want := Record{Generation: 3, CreatedRevision: 1_700_000_000_000_001, Revision: 1_700_000_000_000_042}
	if err := WriteRecord(dir, want); err != nil {
		t.Fatal(err)
	}
	if got, present, err := ReadRecord(dir); got != want || !present || err != nil {
		t.Fatalf("read %+v %v %v, want %+v", got, present, err, want)
	}
	v1 := make([]byte, recordBytesV1)
	binary.LittleEndian.PutUint64(v1, 2)
	binary.LittleEndian.PutUint64(v1[8:], 1_700_000_000_000_007)
	if err := os.WriteFile(filepath.Join(dir, RecordFileName), v1, 0o644); err != nil {
		t.Fatal(err)
	}
	want = Record{Generation: 2, CreatedRevision: 1_700_000_000_000_007, Revision: 1_700_000_000_000_007}
	if got, present, err := ReadRecord(dir); got != want || !present || err != nil {
		t.Fatalf("read v1 %+v %v %v, want %+v", got, present, err, want)
	}
	if err := os.WriteFile(filepath.Join(dir, RecordFileName), v1[:12], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ReadRecord(dir); err == nil {
		t.Fatal("a 12-byte record was read")
	}
	// A record whose first write a crash cut, before anything else was created
	// beside it (storages.go): none.
	if err := os.WriteFile(filepath.Join(dir, RecordFileName), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, present, err := ReadRecord(dir); present || err != nil {
		t.Fatalf("an empty record: present %v, %v; want none", present, err)
	}
}
