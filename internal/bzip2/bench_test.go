package bzip2

import (
	"compress/gzip"
	"io"
	"testing"
)

// BenchmarkWriter compresses 1 MiB of log-like text (two blocks at level 9),
// next to compress/gzip at its default level on the same data as a baseline.
func BenchmarkWriter(b *testing.B) {
	data := textLike(1 << 20)
	b.Run("bzip2-9", func(b *testing.B) {
		z := NewWriter(io.Discard, 9)
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for b.Loop() {
			z.Reset(io.Discard)
			z.Write(data)
			if err := z.Close(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("bzip2-1", func(b *testing.B) {
		z := NewWriter(io.Discard, 1)
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for b.Loop() {
			z.Reset(io.Discard)
			z.Write(data)
			if err := z.Close(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("gzip-default", func(b *testing.B) {
		z := gzip.NewWriter(io.Discard)
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for b.Loop() {
			z.Reset(io.Discard)
			z.Write(data)
			if err := z.Close(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkRepeatedPattern is the sort's worst case: 900k bytes of a short
// pattern (no runs for rle1 to remove), where every rotation shares long
// prefixes and prefix doubling needs all its rounds.
func BenchmarkRepeatedPattern(b *testing.B) {
	data := make([]byte, 0, 899900)
	for len(data)+3 <= cap(data) {
		data = append(data, "abc"...)
	}
	z := NewWriter(io.Discard, 9)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		z.Reset(io.Discard)
		z.Write(data)
		if err := z.Close(); err != nil {
			b.Fatal(err)
		}
	}
}
