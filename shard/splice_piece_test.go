package shard

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/iggy-shard/iggy-shard/segment"
)

// TestSplicePieceFitsAnEmptyPipe: every file -> pipe piece of a reply, from any
// offset inside a page, moves whole into an empty pipe (a short one breaks the
// chain), and the pieces cover the runs. The first splice shows why: a pipe's
// capacity in bytes from inside a page comes back short.
func TestSplicePieceFitsAnEmptyPipe(t *testing.T) {
	pipe, err := makePipe(16 * int(pageBytes))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closePipe(pipe) })
	path := filepath.Join(t.TempDir(), "segment")
	if err := os.WriteFile(path, make([]byte, 4*pipe.CapacityBytes), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	fd, null := int(f.Fd()), devNull(t)
	drain := func() {
		t.Helper()
		for {
			queued, err := unix.IoctlGetInt(pipe.ReadFd, unix.TIOCINQ)
			if err != nil {
				t.Fatal(err)
			}
			if queued == 0 {
				return
			}
			if _, err := unix.Splice(pipe.ReadFd, nil, null, nil, queued, 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	off := int64(100)
	if n, err := unix.Splice(fd, &off, pipe.WriteFd, nil, pipe.CapacityBytes, 0); err != nil || n == int64(pipe.CapacityBytes) {
		t.Fatalf("a pipe's capacity from inside a page: moved %d (%v); the premise is that it comes back short", n, err)
	}
	drain()
	for _, start := range []int64{0, 1, 100, pageBytes - 1, pageBytes, 3*pageBytes + 7} {
		length := int64(3*pipe.CapacityBytes) - start%pageBytes
		r := &splicedReply{runs: []segment.Run{{FD: fd, Offset: start, Length: length}}, pipe: pipe}
		covered := int64(0)
		for run, runMoved := 0, int64(0); run < len(r.runs); run, runMoved = nextPiece(r, run, runMoved) {
			want := pieceBytes(r, run, runMoved)
			off := start + runMoved
			n, err := unix.Splice(fd, &off, pipe.WriteFd, nil, want, 0)
			if err != nil || n != int64(want) {
				t.Fatalf("start %d, piece at %d: moved %d of %d (%v)", start, runMoved, n, want, err)
			}
			covered += n
			drain()
		}
		if covered != length {
			t.Fatalf("start %d: pieces cover %d of %d bytes", start, covered, length)
		}
	}
}

func devNull(t *testing.T) int {
	t.Helper()
	f, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return int(f.Fd())
}
