package server

import (
	"github.com/iggy-shard/iggy-shard/partition"
	"github.com/iggy-shard/iggy-shard/segment"
	"github.com/iggy-shard/iggy-shard/shard"
)

// diskStorages is the server's partition.StorageProvider: each partition's log does
// its reads, writes and fdatasyncs through its owner shard's disk ring
// (shard.Disk), never blocking the shard in a pwrite or an fdatasync. Directories are
// created and removed the way partition.OSStorages does it (durably; removal through
// a tombstone rename), which are blocking calls, rare (a partition's creation,
// deletion or purge).
type diskStorages struct {
	disk *shard.Disk
}

// Open implements partition.StorageProvider.
func (p diskStorages) Open(dir string) (segment.Storage, error) {
	// OSStorages.Open creates dir and its missing parents durably; the blocking
	// storage it returns holds nothing open and is dropped.
	if _, err := (partition.OSStorages{}).Open(dir); err != nil {
		return nil, err
	}
	return p.disk.Open(dir)
}

// Remove implements partition.StorageProvider.
func (diskStorages) Remove(dir string) error { return partition.OSStorages{}.Remove(dir) }
