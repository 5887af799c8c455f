package procstats

import (
	"bytes"
	"path"
	"strings"
	"testing"
	"testing/fstest"
)

// The walk up from a process's cgroup stops after cgroupDepthMax levels: a limit
// further up than that is not seen, one within it is.
func TestCgroupWalkBounded(t *testing.T) {
	host := Memory{TotalBytes: 10_000, AvailableBytes: 7_000}
	deep := strings.Repeat("d/", cgroupDepthMax+6) + "leaf"
	limitAt := func(dir string) fstest.MapFS {
		return fstest.MapFS{path.Join(dir, "memory.max"): &fstest.MapFile{Data: []byte("1000\n")}}
	}
	if _, ok := CgroupMemory(limitAt("."), []byte("0::/"+deep+"\n"), host); ok {
		t.Errorf("a limit %d levels up was read, past the walk's bound of %d", cgroupDepthMax+7, cgroupDepthMax)
	}
	within := strings.TrimSuffix(strings.Repeat("d/", 8), "/")
	got, ok := CgroupMemory(limitAt(within), []byte("0::/"+deep+"\n"), host)
	if !ok || got.TotalBytes != 1000 {
		t.Errorf("a limit within the walk's bound: got %+v, %t; want a total of 1000", got, ok)
	}
}

// A sample reads at most fileMaxBytes of a file.
func TestReadBoundedCapsAFile(t *testing.T) {
	big := bytes.Repeat([]byte("x"), 3*fileMaxBytes)
	text, err := readBounded(fstest.MapFS{"stat": &fstest.MapFile{Data: big}}, "stat")
	if err != nil {
		t.Fatal(err)
	}
	if len(text) != fileMaxBytes {
		t.Fatalf("read %d bytes of a %d-byte file, want the bound %d", len(text), len(big), fileMaxBytes)
	}
}
