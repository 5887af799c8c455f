package partition

import (
	"hash/fnv"
	"slices"

	"github.com/iggy-shard/iggy-shard/segment"
)

// SimStorages is a StorageProvider over simulated disks: every partition directory
// gets its own segment.SimDisk (its page-cache/platter model), seeded from seed and
// the directory's name. The cluster simulator (sim/) and this package's tests
// run stores on it, and Crash is a power loss of all of them at once.
type SimStorages struct {
	seed  uint64
	disks map[string]*segment.SimDisk
}

// NewSimStorages returns an empty provider.
func NewSimStorages(seed uint64) *SimStorages {
	return &SimStorages{seed: seed, disks: make(map[string]*segment.SimDisk)}
}

// Open implements StorageProvider: the directory's disk, made on first use.
func (s *SimStorages) Open(dir string) (segment.Storage, error) {
	d, ok := s.disks[dir]
	if !ok {
		h := fnv.New64a()
		h.Write([]byte(dir))
		d = segment.NewSimDisk(s.seed ^ h.Sum64())
		s.disks[dir] = d
	}
	return d, nil
}

// Remove implements StorageProvider.
func (s *SimStorages) Remove(dir string) error {
	delete(s.disks, dir)
	return nil
}

// Crash returns the disks as a power loss now leaves them (segment.SimDisk.Crash,
// each with its own seed, in the order of the directories' names).
func (s *SimStorages) Crash(seed uint64) *SimStorages {
	after := NewSimStorages(s.seed + 1)
	dirs := make([]string, 0, len(s.disks))
	for dir := range s.disks {
		dirs = append(dirs, dir)
	}
	slices.Sort(dirs)
	for i, dir := range dirs {
		after.disks[dir] = s.disks[dir].Crash(seed + uint64(i))
	}
	return after
}
