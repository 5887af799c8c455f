package partition

import (
	"os"

	"github.com/iggy-shard/iggy-shard/segment"
)

// StorageProvider gives each partition the segment.Storage its log does I/O through,
// rooted at the partition's directory, and removes a partition's directory with
// everything in it. The server's provider hands out views of the shard's io_uring
// ring; OSStorages uses blocking system calls; tests use simulated disks.
type StorageProvider interface {
	// Open returns a storage rooted at dir, creating dir when it does not exist.
	Open(dir string) (segment.Storage, error)
	// Remove deletes dir and every file under it; a missing dir is not an error.
	// Nothing of dir is open when it is called.
	Remove(dir string) error
}

// OSStorages provides segment.OSStorage: pread/pwrite/fdatasync run when the store
// polls its I/O.
type OSStorages struct{}

// Open implements StorageProvider.
func (OSStorages) Open(dir string) (segment.Storage, error) { return segment.NewOSStorage(dir) }

// Remove implements StorageProvider.
func (OSStorages) Remove(dir string) error { return os.RemoveAll(dir) }
