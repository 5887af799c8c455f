package bzip2

import (
	"bytes"
	stdbzip2 "compress/bzip2"
	"fmt"
	"io"
	"math/rand/v2"
	"os/exec"
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

// noRuns is random bytes with no two neighbours equal, so rle1 leaves it as it
// is and block boundaries fall at known input offsets.
func noRuns(seed uint64, n int) []byte {
	p := randomBytes(seed, n)
	for i := 1; i < len(p); i++ {
		if p[i] == p[i-1] {
			p[i]++
		}
	}
	return p
}

// TestBlockBoundaries: inputs just under, at and over a block's capacity, and
// runs straddling it, come back whole at levels 1 and 9 (blocks of 99981 and
// 899981 rle1 bytes).
func TestBlockBoundaries(t *testing.T) {
	for _, level := range []int{1, 9} {
		capacity := level*blockSizeUnitBytes - blockSlackBytes
		// With no runs each byte is a run of one: a block closes when one more
		// 5-byte run might not fit.
		full := capacity - maxRunBytes + 1
		sizes := []int{full - 1, full, full + 1}
		if level == 1 {
			sizes = append(sizes, 2*full+3)
		}
		for _, n := range sizes {
			t.Run(fmt.Sprintf("level %d no runs %d bytes", level, n), func(t *testing.T) {
				checkRoundTrip(t, noRuns(uint64(n), n), level)
			})
		}
		t.Run(fmt.Sprintf("level %d runs across the boundary", level), func(t *testing.T) {
			data := noRuns(3, full-3)
			data = append(data, repeatByte(data[len(data)-1]^0x55, 1000)...)
			data = append(data, noRuns(4, 100)...)
			checkRoundTrip(t, data, level)
		})
	}
	t.Run("level 1 many blocks of mixed runs", func(t *testing.T) {
		rng := rand.New(rand.NewPCG(5, 6))
		var data []byte
		for len(data) < 450000 {
			data = append(data, repeatByte(byte(rng.IntN(4)), 1+rng.IntN(300))...)
		}
		checkRoundTrip(t, data, 1)
	})
}

// TestBlocksWrittenAsTheyFill: a Writer holds at most one block, so a full
// block reaches the underlying writer before Close.
func TestBlocksWrittenAsTheyFill(t *testing.T) {
	var buf bytes.Buffer
	z := NewWriter(&buf, 1)
	if _, err := z.Write(noRuns(1, 150000)); err != nil {
		t.Fatal(err)
	}
	if buf.Len() == 0 {
		t.Fatal("nothing written after 1.5 blocks of input")
	}
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestSmallWritesMatchOneWrite: how the input is cut into Writes does not
// change the stream.
func TestSmallWritesMatchOneWrite(t *testing.T) {
	data := append(textLike(150000), repeatByte('z', 700)...)
	data = append(data, noRuns(2, 100000)...)
	want := compress(t, data, 1)
	rng := rand.New(rand.NewPCG(8, 9))
	var buf bytes.Buffer
	z := NewWriter(&buf, 1)
	for rest := data; len(rest) > 0; {
		n := min(len(rest), rng.IntN(700))
		if k, err := z.Write(rest[:n]); err != nil || k != n {
			t.Fatalf("Write = %d, %v; want %d", k, err, n)
		}
		rest = rest[n:]
	}
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Fatalf("small writes gave %d bytes, one write %d", buf.Len(), len(want))
	}
}

// TestReset: a reset Writer writes the same stream as a new one.
func TestReset(t *testing.T) {
	data := textLike(50000)
	want := compress(t, data, 3)
	var buf bytes.Buffer
	z := NewWriter(io.Discard, 3)
	z.Write(noRuns(1, 120000))
	z.Close()
	z.Reset(&buf)
	z.Write(data)
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Fatal("reset writer's stream differs from a new writer's")
	}
}

func TestInvalidLevel(t *testing.T) {
	for _, level := range []int{-1, 0, 10} {
		var buf bytes.Buffer
		z := NewWriter(&buf, level)
		if _, err := z.Write([]byte("x")); err == nil {
			t.Errorf("level %d: Write succeeded", level)
		}
		if err := z.Close(); err == nil {
			t.Errorf("level %d: Close succeeded", level)
		}
		if buf.Len() != 0 {
			t.Errorf("level %d: wrote %d bytes", level, buf.Len())
		}
	}
}

