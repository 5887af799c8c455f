package server

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/iggy-shard/iggy-shard/segment"
)

// metaStorage carries out the metadata plane's file I/O (its journal, snapshot and
// state record, metaplane.go), in the spirit of segment.Storage: the plane never
// touches a file itself, so a test can put it on segment.SimDisk (metastorage_sim_test.go)
// and crash it anywhere. Unlike segment.Storage the calls block: they run on the
// journal writer's goroutine (journal.go), or on shard 0 at start and stop, one at a
// time, so nothing is gained by queueing them.
type metaStorage interface {
	// ReadFile returns the whole file; an error matching fs.ErrNotExist when there
	// is none.
	ReadFile(name string) ([]byte, error)
	// ReplaceFile makes name hold data, atomically and durably: after a crash the
	// file is whole, either the old one or the new one (the OS storage writes a
	// temporary file, fsyncs it, renames it over name and fsyncs the directory).
	ReplaceFile(name string, data []byte) error
	// OpenJournal opens name for appends, creating it, cut to sizeBytes (a torn
	// tail the recovery gave up on), with its size durable.
	OpenJournal(name string, sizeBytes int64) (metaJournal, error)
}

// metaJournal is an open journal: appends at its end, fdatasync, truncation.
type metaJournal interface {
	Append(b []byte) error
	Sync() error
	Truncate(sizeBytes int64) error
	Close() error
}

// osMetaStorage is metaStorage over the files of one directory.
type osMetaStorage struct{ dir string }

func newOSMetaStorage(dir string) (*osMetaStorage, error) {
	if err := os.MkdirAll(dir, segment.DataDirMode); err != nil {
		return nil, fmt.Errorf("metadata directory: %w", err)
	}
	return &osMetaStorage{dir: dir}, nil
}

func (s *osMetaStorage) ReadFile(name string) ([]byte, error) {
	return os.ReadFile(filepath.Join(s.dir, name))
}

func (s *osMetaStorage) ReplaceFile(name string, data []byte) error {
	return writeFileAtomic(filepath.Join(s.dir, name), data)
}

func (s *osMetaStorage) OpenJournal(name string, sizeBytes int64) (metaJournal, error) {
	path := filepath.Join(s.dir, name)
	_, statErr := os.Stat(path)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, segment.DataFileMode)
	if err != nil {
		return nil, fmt.Errorf("metadata journal: %w", err)
	}
	j := &osJournal{f: f, sizeBytes: sizeBytes}
	if err := f.Truncate(sizeBytes); err != nil {
		f.Close()
		return nil, fmt.Errorf("metadata journal truncate: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, fmt.Errorf("metadata journal sync: %w", err)
	}
	if errors.Is(statErr, fs.ErrNotExist) {
		if err := syncDir(s.dir); err != nil {
			f.Close()
			return nil, fmt.Errorf("metadata journal directory sync: %w", err)
		}
	}
	return j, nil
}

// osJournal writes at the offset it keeps rather than with O_APPEND, so that a
// truncation and the next append agree on the end without a seek.
type osJournal struct {
	f         *os.File
	sizeBytes int64
}

func (j *osJournal) Append(b []byte) error {
	if _, err := j.f.WriteAt(b, j.sizeBytes); err != nil {
		return fmt.Errorf("metadata journal write: %w", err)
	}
	j.sizeBytes += int64(len(b))
	return nil
}

func (j *osJournal) Sync() error {
	if err := j.f.Sync(); err != nil {
		return fmt.Errorf("metadata journal fdatasync: %w", err)
	}
	return nil
}

func (j *osJournal) Truncate(sizeBytes int64) error {
	if err := j.f.Truncate(sizeBytes); err != nil {
		return fmt.Errorf("metadata journal truncate: %w", err)
	}
	j.sizeBytes = sizeBytes
	return nil
}

func (j *osJournal) Close() error { return j.f.Close() }

// writeFileAtomic replaces path with b: a temp file, fsynced, renamed over path, and
// the directory fsynced, so a crash leaves either the old or the new file whole.
func writeFileAtomic(path string, b []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, segment.DataFileMode)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
