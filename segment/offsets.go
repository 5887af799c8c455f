package segment

import (
	"encoding/binary"
	"fmt"
	"sort"
	"strconv"

	"github.com/iggy-shard/iggy-shard/wire"
	"github.com/zeebo/xxh3"
)

// ConsumerKind says whose offset it is; the values are the protocol's Consumer kind
// byte.
type ConsumerKind uint8

const (
	Consumer      ConsumerKind = 1
	ConsumerGroup ConsumerKind = 2
)

func (k ConsumerKind) dir() string {
	if k == ConsumerGroup {
		return "offsets/groups"
	}
	return "offsets/consumers"
}

// offsetFileSize is one consumer offset file: offset u64 then XxHash3-64 of those 8
// bytes, as the reference writes it (apache/iggy core/partitions/src/). An 8-byte file
// is the legacy form without the checksum and is still read.
const offsetFileSize = 16

// OffsetsReport is what loading the consumer offsets found.
type OffsetsReport struct {
	Loaded    int
	Discarded []string // torn or failing their checksum: the consumer starts over
	Clamped   []string // above the recovered log end: lowered to the current offset
}

type consumerOffsets struct {
	byKind [3]map[uint32]*storedOffset // by ConsumerKind
	// WriteFailures counts offset writes or syncs that failed; the offset stays in
	// memory and is written again by the next store.
	writeFailures uint64
	// writing counts the offsets whose write (and fdatasync) is in flight.
	writing int
}

// OffsetsWritten reports whether no consumer offset write is in flight: every
// offset stored so far is written (and, with enforce_fsync, durable), unless a
// write failed (Stats counts those).
func (l *Log) OffsetsWritten() bool { return l.offsets.writing == 0 }

// storedOffset is one consumer's offset and its file. One write is in flight per
// file at most: a store meanwhile marks it dirty and is written when the first one
// completes, so the file's last write is always the newest offset.
type storedOffset struct {
	kind    ConsumerKind
	id      uint32
	offset  uint64
	file    File // 0 until the first store opens it
	buf     [offsetFileSize]byte
	writing bool
	dirty   bool
}

func (c *consumerOffsets) table(kind ConsumerKind) map[uint32]*storedOffset {
	if c.byKind[kind] == nil {
		c.byKind[kind] = make(map[uint32]*storedOffset)
	}
	return c.byKind[kind]
}

func validKind(kind ConsumerKind) bool { return kind == Consumer || kind == ConsumerGroup }

// ConsumerOffset returns the stored offset of a consumer or group, and false when it
// has none.
func (l *Log) ConsumerOffset(kind ConsumerKind, id uint32) (uint64, bool) {
	if !validKind(kind) {
		return 0, false
	}
	so, ok := l.offsets.byKind[kind][id]
	if !ok {
		return 0, false
	}
	return so.offset, true
}

// StoreConsumerOffset stores a consumer's or group's offset: at once in memory (the
// next Get and Next poll see it), and in its file, fdatasynced when EnforceFsync is
// set (otherwise at Close). An offset above the current offset, or any offset in a
// log that never held a message, is wire.ErrInvalidOffset.
func (l *Log) StoreConsumerOffset(kind ConsumerKind, id uint32, offset uint64) error {
	if l.closed {
		return wire.ErrSegmentClosed
	}
	if !validKind(kind) {
		return wire.ErrInvalidCommand
	}
	current, ok := l.CurrentOffset()
	if !ok || offset > current {
		return wire.ErrInvalidOffset
	}
	table := l.offsets.table(kind)
	so, ok := table[id]
	if !ok {
		name := kind.dir() + "/" + strconv.FormatUint(uint64(id), 10)
		f, _, err := l.st.Open(name, true, 0)
		if err != nil {
			return fmt.Errorf("segment: %w: %v", wire.ErrCannotOpenConsumerOffsetsFile, err)
		}
		so = &storedOffset{kind: kind, id: id, file: f}
		table[id] = so
	} else if so.file == 0 {
		f, _, err := l.st.Open(kind.dir()+"/"+strconv.FormatUint(uint64(id), 10), true, 0)
		if err != nil {
			return fmt.Errorf("segment: %w: %v", wire.ErrCannotOpenConsumerOffsetsFile, err)
		}
		so.file = f
	}
	so.offset = offset
	l.writeOffset(so)
	return nil
}

