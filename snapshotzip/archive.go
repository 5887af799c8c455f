// Package snapshotzip writes GET_SNAPSHOT's archive: a zip of one text entry per
// section, in any compression the reference server writes (Stored, Deflated,
// Bzip2, Zstd, LZMA, Xz), bounded in size; Open reads such an archive back with
// the libraries' decoders.
package snapshotzip

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"io"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"
	"github.com/ulikunitz/xz/lzma"

	"github.com/iggy-shard/iggy-shard/internal/bzip2"
	"github.com/iggy-shard/iggy-shard/wire"
)

// GetSnapshot entry compressions beyond the standard library's Store and Deflate,
// as the reference server writes them (its zip writer's Bzip2, Zstd, Lzma and
// Xz). Method ids are APPNOTE.TXT 4.4.5's. A method 12 (bzip2) entry is a whole
// .bz2 stream, "BZh" header included (APPNOTE.TXT 5.7); the standard library
// only reads bzip2, so internal/bzip2 writes it.
//
// A method 14 (LZMA) entry is not a .lzma file: it starts with its own 9-byte
// header and ends with an end-of-stream marker, announced by general purpose
// flag bit 1 (APPNOTE.TXT 5.8):
//
//	[sdk major u8][sdk minor u8][props size u16 = 5][lc/lp/pb u8][dict size u32][LZMA data + EOS]
const (
	MethodBzip2 uint16 = 12
	MethodLZMA  uint16 = 14
	MethodZstd  uint16 = 93
	MethodXz    uint16 = 95

	// zipFlagLZMAEndMarker says an LZMA entry ends with an end-of-stream marker.
	zipFlagLZMAEndMarker uint16 = 1 << 1

	// snapshotDictBytes bounds the LZMA and xz dictionaries: sections are command
	// outputs of kilobytes, the libraries' 8 MiB default would only cost memory.
	snapshotDictBytes = 1 << 20

	// snapshotBzip2Level is bzip2's own default (900k blocks). A block's
	// buffers grow with the input, so small sections stay cheap.
	snapshotBzip2Level = 9
)

// Archive is a GetSnapshot archive being written, in memory.
type Archive struct {
	buf           bytes.Buffer
	zw            *zip.Writer
	method, flags uint16
	sizeMaxBytes  int
}

// New starts an archive in compression c that may grow to sizeMaxBytes; an
// unknown compression is an InvalidCommand.
func New(c wire.SnapshotCompression, sizeMaxBytes int) (*Archive, error) {
	method, flags, err := zipMethod(c)
	if err != nil {
		return nil, err
	}
	a := &Archive{method: method, flags: flags, sizeMaxBytes: sizeMaxBytes}
	a.zw = zip.NewWriter(&a.buf)
	registerCompressors(a.zw)
	return a, nil
}

// Add writes an entry; an archive past its size, or an entry that cannot be
// written, is SnapshotFileCompletionFailed, as the reference answers it.
func (a *Archive) Add(name string, text []byte, modified time.Time) error {
	w, err := a.zw.CreateHeader(&zip.FileHeader{Name: name, Method: a.method, Flags: a.flags, Modified: modified})
	if err != nil {
		return wire.ErrSnapshotFileCompletionFailed
	}
	if _, err := w.Write(text); err != nil {
		return wire.ErrSnapshotFileCompletionFailed
	}
	if a.buf.Len() > a.sizeMaxBytes {
		return wire.ErrSnapshotFileCompletionFailed
	}
	return nil
}

// AppendTo finishes the archive and appends it to dst.
func (a *Archive) AppendTo(dst []byte) ([]byte, error) {
	if err := a.zw.Close(); err != nil || a.buf.Len() > a.sizeMaxBytes {
		return dst, wire.ErrSnapshotFileCompletionFailed
	}
	return append(dst, a.buf.Bytes()...), nil
}

