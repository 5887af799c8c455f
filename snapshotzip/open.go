package snapshotzip

import (
	"archive/zip"
	"bytes"
	"compress/bzip2"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"
	"github.com/ulikunitz/xz/lzma"
)

// Open reads an archive back, with a decompressor for every method Archive
// writes, each built from the libraries' readers, not from the writer's code: for
// the tools and tests that check what a server answered.
func Open(archive []byte) (*zip.Reader, error) {
	zr, err := zip.NewReader(bytes.NewReader(archive), int64(len(archive)))
	if err != nil {
		return nil, err
	}
	zr.RegisterDecompressor(MethodZstd, func(r io.Reader) io.ReadCloser {
		d, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1))
		if err != nil {
			return errReadCloser{err}
		}
		return d.IOReadCloser()
	})
	zr.RegisterDecompressor(MethodXz, func(r io.Reader) io.ReadCloser {
		d, err := xz.NewReader(r)
		if err != nil {
			return errReadCloser{err}
		}
		return io.NopCloser(d)
	})
	zr.RegisterDecompressor(MethodLZMA, readZipLZMA)
	zr.RegisterDecompressor(MethodBzip2, func(r io.Reader) io.ReadCloser {
		return io.NopCloser(bzip2.NewReader(r))
	})
	return zr, nil
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
