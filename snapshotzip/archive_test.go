package snapshotzip

import (
	"archive/zip"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

var compressions = []struct {
	compression wire.SnapshotCompression
	method      uint16
}{
	{wire.SnapshotStored, zip.Store},
	{wire.SnapshotDeflated, zip.Deflate},
	{wire.SnapshotBzip2, MethodBzip2},
	{wire.SnapshotZstd, MethodZstd},
	{wire.SnapshotLzma, MethodLZMA},
	{wire.SnapshotXz, MethodXz},
}

// TestSnapshotCompressionsRoundTrip: every supported compression writes entries
// that archive/zip, with the libraries' decompressors, reads back byte for byte
// (archive/zip checks each entry's CRC-32 at its end), for an empty entry, a
// small one and one larger than the compressors' buffers.
func TestSnapshotCompressionsRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	large := make([]byte, 0, 600<<10)
	for len(large) < 600<<10 {
		// Text with repeats and noise, like a process list.
		large = fmt.Appendf(large, "pid %d cpu %d.%d %s\n", rng.IntN(1<<20), rng.IntN(100), rng.IntN(10), []string{"iggy-shard", "sshd", "kworker/0:1"}[rng.IntN(3)])
	}
	entries := [][]byte{{}, []byte("test\n"), large}
	for _, tc := range compressions {
		t.Run(tc.compression.String(), func(t *testing.T) {
			method, flags, err := zipMethod(tc.compression)
			if err != nil || method != tc.method {
				t.Fatalf("zipMethod(%s) = %d, %v; want %d", tc.compression, method, err, tc.method)
			}
			var buf bytes.Buffer
			zw := zip.NewWriter(&buf)
			registerCompressors(zw)
			for i, e := range entries {
				w, err := zw.CreateHeader(&zip.FileHeader{Name: fmt.Sprintf("%d.txt", i), Method: method, Flags: flags})
				if err != nil {
					t.Fatalf("CreateHeader: %v", err)
				}
				if _, err := w.Write(e); err != nil {
					t.Fatalf("Write: %v", err)
				}
			}
			if err := zw.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			zr, err := Open(buf.Bytes())
			if err != nil {
				t.Fatalf("zip: %v", err)
			}
			if len(zr.File) != len(entries) {
				t.Fatalf("%d entries, want %d", len(zr.File), len(entries))
			}
			for i, f := range zr.File {
				if f.Method != tc.method {
					t.Errorf("entry %d method %d, want %d", i, f.Method, tc.method)
				}
				got := readZipEntry(t, f)
				if !bytes.Equal(got, entries[i]) {
					t.Errorf("entry %d: %d bytes back, want %d", i, len(got), len(entries[i]))
				}
			}
			if tc.method != zip.Store && tc.method != zip.Deflate && zr.File[2].CompressedSize64 >= uint64(len(large)) {
				t.Errorf("large entry not compressed: %d bytes of %d", zr.File[2].CompressedSize64, len(large))
			}
		})
	}
	for _, unknown := range []wire.SnapshotCompression{0, wire.SnapshotXz + 1, 255} {
		if _, _, err := zipMethod(unknown); !errors.Is(err, wire.ErrInvalidCommand) {
			t.Errorf("%s: %v, want InvalidCommand", unknown, err)
		}
	}
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
