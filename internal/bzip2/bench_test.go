package bzip2

import (
	"compress/gzip"
	"testing"
)

// BenchmarkWriter compresses 1 MiB of log-like text (two blocks at level 9),
// next to compress/gzip at its default level on the same data as a baseline.
func BenchmarkWriter(b *testing.B) {
	data := textLike(1 << 20)
	b.Run("bzip2-9", func(b *testing.B) {
		benchmarkBzip2(b, data, 9)
	})
	b.Run("bzip2-1", func(b *testing.B) {
		benchmarkBzip2(b, data, 1)
	})
	b.Run("gzip-default", func(b *testing.B) {
		var out countingWriter
		z := gzip.NewWriter(&out)
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for b.Loop() {
			out = 0
			z.Reset(&out)
			z.Write(data)
			if err := z.Close(); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(out)/float64(len(data)), "ratio")
	})
}

// benchmarkBzip2 compresses data with one Writer, reset between runs as a
// caller compressing many streams would, and reports the compressed size over
// the input size.
func benchmarkBzip2(b *testing.B, data []byte, level int) {
	var out countingWriter
	z := NewWriter(&out, level)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		out = 0
		z.Reset(&out)
		z.Write(data)
		if err := z.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(out)/float64(len(data)), "ratio")
}

// countingWriter counts the bytes written to it.
type countingWriter int

func (c *countingWriter) Write(p []byte) (int, error) {
	*c += countingWriter(len(p))
	return len(p), nil
}

// BenchmarkRepeatedPattern is the sort's worst case: 900k bytes of a short
// pattern (no runs for rle1 to remove), where every rotation shares long
// prefixes and prefix doubling needs all its rounds.
func BenchmarkRepeatedPattern(b *testing.B) {
	data := make([]byte, 0, 899900)
	for len(data)+3 <= cap(data) {
		data = append(data, "abc"...)
	}
	benchmarkBzip2(b, data, 9)
}

// BenchmarkSmallStream is the snapshot case: a new Writer per stream of a few
// kilobytes, so the per-stream setup counts.
func BenchmarkSmallStream(b *testing.B) {
	data := textLike(4 << 10)
	b.Run("bzip2-9", func(b *testing.B) {
		var out countingWriter
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for b.Loop() {
			out = 0
			z := NewWriter(&out, 9)
			z.Write(data)
			if err := z.Close(); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(out)/float64(len(data)), "ratio")
	})
	b.Run("gzip-default", func(b *testing.B) {
		var out countingWriter
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for b.Loop() {
			out = 0
			z := gzip.NewWriter(&out)
			z.Write(data)
			if err := z.Close(); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(out)/float64(len(data)), "ratio")
	})
}
