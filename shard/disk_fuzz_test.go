package shard

import (
	"runtime"
	"testing"

	"github.com/iggy-shard/iggy-shard/ring"
	"github.com/iggy-shard/iggy-shard/segment"
)

// FuzzDiskSchedule drives three storages sharing one Disk (a table of 4 requests, an
// SQ of 8, so requests wait and chains meet full queues) with an arbitrary schedule
// of unlinked writes, link chains of two and three, and polls with and without
// waiting: every request completes exactly once, successfully, and the disk ends
// quiet. Each input byte is one step: storage = b % 3, action = b / 3 % 5.
func FuzzDiskSchedule(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5})
	f.Add([]byte{3, 4, 6, 7, 9, 10, 12, 13, 14})
	f.Add([]byte{6, 6, 6, 7, 7, 7, 8, 8, 8, 0, 1, 2})
	f.Add([]byte{3, 0, 3, 1, 3, 2, 12, 13, 14, 9})
	f.Fuzz(func(t *testing.T, schedule []byte) {
		if len(schedule) > 256 {
			schedule = schedule[:256]
		}
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		r, err := ring.New(ring.Options{SQEntries: 8, Flags: ring.SetupSingleIssuer})
		if err != nil {
			t.Skipf("io_uring unavailable: %v", err)
		}
		defer r.Close()
		disk := NewDisk(r, 4)
		dir := t.TempDir()
		var storages [3]*DiskStorage
		var files [3]segment.File
		for i := range storages {
			st, err := disk.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			f, _, err := st.Open(string(rune('a'+i)), true, 0)
			if err != nil {
				t.Fatal(err)
			}
			storages[i], files[i] = st, f
		}
		data := []byte("0123456789abcdef")
		submitted, completed := 0, 0
		doneOnce := map[*segment.Request]bool{}
		hook := func(r *segment.Request) {
			if doneOnce[r] {
				t.Fatalf("%v completed twice", r.Op)
			}
			doneOnce[r] = true
			if r.Err != nil {
				t.Fatalf("%v failed: %v", r.Op, r.Err)
			}
			completed++
		}
		var offsets [3]int64
		write := func(i int, link bool) *segment.Request {
			req := &segment.Request{Op: segment.OpWrite, File: files[i], Offset: offsets[i], Data: data, Link: link, Done: hook}
			offsets[i] += int64(len(data))
			return req
		}
		sync := func(i int, link bool) *segment.Request {
			return &segment.Request{Op: segment.OpSync, File: files[i], Link: link, Done: hook}
		}
		for _, b := range schedule {
			i, st := int(b%3), storages[b%3]
			switch b / 3 % 5 {
			case 0:
				st.Submit(write(i, false))
				submitted++
			case 1:
				st.Submit(write(i, true))
				st.Submit(sync(i, false))
				submitted += 2
			case 2:
				st.Submit(sync(i, true))
				st.Submit(write(i, true))
				st.Submit(sync(i, false))
				submitted += 3
			case 3:
				st.Poll(false)
			case 4:
				if st.InFlight() > 0 {
					st.Poll(true)
				}
			}
		}
		for _, st := range storages {
			for st.InFlight() > 0 {
				st.Poll(true)
			}
		}
		for i, st := range storages {
			if err := st.Close(files[i]); err != nil {
				t.Fatal(err)
			}
		}
		if completed != submitted || disk.InFlight() != 0 || disk.Ready() {
			t.Fatalf("%d of %d requests completed; disk %d in flight, ready %v", completed, submitted, disk.InFlight(), disk.Ready())
		}
	})
}
