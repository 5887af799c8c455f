package metafiles

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/iggy-shard/iggy-shard/segment"
)

// SimStorage is Storage over segment.SimDisk, for tests: the journal's appends,
// fdatasyncs and truncations are the disk's requests, so a crash keeps what was
// synced and a seeded, possibly torn, part of what was not. ReplaceFile is one
// durable step (SimDisk.WriteFile), the atomic rename of the OS storage.
//
// It can crash on its own: after crashAfterSteps more durable steps (an append, a
// sync, a truncation, a replacement), the next one finds the machine gone: the
// disk as a power loss at that moment would leave it is kept in crashed, and that
// step and every later one fail with errSimCrashed. Like the disk it belongs to
// one goroutine.
type SimStorage struct {
	Disk *segment.SimDisk

	crashAfterSteps int // < 0: never
	crashSeed       uint64
	crashed         *segment.SimDisk
	steps           int
	// Syncs counts the journal fdatasyncs that succeeded, Appends the appends
	// (a snapshot's new journal is synced without one).
	Syncs, Appends int
	// FailReplace, when set, fails a ReplaceFile of the files it names (a full
	// or failing disk) before anything is written.
	FailReplace func(name string) error
	// VolatileTruncation models a filesystem that does not keep metadata
	// operations in order: a journal truncation is durable only at the journal's
	// next fdatasync, and a crash before it brings back the journal as it was
	// (beforeTruncation, the synced bytes it cut).
	VolatileTruncation bool
	beforeTruncation   []byte
}

// Crashed reports whether the storage crashed (CrashAfter).
func (s *SimStorage) Crashed() bool { return s.crashed != nil }

var errSimCrashed = errors.New("simulated machine crashed")

// NewSimStorage is a storage on disk that does not crash until CrashAfter.
func NewSimStorage(disk *segment.SimDisk) *SimStorage {
	return &SimStorage{Disk: disk, crashAfterSteps: -1}
}

// CrashAfter arms the crash: after steps more durable steps, with seed choosing
// what of the unsynced writes survives.
func (s *SimStorage) CrashAfter(steps int, seed uint64) {
	s.crashAfterSteps, s.crashSeed = steps, seed
}

// step is a crash point before each durable step.
func (s *SimStorage) step() error {
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

// AfterCrash is the disk a restart finds: the crash image, or, when the storage
// did not crash, a power loss now.
func (s *SimStorage) AfterCrash(seed uint64) *segment.SimDisk {
	if s.crashed != nil {
		return s.crashed
	}
	return s.crashImage(seed)
}

// crashImage is what a power loss now leaves: SimDisk's crash, with a journal
// truncation not yet synced undone when truncations are volatile.
func (s *SimStorage) crashImage(seed uint64) *segment.SimDisk {
	d := s.Disk.Crash(seed)
	if s.beforeTruncation != nil {
		d.WriteFile(JournalFileName, s.beforeTruncation)
	}
	return d
}

func (s *SimStorage) ReadFile(name string) ([]byte, error) {
	if s.crashed != nil {
		return nil, errSimCrashed
	}
	if _, ok := s.Disk.SizeOf(name); !ok {
		return nil, fmt.Errorf("simdisk %s: %w", name, fs.ErrNotExist)
	}
	return s.Disk.ReadFile(name), nil
}

func (s *SimStorage) ReplaceFile(name string, data []byte) error {
	if s.FailReplace != nil {
		if err := s.FailReplace(name); err != nil {
			return err
		}
	}
	if err := s.step(); err != nil {
		return err
	}
	s.Disk.WriteFile(name, data)
	return nil
}

func (s *SimStorage) OpenJournal(name string, sizeBytes int64) (Journal, error) {
	if s.crashed != nil {
		return nil, errSimCrashed
	}
	f, _, err := s.Disk.Open(name, true, 0)
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
	s         *SimStorage
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
	j.s.Disk.Submit(r)
	for range 100 {
		if j.s.Disk.Poll(true); done {
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
	j.s.Appends++
	return nil
}

func (j *simJournal) Sync() error {
	if err := j.run(&segment.Request{Op: segment.OpSync}); err != nil {
		return err
	}
	j.s.Syncs++
	j.s.beforeTruncation = nil
	return nil
}

func (j *simJournal) Truncate(sizeBytes int64) error {
	if j.s.VolatileTruncation && j.s.beforeTruncation == nil {
		// The journal is synced here (a Ready's truncation comes before its
		// appends): its bytes are the durable ones.
		j.s.beforeTruncation = j.s.Disk.ReadFile(JournalFileName)
	}
	if err := j.run(&segment.Request{Op: segment.OpTruncate, Offset: sizeBytes}); err != nil {
		return err
	}
	j.sizeBytes = sizeBytes
	return nil
}

func (j *simJournal) Close() error { return j.s.Disk.Close(j.f) }
