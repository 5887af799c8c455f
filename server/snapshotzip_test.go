package server

import (
	"archive/zip"
	"bytes"
	"compress/bzip2"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"
	"github.com/ulikunitz/xz/lzma"

	"github.com/iggy-shard/iggy-shard/wire"
)

// openSnapshotZip opens an archive with decompressors for every method the
// server writes, built from the libraries' readers, not from the server's code.
func openSnapshotZip(t *testing.T, archive []byte) *zip.Reader {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(archive), int64(len(archive)))
	if err != nil {
		t.Fatalf("zip: %v", err)
	}
	zr.RegisterDecompressor(zipMethodZstd, func(r io.Reader) io.ReadCloser {
		d, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1))
		if err != nil {
			return errReadCloser{err}
		}
		return d.IOReadCloser()
	})
	zr.RegisterDecompressor(zipMethodXz, func(r io.Reader) io.ReadCloser {
		d, err := xz.NewReader(r)
		if err != nil {
			return errReadCloser{err}
		}
		return io.NopCloser(d)
	})
	zr.RegisterDecompressor(zipMethodLZMA, readZipLZMA)
	zr.RegisterDecompressor(zipMethodBzip2, func(r io.Reader) io.ReadCloser {
		return io.NopCloser(bzip2.NewReader(r))
	})
	return zr
}

// readZipLZMA reads a zip LZMA entry (APPNOTE.TXT 5.8) by turning its 9-byte
// header into the classic .lzma header of unknown size.
func readZipLZMA(r io.Reader) io.ReadCloser {
	var head [9]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return errReadCloser{err}
	}
	if binary.LittleEndian.Uint16(head[2:]) != 5 {
		return errReadCloser{fmt.Errorf("lzma properties size %d, want 5", binary.LittleEndian.Uint16(head[2:]))}
	}
	classic := make([]byte, 0, 13)
	classic = append(classic, head[4:9]...)
	classic = binary.LittleEndian.AppendUint64(classic, ^uint64(0))
	d, err := lzma.NewReader(io.MultiReader(bytes.NewReader(classic), r))
	if err != nil {
		return errReadCloser{err}
	}
	return io.NopCloser(d)
}

type errReadCloser struct{ err error }

func (e errReadCloser) Read([]byte) (int, error) { return 0, e.err }
func (e errReadCloser) Close() error             { return nil }

var snapshotCompressions = []struct {
	compression wire.SnapshotCompression
	method      uint16
}{
	{wire.SnapshotStored, zip.Store},
	{wire.SnapshotDeflated, zip.Deflate},
	{wire.SnapshotBzip2, zipMethodBzip2},
	{wire.SnapshotZstd, zipMethodZstd},
	{wire.SnapshotLzma, zipMethodLZMA},
	{wire.SnapshotXz, zipMethodXz},
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
	for _, tc := range snapshotCompressions {
		t.Run(tc.compression.String(), func(t *testing.T) {
			method, flags, err := snapshotZipMethod(tc.compression)
			if err != nil || method != tc.method {
				t.Fatalf("snapshotZipMethod(%s) = %d, %v; want %d", tc.compression, method, err, tc.method)
			}
			var buf bytes.Buffer
			zw := zip.NewWriter(&buf)
			registerSnapshotCompressors(zw)
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
			zr := openSnapshotZip(t, buf.Bytes())
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
		if _, _, err := snapshotZipMethod(unknown); !errors.Is(err, wire.ErrInvalidCommand) {
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

// TestSnapshotArchiveCompressions: GetSnapshot over the wire in each supported
// compression gives an archive whose test section reads back as "test\n".
func TestSnapshotArchiveCompressions(t *testing.T) {
	s := testServer(t, t.TempDir(), 1)
	c := dialRoot(t, s)
	ctx := testContext(t)
	for _, tc := range snapshotCompressions {
		archive, err := c.GetSnapshot(ctx, tc.compression, wire.SnapshotTest, wire.SnapshotServerConfig)
		mustOK(t, "GetSnapshot "+tc.compression.String(), err)
		zr := openSnapshotZip(t, archive)
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
