package segment

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"golang.org/x/sys/unix"
)

// DataFileMode and DataDirMode are the permissions of what the server creates
// under its data directory (segments, indexes, offsets, the metadata journal and
// snapshot): its owner's alone. The files hold every message and the credentials'
// hashes; other local accounts have no business reading them.
const (
	DataFileMode fs.FileMode = 0o600
	DataDirMode  fs.FileMode = 0o700
)

// OSStorage is a Storage over the files of one partition directory, with blocking
// pread/pwrite/fdatasync/ftruncate/fallocate/unlink system calls. Requests run, in
// submission order, when Poll is called, so a log over OSStorage behaves like one
// over a ring whose completions arrive in order. It is what the benchmarks measure
// and what a server can use before its shard's ring carries the log's I/O.
//
// An OSStorage belongs to one goroutine, like the shard that drives it.
type OSStorage struct {
	root    string
	fds     []int  // by File-1; -1 when free
	free    []File // reusable handles
	queue   []*Request
	running []*Request
	depth   int // nesting of Poll calls (a Done hook that waits)
}

// NewOSStorage returns a storage rooted at the partition directory dir, creating dir
// when it does not exist.
func NewOSStorage(dir string) (*OSStorage, error) {
	if err := os.MkdirAll(dir, DataDirMode); err != nil {
		return nil, err
	}
	return &OSStorage{root: dir}, nil
}

// Dir returns the partition directory.
func (s *OSStorage) Dir() string { return s.root }

// Open implements Storage. A file it creates is made durable in its directory (the
// directory is fsynced), so a segment created and then synced survives a crash.
func (s *OSStorage) Open(name string, create bool, preallocateBytes int64) (File, int64, error) {
	path := filepath.Join(s.root, name)
	flags := unix.O_RDWR | unix.O_CLOEXEC
	created := false
	fd, err := unix.Open(path, flags, 0)
	if errors.Is(err, unix.ENOENT) && create {
		if err := os.MkdirAll(filepath.Dir(path), DataDirMode); err != nil {
			return 0, 0, err
		}
		fd, err = unix.Open(path, flags|unix.O_CREAT, uint32(DataFileMode))
		created = true
	}
	if err != nil {
		return 0, 0, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		_ = unix.Close(fd)
		return 0, 0, &fs.PathError{Op: "fstat", Path: path, Err: err}
	}
	if created {
		if preallocateBytes > 0 {
			// Filesystems without fallocate simply do not reserve; the log works the same.
			_ = unix.Fallocate(fd, unix.FALLOC_FL_KEEP_SIZE, 0, preallocateBytes)
		}
		if err := syncDir(filepath.Dir(path)); err != nil {
			_ = unix.Close(fd)
			return 0, 0, err
		}
	}
	var f File
	if n := len(s.free); n > 0 {
		f = s.free[n-1]
		s.free = s.free[:n-1]
		s.fds[f-1] = fd
	} else {
		s.fds = append(s.fds, fd)
		f = File(len(s.fds))
	}
	return f, st.Size, nil
}

func syncDir(dir string) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &fs.PathError{Op: "open", Path: dir, Err: err}
	}
	err = unix.Fsync(fd)
	_ = unix.Close(fd)
	if err != nil {
		return &fs.PathError{Op: "fsync", Path: dir, Err: err}
	}
	return nil
}

func (s *OSStorage) fd(f File) int {
	if f == 0 || int(f) > len(s.fds) || s.fds[f-1] < 0 {
		panic(fmt.Sprintf("segment: OSStorage: file handle %d is not open", f))
	}
	return s.fds[f-1]
}

// FD returns the file descriptor behind an open handle, for a storage that carries
// out data requests elsewhere (shard.DiskStorage submits them to an io_uring) and
// leaves opening, listing and closing to OSStorage.
func (s *OSStorage) FD(f File) int { return s.fd(f) }

// Execute carries out r at once, with blocking system calls, and returns what
// Poll would have set in r.Result and r.Err; it neither sets them nor runs r.Done.
func (s *OSStorage) Execute(r *Request) (int64, error) { return s.execute(r) }

// Close implements Storage.
func (s *OSStorage) Close(f File) error {
	fd := s.fd(f)
	s.fds[f-1] = -1
	s.free = append(s.free, f)
	return unix.Close(fd)
}

// List implements Storage.
func (s *OSStorage) List(dir string) ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(s.root, dir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		if e.Type().IsRegular() {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return names, nil
}

// Submit implements Storage.
func (s *OSStorage) Submit(r *Request) { s.queue = append(s.queue, r) }

// Poll implements Storage: it carries out every queued request in submission order
// and runs their Done hooks. Requests submitted by those hooks run at the next Poll.
// A hook may itself call Poll (a blocking wait inside a completion): the nested call
// works on its own batch.
func (s *OSStorage) Poll(wait bool) int {
	if len(s.queue) == 0 {
		return 0
	}
	s.depth++
	defer func() { s.depth-- }()
	var batch []*Request
	if s.depth == 1 {
		batch = s.running[:0] // reused: the outermost Poll does not allocate
	}
	batch = append(batch, s.queue...)
	clear(s.queue)
	s.queue = s.queue[:0]
	canceled := false
	for _, r := range batch {
		if canceled {
			r.Result, r.Err = 0, ErrCanceled
		} else {
			r.Result, r.Err = s.execute(r)
		}
		canceled = r.Link && r.Err != nil
	}
	for _, r := range batch {
		r.Done(r)
	}
	if s.depth == 1 {
		clear(batch)
		s.running = batch[:0]
	}
	return len(batch)
}

func (s *OSStorage) execute(r *Request) (int64, error) {
	switch r.Op {
	case OpWrite:
		fd := s.fd(r.File)
		done := 0
		for done < len(r.Data) {
			n, err := unix.Pwrite(fd, r.Data[done:], r.Offset+int64(done))
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				return int64(done), err
			}
			done += n
		}
		return int64(done), nil
	case OpRead:
		fd := s.fd(r.File)
		done := 0
		for done < len(r.Data) {
			n, err := unix.Pread(fd, r.Data[done:], r.Offset+int64(done))
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				return int64(done), err
			}
			if n == 0 {
				break
			}
			done += n
		}
		return int64(done), nil
	case OpSync:
		for {
			err := unix.Fdatasync(s.fd(r.File))
			if err == unix.EINTR {
				continue
			}
			return 0, err
		}
	case OpTruncate:
		return 0, unix.Ftruncate(s.fd(r.File), r.Offset)
	case OpReserve:
		for {
			err := unix.Fallocate(s.fd(r.File), unix.FALLOC_FL_KEEP_SIZE, r.Offset, r.Length)
			if err == unix.EINTR {
				continue
			}
			return 0, err
		}
	case OpRemove:
		err := unix.Unlink(filepath.Join(s.root, r.Name))
		if err == unix.ENOENT {
			err = nil
		}
		return 0, err
	}
	panic(fmt.Sprintf("segment: OSStorage: unknown op %d", r.Op))
}

// IsNoSpace reports whether err is a full-disk error of either storage.
func IsNoSpace(err error) bool {
	return errors.Is(err, ErrNoSpace) || errors.Is(err, unix.ENOSPC)
}
