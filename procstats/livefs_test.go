package procstats

import (
	"io"
	"io/fs"
	"testing/fstest"
)

// liveFS is a tree of test files whose changes a Sampler's held files see, as
// they see /proc's: an open file reads its name's current entry at each read,
// and its reads fail once the entry is gone (as a held /proc/<pid> file's do
// once the process has exited).
type liveFS struct{ fstest.MapFS }

func (l liveFS) Open(name string) (fs.File, error) {
	f, err := l.MapFS.Open(name)
	if err != nil {
		return nil, err
	}
	return &liveFile{File: f, tree: l.MapFS, name: name}, nil
}

type liveFile struct {
	fs.File
	tree fstest.MapFS
	name string
}

func (f *liveFile) ReadAt(b []byte, offset int64) (int, error) {
	entry, ok := f.tree[f.name]
	if !ok {
		return 0, fs.ErrNotExist
	}
	if offset >= int64(len(entry.Data)) {
		return 0, io.EOF
	}
	n := copy(b, entry.Data[offset:])
	if n < len(b) {
		return n, io.EOF
	}
	return n, nil
}