// zipMethod maps a GetSnapshot compression to its zip method and the
// general purpose flags its entries carry. An unknown compression is an
// InvalidCommand, as the request decoder already answers it.
func zipMethod(c wire.SnapshotCompression) (method, flags uint16, err error) {
	switch c {
	case wire.SnapshotStored:
		return zip.Store, 0, nil
	case wire.SnapshotDeflated:
		return zip.Deflate, 0, nil
	case wire.SnapshotBzip2:
		return MethodBzip2, 0, nil
	case wire.SnapshotZstd:
		return MethodZstd, 0, nil
	case wire.SnapshotLzma:
		return MethodLZMA, zipFlagLZMAEndMarker, nil
	case wire.SnapshotXz:
		return MethodXz, 0, nil
	default:
		return 0, 0, wire.ErrInvalidCommand
	}
}

// registerCompressors registers on zw (not globally) the compressors the
// standard library lacks.
func registerCompressors(zw *zip.Writer) {
	// The bzip2 Writer writes nothing before its first full block or Close,
	// so unlike xz and lzma it needs no lazyCompressor.
	zw.RegisterCompressor(MethodBzip2, func(w io.Writer) (io.WriteCloser, error) {
		return bzip2.NewWriter(w, snapshotBzip2Level), nil
	})
	zw.RegisterCompressor(MethodZstd, func(w io.Writer) (io.WriteCloser, error) {
		return zstd.NewWriter(w, zstd.WithEncoderConcurrency(1))
	})
	zw.RegisterCompressor(MethodXz, func(w io.Writer) (io.WriteCloser, error) {
		return &lazyCompressor{w: w, open: func(w io.Writer) (io.WriteCloser, error) {
			return xz.WriterConfig{DictCap: snapshotDictBytes}.NewWriter(w)
		}}, nil
	})
	zw.RegisterCompressor(MethodLZMA, func(w io.Writer) (io.WriteCloser, error) {
		return &lazyCompressor{w: w, open: newZipLZMAWriter}, nil
	})
}

// lazyCompressor opens its compressor at the first Write or at Close. The xz and
// lzma writers write their stream header as they are made, and archive/zip makes
// an entry's compressor before it writes the entry's local header: opened
// eagerly, the stream header would land in front of the local header.
type lazyCompressor struct {
	w    io.Writer
	open func(io.Writer) (io.WriteCloser, error)
	comp io.WriteCloser
}

func (l *lazyCompressor) start() error {
	if l.comp != nil {
		return nil
	}
	comp, err := l.open(l.w)
	if err != nil {
		return err
	}
	l.comp = comp
	return nil
}

func (l *lazyCompressor) Write(p []byte) (int, error) {
	if err := l.start(); err != nil {
		return 0, err
	}
	return l.comp.Write(p)
}

func (l *lazyCompressor) Close() error {
	if err := l.start(); err != nil {
		return err
	}
	return l.comp.Close()
}

// lzmaClassicHeaderBytes is the .lzma header the lzma package writes first:
// properties (1), dictionary size (4), uncompressed size (8).
const lzmaClassicHeaderBytes = 13

// newZipLZMAWriter writes a zip LZMA entry: the zip header, then the lzma
// package's classic stream without its 13-byte header.
func newZipLZMAWriter(w io.Writer) (io.WriteCloser, error) {
	cfg := lzma.WriterConfig{DictCap: snapshotDictBytes, EOSMarker: true}
	props := lzma.Properties{LC: 3, LP: 0, PB: 2}
	cfg.Properties = &props
	var head [9]byte
	head[0], head[1] = 16, 2 // the LZMA SDK version the format follows; readers ignore it
	binary.LittleEndian.PutUint16(head[2:], 5)
	head[4] = props.Code()
	binary.LittleEndian.PutUint32(head[5:], snapshotDictBytes)
	if _, err := w.Write(head[:]); err != nil {
		return nil, err
	}
	return cfg.NewWriter(&skipWriter{w: w, skip: lzmaClassicHeaderBytes})
}

// skipWriter drops the first skip bytes written through it.
type skipWriter struct {
	w    io.Writer
	skip int
}

func (s *skipWriter) Write(p []byte) (int, error) {
	n := len(p)
	if s.skip > 0 {
		dropped := min(s.skip, len(p))
		s.skip -= dropped
		p = p[dropped:]
	}
	if len(p) == 0 {
		return n, nil
	}
	if _, err := s.w.Write(p); err != nil {
		return 0, err
	}
	return n, nil
}
