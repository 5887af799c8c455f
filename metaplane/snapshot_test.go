package metaplane

import (
	"bytes"
	"strings"
	"testing"

	"github.com/iggy-shard/iggy-shard/metadata"
	"github.com/iggy-shard/iggy-shard/vsr"
	"github.com/iggy-shard/iggy-shard/wire"
)

// FuzzDecodeSnapshot: arbitrary bytes as a snapshot give an error or a snapshot,
// never a panic; a snapshot decoded encodes to the same bytes.
func FuzzDecodeSnapshot(f *testing.F) {
	at := Applied{Op: 7, Identity: wire.Uint128{Lo: 1}, Timestamp: 9}
	f.Add([]byte(snapshotMagic))
	f.Add([]byte{})
	f.Add(AppendSnapshot(nil, at, metadata.NewState("iggy", "x", 1), vsr.NewClientTable(8)))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := DecodeSnapshot(b, 8)
		if err != nil {
			return
		}
		// The view field is read as nothing and written 0 (see AppendSnapshot):
		// the rest must come back byte for byte.
		again := AppendSnapshot(nil, s.At, s.State, s.Table)
		if !bytes.Equal(again[:12], b[:12]) || !bytes.Equal(again[16:len(again)-8], b[16:len(b)-8]) {
			t.Fatal("a decoded snapshot does not encode to its bytes")
		}
	})
}

// TestSnapshotTableSize: a snapshot's table loads into a table of another size
// that holds its sessions; one too small is refused naming the setting.
func TestSnapshotTableSize(t *testing.T) {
	table := vsr.NewClientTable(8)
	for i := range 3 {
		table.CommitRegister(wire.Uint128{Lo: uint64(i) + 1}, 0, uint64(i)+1, make([]byte, wire.HeaderSize))
	}
	b := AppendSnapshot(nil, Applied{Op: 3}, metadata.NewState("iggy", "x", 1), table)
	for _, size := range []int{3, 64} {
		s, err := DecodeSnapshot(b, size)
		if err != nil || s.Table.Len() != 3 {
			t.Fatalf("into a table of %d: %v", size, err)
		}
	}
	if _, err := DecodeSnapshot(b, 2); err == nil || !strings.Contains(err.Error(), "metadata.clients_table_max") {
		t.Fatalf("3 sessions into a table of 2: %v", err)
	}
}