func (l *Log) writeOffset(so *storedOffset) {
	if so.writing {
		so.dirty = true
		return
	}
	so.writing, so.dirty = true, false
	l.offsets.writing++
	binary.LittleEndian.PutUint64(so.buf[:8], so.offset)
	binary.LittleEndian.PutUint64(so.buf[8:], xxh3.Hash(so.buf[:8]))
	w := l.request(OpWrite, purposeOffsetWrite, nil)
	w.File = so.file
	w.Data = so.buf[:]
	w.stored = so
	if l.cfg.EnforceFsync {
		w.Link = true
		s := l.request(OpSync, purposeOffsetSync, nil)
		s.File = so.file
		s.stored = so
		l.st.Submit(w)
		l.st.Submit(s)
		return
	}
	l.st.Submit(w)
}

// complete handles an offset write or sync and reports whether the offset must be
// written again now, because it was stored again while this write was in flight. A
// failed write stays dirty but is not retried at once (a full disk would spin): the
// next store or Close writes it. The file is 16 bytes from its first write on, so
// rewriting in place never leaves a stale tail.
func (c *consumerOffsets) complete(r *Request) (rewrite bool) {
	so := r.stored
	if r.Err != nil && r.Err != ErrCanceled {
		c.writeFailures++
	}
	if r.purpose == purposeOffsetWrite && r.Link {
		return false // its sync completes the pair
	}
	so.writing = false
	c.writing--
	if r.Err != nil {
		so.dirty = true
		return false
	}
	return so.dirty && so.file != 0
}

// flushDirtyOffsets writes offsets stored while their previous write was in flight.
func (l *Log) flushDirtyOffsets() {
	for kind := Consumer; kind <= ConsumerGroup; kind++ {
		for _, so := range l.offsets.byKind[kind] {
			if so.dirty && !so.writing && so.file != 0 {
				l.writeOffset(so)
			}
		}
	}
}

// DeleteConsumerOffset removes a consumer's or group's offset and its file;
// wire.ErrConsumerOffsetNotFound when none is stored.
func (l *Log) DeleteConsumerOffset(kind ConsumerKind, id uint32) error {
	if l.closed {
		return wire.ErrSegmentClosed
	}
	if !validKind(kind) {
		return wire.ErrInvalidCommand
	}
	so, ok := l.offsets.byKind[kind][id]
	if !ok {
		return wire.ErrConsumerOffsetNotFound
	}
	// The file must not be removed under a write in flight on it.
	for so.writing {
		if l.st.Poll(true) == 0 && so.writing {
			panic("segment: storage lost a consumer offset write")
		}
	}
	delete(l.offsets.byKind[kind], id)
	if so.file != 0 {
		_ = l.st.Close(so.file)
		so.file = 0
	}
	if err := l.wait(&Request{Op: OpRemove, Name: kind.dir() + "/" + strconv.FormatUint(uint64(id), 10)}); err != nil {
		return fmt.Errorf("segment: %w: %v", wire.ErrCannotDeleteConsumerOffsetFile, err)
	}
	return nil
}

