package server

import (
	"archive/zip"
	"io"
	"testing"

	"github.com/iggy-shard/iggy-shard/snapshotzip"
	"github.com/iggy-shard/iggy-shard/wire"
)

var snapshotCompressions = []struct {
	compression wire.SnapshotCompression
	method      uint16
}{
	{wire.SnapshotStored, zip.Store},
	{wire.SnapshotDeflated, zip.Deflate},
	{wire.SnapshotBzip2, snapshotzip.MethodBzip2},
	{wire.SnapshotZstd, snapshotzip.MethodZstd},
	{wire.SnapshotLzma, snapshotzip.MethodLZMA},
	{wire.SnapshotXz, snapshotzip.MethodXz},
}

func readZipEntry(t *testing.T, f *zip.File) []byte {
	t.Helper()
	rc, err := f.Open()
	if err != nil {
		t.Fatalf("open %s: %v", f.Name, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("read %s: %v", f.Name, err)
	}
	return b
}

// TestSnapshotArchiveCompressions: GetSnapshot over the wire in each supported
// compression gives an archive whose test section reads back as "test\n".
func TestSnapshotArchiveCompressions(t *testing.T) {
	s := testServer(t, t.TempDir(), 1)
	c := dialRoot(t, s)
	ctx := testContext(t)
	for _, tc := range snapshotCompressions {
		archive, err := c.GetSnapshot(ctx, tc.compression, wire.SnapshotTest, wire.SnapshotServerConfig)
		mustOK(t, "GetSnapshot "+tc.compression.String(), err)
		zr, err := snapshotzip.Open(archive)
		mustOK(t, "open the archive "+tc.compression.String(), err)
		found := false
		for _, f := range zr.File {
			if f.Method != tc.method {
				t.Errorf("%s: %s has method %d, want %d", tc.compression, f.Name, f.Method, tc.method)
			}
			b := readZipEntry(t, f)
			if f.Name == "test.txt" {
				found = true
				if string(b) != "test\n" {
					t.Errorf("%s: test.txt = %q", tc.compression, b)
				}
			}
		}
		if !found || len(zr.File) != 2 {
			t.Errorf("%s: entries %d, test.txt found %v; want test.txt and server_config.txt", tc.compression, len(zr.File), found)
		}
	}
}
