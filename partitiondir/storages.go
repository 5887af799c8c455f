package partitiondir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/iggy-shard/iggy-shard/partition"
	"github.com/iggy-shard/iggy-shard/segment"
	"github.com/iggy-shard/iggy-shard/shard"
)

// Storages is a shard's partition.StorageProvider: each partition's log does
// its reads, writes and fdatasyncs through the shard's disk ring (shard.Disk),
// never blocking the shard in a pwrite or an fdatasync. Directories are created and
// removed with blocking calls, which are rare and cheap: a created directory is
// made durable in its parent with the others created since (partition.DirSyncs:
// the store runs SyncDirs before it writes anything), and removal goes through a
// tombstone rename (partition.OSStorages).
//
// A created partition costs nothing on disk until something is written in it: its
// directory is made, with its record (partitionhost/record.go), just before its first
// file (lazyStorage). Directory operations are what a creation costs (some 0.4 ms
// each on the machine the benchmarks ran on): 1,000 partitions created at once no
// longer cost 1,000 mkdirs and 2,000 fsyncs, and one never written costs none.
// partitionhost/record.go (createPartition) says why the record keeps its
// guarantee.
type Storages struct {
	disk *shard.Disk
	dirs partition.DirSyncs
	// announced is the record the next Open of its directory is to keep
	// (announceRecord); nil when none.
	announced *announcedRecord
	// materialized counts the directories made at their first file, for tests.
	materialized uint64
}

type announcedRecord struct {
	dir    string
	record Record
	// fresh: the directory is new (a creation): it does not exist once the store
	// removed what was there; absent: there was nothing to remove.
	fresh, absent bool
}

func NewStorages(disk *shard.Disk) *Storages { return &Storages{disk: disk} }

// AnnounceRecord says that dir, about to be opened by the store, has no record
// and must hold rec: written before anything is created in it, or at once by Open
// when it holds something already. The caller clears the announcement once the
// store returns (ClearAnnounced).
func (p *Storages) AnnounceRecord(dir string, rec Record) {
	p.announced = &announcedRecord{dir: dir, record: rec}
}

// AnnounceCreation is AnnounceRecord for a directory being created: absent says
// the caller saw nothing there, so that the store's clearing of it removes
// nothing.
func (p *Storages) AnnounceCreation(dir string, rec Record, absent bool) {
	p.announced = &announcedRecord{dir: dir, record: rec, fresh: true, absent: absent}
}

// ClearAnnounced ends the announcement.
func (p *Storages) ClearAnnounced() { p.announced = nil }

// Open implements partition.StorageProvider.
func (p *Storages) Open(dir string) (segment.Storage, error) {
	a := p.announced
	p.announced = nil
	if a != nil && a.dir == dir {
		if a.fresh {
			return &lazyStorage{p: p, dir: dir, record: a.record}, nil
		}
		entries, err := os.ReadDir(dir)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		if len(entries) == 0 {
			return &lazyStorage{p: p, dir: dir, record: a.record}, nil
		}
		// Contents without a record are taken as the partition's
		// (partitionhost/record.go): the record says so from now on.
		if err := WriteRecord(dir, a.record); err != nil {
			return nil, err
		}
	}
	if err := p.dirs.MkdirAll(dir); err != nil {
		return nil, err
	}
	return p.disk.Open(dir)
}

// EnsureDir makes dir durable in its parent when it is not there: a partition's
// directory that a lazyStorage has not made yet, for a record written before the
// first file (lazyStorage then finds it and writes none).
func (p *Storages) EnsureDir(dir string) error {
	if err := p.dirs.MkdirAll(dir); err != nil {
		return err
	}
	return p.dirs.Sync()
}

// Remove implements partition.StorageProvider.
func (p *Storages) Remove(dir string) error {
	if a := p.announced; a != nil && a.dir == dir && a.absent {
		return nil // a creation's clearing of a directory the caller saw absent
	}
	return partition.OSStorages{}.Remove(dir)
}

// SyncDirs implements partition.DirSyncer: the directories created since it last
// ran are made durable in their parents, one fsync per parent.
func (p *Storages) SyncDirs() error { return p.dirs.Sync() }

// lazyStorage is the storage of a partition whose directory holds nothing: none
// of its files exists, so it lists nothing and opens nothing until it is asked to
// create a file. Then it makes the directory (durable in its parent), writes the
// record in it durably, unless one was written meanwhile (a purge, a deletion of
// segments: theirs is newer), and from then on is the disk ring's storage.
type lazyStorage struct {
	p      *Storages
	dir    string
	record Record
	inner  *shard.DiskStorage // nil until the first file is created
	// failed are requests submitted while the directory could not be made.
	failed []*segment.Request
}

// materialize makes the directory and its record, and opens the ring's storage.
func (s *lazyStorage) materialize() error {
	if err := s.p.dirs.MkdirAll(s.dir); err != nil {
		return err
	}
	if err := s.p.dirs.Sync(); err != nil {
		return err
	}
	if _, present, err := ReadRecord(s.dir); err != nil {
		return err
	} else if !present {
		if err := writeRecordInPlace(s.dir, s.record); err != nil {
			return err
		}
	}
	inner, err := s.p.disk.Open(s.dir)
	if err != nil {
		return err
	}
	s.inner = inner
	s.p.materialized++
	return nil
}

// Open implements segment.Storage.
func (s *lazyStorage) Open(name string, create bool, preallocateBytes int64) (segment.File, int64, error) {
	if s.inner == nil {
		if !create {
			return 0, 0, &fs.PathError{Op: "open", Path: filepath.Join(s.dir, name), Err: fs.ErrNotExist}
		}
		if err := s.materialize(); err != nil {
			return 0, 0, err
		}
	}
	return s.inner.Open(name, create, preallocateBytes)
}

// Close implements segment.Storage.
func (s *lazyStorage) Close(f segment.File) error {
	if s.inner == nil {
		return fmt.Errorf("partitiondir: close of file %d in %s, which holds none", f, s.dir)
	}
	return s.inner.Close(f)
}

// List implements segment.Storage: a directory not made yet lists nothing.
func (s *lazyStorage) List(dir string) ([]string, error) {
	if s.inner == nil {
		return nil, nil
	}
	return s.inner.List(dir)
}

// DupDescriptor implements segment.Descriptors, so that polls of a partition
// created on this storage can be planned (segment.PlanRead): a file to dup
// was opened, so the directory is made already.
func (s *lazyStorage) DupDescriptor(f segment.File) (int, error) {
	if s.inner == nil {
		return -1, fmt.Errorf("partitiondir: dup of file %d in %s, which holds none", f, s.dir)
	}
	return s.inner.DupDescriptor(f)
}

// Submit implements segment.Storage. Every request but a removal names a file
// opened, so the directory is made already; a removal before (of a file no list
// showed) makes it too, and fails as it would have. A directory that cannot be made
// fails the request.
func (s *lazyStorage) Submit(r *segment.Request) {
	if s.inner == nil {
		if err := s.materialize(); err != nil {
			r.Result, r.Err = 0, err
			s.failed = append(s.failed, r)
			return
		}
	}
	s.inner.Submit(r)
}

// Poll implements segment.Storage.
func (s *lazyStorage) Poll(wait bool) int {
	n := 0
	for len(s.failed) > 0 {
		r := s.failed[0]
		s.failed = s.failed[1:]
		r.Done(r)
		n++
	}
	if s.inner == nil || n > 0 && wait {
		return n
	}
	return n + s.inner.Poll(wait)
}
