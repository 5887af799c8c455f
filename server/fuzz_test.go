package server

import (
	"io"
	"log/slog"
	"testing"

	"github.com/iggy-shard/iggy-shard/metadata"
	"github.com/iggy-shard/iggy-shard/vsr"
	"github.com/iggy-shard/iggy-shard/wire"
)

// FuzzDecodeSnapshotFile: arbitrary bytes in snapshot.bin give an error or a
// snapshot, never a panic or an allocation beyond the input.
func FuzzDecodeSnapshotFile(f *testing.F) {
	m := &metaPlane{state: metadata.NewState("iggy", "x", 1), table: vsr.NewClientTable(8)}
	b := []byte(snapshotMagic)
	dir := f.TempDir()
	m.dir = dir
	m.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	if err := m.writeSnapshot(0, 7, wire.Uint128{Lo: 1}, 9); err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte{})
	f.Add(readSnapshotForFuzz(f, dir))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := decodeSnapshotFile(b)
		if err != nil {
			return
		}
		if _, _, err := metadata.DecodeSnapshot(h.metadataBytes); err != nil {
			return
		}
		_, _ = vsr.DecodeICT2(h.clientTableICT, 8)
	})
}

func readSnapshotForFuzz(f *testing.F, dir string) []byte {
	raw, err := readFileForTest(dir + "/" + snapshotFileName)
	if err != nil {
		f.Fatal(err)
	}
	return raw
}
