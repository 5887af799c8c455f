package server

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/iggy-shard/iggy-shard/partition"
)

// Purge generations. PurgeTopic and PurgeStream are metadata commits: the topic's
// purge generation goes up in the journal at once, and the owner shards empty their
// partitions afterwards. A crash between the two must not bring the purged messages
// back, so each partition directory records the generation its contents reflect
// (a record the reference server keeps too, as purge.gen), always synced:
//
//	streams/{s}/topics/{t}/partitions/{p}/purge.gen
//	+--------------------+-----------------------------+
//	| generation u64 LE  | created_revision u64 LE     |
//	+--------------------+-----------------------------+
//
// created_revision is the partition's creation time (µs), which tells this
// partition from an older one of the same ids whose deletion a crash cut short. At
// start each partition is brought to its topic's committed generation: a file with
// an older generation or another revision means the purge (or the deletion) did not
// happen, and the partition is emptied now, then the file written. Applying it twice
// is harmless: the second time the file already says so.
//
// A directory without the file predates purge generations (or was never purged by
// this server): it is taken as it is and the file written.

const purgeGenFileName = "purge.gen"

const purgeGenFileBytes = 16

type purgeGen struct {
	generation      uint64
	createdRevision uint64
}

// readPurgeGen reads a partition directory's purge.gen; present is false when there
// is none.
func readPurgeGen(dir string) (g purgeGen, present bool, err error) {
	b, err := os.ReadFile(filepath.Join(dir, purgeGenFileName))
	if errors.Is(err, os.ErrNotExist) {
		return purgeGen{}, false, nil
	}
	if err != nil {
		return purgeGen{}, false, err
	}
	if len(b) != purgeGenFileBytes {
		return purgeGen{}, false, fmt.Errorf("%s: %d bytes, want %d", purgeGenFileName, len(b), purgeGenFileBytes)
	}
	return purgeGen{generation: binary.LittleEndian.Uint64(b), createdRevision: binary.LittleEndian.Uint64(b[8:])}, true, nil
}

// writePurgeGen replaces a partition directory's purge.gen durably (temp file,
// fsync, rename, directory fsync).
func writePurgeGen(dir string, g purgeGen) error {
	var b [purgeGenFileBytes]byte
	binary.LittleEndian.PutUint64(b[:], g.generation)
	binary.LittleEndian.PutUint64(b[8:], g.createdRevision)
	return writeFileAtomic(filepath.Join(dir, purgeGenFileName), b[:])
}

// settlePurge brings an opened partition to purge generation want: if its directory
// records an older generation or another incarnation, the partition is emptied; then
// the file records want. It is the start-up half; the live half is recordPurge.
func (h *handler) settlePurge(k partition.Key, want purgeGen) error {
	dir := h.store.Dir(k)
	have, present, err := readPurgeGen(dir)
	if err != nil {
		return err
	}
	if present && have == want {
		return nil
	}
	if present && (have.generation < want.generation || have.createdRevision != want.createdRevision) {
		h.log.Warn("partition purged at start: its purge (or an older partition's deletion) was committed but not carried out before a stop",
			"partition", k.String(), "generation", have.generation, "committed_generation", want.generation,
			"revision", have.createdRevision, "committed_revision", want.createdRevision)
		if err := h.store.Purge(k); err != nil {
			return err
		}
	}
	return writePurgeGen(dir, want)
}

// recordPurge writes the generation a partition's contents now reflect: after it was
// created, and after a live purge emptied it, before anything else is written to it.
func (h *handler) recordPurge(k partition.Key, generation uint64) error {
	info, err := h.store.Info(k)
	if err != nil {
		return err
	}
	return writePurgeGen(h.store.Dir(k), purgeGen{generation: generation, createdRevision: info.CreatedAtMicros})
}
