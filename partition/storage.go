package partition

import (
	"errors"
	"os"
	"path/filepath"
	"slices"

	"github.com/iggy-shard/iggy-shard/segment"
)

// StorageProvider gives each partition the segment.Storage its log does I/O through,
// rooted at the partition's directory, and removes a partition's directory with
// everything in it. The server's provider hands out views of the shard's io_uring
// ring; OSStorages uses blocking system calls; tests use simulated disks.
type StorageProvider interface {
	// Open returns a storage rooted at dir, creating dir when it does not exist.
	Open(dir string) (segment.Storage, error)
	// Remove deletes dir and every file under it, at once as far as a crash can
	// tell: after a crash the directory is either whole or gone, never half a log.
	// A missing dir is not an error. Nothing of dir is open when it is called.
	Remove(dir string) error
}

// OSStorages provides segment.OSStorage: pread/pwrite/fdatasync run when the store
// polls its I/O.
type OSStorages struct {
	// Dirs, when set, collects the directories Open creates, to be made durable
	// together (DirSyncs.Sync, which a store calls before it does anything else
	// after creating partitions: Store.SyncDirs); nil makes each durable at once.
	Dirs *DirSyncs
}

// Open implements StorageProvider. The directories it creates are made durable in
// their parents (segment.NewOSStorage creates them without that), so a partition
// whose files were fdatasynced cannot lose its directory to a power loss: at once,
// or with the next SyncDirs when Dirs is set.
func (o OSStorages) Open(dir string) (segment.Storage, error) {
	if o.Dirs != nil {
		if err := o.Dirs.MkdirAll(dir); err != nil {
			return nil, err
		}
	} else if err := mkdirAllDurable(dir); err != nil {
		return nil, err
	}
	return segment.NewOSStorage(dir)
}

// SyncDirs implements DirSyncer.
func (o OSStorages) SyncDirs() error {
	if o.Dirs == nil {
		return nil
	}
	return o.Dirs.Sync()
}

// DirSyncer is a StorageProvider whose Open may leave the directories it created
// to be made durable later, all at once: a thousand partitions created together
// cost one fsync of their parent, not a thousand. The store calls SyncDirs after
// creating partitions and before anything else (PollIO, Tick, Send, Step, Poll,
// offsets: Store.SyncDirs), so nothing is written in a partition, let alone
// acknowledged, before its directory is durable.
type DirSyncer interface {
	SyncDirs() error
}

// DirSyncs is a set of directories whose entries are to be made durable: the
// parents of directories created (MkdirAll), fsynced once each by Sync. It belongs
// to one goroutine, the shard's.
type DirSyncs struct {
	pending map[string]bool
	// Syncs counts the directory fsyncs done.
	Syncs uint64
}

// MkdirAll creates dir and its missing parents, recording the parent of each one
// it created.
func (d *DirSyncs) MkdirAll(dir string) error {
	dir = filepath.Clean(dir)
	var missing []string
	for p := dir; ; p = filepath.Dir(p) {
		if _, err := os.Stat(p); err == nil {
			break
		} else if !errors.Is(err, os.ErrNotExist) {
			return err
		}
		missing = append(missing, p)
		if parent := filepath.Dir(p); parent == p {
			break
		}
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := os.Mkdir(missing[i], segment.DataDirMode); err != nil && !errors.Is(err, os.ErrExist) {
			return err
		}
		if d.pending == nil {
			d.pending = make(map[string]bool)
		}
		d.pending[filepath.Dir(missing[i])] = true
	}
	return nil
}

// Pending is how many directories wait for their fsync.
func (d *DirSyncs) Pending() int { return len(d.pending) }

// Sync fsyncs every pending directory, deepest first, so that a directory is
// durable in its parent no later than what it holds is.
func (d *DirSyncs) Sync() error {
	if len(d.pending) == 0 {
		return nil
	}
	dirs := make([]string, 0, len(d.pending))
	for dir := range d.pending {
		dirs = append(dirs, dir)
	}
	slices.SortFunc(dirs, func(a, b string) int { return len(b) - len(a) })
	for _, dir := range dirs {
		if err := syncDir(dir); err != nil {
			return err
		}
		delete(d.pending, dir)
		d.Syncs++
	}
	return nil
}

// mkdirAllDurable creates dir and its missing parents, fsyncing the parent of each
// directory it creates, from the top down.
func mkdirAllDurable(dir string) error {
	dir = filepath.Clean(dir)
	var missing []string
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil {
			break
		} else if !errors.Is(err, os.ErrNotExist) {
			return err
		}
		missing = append(missing, d)
		if parent := filepath.Dir(d); parent == d {
			break
		}
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := os.Mkdir(missing[i], segment.DataDirMode); err != nil && !errors.Is(err, os.ErrExist) {
			return err
		}
		if err := syncDir(filepath.Dir(missing[i])); err != nil {
			return err
		}
	}
	return nil
}

// Remove implements StorageProvider. The directory is first renamed to dir+".removing"
// and the rename made durable (the parent is fsynced), so a crash while its files are
// being deleted leaves a tombstone nothing opens rather than a log with a hole, which
// recovery would serve from; the next Remove of the same dir clears a tombstone left
// behind.
func (OSStorages) Remove(dir string) error {
	tombstone := dir + ".removing"
	if err := os.RemoveAll(tombstone); err != nil {
		return err
	}
	if err := os.Rename(dir, tombstone); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	if err := syncDir(filepath.Dir(dir)); err != nil {
		return err
	}
	return os.RemoveAll(tombstone)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if closeErr := d.Close(); err == nil {
		err = closeErr
	}
	return err
}
