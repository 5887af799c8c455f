package shard

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/iggy-shard/iggy-shard/ring"
	"github.com/iggy-shard/iggy-shard/segment"
)

// BenchmarkDiskWrite: sequential 1 MiB writes to one file through a Disk (submit, wait,
// reap, run the hook), against blocking pwrite of the same bytes in the same run, and
// with the writes handed to the kernel's workers (AsyncWriteBytesMin). The file is
// cut back every 256 MiB so the page cache, not the disk, is measured.
//
//	go test ./shard -run '^$' -bench DiskWrite -benchtime 2s -count 3
func BenchmarkDiskWrite(b *testing.B) {
	const writeBytes = 1 << 20
	const fileBytesMax = 256 << 20
	data := make([]byte, writeBytes)
	b.Run("baseline=pwrite", func(b *testing.B) {
		f, err := os.Create(filepath.Join(b.TempDir(), "seq"))
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		fd := int(f.Fd())
		b.SetBytes(writeBytes)
		b.ReportAllocs()
		offset := int64(0)
		for b.Loop() {
			if offset+writeBytes > fileBytesMax {
				offset = 0
			}
			if _, err := unix.Pwrite(fd, data, offset); err != nil {
				b.Fatal(err)
			}
			offset += writeBytes
		}
	})
	for _, async := range []bool{false, true} {
		name := "disk"
		if async {
			name = "disk_async"
		}
		b.Run(name, func(b *testing.B) {
			disk := benchDisk(b)
			if async {
				disk.AsyncWriteBytesMin = 64 << 10
			}
			st, err := disk.Open(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			f, _, err := st.Open("seq", true, 0)
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close(f)
			done := false
			req := &segment.Request{Op: segment.OpWrite, File: f, Data: data}
			req.Done = func(r *segment.Request) {
				if r.Err != nil {
					b.Fatal(r.Err)
				}
				done = true
			}
			b.SetBytes(writeBytes)
			b.ReportAllocs()
			for b.Loop() {
				if req.Offset+writeBytes > fileBytesMax {
					req.Offset = 0
				}
				done = false
				st.Submit(req)
				for !done {
					st.Poll(true)
				}
				req.Offset += writeBytes
			}
		})
	}
}

// BenchmarkDiskPollIdle: one poll of each of 3,000 idle storages, the cost a shard
// pays for idle partitions on every turn with disk work (partition.Store.PollIO
// polls every partition's storage).
//
//	go test ./shard -run '^$' -bench DiskPollIdle -count 5
func BenchmarkDiskPollIdle(b *testing.B) {
	const storages = 3000
	disk := benchDisk(b)
	dir := b.TempDir()
	idle := make([]*DiskStorage, storages)
	for i := range idle {
		var err error
		if idle[i], err = disk.Open(dir); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		for _, st := range idle {
			st.Poll(false)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/storages, "ns/storage")
}

// benchDisk returns a Disk of 64 requests on a ring of the benchmark's thread, which
// it locks until the benchmark ends.
func benchDisk(b *testing.B) *Disk {
	runtime.LockOSThread()
	b.Cleanup(runtime.UnlockOSThread)
	r, err := ring.New(ring.Options{SQEntries: 64, Flags: ring.SetupSingleIssuer})
	if err != nil {
		b.Skipf("io_uring unavailable: %v", err)
	}
	b.Cleanup(func() { r.Close() })
	return NewDisk(r, 64)
}
