// Package partitiondir is the partitions' directories on a node: the record each
// holds of what its contents reflect of the metadata (record.go), and a shard's
// storage of them through its disk ring, which makes a directory only when
// something is first written in it (storages.go). What the server does with the
// record, to apply each partition effect at most once, is partitionhost/record.go.
//
// The record, synced before the contents it speaks for (the reference server keeps
// a purge.gen too; a partition never written has neither directory nor record):
//
//	streams/{s}/topics/{t}/partitions/{p}/purge.gen
//	+--------------------+-------------------------+-------------------+
//	| generation u64 LE  | created_revision u64 LE | revision u64 LE   |
//	+--------------------+-------------------------+-------------------+
//
// A metadata revision is an op's prepare timestamp (µs): every replica applies the
// op with it, and it rises strictly along the committed log. created_revision is
// the revision of the op that created the partition, its created_at: it names the
// incarnation of the partition ids the directory holds. generation is the topic's
// purge generation the contents reflect; revision, that of the last effect carried
// out on the directory. A 16-byte record, from before revisions, reads with
// revision = created_revision.
package partitiondir

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/iggy-shard/iggy-shard/internal/atomicfile"
	"github.com/iggy-shard/iggy-shard/segment"
)

// RecordFileName is the record's file in a partition's directory.
const RecordFileName = "purge.gen"

const (
	recordBytes   = 24
	recordBytesV1 = 16 // generation, created_revision
)

// Record is a partition directory's purge.gen.
type Record struct {
	Generation      uint64
	CreatedRevision uint64
	Revision        uint64
}

// ReadRecord reads a partition directory's record; present is false when
// there is none.
func ReadRecord(dir string) (r Record, present bool, err error) {
	b, err := os.ReadFile(filepath.Join(dir, RecordFileName))
	if errors.Is(err, os.ErrNotExist) {
		return Record{}, false, nil
	}
	if err != nil {
		return Record{}, false, err
	}
	if len(b) == 0 {
		// A created partition's record whose first write a crash cut (its data not
		// written back): nothing else was created in the directory before the record
		// was durable (lazyStorage writes it first), so the directory is as empty as a new one.
		return Record{}, false, nil
	}
	if len(b) != recordBytes && len(b) != recordBytesV1 {
		return Record{}, false, fmt.Errorf("%s: %d bytes, want %d", RecordFileName, len(b), recordBytes)
	}
	r = Record{Generation: binary.LittleEndian.Uint64(b), CreatedRevision: binary.LittleEndian.Uint64(b[8:])}
	r.Revision = r.CreatedRevision
	if len(b) == recordBytes {
		r.Revision = binary.LittleEndian.Uint64(b[16:])
	}
	return r, true, nil
}

// WriteRecord replaces a partition directory's record durably (temp file,
// fsync, rename, directory fsync).
func WriteRecord(dir string, r Record) error {
	b := r.encode()
	return atomicfile.Replace(filepath.Join(dir, RecordFileName), b[:], segment.DataFileMode)
}

// writeRecordInPlace writes the record of a directory that has none and
// holds nothing else yet, durably (the file, then its directory entry), without
// the temporary file and rename a replacement needs: a crash before the fsync
// leaves at most an empty record (read as none) in an otherwise empty directory.
func writeRecordInPlace(dir string, r Record) error {
	b := r.encode()
	f, err := os.OpenFile(filepath.Join(dir, RecordFileName), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, segment.DataFileMode)
	if err != nil {
		return err
	}
	_, err = f.Write(b[:])
	if err == nil {
		err = f.Sync()
	}
	if closeErr := f.Close(); err == nil {
		err = closeErr
	}
	if err != nil {
		return err
	}
	return atomicfile.SyncDir(dir)
}

func (r Record) encode() [recordBytes]byte {
	var b [recordBytes]byte
	binary.LittleEndian.PutUint64(b[:], r.Generation)
	binary.LittleEndian.PutUint64(b[8:], r.CreatedRevision)
	binary.LittleEndian.PutUint64(b[16:], r.Revision)
	return b
}
