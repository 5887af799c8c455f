package metafiles

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/iggy-shard/iggy-shard/internal/atomicfile"
	"github.com/iggy-shard/iggy-shard/segment"
)

// Storage carries out the metadata plane's file I/O (its journal, snapshot and
// state record, files.go), in the spirit of segment.Storage: the plane never
// touches a file itself, so a test can put it on segment.SimDisk (SimStorage, simstorage.go)
// and crash it anywhere. Unlike segment.Storage the calls block: they run on the
// journal writer's goroutine (writer.go), or on shard 0 at start and stop, one at a
// time, so nothing is gained by queueing them.
type Storage interface {
	// ReadFile returns the whole file; an error matching fs.ErrNotExist when there
	// is none.
	ReadFile(name string) ([]byte, error)
	// ReplaceFile makes name hold data, atomically and durably: after a crash the
	// file is whole, either the old one or the new one (the OS storage writes a
	// temporary file, fsyncs it, renames it over name and fsyncs the directory).
	ReplaceFile(name string, data []byte) error
	// OpenJournal opens name for appends, creating it, cut to sizeBytes (a torn
	// tail the recovery gave up on), with its size durable.
	OpenJournal(name string, sizeBytes int64) (Journal, error)
}

// Journal is an open journal: appends at its end, fdatasync, truncation.
type Journal interface {
	Append(b []byte) error
	Sync() error
	Truncate(sizeBytes int64) error
	Close() error
}

// OSStorage is Storage over the files of one directory.
type OSStorage struct{ dir string }

func NewOSStorage(dir string) (*OSStorage, error) {
	if err := os.MkdirAll(dir, segment.DataDirMode); err != nil {
		return nil, fmt.Errorf("metadata directory: %w", err)
	}
	return &OSStorage{dir: dir}, nil
}

func (s *OSStorage) ReadFile(name string) ([]byte, error) {
	return os.ReadFile(filepath.Join(s.dir, name))
}

func (s *OSStorage) ReplaceFile(name string, data []byte) error {
	return atomicfile.Replace(filepath.Join(s.dir, name), data, segment.DataFileMode)
}

func (s *OSStorage) OpenJournal(name string, sizeBytes int64) (Journal, error) {
	path := filepath.Join(s.dir, name)
	_, statErr := os.Stat(path)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, segment.DataFileMode)
	if err != nil {
		return nil, fmt.Errorf("metadata journal: %w", err)
	}
	j := &OSJournal{f: f, sizeBytes: sizeBytes}
	if err := f.Truncate(sizeBytes); err != nil {
		f.Close()
		return nil, fmt.Errorf("metadata journal truncate: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, fmt.Errorf("metadata journal sync: %w", err)
	}
	if errors.Is(statErr, fs.ErrNotExist) {
		if err := atomicfile.SyncDir(s.dir); err != nil {
			f.Close()
			return nil, fmt.Errorf("metadata journal directory sync: %w", err)
		}
	}
	return j, nil
}

// OSJournal writes at the offset it keeps rather than with O_APPEND, so that a
// truncation and the next append agree on the end without a seek.
type OSJournal struct {
	f         *os.File
	sizeBytes int64
}

func (j *OSJournal) Append(b []byte) error {
	if _, err := j.f.WriteAt(b, j.sizeBytes); err != nil {
		return fmt.Errorf("metadata journal write: %w", err)
	}
	j.sizeBytes += int64(len(b))
	return nil
}

func (j *OSJournal) Sync() error {
	if err := j.f.Sync(); err != nil {
		return fmt.Errorf("metadata journal fdatasync: %w", err)
	}
	return nil
}

func (j *OSJournal) Truncate(sizeBytes int64) error {
	if err := j.f.Truncate(sizeBytes); err != nil {
		return fmt.Errorf("metadata journal truncate: %w", err)
	}
	j.sizeBytes = sizeBytes
	return nil
}

func (j *OSJournal) Close() error { return j.f.Close() }

// JournalFile (tests) is the open journal's file when the storage is an
// OSStorage, nil otherwise.
func (f *Files) JournalFile() *os.File {
	if j, ok := f.journal.(*OSJournal); ok {
		return j.f
	}
	return nil
}