func TestWriteAfterClose(t *testing.T) {
	z := NewWriter(io.Discard, 9)
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := z.Write([]byte("x")); err != ErrClosed {
		t.Fatalf("Write after Close: %v, want ErrClosed", err)
	}
	if err := z.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

type failingWriter struct{ err error }

func (f failingWriter) Write([]byte) (int, error) { return 0, f.err }

// TestUnderlyingWriterError: the underlying writer's error stops the stream and
// is returned from then on.
func TestUnderlyingWriterError(t *testing.T) {
	fail := fmt.Errorf("disk full")
	z := NewWriter(failingWriter{fail}, 1)
	data := noRuns(1, 250000)
	n, err := z.Write(data)
	if err != fail || n >= len(data) {
		t.Fatalf("Write = %d, %v; want fewer than %d and %v", n, err, len(data), fail)
	}
	if _, err := z.Write(data); err != fail {
		t.Fatalf("second Write: %v, want %v", err, fail)
	}
	if err := z.Close(); err != fail {
		t.Fatalf("Close: %v, want %v", err, fail)
	}
}

// TestCRCGolden: bzip2's CRC is CRC-32/BZIP2, whose check value is 0xFC891918.
func TestCRCGolden(t *testing.T) {
	if got := crcBytes([]byte("123456789")); got != 0xfc891918 {
		t.Fatalf("crc = %#x, want 0xfc891918", got)
	}
	if got := crcBytes(nil); got != 0 {
		t.Fatalf("crc of nothing = %#x, want 0", got)
	}
}

// TestBzip2Tool: the reference implementation's decoder accepts our streams
// (bzip2 -t tests, bzip2 -dc decompresses), and the compression ratio on text
// is logged next to its own.
func TestBzip2Tool(t *testing.T) {
	tool, err := exec.LookPath("bzip2")
	if err != nil {
		t.Skip("no bzip2 command")
	}
	cases := append(roundTripCases[:len(roundTripCases):len(roundTripCases)], struct {
		name string
		data []byte
	}{"level 1 full blocks", append(noRuns(1, 250000), repeatByte('r', 5000)...)})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			level := 9
			if strings.HasPrefix(tc.name, "level 1") {
				level = 1
			}
			stream := compress(t, tc.data, level)
			test := exec.Command(tool, "-t")
			test.Stdin = bytes.NewReader(stream)
			if out, err := test.CombinedOutput(); err != nil {
				t.Fatalf("bzip2 -t: %v: %s", err, out)
			}
			decompress := exec.Command(tool, "-dc")
			decompress.Stdin = bytes.NewReader(stream)
			got, err := decompress.Output()
			if err != nil {
				t.Fatalf("bzip2 -dc: %v", err)
			}
			if !bytes.Equal(got, tc.data) {
				t.Fatalf("bzip2 -dc gave %d bytes, want %d", len(got), len(tc.data))
			}
			if tc.name == "text" {
				reference := exec.Command(tool, "-9", "-c")
				reference.Stdin = bytes.NewReader(tc.data)
				theirs, err := reference.Output()
				if err != nil {
					t.Fatalf("bzip2 -9 -c: %v", err)
				}
				t.Logf("text %d bytes: ours %d (%.3f), bzip2 -9 %d (%.3f)", len(tc.data),
					len(stream), float64(len(stream))/float64(len(tc.data)),
					len(theirs), float64(len(theirs))/float64(len(tc.data)))
			}
		})
	}
}

// TestNoAllocationsOnceWarm: a Writer reused with Reset allocates nothing for
// blocks no larger than those it has already compressed.
func TestNoAllocationsOnceWarm(t *testing.T) {
	data := append(textLike(150000), noRuns(1, 100000)...)
	z := NewWriter(io.Discard, 1)
	compressAll := func() {
		z.Reset(io.Discard)
		z.Write(data)
		if err := z.Close(); err != nil {
			t.Fatal(err)
		}
	}
	compressAll()
	if allocs := testing.AllocsPerRun(3, compressAll); allocs != 0 {
		t.Fatalf("%v allocations per stream once warm, want 0", allocs)
	}
}
