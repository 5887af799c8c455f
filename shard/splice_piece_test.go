package shard

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

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

// TestSpliceFileEndsInsideARun: a run that passes the end of its file (a bug
// elsewhere: planned bytes are never cut) has its chain cut by a file -> pipe
// splice that comes back short; the bytes it moved still reach the client, after
// every byte before them, then the next splice finds the end of the file and the
// connection closes. What the client reads is the file to its end, exactly, on
// the splice ring and on the connection ring alike.
func TestSpliceFileEndsInsideARun(t *testing.T) {
	const pipeBytes, fileBytes = 64 << 10, 1 << 20
	for _, route := range []string{"splice ring", "connection ring"} {
		t.Run(route, func(t *testing.T) {
			g := startSpliceRig(t, Config{ShardCount: 1, PipeSizeBytes: pipeBytes, SpliceRing: route == "splice ring"}, fileBytes)
			c := dial(t, g.rt)
			run := spliceRun{fileBytes - 3*pipeBytes - 1000, 8 * pipeBytes} // ends 5 pipes' worth past the file
			if _, err := c.conn.Write(fileRunsRequest(1, spliceModeWait, time.Minute, run)); err != nil {
				t.Fatal(err)
			}
			want := make([]byte, 256+16, 256+16+fileBytes-run.offset)
			fileRunsHead(want, 1, int(run.length))
			want = append(want, g.file.data[run.offset:]...)
			c.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			got, err := io.ReadAll(c.conn)
			if err != nil {
				t.Fatalf("read %d bytes, then %v; want the end of the stream", len(got), err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("read %d bytes, want %d: the head and the file from %d to its end", len(got), len(want), run.offset)
			}
			g.closedCount(1)
			g.settled()
			if n := g.spliceRings(); (n == 1) != (route == "splice ring") {
				t.Fatalf("%d splice rings on the %s", n, route)
			}
		})
	}
}
