package bzip2

import (
	"bytes"
	stdbzip2 "compress/bzip2"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
)

// compress returns data compressed at level in one Write.
func compress(t testing.TB, data []byte, level int) []byte {
	t.Helper()
	var buf bytes.Buffer
	z := NewWriter(&buf, level)
	if _, err := z.Write(data); err != nil {
		t.Fatalf("Write: %v", err)
	}
	if err := z.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	return buf.Bytes()
}

// decompress reads a stream back with the standard library's reader, which
// checks every block CRC and the stream CRC.
func decompress(t testing.TB, stream []byte) []byte {
	t.Helper()
	got, err := io.ReadAll(stdbzip2.NewReader(bytes.NewReader(stream)))
	if err != nil {
		t.Fatalf("compress/bzip2: %v", err)
	}
	return got
}

func checkRoundTrip(t testing.TB, data []byte, level int) []byte {
	t.Helper()
	stream := compress(t, data, level)
	if got := decompress(t, stream); !bytes.Equal(got, data) {
		t.Fatalf("level %d: %d bytes back differ from the %d written (first difference at %d)", level, len(got), len(data), firstDifference(got, data))
	}
	return stream
}

func firstDifference(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func repeatByte(b byte, n int) []byte { return bytes.Repeat([]byte{b}, n) }

func randomBytes(seed uint64, n int) []byte {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(rng.Uint32())
	}
	return p
}

// textLike is log-like text: repeated words and numbers with noise, the kind
// of data a snapshot holds.
func textLike(n int) []byte {
	rng := rand.New(rand.NewPCG(7, 11))
	words := strings.Fields("the quick brown fox jumps over lazy dog partition segment offset stream topic consumer group message shard replica commit index error warn info debug")
	var b []byte
	for len(b) < n {
		b = fmt.Appendf(b, "%d %s %s level=%s offset=%d\n", 1700000000+len(b)/40,
			words[rng.IntN(len(words))], words[rng.IntN(len(words))],
			[]string{"info", "warn", "debug"}[rng.IntN(3)], rng.IntN(1<<20))
	}
	return b[:n]
}

func allByteValues() []byte {
	p := make([]byte, 256)
	for i := range p {
		p[i] = byte(i)
	}
	return p
}

var roundTripCases = []struct {
	name string
	data []byte
}{
	{"empty", nil},
	{"one byte", []byte{'x'}},
	{"all 256 byte values", allByteValues()},
	{"run of 3", repeatByte('a', 3)},
	{"run of 4", repeatByte('a', 4)},
	{"run of 5", repeatByte('a', 5)},
	{"run of 255", repeatByte('a', 255)},
	{"run of 256", repeatByte('a', 256)},
	{"run of 1000", repeatByte('a', 1000)},
	{"run of 101 whose count byte is the run byte", repeatByte('a', 101)},
	{"runs of every length", runsOfEveryLength()},
	{"900k identical bytes", repeatByte(0, 900000)},
	{"repeated short pattern", bytes.Repeat([]byte("abc"), 300000)},
	{"two alternating bytes", bytes.Repeat([]byte("ab"), 400000)},
	{"random", randomBytes(1, 300000)},
	{"text", textLike(500000)},
}

func runsOfEveryLength() []byte {
	var b []byte
	for n := 1; n <= 600; n++ {
		b = append(b, repeatByte(byte(n), n)...)
	}
	return b
}

func TestRoundTrip(t *testing.T) {
	for _, tc := range roundTripCases {
		t.Run(tc.name, func(t *testing.T) {
			for _, level := range []int{1, 9} {
				checkRoundTrip(t, tc.data, level)
			}
		})
	}
}

// TestEmptyStream: no input is a header and the end of stream, as bzip2 writes.
func TestEmptyStream(t *testing.T) {
	got := compress(t, nil, 9)
	want := []byte{'B', 'Z', 'h', '9', 0x17, 0x72, 0x45, 0x38, 0x50, 0x90, 0, 0, 0, 0}
	if !bytes.Equal(got, want) {
		t.Fatalf("empty stream % x, want % x", got, want)
	}
}
