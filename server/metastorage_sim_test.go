package server

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/iggy-shard/iggy-shard/segment"
)

// simMetaStorage is metaStorage over segment.SimDisk: the journal's appends,
// fdatasyncs and truncations are the disk's requests, so a crash keeps what was
// synced and a seeded, possibly torn, part of what was not. ReplaceFile is one
// durable step (SimDisk.WriteFile), the atomic rename of the OS storage.
//
// It can crash on its own: after crashAfterSteps more durable steps (an append, a
// sync, a truncation, a replacement), the next one finds the machine gone: the
// disk as a power loss at that moment would leave it is kept in crashed, and that
// step and every later one fail with errSimCrashed. Like the disk it belongs to
// one goroutine.
type simMetaStorage struct {
	disk *segment.SimDisk

	crashAfterSteps int // < 0: never
	crashSeed       uint64
	crashed         *segment.SimDisk
	steps           int
	// syncs counts the journal fdatasyncs that succeeded, appends the appends
	// (a snapshot's new journal is synced without one).
	syncs, appends int
	// failReplace, when set, fails a ReplaceFile of the files it names (a full
	// or failing disk) before anything is written.
	failReplace func(name string) error
	// volatileTruncation models a filesystem that does not keep metadata
	// operations in order: a journal truncation is durable only at the journal's
	// next fdatasync, and a crash before it brings back the journal as it was
	// (beforeTruncation, the synced bytes it cut).
	volatileTruncation bool
	beforeTruncation   []byte
}

var errSimCrashed = errors.New("simulated machine crashed")

func newSimMetaStorage(disk *segment.SimDisk) *simMetaStorage {
	return &simMetaStorage{disk: disk, crashAfterSteps: -1}
}

// crashAfter arms the crash: after steps more durable steps, with seed choosing
// what of the unsynced writes survives.
func (s *simMetaStorage) crashAfter(steps int, seed uint64) {
	s.crashAfterSteps, s.crashSeed = steps, seed
}

// step is a crash point before each durable step.
func (s *simMetaStorage) step() error {
	if s.crashed != nil {
		return errSimCrashed
	}
	if s.crashAfterSteps == 0 {
		s.crashed = s.crashImage(s.crashSeed)
		return errSimCrashed
	}
	if s.crashAfterSteps > 0 {
		s.crashAfterSteps--
	}
	s.steps++
	return nil
}

// afterCrash is the disk a restart finds: the crash image, or, when the storage
// did not crash, a power loss now.
func (s *simMetaStorage) afterCrash(seed uint64) *segment.SimDisk {
	if s.crashed != nil {
		return s.crashed
	}
	return s.crashImage(seed)
}

// crashImage is what a power loss now leaves: SimDisk's crash, with a journal
// truncation not yet synced undone when truncations are volatile.
func (s *simMetaStorage) crashImage(seed uint64) *segment.SimDisk {
	d := s.disk.Crash(seed)
	if s.beforeTruncation != nil {
		d.WriteFile(journalFileName, s.beforeTruncation)
	}
	return d
}

func (s *simMetaStorage) ReadFile(name string) ([]byte, error) {
	if s.crashed != nil {
		return nil, errSimCrashed
	}
	if _, ok := s.disk.SizeOf(name); !ok {
		return nil, fmt.Errorf("simdisk %s: %w", name, fs.ErrNotExist)
	}
	return s.disk.ReadFile(name), nil
}

func (s *simMetaStorage) ReplaceFile(name string, data []byte) error {
	if s.failReplace != nil {
		if err := s.failReplace(name); err != nil {
			return err
		}
	}
	if err := s.step(); err != nil {
		return err
	}
	s.disk.WriteFile(name, data)
	return nil
}

func (s *simMetaStorage) OpenJournal(name string, sizeBytes int64) (metaJournal, error) {
	if s.crashed != nil {
		return nil, errSimCrashed
	}
	f, _, err := s.disk.Open(name, true, 0)
	if err != nil {
		return nil, err
	}
	j := &simJournal{s: s, f: f, sizeBytes: sizeBytes}
	if err := j.Truncate(sizeBytes); err != nil {
		return nil, err
	}
	if err := j.Sync(); err != nil {
		return nil, err
	}
	return j, nil
}

type simJournal struct {
	s         *simMetaStorage
	f         segment.File
	sizeBytes int64
}

// run submits one request and polls the disk until it completes (bounded: a
// lone request completes at the first poll).
func (j *simJournal) run(r *segment.Request) error {
	if err := j.s.step(); err != nil {
		return err
	}
	done := false
	r.File = j.f
	r.Done = func(*segment.Request) { done = true }
	j.s.disk.Submit(r)
	for range 100 {
		if j.s.disk.Poll(true); done {
			return r.Err
		}
	}
	return errors.New("simdisk: request never completed")
}

func (j *simJournal) Append(b []byte) error {
	if err := j.run(&segment.Request{Op: segment.OpWrite, Offset: j.sizeBytes, Data: b}); err != nil {
		return err
	}
	j.sizeBytes += int64(len(b))
	j.s.appends++
	return nil
}

func (j *simJournal) Sync() error {
	if err := j.run(&segment.Request{Op: segment.OpSync}); err != nil {
		return err
	}
	j.s.syncs++
	j.s.beforeTruncation = nil
	return nil
}

func (j *simJournal) Truncate(sizeBytes int64) error {
	if j.s.volatileTruncation && j.s.beforeTruncation == nil {
		// The journal is synced here (a Ready's truncation comes before its
		// appends): its bytes are the durable ones.
		j.s.beforeTruncation = j.s.disk.ReadFile(journalFileName)
	}
	if err := j.run(&segment.Request{Op: segment.OpTruncate, Offset: sizeBytes}); err != nil {
		return err
	}
	j.sizeBytes = sizeBytes
	return nil
}

func (j *simJournal) Close() error { return j.s.disk.Close(j.f) }
