package partition

import (
	"errors"
	"os"
	"path/filepath"

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
type OSStorages struct{}

// Open implements StorageProvider. The directories it creates are made durable in
// their parents (segment.NewOSStorage creates them without that), so a partition
// whose files were fdatasynced cannot lose its directory to a power loss.
func (OSStorages) Open(dir string) (segment.Storage, error) {
	if err := mkdirAllDurable(dir); err != nil {
		return nil, err
	}
	return segment.NewOSStorage(dir)
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
