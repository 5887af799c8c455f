package segment

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// openFDs counts this process's open descriptors.
func openFDs(t testing.TB) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	return len(entries) - 1 // ReadDir's own
}

// submitWait submits r on st and polls until its Done has run.
func submitWait(t testing.TB, st Storage, r *Request) {
	t.Helper()
	done := false
	r.Done = func(*Request) { done = true }
	st.Submit(r)
	for !done {
		if st.Poll(true) == 0 && !done {
			t.Fatal("storage lost a request")
		}
	}
}

func readWhole(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A request in flight pins its file: a file closed to make room under it, its
// descriptor number taken by the next file opened, would take the request's write.
// Here every other file opened meanwhile must be evicted instead, and the write
// lands where it was sent.
func TestFileCacheNeverClosesAFileUnderARequest(t *testing.T) {
	dir := t.TempDir()
	inner, err := NewOSStorage(dir)
	if err != nil {
		t.Fatal(err)
	}
	cache := NewFileCache(2)
	st := cache.Storage(inner)
	a, _, err := st.Open("a", true, 0)
	if err != nil {
		t.Fatal(err)
	}
	done := false
	st.Submit(&Request{Op: OpWrite, File: a, Data: []byte("for a"), Done: func(*Request) { done = true }})
	var others []File
	for _, name := range []string{"b", "c", "d", "e"} {
		f, _, err := st.Open(name, true, 0)
		if err != nil {
			t.Fatal(err)
		}
		others = append(others, f)
	}
	for !done {
		if st.Poll(true) == 0 && !done {
			t.Fatal("the write was lost")
		}
	}
	if got := readWhole(t, filepath.Join(dir, "a")); string(got) != "for a" {
		t.Fatalf("a holds %q", got)
	}
	for _, name := range []string{"b", "c", "d", "e"} {
		if got := readWhole(t, filepath.Join(dir, name)); len(got) != 0 {
			t.Fatalf("%s holds %q: the write went to another file", name, got)
		}
	}
	if s := cache.Stats(); s.Open > 2 || s.OpenPeak > 2 {
		t.Fatalf("%+v: more than 2 files open", s)
	}
	// The evicted files open again for their next request.
	for i, f := range others {
		submitWait(t, st, &Request{Op: OpWrite, File: f, Data: []byte{byte('b' + i)}})
	}
	for i, name := range []string{"b", "c", "d", "e"} {
		if got := readWhole(t, filepath.Join(dir, name)); !bytes.Equal(got, []byte{byte('b' + i)}) {
			t.Fatalf("%s holds %q", name, got)
		}
	}
	if s := cache.Stats(); s.Reopens == 0 || s.OpenPeak > 2 || s.OverBudget != 0 {
		t.Fatalf("%+v: want reopens, at most 2 open, none over budget", s)
	}
}

// Many logs of many segments over a cache of a few descriptors: every append and
// read works, and the process never holds more descriptors than the budget (counted
// in /proc/self/fd, not by the cache).
func TestFileCacheHoldsTheBudgetUnderManyLogs(t *testing.T) {
	const logs, budget = 40, 6
	root := t.TempDir()
	base := openFDs(t)
	cache := NewFileCache(budget)
	peak := 0
	check := func() {
		if n := openFDs(t) - base; n > peak {
			peak = n
		}
	}
	cfg := Config{PartitionID: testPartition, SegmentSizeBytes: 2048, EnforceFsync: true}
	opened := make([]*Log, logs)
	next := make([]uint64, logs)
	for i := range opened {
		inner, err := NewOSStorage(filepath.Join(root, fmt.Sprint(i)))
		if err != nil {
			t.Fatal(err)
		}
		l, _, err := Open(cache.Storage(inner), cfg, Hooks{})
		if err != nil {
			t.Fatal(err)
		}
		opened[i] = l
		check()
	}
	for round := 0; round < 8; round++ {
		for i, l := range opened {
			b := makeBatch(t, next[i], 1_000+uint64(round), 3, 200, fmt.Sprintf("log%d", i))
			if err := l.Append(b); err != nil {
				t.Fatalf("log %d round %d: %v", i, round, err)
			}
			next[i] += 3
			l.WaitIdle()
			if err := l.StoreConsumerOffset(Consumer, uint32(round%3), next[i]-1); err != nil {
				t.Fatal(err)
			}
			l.WaitIdle()
			check()
		}
	}
	for i, l := range opened {
		var p Polled
		if err := l.Read(Query{Kind: PollOffset, Value: 0, Count: 1000}, &p); err != nil {
			t.Fatalf("log %d: %v", i, err)
		}
		if msgs := decodePolled(t, &p); len(msgs) != int(next[i]) {
			t.Fatalf("log %d: read %d messages, want %d", i, len(msgs), next[i])
		}
		if l.SegmentCount() < 2 {
			t.Fatalf("log %d: %d segments: the test wants sealed ones", i, l.SegmentCount())
		}
		check()
	}
	for _, l := range opened {
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	s := cache.Stats()
	if peak > budget || s.OpenPeak > budget || s.OverBudget != 0 {
		t.Fatalf("descriptors at peak %d (cache: %+v), budget %d", peak, s, budget)
	}
	if s.Open != 0 {
		t.Fatalf("%d files left open after every log closed", s.Open)
	}
	if s.Evictions == 0 || s.Reopens == 0 {
		t.Fatalf("%+v: the budget never bit", s)
	}
	t.Logf("%d logs, budget %d: %+v, peak descriptors %d", logs, budget, s, peak)
}

// When every open file is pinned by a request, one more opens past the budget and
// closes again once its requests are done.
func TestFileCacheOpensPastTheBudgetOnlyWhileEveryFileIsPinned(t *testing.T) {
	disk := NewSimDisk(1)
	cache := NewFileCache(2)
	st := cache.Storage(disk)
	var files []File
	for _, name := range []string{"a", "b", "c"} {
		f, _, err := st.Open(name, true, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	pending := 0
	for _, f := range files {
		pending++
		st.Submit(&Request{Op: OpWrite, File: f, Data: []byte("x"), Done: func(*Request) { pending-- }})
	}
	if s := cache.Stats(); s.Open != 3 || s.OverBudget != 1 {
		t.Fatalf("%+v: want 3 open, 1 over budget", s)
	}
	for pending > 0 {
		st.Poll(true)
	}
	if s := cache.Stats(); s.Open != 2 {
		t.Fatalf("%+v: want the budget again once the requests are done", s)
	}
}

// A file that cannot be opened again fails its request at the next Poll, not
// inside Submit, and cancels the request linked after it.
func TestFileCacheReopenFailureFailsTheRequest(t *testing.T) {
	dir := t.TempDir()
	inner, err := NewOSStorage(dir)
	if err != nil {
		t.Fatal(err)
	}
	cache := NewFileCache(1)
	st := cache.Storage(inner)
	a, _, err := st.Open("a", true, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Open("b", true, 0); err != nil { // evicts a
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "a")); err != nil {
		t.Fatal(err)
	}
	var errs []error
	write := &Request{Op: OpWrite, File: a, Data: []byte("x"), Link: true, Done: func(r *Request) { errs = append(errs, r.Err) }}
	sync := &Request{Op: OpSync, File: a, Done: func(r *Request) { errs = append(errs, r.Err) }}
	st.Submit(write)
	st.Submit(sync)
	if len(errs) != 0 {
		t.Fatal("Done ran inside Submit")
	}
	st.Poll(false)
	if len(errs) != 2 || !errors.Is(errs[0], os.ErrNotExist) || errs[1] != ErrCanceled {
		t.Fatalf("completions %v: want the reopen's error, then canceled", errs)
	}
}

// A handle closed while a request pins its file closes the file once the request
// is done.
func TestFileCacheCloseUnderARequestWaitsForIt(t *testing.T) {
	disk := NewSimDisk(2)
	cache := NewFileCache(4)
	st := cache.Storage(disk)
	a, _, err := st.Open("a", true, 0)
	if err != nil {
		t.Fatal(err)
	}
	done := false
	st.Submit(&Request{Op: OpWrite, File: a, Data: []byte("x"), Done: func(*Request) { done = true }})
	if err := st.Close(a); err != nil {
		t.Fatal(err)
	}
	if cache.Stats().Open != 1 {
		t.Fatal("the file closed under its request")
	}
	for !done {
		st.Poll(true)
	}
	if cache.Stats().Open != 0 {
		t.Fatal("the file stayed open after its request")
	}
}

// BenchmarkFileCacheWrite is a 4 KiB write through an OSStorage directly, through
// a cache that keeps its file open, and through one whose file was closed to make
// room before each write (two files, a budget of one): the cost of the cache on
// the hot path, and of a file opened again.
func BenchmarkFileCacheWrite(b *testing.B) {
	data := make([]byte, 4096)
	run := func(b *testing.B, st Storage, files []File) {
		r := &Request{Op: OpWrite, Data: data}
		done := func(*Request) {}
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			r.File, r.Done = files[i%len(files)], done
			st.Submit(r)
			st.Poll(true)
			if r.Err != nil {
				b.Fatal(r.Err)
			}
		}
	}
	open := func(b *testing.B, st Storage, names ...string) []File {
		var files []File
		for _, name := range names {
			f, _, err := st.Open(name, true, 0)
			if err != nil {
				b.Fatal(err)
			}
			files = append(files, f)
		}
		return files
	}
	b.Run("direct", func(b *testing.B) {
		st, _ := NewOSStorage(b.TempDir())
		run(b, st, open(b, st, "a"))
	})
	b.Run("cached", func(b *testing.B) {
		inner, _ := NewOSStorage(b.TempDir())
		st := NewFileCache(4).Storage(inner)
		run(b, st, open(b, st, "a"))
	})
	b.Run("reopened", func(b *testing.B) {
		inner, _ := NewOSStorage(b.TempDir())
		st := NewFileCache(1).Storage(inner)
		run(b, st, open(b, st, "a", "b"))
	})
}