// loadOffsets reads every offset file at Open. Torn or corrupt files are discarded
// (the consumer starts from its strategy's default); offsets above the recovered end
// are clamped to the current offset, since the batches they pointed past are gone.
func (l *Log) loadOffsets(report *RecoveryReport) error {
	current, nonEmpty := l.CurrentOffset()
	for kind := Consumer; kind <= ConsumerGroup; kind++ {
		names, err := l.st.List(kind.dir())
		if err != nil {
			return fmt.Errorf("segment: %w: %v", wire.ErrCannotReadConsumerOffsets, err)
		}
		for _, name := range names {
			path := kind.dir() + "/" + name
			id, err := strconv.ParseUint(name, 10, 32)
			if err != nil {
				continue // not ours
			}
			f, size, err := l.st.Open(path, false, 0)
			if err != nil {
				return fmt.Errorf("segment: %w: %s: %v", wire.ErrCannotOpenConsumerOffsetsFile, path, err)
			}
			var buf [offsetFileSize]byte
			r := &Request{Op: OpRead, File: f, Data: buf[:min(size, offsetFileSize)]}
			if err := l.wait(r); err != nil {
				_ = l.st.Close(f)
				return fmt.Errorf("segment: %w: %s: %v", wire.ErrCannotReadConsumerOffsets, path, err)
			}
			offset := binary.LittleEndian.Uint64(buf[:8])
			valid := (size == 8 && r.Result == 8) ||
				(size == offsetFileSize && r.Result == offsetFileSize && xxh3.Hash(buf[:8]) == binary.LittleEndian.Uint64(buf[8:]))
			if !valid || !nonEmpty {
				_ = l.st.Close(f)
				report.Offsets.Discarded = append(report.Offsets.Discarded, path)
				if err := l.wait(&Request{Op: OpRemove, Name: path}); err != nil {
					return fmt.Errorf("segment: %w: %s: %v", wire.ErrCannotDeleteConsumerOffsetFile, path, err)
				}
				continue
			}
			so := &storedOffset{kind: kind, id: uint32(id), offset: offset, file: f}
			l.offsets.table(kind)[uint32(id)] = so
			report.Offsets.Loaded++
			if offset > current || size == 8 {
				if offset > current {
					so.offset = current
					report.Offsets.Clamped = append(report.Offsets.Clamped, path)
				}
				l.writeOffset(so)
			}
		}
	}
	sort.Strings(report.Offsets.Clamped)
	l.WaitIdle()
	return nil
}

// clampTo lowers offsets that point past the log's end after a rewind.
func (c *consumerOffsets) clampTo(l *Log) {
	current, nonEmpty := l.CurrentOffset()
	for kind := Consumer; kind <= ConsumerGroup; kind++ {
		for _, so := range c.byKind[kind] {
			if !nonEmpty || so.offset > current {
				if nonEmpty {
					so.offset = current
				} else {
					so.offset = 0
				}
				so.dirty = true
			}
		}
	}
}

// close syncs every offset file and closes it.
func (c *consumerOffsets) close(l *Log) {
	l.flushDirtyOffsets()
	l.WaitIdle()
	for kind := Consumer; kind <= ConsumerGroup; kind++ {
		ids := make([]uint32, 0, len(c.byKind[kind]))
		for id := range c.byKind[kind] {
			ids = append(ids, id)
		}
		sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
		for _, id := range ids {
			so := c.byKind[kind][id]
			if so.file == 0 {
				continue
			}
			if err := l.wait(&Request{Op: OpSync, File: so.file}); err != nil {
				c.writeFailures++
			}
			_ = l.st.Close(so.file)
			so.file = 0
		}
	}
}

// ConsumerOffsets appends the stored offsets of one kind, ascending by id, as id and
// offset pairs (a partition's state transfer sends them whole).
func (l *Log) ConsumerOffsets(kind ConsumerKind, dst [][2]uint64) [][2]uint64 {
	if !validKind(kind) {
		return dst
	}
	start := len(dst)
	for id, so := range l.offsets.byKind[kind] {
		dst = append(dst, [2]uint64{uint64(id), so.offset})
	}
	sort.Slice(dst[start:], func(i, j int) bool { return dst[start+i][0] < dst[start+j][0] })
	return dst
}
