package procstats

import (
	"bytes"
	"io/fs"
	"os"
	"strconv"
	"testing"
	"testing/fstest"
	"time"
)

// A held /proc file read again gives the kernel's current text, not the text
// of its first read, through the same open file: /proc/self/io's rchar counts
// the bytes this process has read, the first read's among them.
func TestHeldFileReadsProcAnew(t *testing.T) {
	proc := os.DirFS("/proc")
	h := heldFile{name: "self/io"}
	defer h.close()
	rchar := func() uint64 {
		text, err := h.read(proc, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		for line := range bytes.Lines(text) {
			if v, ok := bytes.CutPrefix(line, []byte("rchar: ")); ok {
				n, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 10, 64)
				if err != nil {
					t.Fatal(err)
				}
				return n
			}
		}
		t.Fatalf("no rchar in %q", text)
		return 0
	}
	first := rchar()
	held := h.file
	second := rchar()
	if h.file != held {
		t.Fatal("the second read opened the file again")
	}
	if second <= first {
		t.Fatalf("rchar %d then %d: the second read gave the first's text", first, second)
	}
}

// A held file longer than its buffer is read whole, up to fileMaxBytes, and
// its buffer is kept: the next reads of the same length do not allocate.
func TestHeldFileGrowsToTheText(t *testing.T) {
	long := bytes.Repeat([]byte("cpu0 1 2 3 4\n"), 1000) // 13,000 bytes, past the first buffer
	tree := fstest.MapFS{"stat": {Data: long}, "huge": {Data: bytes.Repeat([]byte("x"), 3*fileMaxBytes)}}
	h := heldFile{name: "stat"}
	now := time.Unix(1_764_900_000, 0)
	if text, err := h.read(tree, now); err != nil || !bytes.Equal(text, long) {
		t.Fatalf("read %d bytes, %v; want the %d of the file", len(text), err, len(long))
	}
	if n := testing.AllocsPerRun(20, func() { h.read(tree, now) }); n != 0 {
		t.Errorf("a read once the buffer fits: %v allocations, want 0", n)
	}
	huge := heldFile{name: "huge"}
	if text, err := huge.read(tree, now); err != nil || len(text) != fileMaxBytes {
		t.Fatalf("read %d bytes of a %d-byte file, %v; want the bound %d", len(text), 3*fileMaxBytes, err, fileMaxBytes)
	}
}

// A held file whose read fails is opened again at the next read; one that
// cannot be opened is tried again only after reopenInterval (or when the
// clock has gone back).
func TestHeldFileReopens(t *testing.T) {
	tree := fstest.MapFS{"meminfo": {Data: []byte("one")}}
	live := liveFS{tree}
	h := heldFile{name: "meminfo"}
	now := time.Unix(1_764_900_000, 0)
	read := func(when time.Time) string {
		text, err := h.read(live, when)
		if err != nil {
			return "error"
		}
		return string(text)
	}
	if got := read(now); got != "one" {
		t.Fatalf("first read: %q", got)
	}
	delete(tree, "meminfo")
	if got := read(now); got != "error" || h.file != nil {
		t.Fatalf("read of a vanished file: %q, held %v; want an error and the file closed", got, h.file)
	}
	tree["meminfo"] = &fstest.MapFile{Data: []byte("two")}
	if got := read(now); got != "two" {
		t.Fatalf("the read after a failed read: %q, want the file opened again", got)
	}

	delete(tree, "meminfo")
	read(now) // the read fails and closes the file
	if got := read(now); got != "error" {
		t.Fatalf("open of a missing file: %q", got)
	}
	tree["meminfo"] = &fstest.MapFile{Data: []byte("three")}
	if got := read(now.Add(reopenInterval - time.Millisecond)); got != "error" {
		t.Fatalf("within reopenInterval of a failed open: %q, want the open not tried", got)
	}
	if got := read(now.Add(reopenInterval)); got != "three" {
		t.Fatalf("reopenInterval after a failed open: %q, want the file", got)
	}
	delete(tree, "meminfo")
	read(now)
	read(now)
	tree["meminfo"] = &fstest.MapFile{Data: []byte("four")}
	if got := read(now.Add(-time.Second)); got != "four" {
		t.Fatalf("the clock gone back: %q, want the open tried", got)
	}
}

// onlyReader is a file system whose files have no ReadAt.
type onlyReader struct{ fstest.MapFS }

func (o onlyReader) Open(name string) (fs.File, error) {
	f, err := o.MapFS.Open(name)
	return struct{ fs.File }{f}, err
}

// A file system without io.ReaderAt is read by opening its file at each read.
func TestHeldFileWithoutReaderAt(t *testing.T) {
	tree := fstest.MapFS{"io": {Data: bytes.Repeat([]byte("y"), 5000)}}
	h := heldFile{name: "io"}
	now := time.Unix(1_764_900_000, 0)
	for _, want := range []int{5000, 7} {
		tree["io"] = &fstest.MapFile{Data: bytes.Repeat([]byte("z"), want)}
		if text, err := h.read(onlyReader{tree}, now); err != nil || len(text) != want || h.file != nil {
			t.Fatalf("read %d bytes, %v, held %v; want %d and nothing held", len(text), err, h.file, want)
		}
	}
}

// A sample of the host's /proc and cgroup tree, confined as the server's
// sampler is, allocates nothing once its buffers fit (within reopenInterval:
// a file this host lacks is tried again after it, which allocates).
func TestSampleAllocatesNothing(t *testing.T) {
	s := NewSampler(os.DirFS("/proc"), "self", os.Getpagesize()).Confined([]int{0}, os.DirFS("/sys/fs/cgroup"))
	defer s.Close()
	now := time.Now()
	runs := int(reopenInterval/MinimumCPUInterval) - 2
	if n := testing.AllocsPerRun(runs, func() {
		now = now.Add(MinimumCPUInterval) // every sample measures CPU
		s.Sample(now)
	}); n != 0 {
		t.Errorf("a sample allocates %v times, want 0", n)
	}
}
